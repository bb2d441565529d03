"""The mixture of multivariate Student-t distributions (full scale matrices) by EM, with each
component's degrees of freedom fixed or learned.

    z_n ~ Categorical(pi),   u_n | z_n = k ~ Gamma(nu_k / 2, nu_k / 2),   x_n | z_n = k, u_n ~ N(mu_k, Sigma_k / u_n),

so that x_n | z_n = k ~ t_{nu_k}(mu_k, Sigma_k): a point far from mu_k gets a small E[u] and so a
small weight in its component's estimates. Peel and McLachlan (2000), Robust mixture modelling using
the t distribution; Liu and Rubin (1995). E-step, with delta_nk = (x_n - mu_k)^T Sigma_k^-1 (x_n - mu_k)::

    r_nk ∝ pi_k t_{nu_k}(x_n; mu_k, Sigma_k),   E[u | x_n, k] = (nu_k + D) / (nu_k + delta_nk),
    E[log u | x_n, k] = psi((nu_k + D) / 2) - log((nu_k + delta_nk) / 2).

M-step, from n_k = sum_n r_nk, a_k = sum_n r_nk E[u], b_k = sum_n r_nk E[u] x_n,
C_k = sum_n r_nk E[u] x_n x_n^T and e_k = sum_n r_nk (E[log u] - E[u])::

    pi_k = n_k / N,   mu_k = b_k / a_k,   Sigma_k = (C_k - b_k b_k^T / a_k) / n_k,

and, when learned, nu_k the root of -psi(nu / 2) + log(nu / 2) + 1 + e_k / n_k = 0 (decreasing in nu),
found by ``dof_steps`` bisection steps on log nu within ``dof_bounds``.
"""

from __future__ import annotations

import types
import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import INT32_MAX, ArgumentError, check_allocation, check_bool
from vijax._validate import check_enough_points, check_float_dtype, check_int, check_scalar
from vijax._validate import float_dtype, is_tracer
from vijax.expfam import digamma
from vijax.models._components import kmeanspp_centers, student_t_log_density
from vijax.models.gmm_em import DenseDataChecks, check_em_params
from vijax.types import Array, PRNGKey
from vijax.models._pytree import PytreeModel


class StudentTMixtureParams(NamedTuple):
    weights: Array  # (K,), sum to 1
    means: Array  # (K, D)
    covariances: Array  # (K, D, D) scale matrices Sigma_k, SPD (the covariance is nu / (nu - 2) Sigma for nu > 2)
    dofs: Array  # (K,) degrees of freedom nu_k > 0


class StudentTStats(NamedTuple):
    """The expected complete-data sufficient statistics of the M-step (see the module docstring)."""

    n: Array  # (K,) sum_n r_nk
    u: Array  # (K,) sum_n r_nk E[u]
    ux: Array  # (K, D) sum_n r_nk E[u] x_n
    uxx: Array  # (K, D, D) sum_n r_nk E[u] x_n x_n^T
    log_u_minus_u: Array  # (K,) sum_n r_nk (E[log u] - E[u])
    num_points: Array  # scalar N


def _dof_bounds(value) -> tuple[float, float]:
    """``dof_bounds`` as a checked pair of floats (low, high), 0 < low < high < inf."""
    try:
        low, high = (float(b) for b in value)
    except (TypeError, ValueError):
        raise ArgumentError("dof_bounds", f"dof_bounds must be a pair (low, high), got {value!r}", value) from None
    if not 0.0 < low < high < np.inf:
        raise ArgumentError("dof_bounds", f"dof_bounds must satisfy 0 < low < high < inf, got {value!r}", value)
    return low, high


