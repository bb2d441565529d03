"""Bayesian Gaussian mixtures: the univariate model of Blei et al. 2017, §3 and the diagonal-covariance
model of Blei et al. 2017, appendix B (Bishop 2006, §10.2, with diagonal precisions)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from vijax import expfam
from vijax._validate import (
    check_allocation,
    check_choice,
    check_data_array,
    check_enough_points,
    check_float_dtype,
    check_int,
    check_nonconstant_columns,
    constant_columns,
    check_positive,
    check_positive_fields,
    check_positive_scalar,
    finite_values,
    float_dtype,
    real_array,
    values_match,
)
from vijax.models._base import LocalResult, conjugate_posterior
from vijax.types import Array, PRNGKey

_LOG_2PI = float(np.log(2.0 * np.pi))


def _kmeanspp_centers(key: PRNGKey, x: Array, k: int) -> Array:
    """k-means++ seeding (Arthur and Vassilvitskii, 2007): each new center is a data point drawn
    with probability proportional to its squared distance to the nearest center so far."""
    keys = jax.random.split(key, k)
    first = x[jax.random.randint(keys[0], (), 0, x.shape[0])]
    centers = jnp.zeros((k, x.shape[1]), x.dtype).at[0].set(first)
    d2 = jnp.sum((x - first[None, :]) ** 2, axis=1)

    def body(i, carry):
        centers, d2 = carry
        idx = jax.random.categorical(keys[i], jnp.log(d2 + jnp.finfo(x.dtype).tiny))
        c = x[idx]
        return centers.at[i].set(c), jnp.minimum(d2, jnp.sum((x - c[None, :]) ** 2, axis=1))

    return jax.lax.fori_loop(1, k, body, (centers, d2))[0]


def _random_rows(key: PRNGKey, x: Array, k: int) -> Array:
    """``k`` distinct rows of ``x`` (with replacement when there are fewer than ``k`` rows)."""
    n = x.shape[0]
    idx = jax.random.choice(key, n, (k,), replace=n < k)
    return x[idx]


@dataclasses.dataclass(frozen=True)
class UnivariateGMM:
    """The Bayesian mixture of unit-variance Gaussians of Blei et al. 2017, §3 (eq. 7)::

        mu_k ~ N(0, sigma^2),  c_i ~ Categorical(1/K),  x_i | c_i, mu ~ N(c_i^T mu, 1).

    Mean-field q(mu_k) = N(m_k, s_k^2), q(c_i) = Categorical(phi_i). The local step is eq. (26):
    phi_ik ∝ exp(E[mu_k] x_i - E[mu_k^2] / 2), and the global step eq. (34).

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
        dt = float_dtype(self.dtype)
        k = self.num_components
        return expfam.Normal.from_mean_variance(jnp.zeros(k, dt), jnp.full(k, self.prior_variance, dt))

    def batch_checks(self, x) -> list:
        """The value check of a step's batch: finite data."""
        return [finite_values("batch x", x)]

    def check_data(self, x) -> None:
        check_data_array("x", x, ndim=1)

    def init_globals(self, key: PRNGKey, x: Array | None = None) -> expfam.Normal:
        """q(mu_k) = N(m_k, 1) with m_k distinct data points (or prior draws without data)."""
        dt = float_dtype(self.dtype)
        if x is None:
            m = jnp.sqrt(self.prior_variance) * jax.random.normal(key, (self.num_components,), dt)
        else:
            check_enough_points("num_components", self.num_components, np.shape(x)[0], "rows drawn at random")
            m = _random_rows(key, jnp.asarray(x, dt), self.num_components)
        return expfam.Normal.from_mean_variance(m, jnp.ones_like(m))

    def local_step(self, globals_view, x, key=None, method: str = "meanfield") -> LocalResult:
        """phi_ik ∝ exp(x_i E[mu_k] - E[mu_k^2] / 2) (Blei et al. 2017, eq. 26)."""
        check_choice("method", method, self.local_methods)
        e_mu, e_mu2 = globals_view
        logits = x[:, None] * e_mu[None, :] - 0.5 * e_mu2[None, :]
        log_phi = jax.nn.log_softmax(logits, axis=-1)
        phi = jnp.exp(log_phi)
        n_k = jnp.sum(phi, 0)
        stats = (phi.T @ x, -0.5 * n_k)
        local_terms = (
            jnp.sum(-0.5 * x**2) - x.shape[0] * (0.5 * _LOG_2PI + jnp.log(self.num_components)) - jnp.sum(phi * log_phi)
        )
        return LocalResult(stats, local_terms, phi)

    def log_predictive(self, q: expfam.Normal, x: Array) -> Array:
        """log p(x* | x) ≈ log (1/K) sum_k N(x*; m_k, 1 + s_k^2), per point (Blei et al. 2017, §3.3,
        integrating mu_k over q instead of plugging in m_k)."""
        var = (1.0 + q.variance)[None, :]
        lp = -0.5 * (x[:, None] - q.mean[None, :]) ** 2 / var - 0.5 * jnp.log(2 * jnp.pi * var)
        return jax.nn.logsumexp(lp, axis=-1) - jnp.log(self.num_components)


