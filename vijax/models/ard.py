"""Bayesian linear regression with automatic relevance determination (Blei, Kucukelbir and McAuliffe
2017, appendix A, after Drugowitsch 2013, *Variational Bayesian inference for linear and logistic
regression*)::

    y_n | w, tau ~ N(w^T x_n, 1 / tau),       tau ~ Gamma(a0, b0),
    w | tau, alpha ~ N(0, (tau diag(alpha))^-1),  alpha_d ~ Gamma(c0, d0)   (rates b0, d0).

With q(w, tau) q(alpha), the coordinate optima (Blei et al. 2017, eq. 18) are

    q(w, tau) = N(w | w_N, V_N / tau) Gamma(tau | a_N, b_N),
        V_N^-1 = diag(E[alpha]) + X^T X,   w_N = V_N X^T y,
        a_N = a0 + N / 2,                  b_N = b0 + (y^T y - w_N^T V_N^-1 w_N) / 2;
    q(alpha_d) = Gamma(c0 + 1/2, d0 + E[tau w_d^2] / 2),   E[tau w_d^2] = w_Nd^2 a_N / b_N + (V_N)_dd.

The global is q(alpha); ``local_step`` computes q(w, tau) for the one data set ``(X, y)``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from vijax import expfam
from vijax._validate import ArgumentError, check_allocation, check_choice, check_data_array, check_float_dtype
from vijax._validate import check_int, check_positive_fields, finite_values, float_dtype
from vijax.expfam import digamma
from vijax.models._base import LocalResult
from vijax.types import Array, PRNGKey
from vijax.models._pytree import PytreeModel

_LOG_2PI = float(np.log(2.0 * np.pi))


class ARDPosterior(NamedTuple):
    """q(w, tau) = N(w | mean, cov_scale / tau) Gamma(tau | tau_shape, tau_rate): w_N (D,), V_N (D, D), a_N, b_N."""

    mean: Array
    cov_scale: Array
    tau_shape: Array
    tau_rate: Array


def _gamma_entropy(a: Array, b: Array) -> Array:
    return a - jnp.log(b) + gammaln(a) + (1.0 - a) * digamma(a)


@dataclasses.dataclass(frozen=True, eq=False)
class ARDRegression(PytreeModel):
    """Bayesian linear regression with an ARD prior (Blei et al. 2017, appendix A).

    Args:
      dim: D >= 1, the number of inputs (columns of X; add a column of ones for an intercept).
      a0: shape of the Gamma prior on the noise precision tau (> 0).
      b0: its rate (> 0).
      c0: shape of the Gamma prior on each relevance alpha_d (> 0).
      d0: its rate (> 0).
      dtype: float dtype (default: JAX's default float).

    The data are the pair ``(X, y)``: X (N, D) and y (N,), finite.

    Examples:
        >>> import jax, numpy as np, vijax
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 5)); y = X @ np.array([2.0, 0, 0, -1.0, 0]) + 0.1 * rng.normal(size=200)
        >>> model = ARDRegression(dim=5)
        >>> alg = vijax.cavi(model)
        >>> state = alg.init(jax.random.PRNGKey(0), (X, y))
        >>> step = jax.jit(alg.step)
        >>> for t in range(50):
        ...     state, info = step(jax.random.PRNGKey(t), state, (X, y))
        >>> w = model.posterior(state.q_global, (X, y)).mean   # E_q[w]: the zeros shrunk away
        >>> bool(np.allclose(w, [2.0, 0, 0, -1.0, 0], atol=0.05))
        True
    """

    dim: int
    a0: float = 1e-6
    b0: float = 1e-6
    c0: float = 1e-6
    d0: float = 1e-6
    dtype: Any = None
    local_methods = ("meanfield",)

    def __post_init__(self):
        check_int("dim", self.dim)
        check_positive_fields(self, ("a0", "b0", "c0", "d0"), scalar=True)
        check_float_dtype(self.dtype)
        check_allocation("dim**2", self.dim * self.dim, float_dtype(self.dtype).itemsize)  # the posterior's covariance

    def prior(self) -> expfam.Gamma:
        """p(alpha): D independent Gamma(c0, d0)."""
        dt = float_dtype(self.dtype)
        return expfam.Gamma.from_shape_rate(jnp.full(self.dim, self.c0, dt), jnp.full(self.dim, self.d0, dt))

    def batch_checks(self, data) -> list:
        """The value checks of a step's data: X and y finite."""
        return [finite_values("X", data[0]), finite_values("y", data[1])]

    def check_data(self, data) -> None:
        """(X, y): X (N, D) and y (N,), finite; raises ValueError naming ``X`` or ``y``."""
        if not isinstance(data, (tuple, list)) or len(data) != 2:
            raise ArgumentError("data", "data must be the pair (X, y)")
        x, y = data
        check_data_array("X", x, ndim=2, last_dim=self.dim)
        check_data_array("y", y, ndim=1)
        if np.shape(y)[0] != np.shape(x)[0]:
            raise ValueError(f"y must have one value per row of X: X has {np.shape(x)[0]} rows, y {np.shape(y)[0]}")

    def init_globals(self, key: PRNGKey, data=None) -> expfam.Gamma:
        """q(alpha) = Gamma(1, 1) for every d (the prior's mean c0 / d0 may be extreme)."""
        dt = float_dtype(self.dtype)
        return expfam.Gamma.from_shape_rate(jnp.ones(self.dim, dt), jnp.ones(self.dim, dt))

    def _posterior(self, e_alpha: Array, data) -> ARDPosterior:
        x, y = data
        x = jnp.asarray(x, e_alpha.dtype)
        y = jnp.asarray(y, e_alpha.dtype)
        precision = x.T @ x + jnp.diag(e_alpha)
        chol = jnp.linalg.cholesky(precision)
        w = jax.scipy.linalg.cho_solve((chol, True), x.T @ y)
        cov = jax.scipy.linalg.cho_solve((chol, True), jnp.eye(self.dim, dtype=e_alpha.dtype))
        a_n = self.a0 + 0.5 * x.shape[0]
        # y^T y - w_N^T V_N^-1 w_N = ||y - X w_N||^2 + w_N^T diag(E[alpha]) w_N (no cancellation)
        resid = y - x @ w
        b_n = self.b0 + 0.5 * (resid @ resid + jnp.sum(e_alpha * w**2))
        return ARDPosterior(w, cov, jnp.asarray(a_n, e_alpha.dtype), b_n)

    def local_step(self, globals_view, data, key=None, method: str = "meanfield") -> LocalResult:
        """q(w, tau)'s coordinate optimum given E[alpha]: suff_stats (1/2, -E[tau w_d^2] / 2), local_terms the
        alpha-free ELBO terms and local_params the ``ARDPosterior``."""
        check_choice("method", method, self.local_methods)
        _, e_alpha = globals_view
        x, y = data
        post = self._posterior(e_alpha, data)
        x = jnp.asarray(x, e_alpha.dtype)
        y = jnp.asarray(y, e_alpha.dtype)
        a, b = post.tau_shape, post.tau_rate
        e_tau, e_log_tau = a / b, digamma(a) - jnp.log(b)
        e_tau_w2 = e_tau * post.mean**2 + jnp.diag(post.cov_scale)
        n = x.shape[0]
        resid = y - x @ post.mean
        e_loglik = 0.5 * n * (e_log_tau - _LOG_2PI) - 0.5 * (e_tau * resid @ resid + jnp.sum((x @ post.cov_scale) * x))
        e_log_p_tau = self.a0 * jnp.log(self.b0) - gammaln(self.a0) + (self.a0 - 1.0) * e_log_tau - self.b0 * e_tau
        # E log p(w | tau, alpha) = sum_d [ (E log tau + E log alpha_d - log 2 pi) / 2 - E[alpha_d] E[tau w_d^2] / 2 ]:
        # the alpha-linear part is <stats, E t(alpha)>; its rest, D (E log tau - log 2 pi) / 2, cancels
        # with H[q(w | tau)]'s -D E log tau / 2 + D log(2 pi) / 2, leaving D / 2 + log|V_N| / 2.
        _, logdet = jnp.linalg.slogdet(post.cov_scale)
        entropy_and_rest = _gamma_entropy(a, b) + 0.5 * self.dim + 0.5 * logdet
        stats = (jnp.full_like(e_alpha, 0.5), -0.5 * e_tau_w2)
        return LocalResult(stats, e_loglik + e_log_p_tau + entropy_and_rest, post)

    def posterior(self, q_alpha: expfam.Gamma, data) -> ARDPosterior:
        """q(w, tau) given q(alpha) and the data (the coordinate optimum ``local_step`` computes)."""
        return self._posterior(q_alpha.mean_params()[1], data)

    def _student_t(self, q_alpha: expfam.Gamma, data, x_new: Array):
        """(location, squared scale, dof) of the posterior predictive at the rows of ``x_new``."""
        check_data_array("x_new", x_new, ndim=2, last_dim=self.dim)
        post = self.posterior(q_alpha, data)
        x_new = jnp.asarray(x_new, post.mean.dtype)
        scale2 = post.tau_rate / post.tau_shape * (1.0 + jnp.sum((x_new @ post.cov_scale) * x_new, -1))
        return x_new @ post.mean, scale2, 2.0 * post.tau_shape

    def predict(self, q_alpha: expfam.Gamma, data, x_new: Array) -> tuple[Array, Array]:
        """(mean, variance) of the posterior predictive at the rows of ``x_new``: a Student-t with 2 a_N
        degrees of freedom, location x^T w_N and squared scale (b_N / a_N)(1 + x^T V_N x)."""
        loc, scale2, dof = self._student_t(q_alpha, data, x_new)
        return loc, scale2 * dof / (dof - 2.0)

    def log_predictive(self, q_alpha: expfam.Gamma, data, x_new: Array, y_new: Array) -> Array:
        """log p(y_new | x_new, data) under q, per row: the Student-t density of ``predict``."""
        loc, scale2, dof = self._student_t(q_alpha, data, x_new)
        z2 = (jnp.asarray(y_new, loc.dtype) - loc) ** 2 / scale2
        return (
            gammaln((dof + 1) / 2)
            - gammaln(dof / 2)
            - 0.5 * jnp.log(dof * jnp.pi * scale2)
            - (dof + 1) / 2 * jnp.log1p(z2 / dof)
        )
