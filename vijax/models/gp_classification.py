"""Binary Gaussian-process classification with the KL-proximal (PG-SVI) updates of Khan et al. 2016.

Latent z_n = f(x_n) with a zero-mean GP prior, squared-exponential kernel (Kuss & Rasmussen 2005,
eq. 33) k(x, x') = sigma^2 exp(-|x - x'|^2 / (2 l^2)), K = k(X, X) + jitter I, and p(y_n | z_n) =
sigmoid(y_n z_n), y_n in {-1, +1}. q(z) = N(m, V); the negative ELBO splits as f + h (eq. 11) with
f = -sum_n E_q[log p(y_n | z_n)] and h = KL(q || N(0, K)). Linearising f with the minibatch's
gradients scaled by N/M, alpha_n = df/dm_n and gamma_n = 2 df/dv_n (Price; >= 0 for the logit),
the step (eq. 9, r = 1/(1 + beta)) is in closed form (appendix D)::

    V_{k+1}^{-1} = K^{-1} + diag(gt_k),     gt_k = r gt_{k-1} + (1 - r) gamma      (eq. 19)
    m_{k+1} = m_k - (1 - r) (I + K diag(r gt_{k-1}))^{-1} (m_k + K alpha)        (app. D.3, B_k)

``mean_update="paper"`` uses gt_k in place of r gt_{k-1} (eq. 19 and the reference code). The state
is (m, gt), 2N numbers; the v_n come from one Cholesky factor of B = I + S K S, S = diag(sqrt(gt))
(Rasmussen & Williams 2006, §3.4.3): v_n = K_nn - |L_B^{-1} S K[:, n]|^2. Labels may be {0, 1}.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import ArgumentError, ids_in_range, check_allocation, check_data_array, check_float_dtype
from vijax._validate import check_choice, check_int, check_positive_scalar, check_scalar
from vijax.models._base import check_index_array
from vijax.models._nonconjugate import ProxUpdate, structured_prox_update
from vijax.types import Array, PRNGKey
from vijax.models._pytree import PytreeModel

_GH_NODES = 64


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class GPPosterior:
    """q(z) = N(m, V), V^{-1} = K^{-1} + diag(gamma_tilde) (app. D), gamma_tilde (N,) >= 0 the accumulated gradients."""

    mean: Array
    gamma_tilde: Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class GPGradient:
    """Stochastic gradient of f at q's marginals, length N, scaled by N/M: ``alpha = df/dm``, ``gamma = 2 df/dv``."""

    alpha: Array
    gamma: Array


