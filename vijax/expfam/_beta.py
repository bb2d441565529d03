"""Beta(a, b) on (0, 1): t(x) = (log x, log(1 - x)), eta = (a - 1, b - 1)."""

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
class Beta(AbstractExpFamily):
    """Beta distribution with concentrations ``a`` (``concentration1``) and ``b`` (``concentration0``), natural form.

    p(x) = x^(a-1) (1-x)^(b-1) / B(a, b);  A(eta) = lgamma(a) + lgamma(b) - lgamma(a + b).

    It is the two-component Dirichlet, so with c = psi'(a + b) the Fisher is the 2 x 2 matrix
    F = [[psi'(a) - c, -c], [-c, psi'(b) - c]], inverted in closed form by ``inv_fisher_vp``.

    Examples:
        >>> q = Beta.from_concentrations(2.0, 3.0)
        >>> round(float(q.mean_params()[0]), 4)  # E[log x] = psi(a) - psi(a + b)
        -1.0833
    """

    eta1: jax.Array  # a - 1
    eta2: jax.Array  # b - 1
    _event_ndims = (0, 0)
    _sample_ndims = 0

    @classmethod
    def from_concentrations(cls, concentration1, concentration0) -> "Beta":
        """From a = ``concentration1`` (exponent of x) and b = ``concentration0`` (of 1 - x).

        Raises:
            ValueError: naming the argument that is not finite and > 0.
        """
        check_positive("concentration1", concentration1)
        check_positive("concentration0", concentration0)
        a, b = jnp.broadcast_arrays(as_float(concentration1), as_float(concentration0))
        dtype = jnp.result_type(a, b)
        return cls(a.astype(dtype) - 1.0, b.astype(dtype) - 1.0)

    @property
    def concentration1(self) -> jax.Array:
        """a = eta1 + 1."""
        return self.eta1 + 1.0

    @property
    def concentration0(self) -> jax.Array:
        """b = eta2 + 1."""
        return self.eta2 + 1.0

    def log_normalizer(self):
        a, b = self.concentration1, self.concentration0
        return gammaln(a) + gammaln(b) - gammaln(a + b)

    def mean_params(self):
        a, b = self.concentration1, self.concentration0
        psi_ab = digamma(a + b)
        return digamma(a) - psi_ab, digamma(b) - psi_ab

    def fisher_vp(self, v):
        a, b = self.concentration1, self.concentration0
        v1, v2 = v
        c = trigamma(a + b) * (v1 + v2)
        return trigamma(a) * v1 - c, trigamma(b) * v2 - c

    def inv_fisher_vp(self, v):
        """F^-1 v = [[psi'(b) - c, c], [c, psi'(a) - c]] v / det, det = psi'(a) psi'(b) - c (psi'(a) + psi'(b)) > 0."""
        a, b = self.concentration1, self.concentration0
        v1, v2 = v
        ta, tb, c = trigamma(a), trigamma(b), trigamma(a + b)
        inv_det = 1.0 / (ta * tb - c * (ta + tb))
        return inv_det * ((tb - c) * v1 + c * v2), inv_det * (c * v1 + (ta - c) * v2)

    def sufficient_stats(self, x):
        return jnp.log(x), jnp.log1p(-x)

    def sample(self, key, shape=()):
        """Reparameterized draws (implicit gradients through ``jax.random.beta``)."""
        shape = tuple(shape) + self.batch_shape
        a = jnp.broadcast_to(self.concentration1, shape)
        b = jnp.broadcast_to(self.concentration0, shape)
        return jax.random.beta(key, a, b, shape, dtype=self.dtype)

    def is_valid(self):
        return (self.eta1 > -1.0) & (self.eta2 > -1.0)

    def outside_support(self, x):
        """x outside [0, 1]."""
        x = jnp.asarray(x)
        return (x < 0) | (x > 1)

    def _support_point(self, x):
        return jnp.full_like(x, 0.5)

    def mode(self):
        """(a - 1) / (a + b - 2) with a - 1, b - 1 clipped at 0; 1/2 where both a, b <= 1."""
        a, b = jnp.maximum(self.concentration1 - 1.0, 0.0), jnp.maximum(self.concentration0 - 1.0, 0.0)
        tot = a + b
        return jnp.where(tot > 0, a / jnp.where(tot > 0, tot, 1.0), 0.5)

    def mode_stats(self):
        """t(x) = (log m, log(1 - m)) at the mode m, floored by ``floored_log`` at a boundary mode."""
        m = self.mode()
        return floored_log(m), floored_log(1.0 - m)

    def reparam_sample_and_stats(self, key):
        """The two-component Dirichlet x = g_a / (g_a + g_b), t = (log x, log(1 - x)) in log space."""
        return self.from_log_gammas(standard_log_gamma(key, self.log_gamma_shapes()))

    def log_gamma_shapes(self):
        """(a, b) stacked on a last axis: the shapes of g_a, g_b (``vijax.expfam.GammaBased``)."""
        return jnp.stack([self.concentration1, self.concentration0], axis=-1)

    def from_log_gammas(self, log_g):
        """(x, t(x)) from log (g_a, g_b) on the last axis: x = g_a / (g_a + g_b)."""
        log_parts = log_g - jax.nn.logsumexp(log_g, axis=-1, keepdims=True)
        return jnp.exp(log_parts[..., 0]), (log_parts[..., 0], log_parts[..., 1])

    def to_tfp(self):
        tfp = tfp_jax()
        return tfp.distributions.Beta(concentration1=self.concentration1, concentration0=self.concentration0)
