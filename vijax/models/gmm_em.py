"""Gaussian mixtures fitted by maximum-likelihood EM, with full, diagonal, spherical or tied covariances.

    z_n ~ Categorical(w),  x_n | z_n = k ~ N(mu_k, Sigma_k),   n = 1..N, x_n in R^D.

The tutorial *Raise your ELBO*, §EM and §GMM; Dempster, Laird and Rubin (1977). The E-step sets
r_nk ∝ w_k N(x_n | mu_k, Sigma_k) (in log space, which also gives log p(x | theta)); the M-step is::

    N_k = sum_n r_nk,  w_k = N_k / N,  mu_k = sum_n r_nk x_n / N_k,
    Sigma_k = sum_n r_nk (x_n - mu_k)(x_n - mu_k)^T / N_k + reg_covar I.

``"diag"`` keeps the diagonal, ``"spherical"`` its average over d, and ``"tied"`` shares one covariance
sum_k sum_n r_nk (x_n - mu_k)(x_n - mu_k)^T / N: scikit-learn's ``GaussianMixture`` iterates. A covariance whose
Cholesky pivot is within 10 eps of the largest second moment is refused with a ValueError naming ``reg_covar``.
"""

from __future__ import annotations

import types
import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import ArgumentError, ValueCheck, check_allocation, check_choice, check_data_array
from vijax._validate import check_enough_points, check_float_dtype, check_int, check_scalar, enforce_value_checks
from vijax._validate import finite_values, float_dtype, is_tracer
from vijax.models._components import LOG_2PI, nearest_center_resp
from vijax.types import Array, PRNGKey
from vijax.models._pytree import PytreeModel

COVARIANCE_TYPES = ("full", "diag", "spherical", "tied")
INITS = ("kmeans++", "random")


def check_em_params(params, shapes: dict, atol: float) -> None:
    """Raises ValueError naming ``params`` unless each field ``f`` is finite of shape ``shapes[f]`` and the weights
    are non-negative and sum to 1 within ``atol`` (tracers pass)."""
    for name, shape in shapes.items():
        value = getattr(params, name)
        if is_tracer(value):
            continue
        a = np.asarray(value, dtype=np.float64)
        if a.shape != shape or not np.all(np.isfinite(a)):
            raise ArgumentError("params", f"params.{name} must be finite with shape {shape}, got shape {a.shape}")
    if not is_tracer(params.weights):
        w = np.asarray(params.weights, dtype=np.float64)
        if np.any(w < 0) or not np.isclose(w.sum(), 1.0, atol=atol):
            raise ArgumentError("params", f"params.weights must be non-negative and sum to 1, got sum {w.sum():g}")


class GMMParams(NamedTuple):
    """Point parameters of a Gaussian mixture; ``covariances`` (K, D, D) full, (D, D) tied, (K, D) diag, (K,)
    spherical (scikit-learn's layouts)."""

    weights: Array  # (K,), sums to 1
    means: Array  # (K, D)
    covariances: Array


class GMMStats(NamedTuple):
    """Expected statistics of a batch about a center c (D,): N_k (K,), sum_n r_nk (x_n - c) (K, D) and the second
    moments of x - c ((K, D, D) full, (D, D) unweighted tied, (K, D) diag and spherical)."""

    counts: Array
    sums: Array
    second: Array
    center: Array


class DenseDataChecks:
    """The data checks of a model of (N, dim) real rows."""

    def batch_checks(self, x) -> list:
        """The value check of a step's batch: finite data."""
        return [finite_values("batch x", x)]

    def check_data(self, x) -> None:
        """Raises ValueError naming ``x`` unless it is a finite numeric (N, dim) array with N >= 1."""
        check_data_array("x", x, ndim=2, last_dim=self.dim)