@dataclasses.dataclass(frozen=True, eq=False)
class StudentTMixture(DenseDataChecks, PytreeModel):
    """A mixture of K multivariate Student-t distributions with full scale matrices, fitted by EM (``EMModel``).

    Args:
      num_components: K >= 1.
      dim: D >= 1.
      dof: the starting (``learn_dof=True``) or fixed (``learn_dof=False``) degrees of freedom (> 0).
      learn_dof: update each nu_k in the M-step by the 1-D root find, or keep ``dof``.
      dof_bounds: (low, high), 0 < low < high: the interval the learned nu_k are kept in.
      dof_steps: bisection steps of the root find (>= 1).
      reg_covar: added to the diagonal of each Sigma_k in the M-step (>= 0).
      dtype: float dtype (default: JAX's default float).

    Examples:
        >>> model = StudentTMixture(num_components=2, dim=2, dof=4.0)
        >>> x = jax.random.normal(jax.random.PRNGKey(0), (50, 2))
        >>> params = model.init_params(jax.random.PRNGKey(1), x)
        >>> model.log_likelihood(params, x).shape
        (50,)
    """

    num_components: int
    dim: int
    _: dataclasses.KW_ONLY
    dof: float = 10.0
    learn_dof: bool = True
    dof_bounds: tuple = (0.5, 1000.0)
    dof_steps: int = 60
    reg_covar: float = 1e-6
    dtype: Any = None
    static_floats = ("dof", "reg_covar")
    converters = types.MappingProxyType({"dof_bounds": lambda name, value: _dof_bounds(value)})

    def __post_init__(self):
        check_int("num_components", self.num_components)
        check_int("dim", self.dim)
        check_scalar("dof", self.dof, low=0.0)
        check_bool("learn_dof", self.learn_dof)
        check_int("dof_steps", self.dof_steps, maximum=INT32_MAX)
        check_scalar("reg_covar", self.reg_covar, low=0.0, include_low=True)
        check_float_dtype(self.dtype)
        k, d = self.num_components, self.dim
        check_allocation("num_components * dim**2", k * d * d, float_dtype(self.dtype).itemsize)

    def check_params(self, params: StudentTMixtureParams) -> None:
        """Raises ValueError naming the field: shapes, weights on the simplex, SPD scales, positive dofs."""
        k, d = self.num_components, self.dim
        shapes = {"weights": (k,), "means": (k, d), "covariances": (k, d, d), "dofs": (k,)}
        check_em_params(params, shapes, atol=1e-6)
        if not is_tracer(params.dofs) and np.any(np.asarray(params.dofs) <= 0):
            raise ArgumentError("params", "params.dofs must be > 0")
        if not is_tracer(params.covariances):
            c = np.asarray(params.covariances, dtype=np.float64)
            if not np.allclose(c, np.swapaxes(c, -1, -2)) or np.any(np.linalg.eigvalsh(c)[..., 0] <= 0):
                raise ArgumentError("params", "params.covariances must be symmetric positive definite")

    def init_params(self, key: PRNGKey, x=None) -> StudentTMixtureParams:
        """Uniform weights, nu_k = ``dof``; with data k-means++ means and the data's covariance for every
        Sigma_k, without standard-normal means and identity scales."""
        dt = float_dtype(self.dtype)
        k, d = self.num_components, self.dim
        if x is None:
            means, cov = jax.random.normal(key, (k, d), dt), jnp.eye(d, dtype=dt)
        else:
            check_enough_points("num_components", k, np.shape(x)[0])
            x = jnp.asarray(x, dt)
            means = kmeanspp_centers(key, x, k)
            xc = x - jnp.mean(x, 0, keepdims=True)
            cov = xc.T @ xc / x.shape[0] + max(self.reg_covar, 1e-6) * jnp.eye(d, dtype=dt)
        return StudentTMixtureParams(
            jnp.full((k,), 1.0 / k, dt), means, jnp.broadcast_to(cov, (k, d, d)), jnp.full((k,), self.dof, dt)
        )

    def _component_log_probs(self, params: StudentTMixtureParams, x: Array):
        """log pi_k + log t_{nu_k}(x_n; mu_k, Sigma_k) (N, K), and delta (N, K)."""
        lp, delta = student_t_log_density(x, params.means, params.covariances, params.dofs)
        return lp + jnp.log(params.weights)[None], delta

    def _posterior(self, params: StudentTMixtureParams, x: Array):
        """(log p(x_n) (N,), r, E[u | x, z = k], E[log u | x, z = k], each (N, K))."""
        lp, delta = self._component_log_probs(params, x)
        log_px = jax.nn.logsumexp(lp, axis=-1)
        nu, d = params.dofs[None], self.dim
        e_u = (nu + d) / (nu + delta)
        e_log_u = digamma(0.5 * (nu + d)) - jnp.log(0.5 * (nu + delta))
        return log_px, jnp.exp(lp - log_px[:, None]), e_u, e_log_u

    def log_likelihood(self, params: StudentTMixtureParams, x) -> Array:
        """log p(x_n | params) = log sum_k pi_k t_{nu_k}(x_n; mu_k, Sigma_k), per point (N,)."""
        self.check_params(params)
        self.check_data(x)
        return _jit_log_likelihood(self, params, jnp.asarray(x, params.means.dtype))

    def responsibilities(self, params: StudentTMixtureParams, x) -> tuple[Array, Array, Array]:
        """(r (N, K), E[u | x, z = k] (N, K), E[log u | x, z = k] (N, K)): the E-step's posterior."""
        return self._posterior(params, jnp.asarray(x, params.means.dtype))[1:]

    def e_step(self, params: StudentTMixtureParams, x):
        """The statistics of the M-step under p(z, u | x, params), and log p(x | params) summed."""
        x = jnp.asarray(x, params.means.dtype)
        log_px, r, e_u, e_log_u = self._posterior(params, x)
        ru = r * e_u
        stats = StudentTStats(
            jnp.sum(r, 0),
            jnp.sum(ru, 0),
            ru.T @ x,
            jnp.einsum("nk,nd,ne->kde", ru, x, x),
            jnp.sum(r * (e_log_u - e_u), 0),
            jnp.asarray(x.shape[0], x.dtype),
        )
        return stats, jnp.sum(log_px)

    def m_step(self, stats: StudentTStats) -> StudentTMixtureParams:
        """The maximizer of the expected complete-data log-likelihood (see the module docstring); a component
        without responsibility gets zero mean and identity scale."""
        n, a = stats.n, stats.u
        dt = n.dtype
        d = self.dim
        alive = n > 0
        safe_n, safe_a = jnp.where(alive, n, 1.0), jnp.where(a > 0, a, 1.0)
        means = jnp.where(alive[:, None], stats.ux / safe_a[:, None], 0.0)
        cov = (stats.uxx - jnp.einsum("kd,ke->kde", stats.ux, stats.ux) / safe_a[:, None, None]) / safe_n[:, None, None]
        cov = 0.5 * (cov + jnp.swapaxes(cov, -1, -2))
        eye = jnp.eye(d, dtype=dt)[None]
        cov = jnp.where(alive[:, None, None], cov, eye) + self.reg_covar * eye
        if self.learn_dof:
            dofs = solve_dof(jnp.where(alive, stats.log_u_minus_u / safe_n, -2.0), self.dof_bounds, self.dof_steps)
        else:
            dofs = jnp.full(n.shape, self.dof, dt)
        return StudentTMixtureParams(n / stats.num_points, means, cov, dofs)

    def log_prior(self, params: StudentTMixtureParams) -> Array:
        """0: maximum likelihood."""
        return jnp.zeros((), params.weights.dtype)


