"""Probabilistic latent semantic analysis (Hofmann 1999) by EM, in the two forms of *Raise your ELBO*
(§pLSA, eq. 2.91-2.92):

- ``"plsa1"``, the aspect model p(d, w) = sum_z p(z) p(d | z) p(w | z): pi_k = p(z = k) (K,),
  xi_kd = p(d | z = k) (K, D), eta_kw = p(w | z = k) (K, V);
- ``"plsa2"``, the conditional p(w | d) = sum_z p(z | d) p(w | z): pi_dk (D, K) and eta (K, V).

The data are one :class:`vijax.data.BowBatch` holding the whole corpus. The E-step sets r_dwk ∝ pi_k xi_kd
eta_kw (pLSA1) or pi_dk eta_kw (pLSA2), N_dk = sum_w n_dw r_dwk, N_kw = sum_d n_dw r_dwk; the M-step is
pi_k = N_k / N, xi_kd = N_dk / N_k (pLSA1) or pi_dk = N_dk / N_d (pLSA2), and eta_kw = N_kw / N_k (MAP
eta_kw ∝ N_kw + c - 1 under Dirichlet(c), ``word_concentration``). Held-out documents are scored by folding in
p(z | d) with eta fixed (Hofmann 1999).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import ArgumentError, INT32_MAX, check_allocation, check_choice, check_data_dtype
from vijax._validate import check_float_dtype, check_int, check_scalar, float_dtype, is_tracer
from vijax.models._components import map_rows as _map_rows
from vijax.types import Array, PRNGKey
from vijax.models._base import bow_batch_checks
from vijax.models._pytree import PytreeModel

VARIANTS = ("plsa1", "plsa2")


class PLSAParams(NamedTuple):
    """pLSA1: p(z) (K,), p(d | z) (K, D); pLSA2: p(z | d) (D, K), None. Both: ``word_probs`` p(w | z) (K, V)."""

    topic_probs: Array
    doc_probs: Array | None
    word_probs: Array


class PLSAStats(NamedTuple):
    doc_topic: Array  # (D, K) N_dk = sum_w n_dw r_dwk
    topic_word: Array  # (K, V) N_kw = sum_d n_dw r_dwk


class _Bow(NamedTuple):
    word_ids: Array
    counts: Array


def _as_batch(batch) -> _Bow:
    """A ``vijax.data.BowBatch`` (or any pair ``(word_ids, counts)``) as its two arrays."""
    if isinstance(batch, tuple) and len(batch) == 2:
        return _Bow(*batch)
    raise ArgumentError("batch", f"batch must be a vijax.data.BowBatch (word_ids, counts), got {type(batch).__name__}")


@dataclasses.dataclass(frozen=True, eq=False)
class PLSA(PytreeModel):
    """pLSA1 or pLSA2 with K topics over V words, fitted by EM (``vijax.inference.em``).

    Args:
      num_topics: K >= 1.
      vocab_size: V >= 1.
      variant: ``"plsa1"`` (joint p(d, w)) or ``"plsa2"`` (conditional p(w | d)).
      word_concentration: Dirichlet concentration (>= 1) on the rows of p(w | z); 1 = maximum likelihood.
      fold_in_iters: EM iterations of the fold-in of held-out documents (>= 1).
      dtype: float dtype (default: JAX's default float).

    Examples:
        >>> from vijax.data import Corpus
        >>> corpus = Corpus(np.array([0, 2, 3]), np.array([0, 2, 1]), np.array([2.0, 1.0, 3.0]))
        >>> batch = corpus.batch(range(corpus.num_docs))
        >>> model = PLSA(num_topics=2, vocab_size=3, variant="plsa2")
        >>> params = model.init_params(jax.random.PRNGKey(0), batch)
        >>> params.topic_probs.shape
        (2, 2)
    """

    num_topics: int
    vocab_size: int
    _: dataclasses.KW_ONLY
    variant: str = "plsa1"
    word_concentration: float = 1.0
    fold_in_iters: int = 50
    dtype: Any = None
    static_floats = ("word_concentration",)

    def __post_init__(self):
        for name in ("num_topics", "vocab_size"):
            check_int(name, getattr(self, name))
        check_choice("variant", self.variant, VARIANTS)
        check_scalar("word_concentration", self.word_concentration, low=1.0, include_low=True)
        check_int("fold_in_iters", self.fold_in_iters, maximum=INT32_MAX)
        check_float_dtype(self.dtype)
        check_allocation("num_topics * vocab_size", self.num_topics * self.vocab_size, float_dtype(self.dtype).itemsize)

    def batch_checks(self, batch) -> list:
        """The value checks of a step's batch: word ids in [0, V), counts finite and >= 0."""
        _as_batch(batch)  # the same error as check_data for a batch that is not a pair
        return bow_batch_checks(batch, self.vocab_size)

    def check_data(self, batch) -> None:
        """Raises ValueError naming ``word_ids`` or ``counts`` (shapes and dtypes only while tracing)."""
        batch = _as_batch(batch)
        ids, cnt = batch.word_ids, batch.counts
        check_data_dtype("counts", cnt)
        tracing = is_tracer(ids) or is_tracer(cnt) or isinstance(ids, jax.ShapeDtypeStruct)
        if not tracing:
            ids, cnt = np.asarray(ids), np.asarray(cnt)
        if ids.ndim != 2 or ids.shape[0] < 1 or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"word_ids must be integers of shape (D, L) with D >= 1, got {ids.dtype} {ids.shape}")
        if cnt.shape != ids.shape or not np.issubdtype(cnt.dtype, np.number):
            raise ValueError(
                f"counts must be numbers of the shape of word_ids {ids.shape}, got {cnt.dtype} {cnt.shape}"
            )
        if tracing:  # the values are checked by batch_checks inside the step
            return
        if not np.all(np.isfinite(cnt)) or np.any(cnt < 0):
            raise ValueError("counts must be finite and non-negative")
        used = ids[cnt > 0]
        if used.size and (used.min() < 0 or used.max() >= self.vocab_size):
            raise ValueError(
                f"word_ids must lie in [0, vocab_size={self.vocab_size}) wherever counts > 0, "
                f"got values in [{used.min()}, {used.max()}]"
            )

    def init_params(self, key: PRNGKey, batch=None) -> PLSAParams:
        """p(w | z) rows drawn from Dirichlet(1); p(z), p(d | z) and p(z | d) uniform (needs the batch)."""
        if batch is None:
            raise ArgumentError(
                "batch", "batch: PLSA.init_params needs the corpus (its number of documents sizes the parameters)"
            )
        dt = float_dtype(self.dtype)
        k, d = self.num_topics, _as_batch(batch).word_ids.shape[0]
        e = jax.random.exponential(key, (k, self.vocab_size), dt)  # normalized: Dirichlet(1) rows
        eta = e / jnp.sum(e, -1, keepdims=True)
        if self.variant == "plsa1":
            return PLSAParams(jnp.full((k,), 1.0 / k, dt), jnp.full((k, d), 1.0 / d, dt), eta)
        return PLSAParams(jnp.full((d, k), 1.0 / k, dt), None, eta)

    def e_step(self, params: PLSAParams, batch):
        """(N_dk, N_kw) under p(z | d, w, params), and the log-likelihood summed over the corpus."""
        batch = _as_batch(batch)
        ids, cnt = batch.word_ids, jnp.asarray(batch.counts, params.word_probs.dtype)
        docs = params.doc_probs.shape[1] if self.variant == "plsa1" else params.topic_probs.shape[0]
        if ids.shape[0] != docs:  # static shapes: checked under jit too
            raise ArgumentError(
                "batch",
                f"batch: pLSA's parameters are fitted to a corpus of {docs} documents (one row each), "
                f"got {ids.shape[0]} rows",
            )
        log_dz = jnp.log(params.topic_probs)  # log p(z | d) (pLSA2), or log p(z) + log p(d | z) (pLSA1), (D, K)
        if self.variant == "plsa1":
            log_dz = log_dz[None, :] + jnp.log(params.doc_probs).T
        r, log_p = _responsibilities(log_dz, jnp.log(params.word_probs), ids, cnt)
        cr = cnt[..., None] * r  # (D, L, K)
        k = self.num_topics
        topic_word = jax.ops.segment_sum(cr.reshape(-1, k), ids.reshape(-1), num_segments=self.vocab_size).T
        ll = jnp.sum(jnp.where(cnt > 0, cnt * log_p, 0.0))
        return PLSAStats(jnp.sum(cr, 1), topic_word), ll

    def m_step(self, stats: PLSAStats) -> PLSAParams:
        """The tutorial's M-step of pLSA1 or pLSA2 (MAP in p(w | z) when ``word_concentration`` > 1)."""
        eta = _map_rows(stats.topic_word, self.word_concentration)
        if self.variant == "plsa2":
            return PLSAParams(_map_rows(stats.doc_topic, 1.0), None, eta)
        n_k = jnp.sum(stats.doc_topic, 0)
        return PLSAParams(n_k / jnp.sum(n_k), _map_rows(stats.doc_topic.T, 1.0), eta)

    def log_prior(self, params: PLSAParams) -> Array:
        """(c - 1) sum log p(w | z): log p(params) up to a constant (0 for c = 1)."""
        if self.word_concentration == 1.0:
            return jnp.zeros((), params.word_probs.dtype)
        return (self.word_concentration - 1.0) * jnp.sum(jnp.log(params.word_probs))

    def joint_matrix(self, params: PLSAParams) -> Array:
        """pLSA1's fitted joint p(d, w) = Xi^T diag(pi) H, (D, V) (dense: for small corpora and tests)."""
        if self.variant != "plsa1":
            raise ValueError("variant: joint_matrix is pLSA1's p(d, w); pLSA2 models p(w | d)")
        return (params.doc_probs.T * params.topic_probs[None, :]) @ params.word_probs

    def fold_in(self, params: PLSAParams, batch) -> Array:
        """p(z | d) (S, K) of ``batch``'s documents by ``fold_in_iters`` EM steps with p(w | z) fixed, from uniform."""
        self.check_data(batch)
        return _fold_in(self, params, _as_batch(batch))

    def log_predictive(self, params: PLSAParams, observed, heldout) -> Array:
        """sum over each document's held-out tokens of log p(w | d), (S,), p(z | d) folded in on ``observed``."""
        self.check_data(observed)
        self.check_data(heldout)
        observed, heldout = _as_batch(observed), _as_batch(heldout)
        if observed.word_ids.shape[0] != heldout.word_ids.shape[0]:
            raise ArgumentError(
                "observed",
                f"observed and heldout must hold the same documents: {observed.word_ids.shape[0]} "
                f"and {heldout.word_ids.shape[0]} rows",
            )
        return _score(_fold_in(self, params, observed), params.word_probs, heldout)


