"""The Gaussian conjugate components: :class:`NormalGammaDiagonal` (diagonal covariance) and
:class:`NormalWishartFull` (full covariance); see ``vijax.models._components`` for the interface."""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from vijax import expfam
from vijax._validate import (
    ArgumentError,
    check_data_array,
    check_float_dtype,
    check_int,
    check_positive,
    check_positive_fields,
    check_scalar,
    finite_values,
    float_dtype,
    real_array,
    values_in_interval,
    values_match,
)
from vijax.models._base import conjugate_posterior
from vijax.models._pytree import array_or_float, optional_float
from vijax.models._components import LOG_2PI, Component
from vijax.models._hmm_params import GaussianEmissions
from vijax.types import Array, PRNGKey


def kmeanspp_centers(key: PRNGKey, x: Array, k: int) -> Array:
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


def nearest_center_resp(key: PRNGKey, x: Array, k: int) -> Array:
    """One-hot responsibilities (N, k): each point assigned to the nearest of k k-means++ seeds."""
    centers = kmeanspp_centers(key, x, k)
    d2 = jnp.sum(x**2, 1)[:, None] - 2.0 * x @ centers.T + jnp.sum(centers**2, 1)[None, :]
    return jax.nn.one_hot(jnp.argmin(d2, 1), k, dtype=x.dtype)


def normal_gamma_log_predictive(ng: expfam.NormalGamma, x: Array) -> Array:
    """log of each Normal-Gamma component's predictive density of x (N, D), shape (N, K): products
    over d of Student-t(2a, m, b (kappa + 1) / (a kappa))."""
    a, b, m, kappa = ng.concentration, ng.rate, ng.loc, ng.kappa  # (K, D)
    nu = 2.0 * a
    scale2 = b * (kappa + 1.0) / (a * kappa)
    z2 = (x[:, None, :] - m[None]) ** 2 / scale2[None]
    lp = (gammaln((nu + 1) / 2) - gammaln(nu / 2) - 0.5 * jnp.log(nu * jnp.pi * scale2))[None] - (
        nu[None] + 1
    ) / 2 * jnp.log1p(z2 / nu[None])
    return jnp.sum(lp, -1)