def to_pm1_labels(y: Any, name: str = "y") -> np.ndarray:
    """Labels in {0, 1} or {-1, +1} as float {-1, +1} (0 -> -1); anything else is a ValueError."""
    a = np.asarray(y)
    if a.ndim != 1 or a.shape[0] < 1:
        raise ArgumentError(name, f"{name} must be a non-empty 1-D array of labels, got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.number) or not np.all(np.isfinite(a)):
        raise ArgumentError(name, f"{name} must be numeric and finite")
    vals = set(np.unique(a).tolist())
    if not (vals <= {0, 1} or vals <= {-1, 1}):
        raise ArgumentError(name, f"{name} must hold labels in {{0, 1}} or {{-1, 1}}, got values {sorted(vals)[:6]}")
    return np.where(a > 0, 1.0, -1.0)


def se_kernel(x1: Array, x2: Array, log_lengthscale, log_scale) -> Array:
    """k(x, x') = sigma^2 exp(-|x - x'|^2 / (2 l^2)), l = exp(log_lengthscale), sigma = exp(log_scale) (Kuss &
    Rasmussen 2005, eq. 33). Shapes (N, D), (P, D) -> (N, P)."""
    inv_l = jnp.exp(-log_lengthscale)
    a, b = x1 * inv_l, x2 * inv_l
    d2 = jnp.sum(a * a, 1)[:, None] + jnp.sum(b * b, 1)[None, :] - 2.0 * a @ b.T
    return jnp.exp(2.0 * log_scale) * jnp.exp(-0.5 * jnp.maximum(d2, 0.0))


@jax.jit
def _kernel_and_factor(x: Array, log_lengthscale, log_scale, jitter) -> tuple[Array, Array, Array]:
    """(K = k(x, x) + jitter I, its Cholesky factor, whether the factor is finite)."""
    k = se_kernel(x, x, log_lengthscale, log_scale) + jitter * jnp.eye(x.shape[0], dtype=x.dtype)
    chol = jnp.linalg.cholesky(k)
    return k, chol, jnp.all(jnp.isfinite(chol))


def _log_sigmoid(t):
    return -jnp.logaddexp(0.0, -t)


@jax.custom_jvp
def _expected_loglik(m: Array, v: Array, y: Array, nodes: Array, weights: Array) -> Array:
    """sum_s w_s log sigmoid(y (m + sqrt(v) u_s)) per example; derivatives by Bonnet's and Price's theorems."""
    z = m[:, None] + jnp.sqrt(jnp.maximum(v, 0.0))[:, None] * nodes
    return jnp.sum(weights * _log_sigmoid(y[:, None] * z), axis=1)


@_expected_loglik.defjvp
def _expected_loglik_jvp(primals, tangents):
    m, v, y, nodes, weights = primals
    dm, dv = tangents[0], tangents[1]
    z = m[:, None] + jnp.sqrt(jnp.maximum(v, 0.0))[:, None] * nodes
    yz = y[:, None] * z
    val = jnp.sum(weights * _log_sigmoid(yz), axis=1)
    d1 = jnp.sum(weights * y[:, None] * jax.nn.sigmoid(-yz), axis=1)
    d2 = -jnp.sum(weights * jax.nn.sigmoid(z) * jax.nn.sigmoid(-z), axis=1)
    return val, d1 * dm + 0.5 * d2 * dv


_GL_NODES = 64
_GL_RANGE = 40.0
_SWITCH_SD = 2.0


def _quad_parts(m: Array, v: Array, y: Array):
    """E[l(t)], E[l'(t)], E[l''(t)] for t = y z ~ N(y m, v), l = log sigmoid: Gauss-Hermite for sd(t) <= 2; wider,
    l(t) = min(t, 0) + r0(t), min(t, 0) in closed form and r0 by Gauss-Legendre on [-40, 0] and [0, 40]."""
    mu = y * m
    sd = jnp.sqrt(jnp.maximum(v, 0.0))
    xh, wh = np.polynomial.hermite.hermgauss(_GH_NODES)
    th = mu[:, None] + sd[:, None] * jnp.asarray(np.sqrt(2.0) * xh, m.dtype)[None, :]
    wh = jnp.asarray(wh / np.sqrt(np.pi), m.dtype)[None, :]
    gh = (
        jnp.sum(wh * _log_sigmoid(th), 1),
        jnp.sum(wh * jax.nn.sigmoid(-th), 1),
        -jnp.sum(wh * jax.nn.sigmoid(th) * jax.nn.sigmoid(-th), 1),
    )
    xl, wl = np.polynomial.legendre.leggauss(_GL_NODES)
    half = 0.5 * _GL_RANGE
    t = jnp.asarray(np.concatenate([half * (xl - 1.0), half * (xl + 1.0)]), m.dtype)[None, :]
    wt = jnp.asarray(np.concatenate([half * wl, half * wl]), m.dtype)[None, :]
    sdw = jnp.where(sd > _SWITCH_SD, sd, 1.0)[:, None]  # keeps the unused branch finite
    dens = jnp.exp(-0.5 * ((t - mu[:, None]) / sdw) ** 2) / (np.sqrt(2.0 * np.pi) * sdw)
    a = mu / sdw[:, 0]
    cdf_neg = jax.scipy.special.ndtr(-a)
    pdf = jnp.exp(-0.5 * a * a) / np.sqrt(2.0 * np.pi)
    r0 = -jnp.logaddexp(0.0, -jnp.abs(t))
    r1 = jnp.sign(t) * jax.nn.sigmoid(-jnp.abs(t))
    gl = (
        mu * cdf_neg - sdw[:, 0] * pdf + jnp.sum(wt * dens * r0, 1),
        cdf_neg + jnp.sum(wt * dens * r1, 1),
        -jnp.sum(wt * dens * jax.nn.sigmoid(t) * jax.nn.sigmoid(-t), 1),
    )
    wide = sd > _SWITCH_SD
    return tuple(jnp.where(wide, b, a_) for a_, b in zip(gh, gl))


@jax.custom_jvp
def _expected_loglik_quad(m: Array, v: Array, y: Array) -> Array:
    return _quad_parts(m, v, y)[0]


@_expected_loglik_quad.defjvp
def _expected_loglik_quad_jvp(primals, tangents):
    m, v, y = primals
    dm, dv = tangents[0], tangents[1]
    val, d1, d2 = _quad_parts(m, v, y)
    return val, y * d1 * dm + 0.5 * d2 * dv


def expected_loglik(m: Array, v: Array, y: Array, key=None, num_samples: Optional[int] = None) -> Array:
    """E_{N(z | m_n, v_n)}[log sigmoid(y_n z)] per example (M,): Monte Carlo, or quadrature if ``num_samples`` is None."""
    if num_samples is None:
        return _expected_loglik_quad(m, v, y)
    nodes = jax.random.normal(key, (m.shape[0], num_samples), m.dtype)
    return _expected_loglik(m, v, y, nodes, jnp.full((1, num_samples), 1.0 / num_samples, m.dtype))


class GPClassification(PytreeModel):
    """Binary GP classification with a Bernoulli-logit likelihood (Khan et al. 2016, §3.1, §6, app. D).

    Args:
      x: training inputs, shape (N, D), finite.
      y: training labels, shape (N,), in {0, 1} or {-1, +1}.
      log_lengthscale: log l of the SE kernel.
      log_scale: log sigma of the SE kernel (sigma^2 is the prior variance of z_n).
      jitter: added to K's diagonal (the reference code's ``snu2``), >= 0.
      init_gamma: gamma_tilde_0, the paper's small epsilon (>= 0).
      mean_update: ``"exact"`` (the proximal argmin, app. D.3 with B_k) or ``"paper"`` (eq. 19, with A_k).
      quadrature: every expectation by quadrature, ``num_samples`` ignored (Fig. 1's batch PG and GD).

    A batch is an int array of training indices, shape (M,).

    Examples:
        >>> import numpy as np
        >>> x = np.linspace(-2, 2, 8)[:, None]; y = (x[:, 0] > 0).astype(int)
        >>> model = GPClassification(x, y, log_lengthscale=0.0, log_scale=0.0, jitter=1e-6)
        >>> q = model.init_variational(jax.random.PRNGKey(0))  # deterministic: the key is unused
        >>> q = model.prox_step(q, np.arange(8), jax.random.PRNGKey(1), beta=1.0, num_samples=None, num_data=8)
        >>> bool(model.predict_proba(q, np.array([[1.5]]))[0] > 0.5)
        True

    References:
      Khan, Babanezhad, Lin, Schmidt, Sugiyama (2016). Faster stochastic variational inference using
      proximal-gradient methods with general divergence functions. UAI.
    """

    def __init__(
        self,
        x,
        y,
        log_lengthscale: float,
        log_scale: float,
        jitter: float = 1e-4,
        init_gamma: float = 0.0,
        mean_update: str = "exact",
        quadrature: bool = False,
        dtype=None,
    ):
        check_data_array("x", x, ndim=2)
        ypm = to_pm1_labels(y, "y")
        if np.asarray(x).shape[0] != ypm.shape[0]:
            raise ArgumentError("x", f"x has {np.asarray(x).shape[0]} rows but y has {ypm.shape[0]} labels")
        self.log_lengthscale = check_scalar("log_lengthscale", log_lengthscale)
        self.log_scale = check_scalar("log_scale", log_scale)
        self.jitter = check_scalar("jitter", jitter, low=0.0, include_low=True)
        self.init_gamma = check_scalar("init_gamma", init_gamma, low=0.0, include_low=True)
        check_choice("mean_update", mean_update, ("exact", "paper"))
        check_float_dtype(dtype)
        dtype = jnp.dtype(dtype) if dtype is not None else jnp.result_type(float)
        self.num_data = n = int(ypm.shape[0])
        check_allocation("x (its N**2 kernel matrix)", n * n, dtype.itemsize)
        self.dtype = dtype
        self.x = jnp.asarray(x, dtype)
        self.y = jnp.asarray(ypm, dtype)
        self.mean_update = mean_update
        self.quadrature = bool(quadrature)
        self.K, self.chol_K, factored = _kernel_and_factor(self.x, self.log_lengthscale, self.log_scale, self.jitter)
        if not bool(factored):
            raise ValueError(
                "the kernel matrix is not positive definite in this precision; raise jitter "
                "or enable float64 (jax_enable_x64)"
            )

    def init_variational(self, key: PRNGKey, batch=None) -> GPPosterior:
        """q_0 = N(0, (K^{-1} + init_gamma I)^{-1}) ~ the prior (deterministic: ``key`` unused)."""
        n = self.num_data
        return GPPosterior(jnp.zeros((n,), self.dtype), jnp.full((n,), self.init_gamma, self.dtype))

    def prior(self) -> GPPosterior:
        """The prior N(0, K) in the same coordinates: m = 0, gamma_tilde = 0."""
        n = self.num_data
        return GPPosterior(jnp.zeros((n,), self.dtype), jnp.zeros((n,), self.dtype))

    def batch_checks(self, batch) -> list:
        """The value check of a step's batch: training indices in [0, N)."""
        return [ids_in_range("batch index", batch, self.num_data)]

    def check_data(self, batch) -> None:
        """Raises ValueError unless ``batch`` is a non-empty 1-D int array of indices in [0, N)."""
        check_index_array("batch", batch, self.num_data, "training indices")

    def _chol_B(self, d: Array):
        """s = sqrt(d) and the Cholesky factor of B = I + S K S."""
        s = jnp.sqrt(jnp.maximum(d, 0.0))
        b = jnp.eye(self.num_data, dtype=self.dtype) + s[:, None] * self.K * s[None, :]
        return s, jnp.linalg.cholesky(b)

    def marginals(self, q: GPPosterior, index: Array):
        """(m_n, v_n) for n in ``index``: M triangular solves against one Cholesky factor of B."""
        s, lb = self._chol_B(q.gamma_tilde)
        kc = self.K[:, index]  # (N, M)
        t = jax.scipy.linalg.solve_triangular(lb, s[:, None] * kc, lower=True)
        v = self.K[index, index] - jnp.sum(t * t, axis=0)
        return q.mean[index], jnp.maximum(v, 0.0)

    def marginal_variances(self, q: GPPosterior) -> Array:
        """diag(V), all N entries (O(N^3); for evaluation and tests)."""
        return self.marginals(q, jnp.arange(self.num_data))[1]

    def covariance(self, q: GPPosterior) -> Array:
        """The dense V (O(N^2) memory; tests only)."""
        s, lb = self._chol_B(q.gamma_tilde)
        t = jax.scipy.linalg.solve_triangular(lb, s[:, None] * self.K, lower=True)
        return self.K - t.T @ t

    def loglik_grad(self, q: GPPosterior, batch: Array, key, num_samples, num_data=None) -> GPGradient:
        """The stochastic gradient of f at q's marginals, scaled by N/M and scattered to length N (eq. 18)."""
        self.check_data(batch)  # None is not a minibatch here
        batch, num_samples, n = self._elbo_args(batch, num_samples, num_data)
        m_b, v_b = self.marginals(q, batch)
        y_b = self.y[batch]
        gm, gv = jax.grad(lambda a, b: jnp.sum(expected_loglik(a, b, y_b, key, num_samples)), (0, 1))(m_b, v_b)
        scale = n / batch.shape[0]
        zeros = jnp.zeros((self.num_data,), self.dtype)
        return GPGradient(zeros.at[batch].add(-scale * gm), zeros.at[batch].add(-2.0 * scale * gv))

    def prox_step_from_gradient(self, q: GPPosterior, grad: GPGradient, beta) -> GPPosterior:
        """The closed-form KL-proximal step (eq. 19 / app. D) for a given linearisation ``grad``."""
        check_positive_scalar("beta", beta)
        r = 1.0 / (1.0 + jnp.asarray(beta, self.dtype))
        gt_new = r * q.gamma_tilde + (1.0 - r) * grad.gamma
        d = r * q.gamma_tilde if self.mean_update == "exact" else gt_new
        u = q.mean + self.K @ grad.alpha
        s, lb = self._chol_B(d)  # (I + K diag(d))^{-1} u = u - K S B^{-1} S u
        m_new = q.mean - (1.0 - r) * (u - self.K @ (s * jax.scipy.linalg.cho_solve((lb, True), s * u)))
        return GPPosterior(m_new, gt_new)

    def prox_step(self, q: GPPosterior, batch: Array, key, beta, num_samples, num_data=None) -> GPPosterior:
        """One PG-SVI step on ``batch`` (indices (M,)), r = 1 / (1 + beta), ``num_samples`` draws (None: quadrature)."""
        check_positive_scalar("beta", beta)
        return self.prox_step_from_gradient(q, self.loglik_grad(q, batch, key, num_samples, num_data), beta)

    def prox_update(self, q: GPPosterior, batch: Array, key, beta, num_samples, num_data: int) -> ProxUpdate:
        """``prox_svi``'s step: ``prox_step`` with the ELBO at the pre-update q."""
        return structured_prox_update(self, self.prox_step, q, batch, key, beta, num_samples, num_data)

    def kl_to_prior(self, q: GPPosterior) -> Array:
        """KL(N(m, V) || N(0, K)) = (tr B^{-1} - N + log|B| + m^T K^{-1} m) / 2."""
        s, lb = self._chol_B(q.gamma_tilde)
        binv_l = jax.scipy.linalg.solve_triangular(lb, jnp.eye(self.num_data, dtype=self.dtype), lower=True)
        a = jax.scipy.linalg.solve_triangular(self.chol_K, q.mean, lower=True)
        return 0.5 * (jnp.sum(binv_l * binv_l) - self.num_data + 2.0 * jnp.sum(jnp.log(jnp.diag(lb))) + jnp.sum(a * a))

    def _elbo_args(self, batch, num_samples, num_data):
        """Checked (batch, num_samples, N) of both ELBOs (defaults: all examples, the model's N)."""
        if num_samples is not None:
            check_int("num_samples", num_samples)
        num_samples = None if self.quadrature else num_samples
        if batch is None:
            batch = jnp.arange(self.num_data)
        self.check_data(batch)
        return jnp.asarray(batch), num_samples, (self.num_data if num_data is None else num_data)

    def elbo(self, q: GPPosterior, batch=None, key=None, num_samples=None, num_data=None) -> Array:
        """The ELBO (eq. 11): (N/M) sum_b E_q[log p(y_b | z_b)] - KL(q || p); None: all data, quadrature."""
        batch, num_samples, n = self._elbo_args(batch, num_samples, num_data)
        m_b, v_b = self.marginals(q, batch)
        ell = jnp.sum(expected_loglik(m_b, v_b, self.y[batch], key, num_samples))
        return (n / batch.shape[0]) * ell - self.kl_to_prior(q)

    def latent_predictive(self, q: GPPosterior, x_test) -> tuple[Array, Array]:
        """Mean and variance of z* = f(x*) under q: k*^T K^{-1} m and k** - k*^T (K + W^{-1})^{-1} k* (R&W eq. 3.24)."""
        check_data_array("x_test", x_test, ndim=2, last_dim=self.x.shape[1])
        xt = jnp.asarray(x_test, self.dtype)
        ks = se_kernel(self.x, xt, self.log_lengthscale, self.log_scale)  # (N, P)
        mu = ks.T @ jax.scipy.linalg.cho_solve((self.chol_K, True), q.mean)
        s, lb = self._chol_B(q.gamma_tilde)
        t = jax.scipy.linalg.solve_triangular(lb, s[:, None] * ks, lower=True)
        var = jnp.exp(2.0 * self.log_scale) - jnp.sum(t * t, axis=0)
        return mu, jnp.maximum(var, 0.0)

    def predict_proba(self, q: GPPosterior, x_test) -> Array:
        """p(y* = +1 | x*) = E_{N(z | mu*, s*^2)}[sigmoid(z)] by quadrature (``_quad_parts``)."""
        mu, var = self.latent_predictive(q, x_test)
        return _predict(mu, var)

    def log_loss(self, q, x_test, y_test, base: float = 2.0) -> Array:
        """-mean_n log_base p(y*_n | x*_n), the paper's test log-loss; ``q`` a ``GPPosterior`` or (m, L) params."""
        ypm = jnp.asarray(to_pm1_labels(y_test, "y_test"), self.dtype)
        p1 = self.predict_proba(q, x_test) if isinstance(q, GPPosterior) else self.predict_proba_params(q, x_test)
        p = jnp.where(ypm > 0, p1, 1.0 - p1)
        return -jnp.mean(jnp.log(jnp.maximum(p, jnp.finfo(self.dtype).tiny))) / np.log(base)

    # the (m, L) parametrisation of the gradient baselines (app. G)
    def init_params(self, key: PRNGKey, batch=None) -> dict:
        """{m: 0, L: chol(K)} (log diagonal): the q_0 of ``init_variational`` with init_gamma = 0."""
        return params_from_cholesky(jnp.zeros((self.num_data,), self.dtype), self.chol_K)

    def elbo_params(self, params: dict, batch=None, key=None, num_samples=None, num_data=None) -> Array:
        """The ELBO at q = N(m, C C^T), C = ``cholesky_from_params(params)`` (its gradient: appendix G's)."""
        batch, num_samples, n = self._elbo_args(batch, num_samples, num_data)
        m, lo = params["m"], cholesky_from_params(params)
        v_b = jnp.sum(lo[batch] ** 2, axis=1)
        ell = jnp.sum(expected_loglik(m[batch], v_b, self.y[batch], key, num_samples))
        a = jax.scipy.linalg.solve_triangular(self.chol_K, lo, lower=True)
        b = jax.scipy.linalg.solve_triangular(self.chol_K, m, lower=True)
        kl = 0.5 * (
            jnp.sum(a * a)
            + jnp.sum(b * b)
            - self.num_data
            + 2.0 * jnp.sum(jnp.log(jnp.diag(self.chol_K)))
            - 2.0 * jnp.sum(jnp.diag(params["L"]))
        )
        return (n / batch.shape[0]) * ell - kl

    def predict_proba_params(self, params: dict, x_test) -> Array:
        """p(y* = +1 | x*) under q = N(m, L L^T): z* ~ N(k*^T K^{-1} m, k** - k*^T K^{-1} (K - V) K^{-1} k*)."""
        check_data_array("x_test", x_test, ndim=2, last_dim=self.x.shape[1])
        xt = jnp.asarray(x_test, self.dtype)
        ks = se_kernel(self.x, xt, self.log_lengthscale, self.log_scale)
        a = jax.scipy.linalg.cho_solve((self.chol_K, True), ks)  # K^{-1} k*
        lo = cholesky_from_params(params)
        t = jax.scipy.linalg.solve_triangular(self.chol_K, ks, lower=True)
        u = lo.T @ a
        var = jnp.exp(2.0 * self.log_scale) - jnp.sum(t * t, axis=0) + jnp.sum(u * u, axis=0)
        return _predict(ks.T @ jax.scipy.linalg.cho_solve((self.chol_K, True), params["m"]), jnp.maximum(var, 0.0))

    def params_to_posterior(self, params: dict) -> tuple[Array, Array]:
        """(m, V) of the (m, L) parametrisation (dense V; for evaluation)."""
        lo = cholesky_from_params(params)
        return params["m"], lo @ lo.T


def cholesky_from_params(params: dict) -> Array:
    """C = strict lower triangle of ``params["L"]`` + diag(exp(diag(params["L"]))), V's Cholesky factor."""
    raw = params["L"]
    return jnp.tril(raw, -1) + jnp.diag(jnp.exp(jnp.diag(raw)))


def params_from_cholesky(m: Array, chol: Array) -> dict:
    """{m, L} holding a Cholesky factor ``chol`` (positive diagonal) in the log-diagonal form."""
    return {"m": m, "L": jnp.tril(chol, -1) + jnp.diag(jnp.log(jnp.diag(chol)))}


def _predict(mu: Array, var: Array) -> Array:
    """E[sigmoid(z)], z ~ N(mu, var) = E[l'(t)] for t = -z (``_quad_parts`` with y = -1)."""
    return _quad_parts(mu, var, -jnp.ones_like(mu))[1]


__all__ = [
    "GPClassification",
    "GPGradient",
    "GPPosterior",
    "cholesky_from_params",
    "expected_loglik",
    "params_from_cholesky",
    "se_kernel",
    "to_pm1_labels",
]