def _responsibilities(log_dz: Array, log_eta: Array, ids: Array, cnt: Array):
    """r (D, L, K) (0 at padding) and log sum_k exp(log_dz + log eta_kw) (D, L) per unique word."""
    logits = log_dz[:, None, :] + jnp.take(log_eta.T, ids, axis=0, mode="clip")  # (D, L, K)
    log_p = jax.nn.logsumexp(logits, axis=-1)
    ok = (cnt > 0) & jnp.isfinite(log_p)
    r = jnp.where(ok[..., None], jnp.exp(logits - jnp.where(ok, log_p, 0.0)[..., None]), 0.0)
    return r, log_p


@jax.jit
def _fold_in(model: PLSA, params: PLSAParams, batch: _Bow) -> Array:
    k, s = model.num_topics, batch.word_ids.shape[0]
    dt = params.word_probs.dtype
    theta = jnp.full((s, k), 1.0 / k, dt)
    log_eta = jnp.log(params.word_probs)
    cnt = jnp.asarray(batch.counts, dt)

    def body(_, theta):
        r, _ = _responsibilities(jnp.log(theta), log_eta, batch.word_ids, cnt)
        n_dk = jnp.sum(cnt[..., None] * r, 1)
        tot = jnp.sum(n_dk, -1, keepdims=True)
        return jnp.where(tot > 0, n_dk / jnp.where(tot > 0, tot, 1.0), theta)

    return jax.lax.fori_loop(0, model.fold_in_iters, body, theta)


@jax.jit
def _score(theta: Array, word_probs: Array, heldout: _Bow):
    cnt = jnp.asarray(heldout.counts, word_probs.dtype)
    p = jnp.einsum("sk,slk->sl", theta, jnp.take(word_probs.T, heldout.word_ids, axis=0, mode="clip"))
    log_p = jnp.where(cnt > 0, cnt * jnp.log(jnp.where(cnt > 0, p, 1.0)), 0.0)
    return jnp.sum(log_p, 1)


__all__ = ["PLSA", "PLSAParams", "PLSAStats", "VARIANTS"]
