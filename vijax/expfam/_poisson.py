"""Poisson(rate) on {0, 1, 2, ...}: t(x) = x, eta = log rate, h(x) = 1 / x!."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from vijax._validate import check_finite, check_positive
from vijax.expfam._base import AbstractExpFamily, as_float, broadcast_draw, not_integer, register_family
from vijax.types import tfp_jax

_SWITCH_RATE = 200.0
_NUM_TERMS = 384


def _log_factorial(x: jax.Array) -> jax.Array:
    """log x! = lgamma(x + 1), exactly 0 at x = 0 and 1 (float32 lgamma(1) is 5e-7, not 0)."""
    return jnp.where(x < 2.0, 0.0, gammaln(jnp.maximum(x, 2.0) + 1.0))


@jax.jit
def expected_log_factorial(rate: jax.Array) -> jax.Array:
    """E[log x!] = E[lgamma(x + 1)] for x ~ Poisson(rate), elementwise; jit-able, fixed cost.

    For ``rate < 200`` the series sum_k p(k) lgamma(k + 1) over the 384 consecutive k from
    max(0, floor(rate) - 192) (renormalized; truncated mass below 1e-30); above, the expansion of the
    Poisson entropy H = rate - rate log rate + E[log x!]::

        H(rate) = 1/2 log(2 pi e rate) - 1/(12 rate) - 1/(24 rate^2) - 19/(360 rate^3) + O(rate^-4).
    """
    rate = jnp.asarray(rate)
    dtype, shape = rate.dtype, rate.shape
    # each branch sees a clipped rate, so that the unused one stays finite (no NaN gradients)
    lam = jnp.minimum(rate, _SWITCH_RATE)
    start = jnp.maximum(jnp.floor(lam) - _NUM_TERMS // 2, 0.0)
    k = start[..., None] + jnp.broadcast_to(jnp.arange(_NUM_TERMS, dtype=dtype), shape + (_NUM_TERMS,))
    log_fact = _log_factorial(k)
    weights = jax.nn.softmax(k * jnp.log(lam)[..., None] - log_fact, -1)  # p(k) / sum_window p
    series = jnp.sum(weights * log_fact, -1)

    big = jnp.maximum(rate, _SWITCH_RATE)
    entropy = 0.5 * jnp.log(2.0 * math.pi * math.e * big) - 1.0 / (12.0 * big) - 1.0 / (24.0 * big**2)
    entropy = entropy - 19.0 / (360.0 * big**3)
    asymptotic = entropy - big + big * jnp.log(big)
    return jnp.where(rate < _SWITCH_RATE, series, asymptotic)


@register_family
class Poisson(AbstractExpFamily):
    """Poisson distribution with ``rate`` lambda, in natural form.

    p(x) = lambda^x e^-lambda / x! = exp(eta x - A(eta)) / x!,  A(eta) = e^eta = lambda,
    grad A = hess A = lambda. E[log h] = -E[log x!] (for the entropy) is
    :func:`expected_log_factorial`. Draws are counts in the family's float dtype (as in TFP).

    Examples:
        >>> q = Poisson.from_rate(3.0)
        >>> float(q.mean_params()[0])
        3.0
    """

    eta: jax.Array  # log rate
    _event_ndims = (0,)
    _sample_ndims = 0

    @classmethod
    def from_rate(cls, rate) -> "Poisson":
        """Raises ``ValueError`` naming ``rate`` when it is not finite and > 0."""
        check_positive("rate", rate)
        return cls(jnp.log(as_float(rate)))

    @classmethod
    def from_log_rate(cls, log_rate) -> "Poisson":
        """Raises ``ValueError`` naming ``log_rate`` when it is not finite."""
        check_finite("log_rate", log_rate)
        return cls(as_float(log_rate))

    @property
    def rate(self) -> jax.Array:
        """lambda = exp(eta), with the batch shape."""
        return jnp.exp(self.eta)

    @property
    def log_rate(self) -> jax.Array:
        """log lambda = eta (the natural parameter itself)."""
        return self.eta

    def log_normalizer(self):
        return jnp.exp(self.eta)

    def mean_params(self):
        return (jnp.exp(self.eta),)

    def fisher_vp(self, v):
        (v,) = v
        return (jnp.exp(self.eta) * v,)

    def inv_fisher_vp(self, v):
        (v,) = v
        return (jnp.exp(-self.eta) * v,)

    def sufficient_stats(self, x):
        return (jnp.asarray(x).astype(self.dtype),)

    def log_base_measure(self, x):
        return -_log_factorial(jnp.asarray(x).astype(self.dtype))

    def expected_log_base_measure(self):
        return -expected_log_factorial(self.rate)

    def sample(self, key, shape=()):
        """Counts of shape ``shape + batch_shape`` in the float dtype (not reparameterizable)."""
        return broadcast_draw(self, jax.random.poisson, key, shape, self.rate)

    def is_valid(self):
        return jnp.isfinite(self.eta)

    def outside_support(self, x):
        """A negative or non-integer count."""
        return (jnp.asarray(x) < 0) | not_integer(x)

    def _support_point(self, x):
        return jnp.zeros_like(x)

    def to_tfp(self):
        tfp = tfp_jax()
        return tfp.distributions.Poisson(log_rate=self.eta)