@dataclasses.dataclass(frozen=True)
class DiagonalGMM:
    """Bayesian Gaussian mixture with diagonal precisions (Blei et al. 2017, appendix B)::

        pi ~ Dirichlet(alpha0 1_K),  tau_kd ~ Gamma(a0, b0_d),  mu_kd | tau_kd ~ N(m0_d, 1/(kappa0 tau_kd)),
        z_n ~ Categorical(pi),  x_nd | z_n = k ~ N(mu_kd, 1/tau_kd).

    Mean-field q(pi) Dirichlet, q(mu_kd, tau_kd) Normal-Gamma, q(z_n) Categorical. In the
    exponential-family form of ``vijax.models._base``, a datum assigned to k contributes
    s = (x, -1/2, -x^2/2, 1/2) to the Normal-Gamma statistics (tau mu, tau mu^2, tau, log tau)
    and z_n to the Dirichlet's log pi; log h = -D/2 log 2 pi.

    The E-step is one (N, 2D) x (2D, K) product of [x, x^2] with [E(tau mu), -E(tau)/2] and the
    M-step one (K, N) x (N, 2D) product: the whole step touches the data twice.

    Args:
      num_components: K >= 1.
      dim: D >= 1.
      alpha0: Dirichlet concentration of each weight (> 0).
      loc0: prior mean m0 of each mean (scalar or (D,)).
      kappa0: prior precision scale of the means (> 0).
      a0: Gamma shape of the precisions (> 0).
      b0: Gamma rate of the precisions (> 0, scalar or (D,)).
      dtype: float dtype (default: JAX's default float).

    Examples:
        >>> model = DiagonalGMM(num_components=4, dim=2)
        >>> [f.batch_shape for f in model.prior()]
        [(), (4, 2)]
    """

    num_components: int
    dim: int
    alpha0: float = 1.0
    loc0: Any = 0.0
    kappa0: float = 1.0
    a0: float = 1.0
    b0: Any = 1.0
    dtype: Any = None
    local_methods = ("meanfield",)

    def __post_init__(self):
        check_int("num_components", self.num_components)
        check_int("dim", self.dim)
        check_positive_fields(self, ("alpha0", "kappa0", "a0"), scalar=True)
        check_positive("b0", self.b0)
        if not np.all(np.isfinite(real_array("loc0", self.loc0, "a finite number or array"))):
            raise ValueError(f"loc0 must be finite, got {self.loc0!r}")
        for name in ("loc0", "b0"):
            shape = np.shape(getattr(self, name))
            if shape not in ((), (self.dim,)):
                raise ValueError(f"{name} must be a scalar or have shape ({self.dim},), got {shape}")
        check_float_dtype(self.dtype)
        check_allocation("num_components * dim", self.num_components * self.dim, float_dtype(self.dtype).itemsize)

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
        """Empirical-Bayes defaults in the manner of scikit-learn's ``BayesianGaussianMixture``:
        m0 = mean(x), alpha0 = 1/K, a0 = D/2 (its degrees_of_freedom_prior = D), and b0 = a0 var(x)
        so that the prior mean of each precision is 1/var(x).

        A constant column (all rows equal there: a colour bin that no image uses) has no spread
        to fit, and b0 = a0 var(x) would be 0, an unbounded precision: its variance is taken as
        1e-6 times the mean variance of the other columns, a tight but proper prior.

        Raises:
          ValueError: naming ``x`` when every column is constant (identical points): there is no
            spread to fit at all. Build :class:`DiagonalGMM` with an explicit ``b0`` > 0.
        """
        check_data_array("x", x, ndim=2)
        check_int("num_components", num_components)
        x = np.asarray(x, dtype=float)
        d = x.shape[1]
        a0 = d / 2.0 if a0 is None else a0
        alpha0 = 1.0 / num_components if alpha0 is None else alpha0
        var = x.var(0)
        constant = constant_columns(x)
        if constant.all():
            check_nonconstant_columns("x", x)  # raises, naming the identical rows
        var = np.where(constant, 1e-6 * var[~constant].mean(), var)
        return cls(num_components, d, alpha0=alpha0, loc0=x.mean(0), kappa0=kappa0, a0=a0, b0=a0 * var, dtype=dtype)

    def prior(self):
        dt = float_dtype(self.dtype)
        k, d = self.num_components, self.dim
        full = lambda v: jnp.broadcast_to(jnp.asarray(v, dt), (k, d))
        return (
            expfam.Dirichlet.from_concentration(jnp.full((k,), self.alpha0, dt)),
            expfam.NormalGamma.from_params(full(self.loc0), full(self.kappa0), full(self.a0), full(self.b0)),
        )

    def batch_checks(self, x) -> list:
        """The value checks of a step's batch: finite values; for precomputed features (N, 2D),
        also their second half the square of their first (so that data of another width is not
        silently read as features)."""
        checks = [finite_values("batch x", x)]
        if np.ndim(x) == 2 and np.shape(x)[1] == 2 * self.dim:
            d = self.dim
            checks.append(
                values_match(
                    "batch feature x**2",
                    x[:, d:],
                    x[:, :d] ** 2,
                    f"the square of its data column (features must be [x, x**2], (N, {2 * d}); data is (N, {d}))",
                )
            )
        return checks

    def check_data(self, x) -> None:
        if np.ndim(x) == 2 and np.shape(x)[1] == 2 * self.dim:  # precomputed features
            check_data_array("x", x, ndim=2, last_dim=2 * self.dim)
        else:
            check_data_array("x", x, ndim=2, last_dim=self.dim)

    def posterior_from_responsibilities(self, x: Array, resp: Array):
        """The coordinate-optimal q(beta) for given responsibilities ``resp`` (N, K) (the M-step)."""
        return conjugate_posterior(self.prior(), self.stats(x, resp))

    def init_globals(self, key: PRNGKey, x: Array | None = None):
        """Hard-assign each point to the nearest of K k-means++ seeds, then one M-step.
        Without data: a prior draw of the means with the prior's precisions.

        Raises:
          ValueError: naming ``num_components`` when ``x`` has fewer rows than components.
        """
        if x is None:
            prior = self.prior()
            draw = prior[1].sample(key)
            ng = expfam.NormalGamma.from_params(draw[..., 0], prior[1].kappa, prior[1].concentration, prior[1].rate)
            return prior[0], ng
        check_enough_points("num_components", self.num_components, np.shape(x)[0])
        return self._seeded_globals(key, x)

    def _seeded_globals(self, key: PRNGKey, x: Array):
        """:meth:`init_globals` with data, for any number of points (the DP mixture's truncation
        level may exceed it: the extra components then start empty, at the prior)."""
        dt = float_dtype(self.dtype)
        x = jnp.asarray(x, dt)[:, : self.dim]  # raw data, or the data part of features(x)
        centers = _kmeanspp_centers(key, x, self.num_components)
        d2 = jnp.sum(x**2, 1)[:, None] - 2.0 * x @ centers.T + jnp.sum(centers**2, 1)[None, :]
        resp = jax.nn.one_hot(jnp.argmin(d2, 1), self.num_components, dtype=dt)
        return self.posterior_from_responsibilities(x, resp)

    def features(self, x: Array) -> Array:
        """[x, x^2], shape (N, 2D): the statistics the E- and M-steps read. Every method taking
        ``x`` also takes these features, so a loop over a fixed data set can compute them once
        and save one pass over the data per step."""
        return x if x.shape[-1] == 2 * self.dim else jnp.concatenate([x, x**2], axis=-1)

    def stats(self, x: Array, phi: Array):
        """The statistics ((sum_n phi_n,), Normal-Gamma statistics) of responsibilities ``phi`` (N, K)
        for data ``x`` (N, D) or its :meth:`features`."""
        n_k = jnp.sum(phi, 0)
        sx = phi.T @ self.features(x)
        s1, s2 = sx[:, : self.dim], sx[:, self.dim :]
        half_n = jnp.broadcast_to(0.5 * n_k[:, None], s1.shape)
        return (n_k,), (s1, -half_n, -0.5 * s2, half_n)

    def log_resp(self, globals_view, x: Array) -> Array:
        """log phi_nk (normalized), the mean-field update of q(z_n) (Bishop eq. 10.46-10.49)."""
        (e_log_pi,), ng_view = globals_view
        return jax.nn.log_softmax(e_log_pi[None, :] + self.component_log_lik(ng_view, x), axis=-1)

    def component_log_lik(self, ng_view, x: Array) -> Array:
        """<s(x_n), E[t(mu_k, tau_k)]>, shape (N, K): the expected log-likelihood of x_n under
        component k without log h = -D/2 log 2 pi, at a Normal-Gamma view (E(tau mu), E(tau mu^2),
        E(tau), E(log tau)), each (K, D)."""
        e_tm, e_tm2, e_t, e_logt = ng_view
        w = jnp.concatenate([e_tm, -0.5 * e_t], axis=1)  # (K, 2D)
        const = jnp.sum(0.5 * e_logt - 0.5 * e_tm2, axis=1)
        return self.features(x) @ w.T + const[None, :]

    def local_step(self, globals_view, x, key=None, method: str = "meanfield") -> LocalResult:
        check_choice("method", method, self.local_methods)
        if x.ndim != 2 or x.shape[1] not in (self.dim, 2 * self.dim):
            raise ValueError(f"x must have shape (N, {self.dim}) (or features (N, {2 * self.dim})), got {x.shape}")
        log_phi = self.log_resp(globals_view, x)
        phi = jnp.exp(log_phi)
        local_terms = -jnp.sum(phi * log_phi) - 0.5 * x.shape[0] * self.dim * _LOG_2PI
        return LocalResult(self.stats(x, phi), local_terms, phi)

    def log_predictive(self, q, x: Array) -> Array:
        """Exact log posterior predictive under q, per point: a mixture over k with weights E[pi_k]
        of products over d of Student-t(2a, m, b (kappa + 1) / (a kappa))."""
        dirichlet, ng = q
        alpha = dirichlet.concentration
        log_w = jnp.log(alpha) - jnp.log(jnp.sum(alpha))
        return jax.nn.logsumexp(self.component_log_predictive(ng, x) + log_w[None], axis=-1)

    @staticmethod
    def component_log_predictive(ng, x: Array) -> Array:
        """log of each component's predictive density under a Normal-Gamma q (or prior), shape
        (N, K): products over d of Student-t(2a, m, b (kappa + 1) / (a kappa))."""
        a, b, m, kappa = ng.concentration, ng.rate, ng.loc, ng.kappa  # (K, D)
        nu = 2.0 * a
        scale2 = b * (kappa + 1.0) / (a * kappa)
        z2 = (x[:, None, :] - m[None]) ** 2 / scale2[None]
        lp = (gammaln((nu + 1) / 2) - gammaln(nu / 2) - 0.5 * jnp.log(nu * jnp.pi * scale2))[None] - (
            nu[None] + 1
        ) / 2 * jnp.log1p(z2 / nu[None])
        return jnp.sum(lp, -1)

    def point_estimates(self, q):
        """(weights E[pi], means E[mu], variances 1/E[tau]) of a fitted q."""
        dirichlet, ng = q
        alpha = dirichlet.concentration
        return alpha / jnp.sum(alpha), ng.loc, ng.rate / ng.concentration
