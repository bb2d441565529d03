"""Univariate Normal: t(x) = (x, x^2), eta = (mu / sigma^2, -1 / (2 sigma^2))."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import check_finite, check_positive
from vijax.expfam._base import AbstractExpFamily, as_float, register_family, standard_normal
from vijax.types import tfp_jax

_HALF_LOG_2PI = 0.5 * float(np.log(2.0 * np.pi))


@register_family
class Normal(AbstractExpFamily):
    """Normal(mu, sigma^2) in natural form, base measure h(x) = 1.

    A(eta) = -eta1^2 / (4 eta2) - 1/2 log(-2 eta2) + 1/2 log(2 pi) = mu^2/(2 sigma^2) + log sigma + 1/2 log 2pi.
    Fisher = Cov[(x, x^2)] = [[s, 2 mu s], [2 mu s, 4 mu^2 s + 2 s^2]] with s = sigma^2; its
    determinant is 2 s^3, so both Fisher products are closed form.

    Examples:
        >>> q = Normal.from_mean_variance(1.0, 4.0)
        >>> [float(m) for m in q.mean_params()]  # E[x], E[x^2]
        [1.0, 5.0]
    """

    eta1: jax.Array  # mu / sigma^2
    eta2: jax.Array  # -1 / (2 sigma^2)
    _event_ndims = (0, 0)
    _sample_ndims = 0

    @classmethod
    def from_mean_variance(cls, mean, variance) -> "Normal":
        """From the mean ``mu`` and the variance ``sigma^2``, broadcast together.

        Raises:
            ValueError: naming ``mean`` when not finite, or ``variance`` when not finite and > 0.
        """
        check_finite("mean", mean)
        check_positive("variance", variance)
        m, v = jnp.broadcast_arrays(as_float(mean), as_float(variance))
        return cls(m / v, -0.5 / v)

    @property
    def variance(self) -> jax.Array:
        """sigma^2 = -1 / (2 eta2), with the batch shape."""
        return -0.5 / self.eta2

    @property
    def mean(self) -> jax.Array:
        """mu = eta1 sigma^2, with the batch shape."""
        return self.eta1 * self.variance

    def log_normalizer(self):
        return -(self.eta1**2) / (4.0 * self.eta2) - 0.5 * jnp.log(-2.0 * self.eta2) + _HALF_LOG_2PI

    def mean_params(self):
        m, s = self.mean, self.variance
        return m, m**2 + s

    def fisher_vp(self, v):
        m, s = self.mean, self.variance
        v1, v2 = v
        return s * v1 + 2.0 * m * s * v2, 2.0 * m * s * v1 + (4.0 * m**2 * s + 2.0 * s**2) * v2

    def inv_fisher_vp(self, v):
        m, s = self.mean, self.variance
        v1, v2 = v
        c = 1.0 / (2.0 * s**3)
        return c * ((4.0 * m**2 * s + 2.0 * s**2) * v1 - 2.0 * m * s * v2), c * (-2.0 * m * s * v1 + s * v2)

    def sufficient_stats(self, x):
        return x, x**2

    def sample(self, key, shape=()):
        return self._affine(standard_normal(key, tuple(shape) + self.batch_shape, self.dtype))

    def is_valid(self):
        return self.eta2 < 0.0

    def mode(self):
        """The mode, equal to the mean mu."""
        return self.mean

    def mode_stats(self):
        """t(x) = (mu, mu^2) at the mode x = mu."""
        return self.sufficient_stats(self.mode())

    def reparam_sample_and_stats(self, key):
        """x = mu + sigma eps, eps ~ N(0, 1): explicit, and equal to -(dQ/d eta) / q."""
        return self.from_normals(standard_normal(key, self.batch_shape, self.dtype))

    def normal_shape(self):
        """One standard normal per element of the batch."""
        return self.batch_shape

    def from_normals(self, eps):
        """x = mu + sigma eps and t(x) = (x, x^2), for ``eps`` of shape ``sample_shape + batch_shape``."""
        x = self._affine(eps)
        return x, (x, x**2)

    def _affine(self, eps):
        """mu + sigma eps (``sample`` without the statistics: outside ``jit`` x^2 would be computed
        for nothing)."""
        return jnp.broadcast_to(self.mean, eps.shape) + jnp.broadcast_to(jnp.sqrt(self.variance), eps.shape) * eps

    def to_tfp(self):
        tfp = tfp_jax()
        return tfp.distributions.Normal(loc=self.mean, scale=jnp.sqrt(self.variance))