@dataclasses.dataclass(frozen=True, eq=False)
class NormalGammaDiagonal(Component):
    """Diagonal Gaussian x_d ~ N(mu_d, 1 / tau_d) with Normal-Gamma priors tau_d ~ Gamma(a0, b0_d),
    mu_d | tau_d ~ N(m0_d, 1 / (kappa0 tau_d)) (Blei et al. 2017, appendix B). A datum contributes
    s = (x, -1/2, -x^2/2, 1/2) to the statistics (tau mu, tau mu^2, tau, log tau); log h = -D/2 log 2 pi.

    Every method taking data also takes the features [x, x^2] (N, 2D) (:meth:`features`), so a
    loop over a fixed data set can compute them once: the E-step is one (N, 2D) x (2D, K) product and
    the statistics one (K, N) x (N, 2D) product.
    """

    dim: int
    loc0: Any = 0.0
    kappa0: float = 1.0
    a0: float = 1.0
    b0: Any = 1.0
    min_variance: float = 1e-6
    dtype: Any = None
    static_floats = ("kappa0", "a0", "min_variance")
    converters = types.MappingProxyType(dict.fromkeys(("loc0", "b0"), array_or_float))
    point_type = GaussianEmissions

    distinct_seeds = True

    def __post_init__(self):
        check_int("dim", self.dim)
        check_positive_fields(self, ("kappa0", "a0"), scalar=True)
        check_positive("b0", self.b0)
        check_scalar("min_variance", self.min_variance, low=0.0, include_low=True)
        if not np.all(np.isfinite(real_array("loc0", self.loc0, "a finite number or array"))):
            raise ValueError(f"loc0 must be finite, got {self.loc0!r}")
        for name in ("loc0", "b0"):
            shape = np.shape(getattr(self, name))
            if shape not in ((), (self.dim,)):
                raise ValueError(f"{name} must be a scalar or have shape ({self.dim},), got {shape}")
        check_float_dtype(self.dtype)

    def prior(self, num: int) -> expfam.NormalGamma:
        dt = float_dtype(self.dtype)
        full = lambda v: jnp.broadcast_to(jnp.asarray(v, dt), (num, self.dim))
        return expfam.NormalGamma.from_params(full(self.loc0), full(self.kappa0), full(self.a0), full(self.b0))

    def features(self, x: Array) -> Array:
        """[x, x^2], shape (N, 2D); features are returned unchanged."""
        return x if x.shape[-1] == 2 * self.dim else jnp.concatenate([x, x**2], axis=-1)

    def suff_stats(self, x: Array) -> tuple:
        f = self.features(x)
        half = jnp.full(f.shape[:1] + (self.dim,), 0.5, f.dtype)
        return f[:, : self.dim], -half, -0.5 * f[:, self.dim :], half

    def log_base_measure(self, x: Array) -> Array:
        return jnp.full(x.shape[:1], -0.5 * self.dim * LOG_2PI, x.dtype)

    def stats(self, x: Array, weights: Array) -> tuple:
        n_k = jnp.sum(weights, 0)
        sx = weights.T @ self.features(x)
        s1, s2 = sx[:, : self.dim], sx[:, self.dim :]
        half_n = jnp.broadcast_to(0.5 * n_k[:, None], s1.shape)
        return s1, -half_n, -0.5 * s2, half_n

    def expected_log_lik_without_base(self, view, x: Array) -> Array:
        """<s(x_n), view_k>, (N, K): :meth:`expected_log_lik` without log h = -D/2 log 2 pi."""
        e_tm, e_tm2, e_t, e_logt = view
        w = jnp.concatenate([e_tm, -0.5 * e_t], axis=1)  # (K, 2D)
        const = jnp.sum(0.5 * e_logt - 0.5 * e_tm2, axis=1)
        return self.features(x) @ w.T + const[None, :]

    def expected_log_lik(self, view, x: Array) -> Array:
        e_tm, e_tm2, e_t, e_logt = view
        w = jnp.concatenate([e_tm, -0.5 * e_t], axis=1)
        const = jnp.sum(0.5 * e_logt - 0.5 * e_tm2, axis=1) - 0.5 * self.dim * LOG_2PI
        return self.features(x) @ w.T + const[None, :]

    def log_predictive(self, q: expfam.NormalGamma, x: Array) -> Array:
        """Products over d of Student-t(2a, m, b (kappa + 1) / (a kappa)), shape (N, K)."""
        return normal_gamma_log_predictive(q, x[:, : self.dim])

    def point_estimate(self, q: expfam.NormalGamma):
        """(means E[mu], variances 1 / E[tau])."""
        return q.loc, q.rate / q.concentration

    def check_data(self, x, name: str | None = None) -> None:
        name = name or self.data_name
        if np.ndim(x) == 2 and np.shape(x)[1] == 2 * self.dim:  # precomputed features
            check_data_array(name, x, ndim=2, last_dim=2 * self.dim)
        else:
            check_data_array(name, x, ndim=2, last_dim=self.dim)

    def batch_checks(self, x, name: str | None = None) -> list:
        """Finite values; for features (N, 2D), also their second half the square of their first.
        That match fails at every non-finite entry of either half, so it covers the finiteness
        check (``ValueCheck.covered_by``): a traced step makes one pass over features, not two."""
        name = name or self.data_name
        finite = finite_values(f"batch {name}", x)
        if not (np.ndim(x) == 2 and np.shape(x)[1] == 2 * self.dim):
            return [finite]
        d = self.dim
        match = values_match(
            f"batch feature {name}**2",
            x[:, d:],
            x[:, :d] ** 2,
            f"the square of its data column (features must be [x, x**2], (N, {2 * d}); data is (N, {d}))",
        )
        return [finite._replace(covered_by=match.name), match]

    def check_shape(self, x: Array) -> None:
        if x.ndim != 2 or x.shape[1] not in (self.dim, 2 * self.dim):
            raise ArgumentError(
                "x", f"x must have shape (N, {self.dim}) (or features (N, {2 * self.dim})), got {x.shape}"
            )

    # -- EM: point estimates (GaussianEmissions(means, variances)) ------------------------------------
    @property
    def point_width(self) -> int:
        """D: the width of an emission (the last axis of ``GaussianEmissions.means``)."""
        return self.dim

    def point_checks(self, params: GaussianEmissions, num: int) -> list:
        """The value checks of point emissions: means and variances finite, variances at least the
        dtype's smallest normal number."""
        tiny = float(jnp.finfo(params.variances.dtype).tiny)
        return [
            finite_values("params.emissions.means", params.means),
            finite_values("params.emissions.variances", params.variances),
            values_in_interval("params.emissions.variances", params.variances, tiny, float("inf")),
        ]

    def point_view(self, params: GaussianEmissions) -> tuple:
        """t(theta) at a point: (tau mu, tau mu^2, tau, log tau) with tau = 1 / variances, each (K, D)."""
        tau = 1.0 / params.variances
        return tau * params.means, tau * params.means**2, tau, jnp.log(tau)

    def point_m_step(self, stats) -> GaussianEmissions:
        """Maximum likelihood (the prior is not used), variances floored at ``min_variance``."""
        s1, neg_half_n, neg_half_s2, _ = stats
        n = -2.0 * neg_half_n
        safe = jnp.where(n > 0, n, 1.0)
        means = jnp.where(n > 0, s1 / safe, 0.0)
        var = jnp.where(n > 0, -2.0 * neg_half_s2 / safe - means**2, 1.0)
        return GaussianEmissions(means, jnp.maximum(var, self.min_variance))

    def point_log_prior(self, params: GaussianEmissions) -> Array:
        """0: EM for these emissions is maximum likelihood (the Normal-Gamma prior is not used)."""
        return jnp.zeros((), float_dtype(self.dtype))

    def init_point(self, key: PRNGKey, num: int, prepared=None) -> GaussianEmissions:
        """Means at ``num`` observed points drawn at random, variances the data's; without data
        standard-normal means and unit variances. ``prepared``: (observations (M, D), mask (M,))."""
        dt = float_dtype(self.dtype)
        if prepared is None:
            return GaussianEmissions(jax.random.normal(key, (num, self.dim), dt), jnp.ones((num, self.dim), dt))
        x, mask = prepared
        w = mask.astype(dt)
        n = jnp.sum(w)
        mean = w @ x / n
        var = jnp.maximum(w @ (x - mean[None]) ** 2 / n, max(self.min_variance, 1e-6))
        rows = jax.random.choice(key, x.shape[0], (num,), replace=bool(x.shape[0] < num), p=w / n)
        return GaussianEmissions(x[rows], jnp.broadcast_to(var, (num, self.dim)))

    def pseudo_stats(self, params: GaussianEmissions) -> tuple:
        """E[s(x)] for x ~ N(means, variances): one pseudo-observation per copy."""
        m, v = params.means, params.variances
        half = jnp.full_like(m, 0.5)
        return m, -half, -0.5 * (m**2 + v), half

    def expected_point(self, q: expfam.NormalGamma) -> GaussianEmissions:
        """(E[mu], E[sigma^2] = b / (a - 1))."""
        return GaussianEmissions(q.loc, q.rate / jnp.maximum(q.concentration - 1.0, 1e-12))

    def initial_q(self, key: PRNGKey, num: int, x: Array | None = None):
        """Each point hard-assigned to the nearest of ``num`` k-means++ seeds, then one M-step (``num``
        may exceed N: the extra copies start empty, at the prior). Without data: means drawn from the
        prior, with the prior's precisions."""
        dt = float_dtype(self.dtype)
        prior = self.prior(num)
        if x is None:
            draw = prior.sample(key)
            q = expfam.NormalGamma.from_params(draw[..., 0], prior.kappa, prior.concentration, prior.rate)
            return q, jnp.zeros((num,), dt)
        x = jnp.asarray(x, dt)[:, : self.dim]  # raw data, or the data part of features(x)
        resp = nearest_center_resp(key, x, num)
        return conjugate_posterior(prior, self.stats(x, resp)), jnp.sum(resp, 0)