@jax.jit
def _jit_log_likelihood(model: StudentTMixture, params: StudentTMixtureParams, x: Array) -> Array:
    return jax.nn.logsumexp(model._component_log_probs(params, x)[0], axis=-1)


def dof_equation(nu: Array, mean_log_u_minus_u: Array) -> Array:
    """-psi(nu / 2) + log(nu / 2) + 1 + c, c = e_k / n_k: 2 / n_k times the derivative in nu_k of the expected
    complete-data log-likelihood (Peel and McLachlan 2000)."""
    return -digamma(0.5 * nu) + jnp.log(0.5 * nu) + 1.0 + mean_log_u_minus_u


def solve_dof(mean_log_u_minus_u: Array, bounds: tuple, steps: int) -> Array:
    """The root in nu of :func:`dof_equation`, elementwise, by ``steps`` bisection steps on log nu within
    ``bounds`` (the bound itself when the root lies outside)."""
    c = jnp.asarray(mean_log_u_minus_u)
    lo = jnp.full(c.shape, np.log(bounds[0]), c.dtype)
    hi = jnp.full(c.shape, np.log(bounds[1]), c.dtype)

    def body(_, carry):
        lo, hi = carry
        mid = 0.5 * (lo + hi)
        positive = dof_equation(jnp.exp(mid), c) > 0  # the equation decreases in nu: the root lies above mid
        return jnp.where(positive, mid, lo), jnp.where(positive, hi, mid)

    lo, hi = jax.lax.fori_loop(0, steps, body, (lo, hi))
    return jnp.exp(0.5 * (lo + hi))


__all__ = ["StudentTMixture", "StudentTMixtureParams", "StudentTStats", "dof_equation", "solve_dof"]