@dataclasses.dataclass(frozen=True, eq=False)
class GaussianMixtureEM(DenseDataChecks, PytreeModel):
    """A Gaussian mixture for maximum-likelihood EM (``vijax.inference.em``; the ``EMModel`` protocol).

    Args:
      num_components: K >= 1.
      dim: D >= 1.
      covariance_type: ``"full"``, ``"diag"``, ``"spherical"`` or ``"tied"``.
      reg_covar: >= 0, added to the diagonal of every covariance in the M-step (scikit-learn's default 1e-6).
      init: ``init_params``'s one M-step from ``"kmeans++"`` (hard) or ``"random"`` (uniform) responsibilities.
      block_size: rows per block of the E-step's ``lax.scan`` (memory O(block_size K D)).
      dtype: float dtype (default: JAX's default float).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.inference import em
        >>> x = jax.random.normal(jax.random.PRNGKey(0), (200, 2))
        >>> model = GaussianMixtureEM(3, 2, covariance_type="diag")
        >>> alg = em(model)
        >>> state = alg.init(jax.random.PRNGKey(1), x)
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(2), state, x)
        >>> state.q_global.covariances.shape
        (3, 2)

    References:
      Dempster, Laird and Rubin (1977), Maximum likelihood from incomplete data via the EM algorithm.
    """

    num_components: int
    dim: int
    _: dataclasses.KW_ONLY
    covariance_type: str = "full"
    reg_covar: float = 1e-6
    init: str = "kmeans++"
    block_size: int = 8192
    dtype: Any = None
    converters = types.MappingProxyType(
        {"reg_covar": lambda name, value: check_scalar(name, value, low=0.0, include_low=True)}
    )

    def __post_init__(self):
        check_int("num_components", self.num_components)
        check_int("dim", self.dim)
        check_choice("covariance_type", self.covariance_type, COVARIANCE_TYPES)
        check_choice("init", self.init, INITS)
        check_int("block_size", self.block_size)
        check_float_dtype(self.dtype)
        k, d, itemsize = self.num_components, self.dim, float_dtype(self.dtype).itemsize
        check_allocation("num_components * dim**2", k * d * d if self.covariance_type == "full" else k * d, itemsize)

    def covariance_shape(self) -> tuple:
        """The shape of ``GMMParams.covariances`` for ``covariance_type``."""
        k, d = self.num_components, self.dim
        return {"full": (k, d, d), "tied": (d, d), "diag": (k, d), "spherical": (k,)}[self.covariance_type]

    def check_params(self, params: GMMParams) -> None:
        """Raises ValueError naming the field: shapes, weights on the simplex, covariances positive (definite)."""
        k, d = self.num_components, self.dim
        check_em_params(params, {"weights": (k,), "means": (k, d), "covariances": self.covariance_shape()}, atol=1e-4)
        if not is_tracer(params.covariances):
            c = np.asarray(params.covariances, dtype=np.float64)
            ok = np.all(np.linalg.eigvalsh(c) > 0) if self.covariance_type in ("full", "tied") else np.all(c > 0)
            if not ok:
                raise ArgumentError("params", "params.covariances must be positive definite (positive variances)")

    def _precision_terms(self, params: GMMParams, center: Array):
        """m_k = mu_k - c, the precision factor and -1/2 log det Sigma_k (K,) about ``center``."""
        dt = float_dtype(self.dtype)
        m = params.means.astype(dt) - center[None, :]
        cov = params.covariances.astype(dt)
        if self.covariance_type in ("full", "tied"):
            chol = jnp.linalg.cholesky(cov)  # Sigma = L L^T; P = L^{-T}: P P^T = Sigma^{-1}
            eye = jnp.broadcast_to(jnp.eye(self.dim, dtype=dt), chol.shape)
            prec_chol = jnp.swapaxes(jax.scipy.linalg.solve_triangular(chol, eye, lower=True), -1, -2)
            half_logdet = -jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), -1)
            return m, prec_chol, jnp.broadcast_to(half_logdet, (self.num_components,))
        prec = 1.0 / cov  # (K, D) or (K,)
        if self.covariance_type == "spherical":
            return m, prec, 0.5 * self.dim * jnp.log(prec)
        return m, prec, 0.5 * jnp.sum(jnp.log(prec), -1)

    def _log_joint(self, terms, log_w: Array, xc: Array) -> Array:
        """log w_k + log N(x_n | mu_k, Sigma_k) for centered rows ``xc`` (B, D): (B, K)."""
        m, prec, half_logdet = terms
        k, d = self.num_components, self.dim
        if self.covariance_type == "full":
            # y_nk = (x_n - m_k)^T P_k as one (B, D) x (D, K D) product
            p_flat = jnp.transpose(prec, (1, 0, 2)).reshape(d, k * d)
            shift = jnp.einsum("kd,kde->ke", m, prec).reshape(k * d)
            y = (xc @ p_flat - shift[None, :]).reshape(xc.shape[0], k, d)
            quad = jnp.sum(y * y, -1)
        elif self.covariance_type == "tied":
            y = (xc @ prec)[:, None, :] - (m @ prec)[None, :, :]
            quad = jnp.sum(y * y, -1)
        else:
            lam = prec if self.covariance_type == "diag" else jnp.broadcast_to(prec[:, None], (k, d))
            quad = ((xc * xc) @ lam.T - 2.0 * (xc @ (lam * m).T)) + jnp.sum(m * m * lam, -1)[None, :]
        return log_w[None, :] + half_logdet[None, :] - 0.5 * (d * LOG_2PI + quad)

    def _block_stats(self, xc: Array, resp: Array) -> tuple:
        """Statistics of centered rows ``xc`` (B, D) with responsibilities ``resp`` (B, K)."""
        b, d = xc.shape
        counts, sums = jnp.sum(resp, 0), resp.T @ xc
        if self.covariance_type == "full":
            second = (resp.T @ (xc[:, :, None] * xc[:, None, :]).reshape(b, d * d)).reshape(-1, d, d)
        elif self.covariance_type == "tied":
            second = xc.T @ xc
        else:
            second = resp.T @ (xc * xc)
        return counts, sums, second

    def _at_center(self, params: GMMParams):
        """(the center c = sum_k w_k mu_k, the precision terms about it, log w)."""
        dt = float_dtype(self.dtype)
        c = jax.lax.stop_gradient(params.weights.astype(dt) @ params.means.astype(dt))
        return c, self._precision_terms(params, c), jnp.log(params.weights.astype(dt))

    def _scan_blocks(self, fn, arrays: tuple):
        """sum over row blocks of ``fn(*blocks)``: full blocks by ``lax.scan``, then the remainder."""
        n = arrays[0].shape[0]
        if n <= self.block_size:
            return fn(*arrays)
        bs = self.block_size
        nb, rest = divmod(n, bs)
        blocks = tuple(a[: nb * bs].reshape((nb, bs) + a.shape[1:]) for a in arrays)

        def body(acc, blk):
            return jax.tree_util.tree_map(jnp.add, acc, fn(*blk)), None

        zero = jax.tree_util.tree_map(jnp.zeros_like, jax.eval_shape(fn, *(b[0] for b in blocks)))
        total, _ = jax.lax.scan(body, zero, blocks)
        if rest:
            total = jax.tree_util.tree_map(jnp.add, total, fn(*(a[nb * bs :] for a in arrays)))
        return total

    def _log_joints(self, params: GMMParams, x: Array) -> Array:
        c, terms, log_w = self._at_center(params)
        return self._log_joint(terms, log_w, jnp.asarray(x, c.dtype) - c[None, :])

    @jax.jit
    def log_prob(self, params: GMMParams, x: Array) -> Array:
        """log p(x_n | theta) per row, (N,)."""
        return jax.nn.logsumexp(self._log_joints(params, x), -1)

    @jax.jit
    def responsibilities(self, params: GMMParams, x: Array) -> Array:
        """p(z_n = k | x_n, theta), (N, K)."""
        lj = self._log_joints(params, x)
        return jnp.exp(lj - jax.nn.logsumexp(lj, -1, keepdims=True))

    def e_step(self, params: GMMParams, x: Array) -> tuple[GMMStats, Array]:
        """Expected statistics under p(z | x, theta) and log p(x | theta) summed over the rows."""
        c, terms, log_w = self._at_center(params)
        x = jnp.asarray(x, c.dtype)

        def block(xb):
            xc = xb - c[None, :]
            lj = self._log_joint(terms, log_w, xc)
            lse = jax.nn.logsumexp(lj, -1, keepdims=True)
            return self._block_stats(xc, jnp.exp(lj - lse)), jnp.sum(lse)

        (counts, sums, second), log_lik = self._scan_blocks(block, (x,))
        return GMMStats(counts, sums, second, c), log_lik

    def stats_from_responsibilities(self, x: Array, resp: Array) -> GMMStats:
        """The statistics of given responsibilities (N, K) (rows summing to 1), centered at the data's mean."""
        dt = float_dtype(self.dtype)
        x, resp = jnp.asarray(x, dt), jnp.asarray(resp, dt)
        c = jnp.mean(x, 0)
        counts, sums, second = self._scan_blocks(lambda xb, rb: self._block_stats(xb - c[None, :], rb), (x, resp))
        return GMMStats(counts, sums, second, c)

    def m_step(self, stats: GMMStats) -> GMMParams:
        """The maximum-likelihood theta of the statistics (the tutorial's §GMM), plus ``reg_covar``.

        Raises:
          ValueError: naming ``reg_covar`` and the component when a covariance is singular to rounding.
        """
        params, pivots, bad = self._m_step(stats)
        enforce_value_checks([self._singular_check(pivots, bad)])
        return params

    def _singular_check(self, pivots: Array, bad: Array) -> ValueCheck:
        where = {"full": "component", "spherical": "component", "diag": "component, dim", "tied": "dim"}
        return ValueCheck(
            "reg_covar is too small: the M-step's covariance pivot",
            pivots,
            bad,
            f"([{where[self.covariance_type]}]) is within rounding of 0, a singular covariance: the component "
            f"collapsed onto duplicate or collinear points (a single point, or a column of x constant over its "
            f"points: maximum likelihood gives it variance reg_covar={self.reg_covar:g}); raise reg_covar, drop "
            "the constant column, use fewer components, or float64",
        )

    def _m_step(self, stats: GMMStats) -> tuple[GMMParams, Array, Array]:
        """(theta, its covariances' Cholesky pivots or variances, where they are within rounding of 0)."""
        counts, sums, second, c = stats
        dt = counts.dtype
        nk = counts + 10.0 * jnp.finfo(dt).eps  # scikit-learn's guard against empty components
        m = sums / nk[:, None]  # centered means
        eye = jnp.eye(self.dim, dtype=dt)
        if self.covariance_type == "full":
            cov = second / nk[:, None, None] - m[:, :, None] * m[:, None, :] + self.reg_covar * eye[None]
        elif self.covariance_type == "tied":
            cov = (second - jnp.einsum("k,kd,ke->de", nk, m, m)) / jnp.sum(nk) + self.reg_covar * eye
        else:
            cov = second / nk[:, None] - m * m + self.reg_covar
            if self.covariance_type == "spherical":
                cov = jnp.mean(cov, -1)
        # rounding level of cov = E[x x^T] - mu mu^T: 10 eps times the largest second moment about c
        eps = 10.0 * jnp.finfo(dt).eps
        if self.covariance_type in ("full", "tied"):
            diag = jnp.diagonal(second, axis1=-2, axis2=-1)
            level = eps * jnp.max(diag / (nk[:, None] if self.covariance_type == "full" else jnp.sum(nk)), -1)
            pivots = jnp.diagonal(jnp.linalg.cholesky(cov), axis1=-2, axis2=-1) ** 2
            bad = ~(pivots > level[..., None])
            pivots, bad = jnp.min(pivots, -1), jnp.any(bad, -1)  # per component (tied: one)
        else:
            level = eps * second / nk[:, None]
            pivots = cov
            if self.covariance_type == "spherical":
                level = jnp.max(level, -1)
            bad = ~(pivots > level)
        return GMMParams(nk / jnp.sum(nk), m + c[None, :], cov), jnp.atleast_1d(pivots), jnp.atleast_1d(bad)

    def params_from_responsibilities(self, x: Array, resp: Array) -> GMMParams:
        """theta = the M-step of given responsibilities (N, K) (ValueError naming ``x`` or ``resp`` for bad input)."""
        self.check_data(x)
        check_data_array("resp", resp, ndim=2, last_dim=self.num_components)
        if not is_tracer(resp):
            r = np.asarray(resp, dtype=np.float64)
            if r.shape[0] != np.shape(x)[0] or np.any(r < 0) or not np.allclose(r.sum(1), 1.0, atol=1e-4):
                raise ArgumentError(
                    "resp",
                    f"resp must be non-negative with rows summing to 1 and one row per row of x, got shape {r.shape}",
                )
        params, pivots, bad = self._params_from_responsibilities(x, resp)
        enforce_value_checks([self._singular_check(pivots, bad)])
        return params

    @jax.jit
    def _params_from_responsibilities(self, x: Array, resp: Array) -> tuple[GMMParams, Array, Array]:
        return self._m_step(self.stats_from_responsibilities(x, resp))

    def log_prior(self, params: GMMParams) -> Array:
        """0: maximum likelihood."""
        return jnp.zeros((), float_dtype(self.dtype))

    def init_params(self, key: PRNGKey, x: Array = None) -> GMMParams:
        """One M-step from k-means++ or random responsibilities (without data: uniform weights, N(0, I) means,
        identity covariances).

        Raises:
          ValueError: naming ``num_components`` (fewer rows than components) or ``reg_covar`` (singular).
        """
        if x is None:
            return self._init_params(key, x)[0]
        check_enough_points("num_components", self.num_components, np.shape(x)[0], self.init)
        params, pivots, bad = self._init_params(key, x)
        enforce_value_checks([self._singular_check(pivots, bad)])
        return params

    @jax.jit
    def _init_params(self, key: PRNGKey, x: Array = None):
        """(theta, pivots, where singular) of :meth:`init_params` (theta alone without data)."""
        dt = float_dtype(self.dtype)
        k, d = self.num_components, self.dim
        if x is None:
            eye = jnp.eye(d, dtype=dt) if self.covariance_type in ("full", "tied") else 1.0
            cov = jnp.broadcast_to(jnp.asarray(eye, dt), self.covariance_shape())
            return (GMMParams(jnp.full((k,), 1.0 / k, dt), jax.random.normal(key, (k, d), dt), cov),)
        x = jnp.asarray(x, dt)
        if self.init == "random":
            u = jax.random.uniform(key, (x.shape[0], k), dt)
            resp = u / jnp.sum(u, 1, keepdims=True)
        else:
            resp = nearest_center_resp(key, x, k)
        return self._m_step(self.stats_from_responsibilities(x, resp))


__all__ = ["COVARIANCE_TYPES", "GMMParams", "GMMStats", "GaussianMixtureEM", "check_em_params"]