@dataclasses.dataclass(frozen=True, eq=False)
class NormalWishartFull(Component):
    """Full-covariance Gaussian x ~ N(mu, Lambda^-1) with a Normal-Wishart prior Lambda ~ Wishart(W0, nu0),
    mu | Lambda ~ N(m0, (kappa0 Lambda)^-1) (Bishop 2006, §10.2). A datum contributes
    s = (x, -1/2, -x x^T / 2, 1/2) to (Lambda mu, mu^T Lambda mu, Lambda, log|Lambda|); log h = -D/2 log 2 pi.

    ``dof0`` defaults to D and ``scale_inv0`` (W0^-1, scikit-learn's ``covariance_prior``) to the
    identity.
    """

    dim: int
    loc0: Any = 0.0
    kappa0: float = 1.0
    dof0: float | None = None
    scale_inv0: Any = None
    dtype: Any = None
    static_floats = ("kappa0",)
    converters = types.MappingProxyType({"dof0": optional_float, "loc0": array_or_float, "scale_inv0": array_or_float})

    distinct_seeds = True

    def __post_init__(self):
        check_int("dim", self.dim)
        check_positive_fields(self, ("kappa0",), scalar=True)
        check_float_dtype(self.dtype)
        d = self.dim
        loc0 = real_array("loc0", self.loc0, f"a finite scalar or an array of shape ({d},)")
        if loc0.shape not in ((), (d,)) or not np.all(np.isfinite(loc0)):
            raise ValueError(f"loc0 must be a finite scalar or have shape ({d},), got {self.loc0!r}")
        check_scalar("dof0", self.degrees_of_freedom, low=d - 1.0)
        s = real_array("scale_inv0", self.scale_inv, f"a symmetric positive-definite ({d}, {d}) matrix")
        if s.shape != (d, d):
            raise ValueError(f"scale_inv0 must have shape ({d}, {d}), got {s.shape}")
        if not np.all(np.isfinite(s)) or not np.allclose(s, s.T) or np.linalg.eigvalsh(s).min() <= 0:
            raise ValueError("scale_inv0 must be a finite, symmetric positive-definite matrix")

    @property
    def degrees_of_freedom(self) -> float:
        """nu0 (``dof0``, default D)."""
        return float(self.dim if self.dof0 is None else check_scalar("dof0", self.dof0))

    @property
    def scale_inv(self) -> Array:
        """W0^-1 (``scale_inv0``, default the identity): an array (a leaf of the component, traced
        where the component is a ``jit`` argument)."""
        return np.eye(self.dim) if self.scale_inv0 is None else self.scale_inv0

    def prior(self, num: int) -> expfam.NormalWishart:
        dt = float_dtype(self.dtype)
        d = self.dim
        scale = jnp.linalg.inv(jnp.asarray(self.scale_inv, dt))
        return expfam.NormalWishart.from_params(
            jnp.broadcast_to(jnp.asarray(self.loc0, dt), (num, d)),
            jnp.full((num,), self.kappa0, dt),
            jnp.broadcast_to(jnp.asarray(0.5 * (scale + scale.T), dt), (num, d, d)),
            jnp.full((num,), self.degrees_of_freedom, dt),
        )

    def suff_stats(self, x: Array) -> tuple:
        half = jnp.full(x.shape[:1], 0.5, x.dtype)
        return x, -half, -0.5 * x[:, :, None] * x[:, None, :], half

    def log_base_measure(self, x: Array) -> Array:
        return jnp.full(x.shape[:1], -0.5 * self.dim * LOG_2PI, x.dtype)

    def stats(self, x: Array, weights: Array) -> tuple:
        n_k = jnp.sum(weights, 0)
        sx = weights.T @ x  # (K, D)
        sxx = jnp.einsum("nk,nd,ne->kde", weights, x, x)
        return sx, -0.5 * n_k, -0.5 * sxx, 0.5 * n_k

    def expected_log_lik(self, view, x: Array) -> Array:
        """Bishop (2006) eq. (10.46)-(10.49) in mean parameters."""
        e_lam_mu, e_mu_lam_mu, e_lam, e_logdet = view
        quad = jnp.einsum("nd,kde,ne->nk", x, e_lam, x)
        const = -0.5 * e_mu_lam_mu + 0.5 * e_logdet - 0.5 * self.dim * LOG_2PI
        return x @ e_lam_mu.T - 0.5 * quad + const[None, :]

    def log_predictive(self, q: expfam.NormalWishart, x: Array) -> Array:
        """Multivariate Student-t(nu + 1 - D, m, (kappa + 1) / (kappa (nu + 1 - D)) W^-1) per component
        (Bishop 2006, eq. 10.81-10.82), shape (N, K)."""
        d = self.dim
        nu, kappa, m = q.dof, q.kappa, q.loc
        dof = nu + 1.0 - d
        shape = ((kappa + 1.0) / (kappa * dof))[:, None, None] * q.scale_inv  # (K, D, D)
        chol = jnp.linalg.cholesky(shape)
        diff = x[:, None, :] - m[None]  # (N, K, D)
        z = jax.scipy.linalg.solve_triangular(chol[None], diff[..., None], lower=True)[..., 0]
        maha = jnp.sum(z**2, -1)
        log_det = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), -1)
        const = gammaln(0.5 * (dof + d)) - gammaln(0.5 * dof) - 0.5 * d * jnp.log(dof * jnp.pi) - 0.5 * log_det
        return const[None] - 0.5 * (dof + d)[None] * jnp.log1p(maha / dof[None])

    def point_estimate(self, q: expfam.NormalWishart):
        """(means E[mu], covariances E[Lambda]^-1)."""
        return q.loc, q.scale_inv / q.dof[:, None, None]

    def check_data(self, x, name: str | None = None) -> None:
        check_data_array(name or self.data_name, x, ndim=2, last_dim=self.dim)

    def check_shape(self, x: Array) -> None:
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ArgumentError("x", f"x must have shape (N, {self.dim}), got {x.shape}")

    def initial_q(self, key: PRNGKey, num: int, x: Array | None = None):
        """Hard assignment to the nearest of ``num`` k-means++ seeds, then one M-step. Without data:
        the prior with its means at prior draws."""
        dt = float_dtype(self.dtype)
        prior = self.prior(num)
        if x is None:
            mu = prior.sample(key)[..., -1]  # a draw is [Lambda | mu]
            q = expfam.NormalWishart.from_params(mu, prior.kappa, prior.scale, prior.dof)
            return q, jnp.zeros((num,), dt)
        x = jnp.asarray(x, dt)
        resp = nearest_center_resp(key, x, num)
        return conjugate_posterior(prior, self.stats(x, resp)), jnp.sum(resp, 0)


__all__ = ["NormalGammaDiagonal", "NormalWishartFull", "kmeanspp_centers", "normal_gamma_log_predictive"]
