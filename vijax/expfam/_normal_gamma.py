"""Normal-Gamma over (mu, tau): tau ~ Gamma(a, b), mu | tau ~ N(m, 1 / (kappa tau)).

The conjugate prior of a Normal likelihood with unknown mean and precision, one per batch
element (a diagonal Gaussian mixture uses a K x D batch of them; Blei et al. 2017, appendix B).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import digamma, gammaln

from vijax._validate import check_finite, check_positive
from vijax.expfam._base import AbstractExpFamily, as_float, register_family, standard_normal
from vijax.expfam._inversion import standard_log_gamma
from vijax.types import tfp_jax

_HALF_LOG_2PI = 0.5 * float(np.log(2.0 * np.pi))


@register_family
class NormalGamma(AbstractExpFamily):
    """Normal-Gamma in natural form; a draw is the pair ``x = (mu, tau)`` on the last axis.

    log p(mu, tau) = <eta, t> - A(eta) with
        t   = (tau mu, tau mu^2, tau, log tau),
        eta = (kappa m, -kappa / 2, -b - kappa m^2 / 2, a - 1/2),
        A   = lgamma(a) - a log b - 1/2 log kappa + 1/2 log 2 pi,   h = 1.
    Mean parameters: ((a/b) m, (a/b) m^2 + 1/kappa, a/b, psi(a) - log b).

    Examples:
        >>> q = NormalGamma.from_params(loc=0.0, kappa=2.0, concentration=3.0, rate=1.5)
        >>> float(q.mean_params()[2])  # E[tau] = a / b
        2.0
    """

    eta1: jax.Array  # kappa m
    eta2: jax.Array  # -kappa / 2
    eta3: jax.Array  # -b - kappa m^2 / 2
    eta4: jax.Array  # a - 1/2
    _event_ndims = (0, 0, 0, 0)
    _sample_ndims = 1

    @classmethod
    def from_params(cls, loc, kappa, concentration, rate) -> "NormalGamma":
        """From the mean ``loc`` (m), the precision scale ``kappa``, and the Gamma shape/rate."""
        check_finite("loc", loc)
        check_positive("kappa", kappa)
        check_positive("concentration", concentration)
        check_positive("rate", rate)
        m, k, a, b = jnp.broadcast_arrays(as_float(loc), as_float(kappa), as_float(concentration), as_float(rate))
        return cls(k * m, -0.5 * k, -b - 0.5 * k * m**2, a - 0.5)

    @property
    def kappa(self):
        """kappa = -2 eta2, the precision scale of mu given tau (mu | tau ~ N(m, 1 / (kappa tau)))."""
        return -2.0 * self.eta2

    @property
    def loc(self):
        """m = eta1 / kappa, the mean of mu."""
        return self.eta1 / self.kappa

    @property
    def concentration(self):
        """a = eta4 + 1/2, the Gamma shape of tau."""
        return self.eta4 + 0.5

    @property
    def rate(self):
        """b = -eta3 - kappa m^2 / 2, the Gamma rate of tau."""
        return -self.eta3 + self.eta1**2 / (4.0 * self.eta2)

    def log_normalizer(self):
        a, b = self.concentration, self.rate
        return gammaln(a) - a * jnp.log(b) - 0.5 * jnp.log(self.kappa) + _HALF_LOG_2PI

    def mean_params(self):
        a, b, m = self.concentration, self.rate, self.loc
        e_tau = a / b
        return e_tau * m, e_tau * m**2 + 1.0 / self.kappa, e_tau, digamma(a) - jnp.log(b)

    def sufficient_stats(self, x):
        mu, tau = x[..., 0], x[..., 1]
        return tau * mu, tau * mu**2, tau, jnp.log(tau)

    def sample(self, key, shape=()):
        shape = tuple(shape) + self.batch_shape
        k_tau, k_mu = jax.random.split(key)
        a = jnp.broadcast_to(self.concentration, shape)
        tau = jax.random.gamma(k_tau, a, shape, dtype=self.dtype) / jnp.broadcast_to(self.rate, shape)
        eps = standard_normal(k_mu, shape, self.dtype)
        mu = jnp.broadcast_to(self.loc, shape) + eps / jnp.sqrt(jnp.broadcast_to(self.kappa, shape) * tau)
        return jnp.stack([mu, tau], axis=-1)

    def reparam_sample_and_stats(self, key):
        """One draw (mu, tau) and its statistics, differentiable in eta at fixed (u, eps): tau = g / b with
        log g ~ log Gamma(a, 1) by inversion, mu = m + eps / sqrt(kappa tau), eps ~ N(0, 1)."""
        k_tau, k_mu = jax.random.split(key)
        log_tau = standard_log_gamma(k_tau, self.concentration) - jnp.log(self.rate)
        tau = jnp.exp(log_tau)
        eps = standard_normal(k_mu, self.batch_shape, self.dtype)
        mu = self.loc + eps * jax.lax.rsqrt(self.kappa * tau)
        return jnp.stack([mu, tau], axis=-1), (tau * mu, tau * mu**2, tau, log_tau)

    def is_valid(self):
        return (self.eta2 < 0.0) & (self.eta4 > -0.5) & (self.rate > 0.0)

    def outside_support(self, x):
        """A negative precision tau (x = [mu, tau])."""
        return jnp.asarray(x)[..., 1] < 0

    def _support_point(self, x):
        return jnp.broadcast_to(jnp.asarray([0.0, 1.0], x.dtype), x.shape)

    def to_tfp(self):
        """A ``JointDistributionSequential`` over ``[tau, mu]`` (note the order)."""
        tfp = tfp_jax()
        tfd = tfp.distributions
        m, k = self.loc, self.kappa
        return tfd.JointDistributionSequential(
            [
                tfd.Gamma(concentration=self.concentration, rate=self.rate),
                lambda tau: tfd.Normal(loc=m, scale=jax.lax.rsqrt(k * tau)),
            ]
        )
