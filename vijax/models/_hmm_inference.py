"""Exact inference in a hidden Markov model, one sequence at a time (vmap for batches).

Rabiner (1989), A tutorial on hidden Markov models and selected applications in speech recognition,
§III (the forward-backward procedure, eq. 18-27, and the Viterbi algorithm, eq. 30-35). Every
message is kept in log space; a message-times-matrix product is computed as
m + log(exp(v - m) @ A) with m = max(v), so each step is one dense product (batched over sequences
under vmap) that neither underflows nor overflows, and a zero in A stays an exact -inf.

Inputs are log pi (K,), log A (K, K) (rows: from, columns: to) and the per-step emission
log-likelihoods log b (T, K), with a ``length`` L <= T: steps t >= L are padding, where the forward
message carries over unchanged and the backward message is log 1, so the results for the first L
steps equal those of the unpadded sequence. pi and A may be sub-normalized (exp E[log pi] in the
mean-field local step of a Bayesian HMM); the log-likelihood is then log Z of the tilted chain.

Two schedules give the same messages: ``"sequential"`` (``lax.scan``, O(T K^2) work, T steps) and
``"parallel"`` (``lax.associative_scan`` over the T matrices M_t(i, j) = log A_ij + log b_t(j) in
the log-semiring, O(T K^3) work in O(log T) depth; Särkkä and García-Fernández 2021, Temporal
parallelization of Bayesian smoothers, and Hassan et al. 2021 for HMMs), for long sequences on
parallel hardware.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from vijax.types import Array

SCHEDULES = ("sequential", "parallel")


class Messages(NamedTuple):
    log_alpha: Array  # (T, K), forward messages, each up to a constant
    log_beta: Array  # (T, K), backward messages, each up to a constant
    log_likelihood: Array  # scalar log p(x_{0:L-1})


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


def _lse(x: Array, axis: int = -1) -> Array:
    return jax.nn.logsumexp(x, axis=axis)


def _shift(v: Array) -> Array:
    """max(v) (0 where v is all -inf), the shift that keeps exp(v - shift) in range."""
    m = jnp.max(v, axis=-1, keepdims=True)
    return jax.lax.stop_gradient(jnp.where(jnp.isfinite(m), m, 0.0))


def _log_vecmat(log_v: Array, mat: Array) -> Array:
    """log(exp(log_v) @ mat) for mat >= 0."""
    m = _shift(log_v)
    return m + jnp.log(jnp.exp(log_v - m) @ mat)


def _log_matvec(mat: Array, log_v: Array) -> Array:
    """log(mat @ exp(log_v)) for mat >= 0."""
    m = _shift(log_v)
    return m + jnp.log(mat @ jnp.exp(log_v - m))


def _mask(length, num_steps: int) -> Array:
    return jnp.arange(num_steps) < length


def _sequential(log_init: Array, log_trans: Array, log_em: Array, length) -> Messages:
    """Unnormalized log messages: each step adds its own shift back, so no per-step normalization
    (and no log-sum-exp) is needed; log p(x) = logsumexp(log alpha_{T-1})."""
    mask = _mask(length, log_em.shape[0])
    trans = jnp.exp(log_trans)
    a0 = log_init + log_em[0]

    def forward(a_prev, inputs):
        le, m = inputs
        a = jnp.where(m, _log_vecmat(a_prev, trans) + le, a_prev)
        return a, a

    a_last, alphas = jax.lax.scan(forward, a0, (log_em[1:], mask[1:]))

    def backward(b_next, inputs):
        le_next, m_next = inputs
        b = jnp.where(m_next, _log_matvec(trans, le_next + b_next), b_next)
        return b, b

    b_last = jnp.zeros_like(a0)
    _, betas = jax.lax.scan(backward, b_last, (log_em[1:], mask[1:]), reverse=True)
    return Messages(jnp.concatenate([a0[None], alphas]), jnp.concatenate([betas, b_last[None]]), _lse(a_last))


def _log_matmul(a: Array, b: Array) -> Array:
    """(a ⊗ b)_ij = log sum_k exp(a_ik + b_kj), batched over leading axes."""
    return _lse(a[..., :, :, None] + b[..., None, :, :], axis=-2)


def _parallel(log_init: Array, log_trans: Array, log_em: Array, length) -> Messages:
    num_steps, k = log_em.shape
    mask = _mask(length, num_steps)
    log_eye = jnp.where(jnp.eye(k, dtype=bool), 0.0, -jnp.inf).astype(log_em.dtype)
    first = jnp.broadcast_to((log_init + log_em[0])[None, :], (k, k))
    rest = jnp.where(mask[1:, None, None], log_trans[None] + log_em[1:, None, :], log_eye[None])
    elems = jnp.concatenate([first[None], rest])
    prefix = jax.lax.associative_scan(_log_matmul, elems)
    log_alpha = prefix[:, 0, :]  # log p(x_{0:t}, z_t) (carried unchanged over the padding)
    suffix = jax.lax.associative_scan(lambda a, b: _log_matmul(b, a), rest, reverse=True)
    log_beta = jnp.concatenate([_lse(suffix, axis=-1), jnp.zeros((1, k), log_em.dtype)])
    return Messages(log_alpha, log_beta, _lse(log_alpha[-1]))


def messages(log_init: Array, log_trans: Array, log_em: Array, length=None, schedule: str = "sequential") -> Messages:
    """Forward and backward messages of one sequence (Rabiner 1989, eq. 19-25), in log space.

    Args:
      log_init: log pi, (K,).
      log_trans: log A, (K, K), rows the previous state.
      log_em: log p(x_t | z_t = k), (T, K).
      length: L, the number of real steps (default T); steps t >= L are padding.
      schedule: ``"sequential"`` (lax.scan) or ``"parallel"`` (lax.associative_scan).
    """
    length = log_em.shape[0] if length is None else length
    if schedule == "sequential":
        return _sequential(log_init, log_trans, log_em, length)
    if schedule == "parallel":
        return _parallel(log_init, log_trans, log_em, length)
    raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")


def _pair_weights(msg: Messages, log_trans: Array, log_em: Array, length):
    """u_t, v_t, w_t with p(z_{t-1} = i, z_t = j | x) = w_t u_t(i) A_ij v_t(j) for t = 1..T-1."""
    mask = _mask(length, log_em.shape[0])[1:]
    trans = jnp.exp(log_trans)
    la = msg.log_alpha[:-1]
    lv = log_em[1:] + msg.log_beta[1:]
    u = jnp.exp(la - _shift(la))
    v = jnp.exp(lv - _shift(lv))
    z = jnp.einsum("ti,ij,tj->t", u, trans, v)
    w = jnp.where(mask, 1.0 / jnp.where(mask, z, 1.0), 0.0)
    return u, v, w, trans


def posterior(log_init: Array, log_trans: Array, log_em: Array, length=None, schedule: str = "sequential") -> Posterior:
    """Log-likelihood, smoothed marginals gamma_t (Rabiner 1989, eq. 27) and expected transition
    counts sum_t xi_t (eq. 37-38) of one sequence; see :func:`messages` for the arguments."""
    length = log_em.shape[0] if length is None else length
    msg = messages(log_init, log_trans, log_em, length, schedule)
    mask = _mask(length, log_em.shape[0])
    gamma = jax.nn.softmax(msg.log_alpha + msg.log_beta, axis=-1) * mask[:, None]
    u, v, w, trans = _pair_weights(msg, log_trans, log_em, length)
    counts = trans * ((u * w[:, None]).T @ v)
    return Posterior(msg.log_likelihood, gamma, counts)


def pairwise_marginals(
    log_init: Array, log_trans: Array, log_em: Array, length=None, schedule: str = "sequential"
) -> Array:
    """xi_t(i, j) = p(z_{t-1} = i, z_t = j | x) for t = 1..T-1, (T-1, K, K) (Rabiner 1989, eq. 37);
    zero at padded steps."""
    length = log_em.shape[0] if length is None else length
    msg = messages(log_init, log_trans, log_em, length, schedule)
    u, v, w, trans = _pair_weights(msg, log_trans, log_em, length)
    return w[:, None, None] * u[:, :, None] * trans[None] * v[:, None, :]


def viterbi(log_init: Array, log_trans: Array, log_em: Array, length=None) -> tuple[Array, Array]:
    """The most probable state path and its log joint probability (Rabiner 1989, eq. 32-35), in
    log space; padded steps get state -1.

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

    def backward(s, bp):
        return bp[s], s

    first, later = jax.lax.scan(backward, last, backpointers, reverse=True)
    path = jnp.concatenate([first[None], later])
    return jnp.where(mask, path, -1), jnp.max(d_last)


__all__ = ["Messages", "Posterior", "SCHEDULES", "messages", "pairwise_marginals", "posterior", "viterbi"]
