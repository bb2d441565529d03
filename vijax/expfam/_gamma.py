"""Gamma(alpha, beta) with rate beta: t(x) = (log x, x), eta = (alpha - 1, -beta)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from vijax._validate import check_positive
from vijax.expfam._base import AbstractExpFamily, as_float, floored_log, register_family
from vijax.expfam._inversion import standard_log_gamma
from vijax.expfam._special import digamma, trigamma
from vijax.types import tfp_jax


@register_family
class Gamma(AbstractExpFamily):
    """Gamma distribution with shape ``alpha`` and rate ``beta``, in natural form.

    p(x) = beta^alpha / Gamma(alpha) x^(alpha-1) e^(-beta x);  A(eta) = lgamma(alpha) - alpha log beta.

    Examples:
        >>> q = Gamma.from_shape_rate(2.0, 3.0)
        >>> float(q.mean_params()[1])  # E[x] = alpha / beta
        0.666...
    """

    eta1: jax.Array  # alpha - 1
    eta2: jax.Array  # -beta
    _event_ndims = (0, 0)
    _sample_ndims = 0

    @classmethod
    def from_shape_rate(cls, shape, rate) -> "Gamma":
        """From the shape ``alpha`` and the rate ``beta`` (E[x] = alpha / beta), broadcast together.

        Raises:
            ValueError: naming ``shape`` or ``rate`` when an entry is not finite and > 0.
        """
        check_positive("shape", shape)
        check_positive("rate", rate)
        a, b = jnp.broadcast_arrays(as_float(shape), as_float(rate))
        return cls(a - 1.0, -b)

    @property
    def concentration(self) -> jax.Array:
        """The shape alpha = eta1 + 1, with the batch shape."""
        return self.eta1 + 1.0

    @property
    def rate(self) -> jax.Array:
        """The rate beta = -eta2, with the batch shape."""
        return -self.eta2

    def log_normalizer(self):
        a, b = self.concentration, self.rate
        return gammaln(a) - a * jnp.log(b)

    def mean_params(self):
        a, b = self.concentration, self.rate
        return digamma(a) - jnp.log(b), a / b

    def fisher_vp(self, v):
        a, b = self.concentration, self.rate
        v1, v2 = v
        return trigamma(a) * v1 + v2 / b, v1 / b + a / b**2 * v2

    def inv_fisher_vp(self, v):
        # 2x2 inverse: F = [[psi'(a), 1/b], [1/b, a/b^2]], det = (a psi'(a) - 1) / b^2.
        a, b = self.concentration, self.rate
        v1, v2 = v
        t = trigamma(a)
        scale = 1.0 / (a * t - 1.0)
        return scale * (a * v1 - b * v2), scale * (-b * v1 + b**2 * t * v2)

    def sufficient_stats(self, x):
        return jnp.log(x), x

    def sample(self, key, shape=()):
        shape = tuple(shape) + self.batch_shape
        a = jnp.broadcast_to(self.concentration, shape)
        return jax.random.gamma(key, a, shape, dtype=self.dtype) / jnp.broadcast_to(self.rate, shape)

    def is_valid(self):
        return (self.eta1 > -1.0) & (self.eta2 < 0.0)

    def outside_support(self, x):
        """x < 0 (x = 0, the support's closure, gives the formula's value)."""
        return jnp.asarray(x) < 0

    def mode(self):
        """(alpha - 1) / beta, or 0 where alpha < 1."""
        return jnp.maximum(self.concentration - 1.0, 0.0) / self.rate

    def mode_stats(self):
        """t(x) = (log m, m) at the mode m, with log m floored by ``floored_log`` at m = 0 (alpha < 1)."""
        m = self.mode()
        return floored_log(m), m

    def reparam_sample_and_stats(self, key):
        """beta = g / b with log g ~ log Gamma(a, 1) by ``standard_log_gamma`` (implicit derivative)."""
        return self.from_log_gammas(standard_log_gamma(key, self.log_gamma_shapes()))

    def log_gamma_shapes(self):
        """The shapes a of the Gamma(a, 1) variables a draw is made of (``vijax.expfam.GammaBased``)."""
        return self.concentration

    def from_log_gammas(self, log_g):
        """(beta, t(beta)) from log g, g ~ Gamma(``log_gamma_shapes()``, 1): beta = g / b."""
        log_x = log_g - jnp.log(self.rate)
        x = jnp.exp(log_x)
        return x, (log_x, x)

    def to_tfp(self):
        tfp = tfp_jax()
        return tfp.distributions.Gamma(concentration=self.concentration, rate=self.rate)
