"""Exact inference in a hidden Markov model, for one sequence or a batch of padded sequences.

Rabiner (1989), §III: forward-backward (eq. 18-27) and Viterbi (eq. 30-35), in log space, from log pi (K,), log A
(K, K) (rows: from) and log b, (T, K) or (B, T, K), with a length L <= T per sequence (padding after it). pi and A
may be sub-normalized (a Bayesian HMM's exp E[log pi]): the log-likelihood is then log Z of the tilted chain.
``"sequential"`` (``lax.scan``, O(T K^2)) and ``"parallel"`` (``lax.associative_scan`` in the log-semiring,
O(T K^3) in O(log T) depth; Särkkä and García-Fernández 2021) give the same messages, scaled as in Rabiner §V-A.

A sequential step log sum_i exp(v_i) A_ij is m + log r_j, m = max(v), r = exp(v - m) @ A, exact to a few ulps
where r_j >= rho = 2 K tiny max(1, max A) / eps; otherwise it takes the full log-sum-exp (``lax.cond``). The
transition counts sum_t xi_t are one contraction, exact where every normalizer z_t >= 4 K^2 tiny max(1, max A) /
eps; otherwise they are summed from exact log xi_t.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from vijax.types import Array

from vijax._validate import check_choice

FORWARD_BACKWARD = ("sequential", "parallel")
_lse = jax.nn.logsumexp


class Messages(NamedTuple):
    log_alpha: Array  # (..., T, K), log p(x_{0:t}, z_t) less a constant per step
    log_beta: Array  # (..., T, K), log p(x_{t+1:L-1} | z_t) less a constant per step (0 from the last real step)
    log_likelihood: Array  # (...), log p(x_{0:L-1})


class Posterior(NamedTuple):
    """The smoothed posterior of one sequence (or a batch: a leading axis on every field).

    Attributes:
      log_likelihood: log p(x) (scalar).
      marginals: p(z_t = k | x), (T, K); zero rows at padded steps.
      transition_counts: sum over t of p(z_{t-1} = i, z_t = j | x), (K, K).
    """

    log_likelihood: Array
    marginals: Array
    transition_counts: Array


def _shift(v: Array) -> Array:
    """max(v) over the last axis, kept (0 where v is all -inf)."""
    m = jnp.max(v, axis=-1, keepdims=True)
    return jax.lax.stop_gradient(jnp.where(jnp.isfinite(m), m, 0.0))


def _mask(length, num_steps: int) -> Array:
    """(..., T) bool: the real steps of sequences of lengths ``length`` (...)."""
    length = jnp.asarray(length)
    return jnp.arange(num_steps).reshape((1,) * length.ndim + (num_steps,)) < length[..., None]


def _time_major(x: Array) -> Array:
    return jnp.swapaxes(x, 0, 1)


def _transition_factors(log_trans: Array):
    """A with its structural zeros kept and every other entry at least tiny, and tiny max(1, max A) / eps."""
    info = jnp.finfo(log_trans.dtype)
    trans = jnp.where(log_trans > -jnp.inf, jnp.maximum(jnp.exp(log_trans), info.tiny), 0.0)
    scale = info.tiny * jnp.maximum(1.0, jnp.max(trans)) / info.eps
    return trans, jax.lax.stop_gradient(scale)


def _sweep(step, first: Array, inputs, reverse: bool = False):
    """``lax.scan`` of ``step`` over time from ``first`` (B, K); inputs and outputs are (B, T-1, ...)."""
    _, out = jax.lax.scan(step, first, tuple(_time_major(x) for x in inputs), reverse=reverse)
    return jax.tree_util.tree_map(_time_major, out)


def _inexact(r: Array, src: Array, trans: Array, real: Array, rho) -> Array:
    """Whether a fast product r = exp(src - m) @ trans was inexact: 0 < r_j < rho, or r_j = 0 though src reaches j."""
    low = real[:, None] & (r < rho)
    zero = low & (r == 0)
    lost = lambda: jnp.any(zero & (jnp.isfinite(src).astype(trans.dtype) @ trans > 0))
    return jnp.any(low & (r > 0)) | jax.lax.cond(jnp.any(zero), lost, lambda: jnp.zeros((), bool))


def _log_product(src: Array, log_trans: Array, trans: Array, real: Array, rho, exact: bool) -> tuple[Array, Array]:
    """log sum_i exp(src_i) A_ij per row of ``src`` (B, K) as (m = max_i src_i, the rest): the fast product, or a
    full log-sum-exp where that is inexact (always, for ``exact``)."""
    m = _shift(src)
    src = src - m
    if exact:
        return m, _lse(src[:, :, None] + log_trans[None], axis=1)
    r = jnp.exp(src) @ trans
    full = lambda ops: _lse(ops[0][:, :, None] + ops[1][None], axis=1)
    fast = lambda ops: jnp.log(ops[2])
    return m, jax.lax.cond(_inexact(r, src, trans, real, rho), full, fast, (src, log_trans, r))


def _forward(log_init, log_em, mask, factors, exact: bool) -> tuple[Array, Array]:
    """Scaled forward messages a_t(j) = log sum_i exp(a_{t-1}(i)) A_ij + log b_t(j) - c_t (B, T, K) and shifts c_t."""
    log_trans, trans, rho = factors

    def step(a_prev, inputs):
        le, real = inputs
        c, rest = _log_product(a_prev, log_trans, trans, real, rho, exact)
        a = jnp.where(real[:, None], rest + le, a_prev)
        return a, (a, jnp.where(real, c[:, 0], 0.0))

    a0 = log_init[None] + log_em[:, 0]
    c0 = _shift(a0)
    a0 = a0 - c0
    alphas, logc = _sweep(step, a0, (log_em[:, 1:], mask[:, 1:]))
    return jnp.concatenate([a0[:, None], alphas], axis=1), jnp.concatenate([c0, logc], axis=1)


def _backward(log_em, mask, factors, exact: bool) -> Array:
    """Scaled backward messages beta_t(i) = log sum_j A_ij exp(log b_{t+1}(j) + beta_{t+1}(j)) (B, T, K)."""
    log_trans, trans, rho = factors

    def step(b_next, inputs):
        le_next, real_next = inputs
        _, rest = _log_product(le_next + b_next, log_trans.T, trans.T, real_next, rho, exact)
        b = jnp.where(real_next[:, None], rest, b_next)
        return b, b

    b_last = jnp.zeros_like(log_em[:, 0])
    return jnp.concatenate([_sweep(step, b_last, (log_em[:, 1:], mask[:, 1:]), reverse=True), b_last[:, None]], axis=1)


def _sequential(log_init: Array, log_trans: Array, log_em: Array, length, exact: bool = False) -> Messages:
    """Batched messages by ``lax.scan`` (``exact``: a full log-sum-exp at every step)."""
    mask = _mask(length, log_em.shape[1])
    trans, scale = _transition_factors(log_trans)
    factors = (log_trans, trans, 2 * log_trans.shape[-1] * scale)
    alphas, logc = _forward(log_init, log_em, mask, factors, exact)
    log_lik = jnp.sum(logc, -1) + _lse(alphas[:, -1], axis=-1)
    return Messages(alphas, _backward(log_em, mask, factors, exact), log_lik)


def _scaled(m: Array, c: Array) -> tuple[Array, Array]:
    """(m - s, c + s), s the max entry of each matrix m (..., K, K) (0 if none is finite)."""
    s = jnp.max(m, axis=(-2, -1), keepdims=True)
    s = jax.lax.stop_gradient(jnp.where(jnp.isfinite(s), s, 0.0))
    return m - s, c + s[..., 0, 0]


def _scaled_matmul(a, b):
    """The log-semiring product of scaled matrices (m, log scale c), (a_m ⊗ b_m)_ij = log sum_k exp(a_ik + b_kj)."""
    return _scaled(_lse(a[0][..., :, :, None] + b[0][..., None, :, :], axis=-2), a[1] + b[1])


def _parallel_one(log_init: Array, log_trans: Array, log_em: Array, length) -> Messages:
    num_steps, k = log_em.shape
    mask = _mask(length, num_steps)
    log_eye = jnp.where(jnp.eye(k, dtype=bool), 0.0, -jnp.inf).astype(log_em.dtype)
    first = jnp.broadcast_to((log_init + log_em[0])[None, :], (k, k))
    rest = jnp.where(mask[1:, None, None], log_trans[None] + log_em[1:, None, :], log_eye[None])
    zero = jnp.zeros((num_steps,), log_em.dtype)
    prefix, log_scale = jax.lax.associative_scan(_scaled_matmul, _scaled(jnp.concatenate([first[None], rest]), zero))
    log_alpha = prefix[:, 0, :]  # log p(x_{0:t}, z_t) - log_scale_t (carried unchanged over the padding)
    suffix, _ = jax.lax.associative_scan(lambda a, b: _scaled_matmul(b, a), _scaled(rest, zero[1:]), reverse=True)
    log_beta = jnp.concatenate([_lse(suffix, axis=-1), jnp.zeros((1, k), log_em.dtype)])
    return Messages(log_alpha, log_beta, log_scale[-1] + _lse(log_alpha[-1], axis=-1))


def _parallel(log_init: Array, log_trans: Array, log_em: Array, length) -> Messages:
    return jax.vmap(lambda e, n: _parallel_one(log_init, log_trans, e, n))(log_em, length)


def _batched(log_em: Array, length):
    """(log_em as (B, T, K), lengths (B,), whether a single sequence was given)."""
    single = log_em.ndim == 2
    length = jnp.full(log_em.shape[:-2], log_em.shape[-2], jnp.int32) if length is None else jnp.asarray(length)
    return (log_em[None], length[None], True) if single else (log_em, length, False)


def _unbatch(tree, single: bool):
    return jax.tree_util.tree_map(lambda a: a[0], tree) if single else tree


def _messages(log_init, log_trans, log_em, length, forward_backward: str) -> Messages:
    run = _sequential if forward_backward == "sequential" else _parallel
    return run(log_init, log_trans, log_em, length)


def messages(
    log_init: Array, log_trans: Array, log_em: Array, length=None, forward_backward: str = "sequential"
) -> Messages:
    """Forward and backward messages (Rabiner 1989, eq. 19-25), in log space.

    Args:
      log_init: log pi, (K,).
      log_trans: log A, (K, K), rows the previous state.
      log_em: log p(x_t | z_t = k), (T, K) for one sequence or (B, T, K) for a batch.
      length: L, the number of real steps (default T), a scalar or (B,); steps t >= L are padding.
      forward_backward: ``"sequential"`` (lax.scan) or ``"parallel"`` (lax.associative_scan).
    """
    check_choice("forward_backward", forward_backward, FORWARD_BACKWARD)
    log_em, length, single = _batched(log_em, length)
    return _unbatch(_messages(log_init, log_trans, log_em, length, forward_backward), single)


def _pair_logs(msg: Messages, log_em: Array):
    """log alpha_{t-1} and log b_t + log beta_t for t = 1..T-1, (B, T-1, K) each."""
    return msg.log_alpha[:, :-1], log_em[:, 1:] + msg.log_beta[:, 1:]


def _exact_pairs(la: Array, log_trans: Array, lv: Array, real: Array) -> Array:
    """xi_t(i, j) ∝ exp(log alpha_{t-1}(i) + log A_ij + log b_t(j) + log beta_t(j)), zero at padded steps."""
    log_xi = la[..., :, None] + log_trans + lv[..., None, :]
    log_z = jax.nn.logsumexp(log_xi, axis=(-2, -1), keepdims=True)
    return jnp.where(real[..., None, None], jnp.exp(log_xi - log_z), 0.0)


def _exact_counts(msg: Messages, log_trans: Array, log_em: Array, mask: Array) -> Array:
    """sum_t xi_t from exact log xi_t, one step at a time (a (B, K, K) carry, never (B, T-1, K, K))."""
    la, lv = _pair_logs(msg, log_em)

    def add(total, inputs):
        la_t, lv_t, real_t = inputs  # (B, K), (B, K), (B,)
        return total + _exact_pairs(la_t, log_trans[None], lv_t, real_t), None

    first = jnp.zeros(la.shape[:1] + log_trans.shape, la.dtype)
    total, _ = jax.lax.scan(add, first, (_time_major(la), _time_major(lv), _time_major(mask[:, 1:])))
    return total


def _fast_counts(msg: Messages, log_trans: Array, log_em: Array, mask: Array):
    """sum_t xi_t, (B, K, K), by one contraction of separately shifted factors, and whether it was inexact."""
    trans, scale = _transition_factors(log_trans)
    la, lv = _pair_logs(msg, log_em)
    real = mask[:, 1:]
    u, v = jnp.exp(la - _shift(la)), jnp.exp(lv - _shift(lv))
    z = jnp.einsum("bti,ij,btj->bt", u, trans, v)
    rho = 4 * log_trans.shape[-1] ** 2 * scale
    bad = jnp.any(real & jnp.isfinite(msg.log_likelihood)[:, None] & (z < rho))
    w = jnp.where(real, 1.0 / jnp.where(real, z, 1.0), 0.0)
    return trans[None] * jnp.einsum("bti,btj->bij", u * w[..., None], v), bad


def posterior(
    log_init: Array, log_trans: Array, log_em: Array, length=None, forward_backward: str = "sequential"
) -> Posterior:
    """Log-likelihood, smoothed marginals gamma_t (Rabiner 1989, eq. 27) and expected transition
    counts sum_t xi_t (eq. 37-38) of one sequence or a batch; see :func:`messages` for the arguments."""
    check_choice("forward_backward", forward_backward, FORWARD_BACKWARD)
    log_em, length, single = _batched(log_em, length)
    mask = _mask(length, log_em.shape[1])
    msg = _messages(log_init, log_trans, log_em, length, forward_backward)
    counts, bad = _fast_counts(msg, log_trans, log_em, mask)
    ops = (counts, log_init, log_trans, log_em, length)
    counts = jax.lax.cond(bad, lambda ops: _recount(*ops[1:]), lambda ops: ops[0], ops)
    marginals = jax.nn.softmax(msg.log_alpha + msg.log_beta, axis=-1) * mask[..., None]
    return _unbatch(Posterior(msg.log_likelihood, marginals, counts), single)


def _recount(log_init: Array, log_trans: Array, log_em: Array, length) -> Array:
    """The transition counts from exact log xi_t and messages with a full log-sum-exp at every step."""
    msg = _sequential(log_init, log_trans, log_em, length, exact=True)
    return _exact_counts(msg, log_trans, log_em, _mask(length, log_em.shape[1]))


def pairwise_marginals(
    log_init: Array, log_trans: Array, log_em: Array, length=None, forward_backward: str = "sequential"
) -> Array:
    """xi_t(i, j) = p(z_{t-1} = i, z_t = j | x) for t = 1..T-1, (T-1, K, K) per sequence (Rabiner 1989,
    eq. 37), computed from the log messages; zero at padded steps."""
    check_choice("forward_backward", forward_backward, FORWARD_BACKWARD)
    log_em, length, single = _batched(log_em, length)
    msg = _messages(log_init, log_trans, log_em, length, forward_backward)
    la, lv = _pair_logs(msg, log_em)
    real = _mask(length, log_em.shape[1])[:, 1:]
    return _unbatch(_exact_pairs(la, log_trans[None, None], lv, real), single)


def viterbi(log_init: Array, log_trans: Array, log_em: Array, length=None) -> tuple[Array, Array]:
    """The most probable state path and its log joint probability (Rabiner 1989, eq. 32-35), max-plus in log
    space; padded steps get state -1. One sequence (vmap for a batch).

    Returns:
      (path (T,) int32, log p(x, path) scalar).
    """
    num_steps, k = log_em.shape
    length = num_steps if length is None else length
    mask = _mask(length, num_steps)
    states = jnp.arange(k, dtype=jnp.int32)

    def forward(d_prev, inputs):
        le, m = inputs
        scores = d_prev[:, None] + log_trans
        bp = jnp.argmax(scores, axis=0).astype(jnp.int32)
        d = jnp.max(scores, axis=0) + le
        return jnp.where(m, d, d_prev), jnp.where(m, bp, states)

    d_last, backpointers = jax.lax.scan(forward, log_init + log_em[0], (log_em[1:], mask[1:]))
    last = jnp.argmax(d_last).astype(jnp.int32)

    first, later = jax.lax.scan(lambda s, bp: (bp[s], s), last, backpointers, reverse=True)
    path = jnp.concatenate([first[None], later])
    return jnp.where(mask, path, -1), jnp.max(d_last)


__all__ = ["Messages", "Posterior", "FORWARD_BACKWARD", "messages", "pairwise_marginals", "posterior", "viterbi"]
