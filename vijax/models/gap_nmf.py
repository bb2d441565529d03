"""GaP-KL-NMF: Bayesian nonparametric Poisson (KL) factorization of magnitude spectrograms (Hoffman & Blei
2015, §4.3, eq. 12; Nakano et al. 2011, after Hoffman, Blei and Cook 2010). For Y of F bins by N frames::

    W_fk ~ Gamma(a, a),   theta_k ~ Gamma(alpha / K, alpha c),   H_kn ~ Gamma(b, b),
    Y_fn ~ Poisson(sum_k theta_k W_fk H_kn)          (shape, rate; the paper's a = 0.25, b = 0.2, alpha = c = 1).

The globals are (W, theta); the locals of frame n are h_n and the augmentation z_fkn ~
Poisson(theta_k W_fk h_kn), y_fn = sum_k z_fkn (Cemgil 2009), q(h_kn) = Gamma(gamma_kn, r_kn),
q(z_f:n) = Multinomial(y_fn, phi_fn). The likelihood holds the product theta_k W_fk, so the model is
conditionally conjugate in each block given the other (Hoffman & Blei 2015, §2.1), and each block's
statistics use the other's view::

    s_W     = ( sum_n E[z_fkn],    -theta_k   sum_n E[h_kn] )        (F, K) each,
    s_theta = ( sum_fn E[z_fkn],   -sum_f W_fk sum_n E[h_kn] )        (K,) each.

<s, t> counts the product term twice, so ``local_terms`` adds it back once. The mean-field local step
(Hoffman & Blei 2015, §2.5), with B_fk = exp(<log theta_k> + <log W_fk>) and e_kn = exp(E[log h_kn])::

    gamma_kn = b + e_kn sum_f y_fn B_fk / (sum_j B_fj e_jn),     r_kn = b + <theta_k> sum_f <W_fk>,

iterated from b + sum_f y_fn / K until every frame's mean relative change is below ``tol``. With phi
at the final gamma the local ELBO is exact::

    sum_f y_fn log sum_k B_fk e_kn - sum_f log y_fn! - sum_fk <theta_k> <W_fk> E[h_kn]
    - sum_k KL(q(h_kn) || Gamma(b, b)).

A batch is (S, F) = Y[:, frames].T, non-negative.

References:
  Hoffman and Blei (2015). Structured stochastic variational inference. AISTATS.
  Hoffman, Blei and Cook (2010). Bayesian nonparametric matrix factorization for recorded music. ICML.
  Nakano et al. (2011). Bayesian nonparametric spectrogram modeling based on infinite factorial
  infinite hidden Markov model. WASPAA.
  Cemgil (2009). Bayesian inference for nonnegative matrix factorisation models. Comput. Intell. Neurosci.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import digamma, gammaln

from vijax import expfam
from vijax._validate import ArgumentError, INT32_MAX, check_allocation, check_choice, check_data_array
from vijax._validate import check_float_dtype, check_int, check_positive_fields, check_scalar, finite_nonnegative
from vijax._validate import float_dtype
from vijax.models._base import LocalResult, conjugate_elbo
from vijax.types import Array, PRNGKey
from vijax.models._pytree import PytreeModel


@dataclasses.dataclass(frozen=True, eq=False)
class GaPNMF(PytreeModel):
    """GaP-KL-NMF (Hoffman & Blei 2015, eq. 12) as a model with globals (W, theta) and per-frame locals.

    Args:
      num_components: K >= 1, the truncation of the gamma process.
      num_freqs: F >= 1, the number of frequency bins (rows of Y).
      a: shape and rate of the Gamma prior on each W_fk (> 0; seed: 0.25).
      b: shape and rate of the Gamma prior on each H_kn (> 0; seed: 0.2).
      alpha: gamma-process concentration; theta_k ~ Gamma(alpha / K, alpha c) (> 0; seed: 1).
      c: gamma-process rate parameter (> 0; seed: 1); E[sum_k theta_k] = 1 / c.
      max_iters: cap on the local iterations per step (>= 1).
      tol: relative convergence threshold of the local iterations (>= 0).
      init_shape: shape of the initial q(W) and q(theta) (> 0): larger is a tighter start.
      dtype: float dtype of the prior and of the initial q (default: JAX's default float).

    Examples:
        >>> model = GaPNMF(num_components=4, num_freqs=6)
        >>> [f.batch_shape for f in model.prior()]
        [(6, 4), (4,)]
        >>> float(model.prior()[1].concentration[0])  # alpha / K
        0.25
    """

    num_components: int
    num_freqs: int
    a: float = 0.25
    b: float = 0.2
    alpha: float = 1.0
    c: float = 1.0
    max_iters: int = 100
    tol: float = 1e-4
    init_shape: float = 100.0
    dtype: Any = None
    local_methods = ("meanfield",)
    static_floats = ("a", "b", "alpha", "c", "tol", "init_shape")

    def __post_init__(self):
        check_int("num_components", self.num_components)
        check_int("num_freqs", self.num_freqs)
        check_positive_fields(self, ("a", "b", "alpha", "c", "init_shape"))
        check_int("max_iters", self.max_iters, maximum=INT32_MAX)
        check_scalar("tol", self.tol, low=0.0, include_low=True)
        check_float_dtype(self.dtype)
        k, f = self.num_components, self.num_freqs
        check_allocation("num_freqs * num_components", f * k, float_dtype(self.dtype).itemsize)

    def prior(self) -> tuple[expfam.Gamma, expfam.Gamma]:
        """p(W, theta) = (Gamma(a, a) with batch (F, K), Gamma(alpha / K, alpha c) with batch (K,))."""
        dt = float_dtype(self.dtype)
        f, k = self.num_freqs, self.num_components
        p_w = expfam.Gamma(jnp.full((f, k), self.a - 1.0, dt), jnp.full((f, k), -self.a, dt))
        p_theta = expfam.Gamma(jnp.full((k,), self.alpha / k - 1.0, dt), jnp.full((k,), -self.alpha * self.c, dt))
        return p_w, p_theta

    def init_globals(self, key: PRNGKey, batch=None) -> tuple[expfam.Gamma, expfam.Gamma]:
        """Every q of shape ``init_shape``; E[W_fk] ~ Gamma(init_shape, init_shape), E[theta_k] = mean(Y) / K
        (without a batch, 1 / (c K))."""
        dt = float_dtype(self.dtype)
        f, k = self.num_freqs, self.num_components
        s = jnp.asarray(self.init_shape, dt)
        g = jax.random.gamma(key, s, (f, k), dtype=dt) / s
        if batch is None:
            mean_theta = jnp.full((k,), 1.0 / (self.c * k), dt)
        else:
            self.check_data(batch)
            mean_theta = jnp.full((k,), jnp.maximum(jnp.mean(jnp.asarray(batch, dt)), jnp.finfo(dt).tiny) / k, dt)
        q_w = expfam.Gamma(jnp.full((f, k), s - 1.0, dt), -s / g)
        q_theta = expfam.Gamma(jnp.full((k,), s - 1.0, dt), -s / mean_theta)
        return q_w, q_theta

    @staticmethod
    def expected_dictionary(q_global) -> Array:
        """E_q[W], shape (F, K)."""
        return q_global[0].mean_params()[1]

    @staticmethod
    def expected_weights(q_global) -> Array:
        """E_q[theta], shape (K,)."""
        return q_global[1].mean_params()[1]

    def batch_checks(self, batch) -> list:
        """The value check of a step's batch: finite magnitudes >= 0."""
        return [finite_nonnegative("batch (spectrogram frames)", batch)]

    def check_data(self, batch) -> None:
        """Raises ValueError naming ``batch`` unless it is (S >= 1, num_freqs), finite and >= 0."""
        check_data_array("batch (spectrogram frames)", batch, 2, self.num_freqs)
        if isinstance(batch, jax.core.Tracer):
            return
        y = np.asarray(batch)
        if np.issubdtype(y.dtype, np.complexfloating):
            raise ArgumentError("batch", "batch (spectrogram frames) must be real magnitudes, got complex values")
        if np.any(y < 0):
            raise ArgumentError(
                "batch", f"batch (spectrogram frames) must be >= 0 (magnitudes or counts), got min {y.min()!r}"
            )

    def local_step(self, globals_view, batch, key: PRNGKey | None = None, method: str = "meanfield") -> LocalResult:
        """The mean-field local step of every frame of ``batch`` at ``globals_view``.

        Args:
          globals_view: ``((log_w, w), (log_theta, theta))``, (F, K) and (K,): E_q[t(.)] or t of a draw (SSVI).
          batch: (S, F) spectrogram frames.
          key: unused.
          method: ``"meanfield"``.

        Returns:
          LocalResult of (s_W, s_theta), the module docstring's local terms and q(h), a ``Gamma`` (S, K).
        """
        check_choice("method", method, self.local_methods)
        (log_w, w), (log_theta, theta) = globals_view
        f, k = self.num_freqs, self.num_components
        shapes = [jnp.shape(x) for x in (log_w, w, log_theta, theta)]
        if shapes != [(f, k), (f, k), (k,), (k,)]:
            raise ArgumentError(
                "globals_view",
                f"globals_view must be ((log_w, w), (log_theta, theta)) with shapes ({f}, {k}) and ({k},), got {shapes}",
            )
        if jnp.ndim(batch) != 2 or jnp.shape(batch)[1] != f or jnp.shape(batch)[0] < 1:
            raise ArgumentError(
                "batch", f"batch must be (S, {f}) spectrogram frames with S >= 1, got shape {jnp.shape(batch)}"
            )
        dt = jnp.result_type(log_w)
        views = [jnp.asarray(x, dt) for x in (log_w, w, log_theta, theta)]
        return _local_step(self, *views, jnp.asarray(batch).astype(dt))

    def elbo(self, q_global, batch) -> Array:
        """The mean-field ELBO of ``batch`` (all of Y) at q(beta), the locals optimal for E_q[t(beta)]."""
        local = self.local_step(expfam.tree_mean_params(q_global), batch)
        return conjugate_elbo(self.prior(), q_global, local)

    def _fit_gamma(self, log_b: Array, log_rate: Array, y: Array) -> Array:
        """Iterates gamma_kn = b + e_kn sum_f y_fn B_fk / (B e_n)_f to convergence; (S, K)."""
        b = self.b
        bmat = jnp.exp(log_b - jnp.max(log_b, axis=1, keepdims=True))  # (F, K), per-f shift cancels

        def e_of(gamma):  # exp(E log h) up to a per-frame factor, which cancels in the update
            le = digamma(gamma) - log_rate[None, :]
            return jnp.exp(le - jnp.max(le, axis=1, keepdims=True))

        def update(gamma):
            e = e_of(gamma)
            z = e @ bmat.T  # (S, F)
            ratio = jnp.where(y > 0, y / jnp.where(y > 0, z, 1.0), 0.0)
            return b + e * (ratio @ bmat)

        def cond(carry):
            i, _, change = carry
            return (i < self.max_iters) & (change >= self.tol)

        def body(carry):
            i, gamma, _ = carry
            new = update(gamma)
            rel = jnp.mean(jnp.abs(new - gamma), axis=1) / jnp.mean(new, axis=1)
            return i + 1, new, jnp.max(rel)

        gamma0 = b + jnp.broadcast_to(jnp.sum(y, axis=1, keepdims=True) / log_b.shape[1], (y.shape[0], log_b.shape[1]))
        inf = jnp.asarray(jnp.inf, y.dtype)
        return jax.lax.while_loop(cond, body, (jnp.zeros((), jnp.int32), gamma0, inf))[1]


@jax.jit
def _local_step(model: GaPNMF, log_w, w, log_theta, theta, y) -> LocalResult:
    """The body of ``GaPNMF.local_step``."""
    dt = log_w.dtype
    floor = 0.5 * jnp.finfo(dt).min  # a drawn W or theta of exactly 0 (log = -inf) gets weight 0, not NaN
    log_b = jnp.maximum(log_w + log_theta[None, :], floor)  # (F, K)
    rate = model.b + theta * jnp.sum(w, axis=0)  # (K,)
    log_rate = jnp.log(rate)
    gamma = model._fit_gamma(log_b, log_rate, y)  # (S, K)

    # Statistics of phi at the final gamma (unnormalised by per-f and per-n shifts that cancel).
    shift_f = jnp.max(log_b, axis=1)  # (F,)
    bmat = jnp.exp(log_b - shift_f[:, None])
    le = digamma(gamma) - log_rate[None, :]  # E[log h] (S, K)
    shift_n = jnp.max(le, axis=1)  # (S,)
    e = jnp.exp(le - shift_n[:, None])
    z = e @ bmat.T  # (S, F): sum_k B e up to the shifts
    pos = y > 0
    ratio = jnp.where(pos, y / jnp.where(pos, z, 1.0), 0.0)
    z_sum = bmat * (ratio.T @ e)  # (F, K): sum_n E[z_fkn] = sum_n y_fn phi_fkn
    e_h = gamma / rate[None, :]  # E[h] (S, K)
    h_sum = jnp.sum(e_h, axis=0)  # (K,)
    w_sum = jnp.sum(w, axis=0)  # (K,)
    stats_w = (z_sum, jnp.broadcast_to(-theta * h_sum, z_sum.shape))
    stats_theta = (jnp.sum(z_sum, axis=0), -w_sum * h_sum)

    log_sum = jnp.log(jnp.where(pos, z, 1.0)) + shift_f[None, :] + shift_n[:, None]  # log sum_k B_fk e_kn
    data = jnp.sum(jnp.where(pos, y * log_sum, 0.0)) - jnp.sum(gammaln(y + 1.0))
    q_h = expfam.Gamma(gamma - 1.0, -jnp.broadcast_to(rate, gamma.shape))
    p_h = expfam.Gamma(jnp.full_like(gamma, model.b - 1.0), jnp.full_like(gamma, -model.b))
    local_terms = (
        data
        - jnp.sum(z_sum * log_b)  # <s, t> adds sum z (log W + log theta) back
        + jnp.sum(theta * w_sum * h_sum)  # ... and subtracts the product term twice
        - jnp.sum(q_h.kl(p_h))
    )
    return LocalResult((stats_w, stats_theta), local_terms, q_h)


__all__ = ["GaPNMF"]
