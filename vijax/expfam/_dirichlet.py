"""Dirichlet(alpha) over the (K-1)-simplex: t(x) = log x, eta = alpha - 1."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from vijax._validate import ArgumentError, check_positive
from vijax.expfam._base import AbstractExpFamily, as_float, floored_log, register_family
from vijax.expfam._inversion import standard_log_gamma
from vijax.expfam._special import digamma_and_gammaln_with_total, trigamma
from vijax.types import tfp_jax


@register_family
class Dirichlet(AbstractExpFamily):
    """Dirichlet distribution with concentration ``alpha`` (last axis = event), natural form.

    A(eta) = sum_k lgamma(alpha_k) - lgamma(alpha_0), alpha_0 = sum_k alpha_k.
    The Fisher matrix is diag(psi'(alpha)) - psi'(alpha_0) 1 1^T, so ``inv_fisher_vp`` costs O(K)
    by the matrix inversion lemma (Hoffman & Blei 2015, appendix C).

    Examples:
        >>> q = Dirichlet.from_concentration([1.0, 2.0, 3.0])
        >>> q.batch_shape
        ()
    """

    eta: jax.Array  # alpha - 1, shape batch + (K,)
    _event_ndims = (1,)
    _sample_ndims = 1

    @classmethod
    def from_concentration(cls, concentration) -> "Dirichlet":
        """From the concentration ``alpha`` (batch + (K,), the event axis last).

        Raises:
            ValueError: naming ``concentration`` when an entry is not finite and > 0, or it has no event axis.
        """
        check_positive("concentration", concentration)
        alpha = as_float(concentration)
        if alpha.ndim < 1:
            raise ArgumentError(
                "concentration", f"concentration must have at least one (event) axis, got shape {alpha.shape}"
            )
        return cls(alpha - 1.0)

    @property
    def concentration(self) -> jax.Array:
        """alpha = eta + 1, shape batch + (K,)."""
        return self.eta + 1.0

    def log_normalizer(self):
        a = self.concentration
        return jnp.sum(gammaln(a), -1) - gammaln(jnp.sum(a, -1))

    def mean_params(self):
        psi = digamma_and_gammaln_with_total(self.concentration)[0]
        return (psi[..., :-1] - psi[..., -1:],)

    def kl(self, other: "Dirichlet") -> jax.Array:
        """KL(self || other), the Bregman divergence of ``AbstractExpFamily.kl`` from one pass of special functions."""
        if type(other) is not type(self):
            raise TypeError(f"kl: other must be a {type(self).__name__}, got {type(other).__name__}")
        psi, lgam = digamma_and_gammaln_with_total(self.concentration)
        # -A(eta_self) - <eta_other - eta_self, E[log x]>
        rest = jnp.sum((self.eta - other.eta) * (psi[..., :-1] - psi[..., -1:]) - lgam[..., :-1], axis=-1)
        return other.log_normalizer() + lgam[..., -1] + rest

    def fisher_vp(self, v):
        (v,) = v
        a = self.concentration
        c = trigamma(jnp.sum(a, -1, keepdims=True))
        return (trigamma(a) * v - c * jnp.sum(v, -1, keepdims=True),)

    def inv_fisher_vp(self, v):
        # (D - c 1 1^T)^-1 v = D^-1 v + D^-1 1 (c 1^T D^-1 v) / (1 - c 1^T D^-1 1),  O(K).
        (v,) = v
        a = self.concentration
        c = trigamma(jnp.sum(a, -1, keepdims=True))
        dinv = 1.0 / trigamma(a)
        dv = dinv * v
        corr = c * jnp.sum(dv, -1, keepdims=True) / (1.0 - c * jnp.sum(dinv, -1, keepdims=True))
        return (dv + dinv * corr,)

    def sufficient_stats(self, x):
        return (jnp.log(x),)

    def sample(self, key, shape=()):
        shape = tuple(shape) + self.batch_shape
        return jax.random.dirichlet(key, self.concentration, shape, dtype=self.dtype)

    def is_valid(self):
        return jnp.all(self.eta > -1.0, axis=-1)

    def outside_support(self, x):
        """A point with a negative coordinate or whose coordinates do not sum to 1 (within sqrt(eps))."""
        x = jnp.asarray(x)
        tol = float(np.sqrt(np.finfo(x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else self.dtype).eps))
        return jnp.any(x < 0, -1) | (jnp.abs(jnp.sum(x, -1) - 1) > tol)

    def _support_point(self, x):
        return jnp.full_like(x, 1.0 / x.shape[-1])

    def mode(self):
        """(alpha - 1) / sum(alpha - 1) with alpha - 1 clipped at 0; uniform where every alpha_k <= 1."""
        c = jnp.maximum(self.concentration - 1.0, 0.0)
        tot = jnp.sum(c, -1, keepdims=True)
        return jnp.where(tot > 0, c / jnp.where(tot > 0, tot, 1.0), 1.0 / c.shape[-1])

    def mode_stats(self):
        """t(x) = log m at the mode m, floored by ``floored_log`` where m_k = 0 (a boundary mode)."""
        return (floored_log(self.mode()),)

    def reparam_sample_and_stats(self, key):
        """Normalised Gamma(alpha_k, 1) draws (Hoffman and Blei 2015, eq. 27-28), t = log x in log space."""
        return self.from_log_gammas(standard_log_gamma(key, self.log_gamma_shapes()))

    def log_gamma_shapes(self):
        """alpha: the shapes of the Gamma(alpha_k, 1) draws (``vijax.expfam.GammaBased``)."""
        return self.concentration

    def from_log_gammas(self, log_g):
        """(x, t(x)) from log g, g_k ~ Gamma(alpha_k, 1): x = g / sum_k g_k."""
        log_x = log_g - jax.nn.logsumexp(log_g, axis=-1, keepdims=True)
        return jnp.exp(log_x), (log_x,)

    def to_tfp(self):
        tfp = tfp_jax()
        return tfp.distributions.Dirichlet(concentration=self.concentration)
