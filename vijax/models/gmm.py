"""Bayesian Gaussian mixtures: the univariate model of Blei et al. 2017, §3, the diagonal-covariance model of
their appendix B, and the full-covariance model of Bishop 2006, §10.2 (scikit-learn's
``BayesianGaussianMixture(weight_concentration_prior_type="dirichlet_distribution")``)::

    pi ~ Dirichlet(alpha0 1_K),   Lambda_k ~ Wishart(W0, nu0),   mu_k | Lambda_k ~ N(m0, (kappa0 Lambda_k)^-1),
    z_n ~ Categorical(pi),        x_n | z_n = k ~ N(mu_k, Lambda_k^-1).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax._validate import ArgumentError, check_allocation, check_choice, check_data_array, check_enough_points
from vijax._validate import check_float_dtype, check_int, check_nonconstant_columns, constant_columns
from vijax._validate import check_positive_scalar, finite_values, float_dtype
from vijax.models._base import LocalResult, program_argument
from vijax.models._components import LOG_2PI, NormalGammaDiagonal, NormalWishartFull, normal_gamma_log_predictive
from vijax.models.mixture import DirichletWeights, Mixture, check_mixture_sizes
from vijax.types import Array, PRNGKey
from vijax.models._pytree import PytreeModel


@functools.partial(jax.jit, static_argnums=(2, 3))
def _start_at_random_rows(key: PRNGKey, x: Array, k: int, dt) -> expfam.Normal:
    x = jnp.asarray(x, dt)
    n = x.shape[0]
    m = x[jax.random.choice(key, n, (k,), replace=n < k)]
    return expfam.Normal.from_mean_variance(m, jnp.ones_like(m))


@dataclasses.dataclass(frozen=True, eq=False)
class UnivariateGMM(PytreeModel):
    """The Bayesian mixture of unit-variance Gaussians of Blei et al. 2017, §3 (eq. 7)::

        mu_k ~ N(0, sigma^2),  c_i ~ Categorical(1/K),  x_i | c_i, mu ~ N(c_i^T mu, 1).

    Mean-field q(mu_k) = N(m_k, s_k^2), q(c_i) = Categorical(phi_i); local step eq. (26), global step eq. (34).

    Args:
      num_components: K >= 1.
      prior_variance: sigma^2 > 0.
      dtype: float dtype of the prior (default: JAX's default float).

    Examples:
        >>> model = UnivariateGMM(num_components=3, prior_variance=10.0)
        >>> model.prior().batch_shape
        (3,)
    """

    num_components: int
    prior_variance: float = 10.0
    dtype: Any = None
    local_methods = ("meanfield",)

    def __post_init__(self):
        check_int("num_components", self.num_components)
        check_positive_scalar("prior_variance", self.prior_variance)
        check_float_dtype(self.dtype)
        check_allocation("num_components", self.num_components, float_dtype(self.dtype).itemsize)

    def prior(self) -> expfam.Normal:
        """p(mu_k) = N(0, sigma^2) for k = 1..K: a ``Normal`` of batch shape (K,)."""
        dt = float_dtype(self.dtype)
        k = self.num_components
        return expfam.Normal.from_mean_variance(jnp.zeros(k, dt), jnp.full(k, self.prior_variance, dt))

    def batch_checks(self, x) -> list:
        """The value check of a step's batch: finite data."""
        return [finite_values("batch x", x)]

    def check_data(self, x) -> None:
        """Raises ValueError naming ``x`` unless it is a 1-d (N,) array of finite numbers."""
        check_data_array("x", x, ndim=1)

    def init_globals(self, key: PRNGKey, x: Array | None = None) -> expfam.Normal:
        """q(mu_k) = N(m_k, 1) with m_k distinct data points (or prior draws without data)."""
        dt = float_dtype(self.dtype)
        if x is not None:
            self.check_data(x)
            check_enough_points("num_components", self.num_components, np.shape(x)[0], "rows drawn at random")
            return _start_at_random_rows(key, program_argument(x), self.num_components, dt)
        m = jnp.sqrt(self.prior_variance) * jax.random.normal(key, (self.num_components,), dt)
        return expfam.Normal.from_mean_variance(m, jnp.ones_like(m))

    def local_step(self, globals_view, x, key=None, method: str = "meanfield") -> LocalResult:
        """phi_ik ∝ exp(x_i E[mu_k] - E[mu_k^2] / 2) (Blei et al. 2017, eq. 26)."""
        check_choice("method", method, self.local_methods)
        e_mu, e_mu2 = globals_view
        log_phi = jax.nn.log_softmax(x[:, None] * e_mu[None, :] - 0.5 * e_mu2[None, :], axis=-1)
        phi = jnp.exp(log_phi)
        stats = (phi.T @ x, -0.5 * jnp.sum(phi, 0))
        local_terms = (
            jnp.sum(-0.5 * x**2) - x.shape[0] * (0.5 * LOG_2PI + jnp.log(self.num_components)) - jnp.sum(phi * log_phi)
        )
        return LocalResult(stats, local_terms, phi)

    def log_predictive(self, q: expfam.Normal, x: Array) -> Array:
        """log p(x* | x) ≈ log (1/K) sum_k N(x*; m_k, 1 + s_k^2) per point (Blei et al. 2017, §3.3, mu_k integrated)."""
        x = program_argument(x)
        self.check_data(x)
        return self._log_predictive(q, x)

    @jax.jit
    def _log_predictive(self, q: expfam.Normal, x: Array) -> Array:
        var = (1.0 + q.variance)[None, :]
        lp = -0.5 * (x[:, None] - q.mean[None, :]) ** 2 / var - 0.5 * jnp.log(2 * jnp.pi * var)
        return jax.nn.logsumexp(lp, axis=-1) - jnp.log(self.num_components)


class GaussianMixtureNames:
    """The prior's arguments of :class:`DiagonalGMM` and ``FullGMM`` as attributes."""

    dim = property(lambda self: self.component.dim, doc="D: the data dimension.")
    alpha0 = property(
        lambda self: self.weights.concentration, doc="alpha0: the Dirichlet concentration of each weight."
    )
    loc0 = property(lambda self: self.component.loc0, doc="m0: the prior mean of each component mean (scalar or (D,)).")
    kappa0 = property(lambda self: self.component.kappa0, doc="kappa0: the prior precision scale of the means.")

    @classmethod
    def _empirical(cls, x, num_components: int, alpha0):
        """(x as a checked float64 (N, D) array, alpha0 defaulting to 1/K) for ``from_data``."""
        check_data_array("x", x, ndim=2)
        check_int("num_components", num_components)
        return np.asarray(x, dtype=float), 1.0 / num_components if alpha0 is None else alpha0


class DiagonalGMM(GaussianMixtureNames, Mixture):
    """Bayesian Gaussian mixture with diagonal precisions (Blei et al. 2017, appendix B)::

        pi ~ Dirichlet(alpha0 1_K),  tau_kd ~ Gamma(a0, b0_d),  mu_kd | tau_kd ~ N(m0_d, 1/(kappa0 tau_kd)),
        z_n ~ Categorical(pi),  x_nd | z_n = k ~ N(mu_kd, 1/tau_kd).

    Args:
      num_components: K >= 1.
      dim: D >= 1.
      alpha0: Dirichlet concentration of each weight (> 0).
      loc0: prior mean m0 of each mean (scalar or (D,)).
      kappa0: its precision scale (> 0).
      a0: Gamma shape of the precisions (> 0).
      b0: their Gamma rate (> 0; scalar or (D,)).
      dtype: float dtype (default: JAX's default float).

    Examples:
        >>> model = DiagonalGMM(num_components=4, dim=2)
        >>> [f.batch_shape for f in model.prior()]
        [(), (4, 2)]
    """

    def __init__(
        self,
        num_components: int,
        dim: int,
        alpha0: float = 1.0,
        loc0: Any = 0.0,
        kappa0: float = 1.0,
        a0: float = 1.0,
        b0: Any = 1.0,
        dtype: Any = None,
    ):
        check_mixture_sizes(num_components, dim, ("alpha0", alpha0), dtype)
        component = NormalGammaDiagonal(dim, loc0=loc0, kappa0=kappa0, a0=a0, b0=b0, dtype=dtype)
        super().__init__(component, DirichletWeights(num_components, alpha0))

    a0 = property(lambda self: self.component.a0, doc="a0: the Gamma shape of the prior on each precision tau_kd.")
    b0 = property(lambda self: self.component.b0, doc="b0: the Gamma rate of the prior on tau_kd (scalar or (D,)).")

    @classmethod
    def from_data(
        cls,
        x,
        num_components: int,
        *,
        alpha0: float | None = None,
        kappa0: float = 1.0,
        a0: float | None = None,
        dtype=None,
    ) -> "DiagonalGMM":
        """Empirical-Bayes defaults as scikit-learn's ``BayesianGaussianMixture``: m0 = mean(x), alpha0 = 1/K,
        a0 = D/2, b0 = a0 var(x) (a constant column: 1e-6 times the mean variance of the others).

        Raises:
          ValueError: naming ``x`` when every column is constant: give :class:`DiagonalGMM` an explicit ``b0``.
        """
        x, alpha0 = cls._empirical(x, num_components, alpha0)
        d = x.shape[1]
        a0 = d / 2.0 if a0 is None else a0
        var = x.var(0)
        constant = constant_columns(x)
        if constant.all():
            check_nonconstant_columns("x", x)  # raises, naming the identical rows
        var = np.where(constant, 1e-6 * var[~constant].mean(), var)
        return cls(num_components, d, alpha0=alpha0, loc0=x.mean(0), kappa0=kappa0, a0=a0, b0=a0 * var, dtype=dtype)

    def features(self, x: Array) -> Array:
        """[x, x^2], shape (N, 2D), which every method taking ``x`` also takes."""
        return self._features(program_argument(x))

    @jax.jit
    def _features(self, x: Array) -> Array:
        return self.component.features(x)

    def component_log_lik(self, ng_view, x: Array) -> Array:
        """<s(x_n), E[t(mu_k, tau_k)]>, (N, K): E[log p(x_n | component k)] without log h = -D/2 log 2 pi."""
        return self.component.expected_log_lik_without_base(ng_view, x)

    @staticmethod
    def component_log_predictive(ng, x: Array) -> Array:
        """log of each component's predictive density under a Normal-Gamma q (or prior), (N, K)."""
        return normal_gamma_log_predictive(ng, x)


class FullGMM(GaussianMixtureNames, Mixture):
    """Bayesian Gaussian mixture with full precision matrices (Bishop 2006, §10.2).

    Args:
      num_components: K >= 1.
      dim: D >= 1.
      alpha0: Dirichlet concentration of each weight (> 0).
      loc0: prior mean m0 of each mean (scalar or (D,)).
      kappa0: its precision scale (> 0).
      dof0: Wishart degrees of freedom nu0 (> D - 1; default D).
      scale_inv0: W0^-1 (SPD (D, D); scikit-learn's ``covariance_prior``), E[Lambda] = nu0 W0. Default: I.
      dtype: float dtype (default: JAX's default float).

    Examples:
        >>> model = FullGMM(num_components=3, dim=2, dof0=2.0)
        >>> [f.batch_shape for f in model.prior()]
        [(), (3,)]
    """

    def __init__(
        self,
        num_components: int,
        dim: int,
        alpha0: float = 1.0,
        loc0: Any = 0.0,
        kappa0: float = 1.0,
        dof0: float | None = None,
        scale_inv0: Any = None,
        dtype: Any = None,
    ):
        check_mixture_sizes(num_components, dim, ("alpha0", alpha0), dtype, squared=True)
        component = NormalWishartFull(dim, loc0=loc0, kappa0=kappa0, dof0=dof0, scale_inv0=scale_inv0, dtype=dtype)
        super().__init__(component, DirichletWeights(num_components, alpha0))

    dof0 = property(lambda self: self.component.degrees_of_freedom, doc="nu0: the Wishart degrees of freedom.")
    scale_inv0 = property(lambda self: self.component.scale_inv, doc="W0^-1: the inverse Wishart scale, (D, D).")

    @classmethod
    def from_data(
        cls,
        x,
        num_components: int,
        *,
        alpha0: float | None = None,
        kappa0: float = 1.0,
        dof0: float | None = None,
        dtype=None,
    ) -> "FullGMM":
        """scikit-learn's defaults for ``BayesianGaussianMixture(covariance_type="full")``: m0 = mean(x),
        alpha0 = 1/K, nu0 = D, W0^-1 = the empirical covariance of x.

        Raises:
          ValueError: naming ``x`` when a column is constant or the empirical covariance is singular.
        """
        x, alpha0 = cls._empirical(x, num_components, alpha0)
        d = x.shape[1]
        check_nonconstant_columns("x", x)
        cov = np.atleast_2d(np.cov(x.T))
        eig = np.linalg.eigvalsh(cov)
        if not eig[0] > 1e-12 * eig[-1]:
            raise ArgumentError(
                "x",
                f"x has linearly dependent columns (empirical covariance of rank {int(np.sum(eig > 1e-12 * eig[-1]))} "
                f"< {d}, eigenvalues {eig[0]:.3g} to {eig[-1]:.3g}): from_data's W0^-1 is that covariance and must be "
                "positive definite; drop the dependent column(s) or give scale_inv0 explicitly",
            )
        dof0 = float(d) if dof0 is None else dof0
        return cls(
            num_components, d, alpha0=alpha0, loc0=x.mean(0), kappa0=kappa0, dof0=dof0, scale_inv0=cov, dtype=dtype
        )

    def features(self, x: Array) -> Array:
        """x itself (the interface of ``DiagonalGMM.features``)."""
        return x


__all__ = ["DiagonalGMM", "FullGMM", "GaussianMixtureNames", "UnivariateGMM"]
