"""Held-out evaluation of topic models by document completion (Hoffman et al. 2013, §4.1; Mimno et al. 2012): the
topic proportions are fitted on each test document's observed part, the held-out words scored with the plug-in
predictive sum_k E[theta_dk] E_q[beta_kw]; documents with an empty observed or held-out part are skipped (counted)::

    per-word log predictive = sum_d sum_{w in heldout_d} log p(w | observed_d) / sum_d |heldout_d|,
    perplexity = exp(-per-word log predictive).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import ArgumentError, check_finite, check_int, is_tracer
from vijax.models import filter_jit
from vijax.types import Array, PRNGKey


def _check_q(q_global) -> None:
    for leaf in jax.tree_util.tree_leaves(q_global):
        check_finite("q_global", leaf)


def _docs(n) -> str:
    return f"{int(n)} document{'' if int(n) == 1 else 's'}"


def _no_tokens(num_tokens, num_skipped) -> None:
    if is_tracer(num_tokens) or float(num_tokens) > 0:
        return
    raise ValueError(
        f"heldout has no tokens to score: num_tokens = 0 ({_docs(num_skipped)} skipped for an empty observed or "
        "held-out part); the per-word log predictive is undefined"
    )


class DocumentCompletion(NamedTuple):
    """Totals of a document-completion evaluation.

    Attributes:
      log_prob: sum over scored documents of their held-out words' log predictive probabilities.
      num_tokens: number of held-out tokens scored.
      num_docs: number of documents scored.
      num_skipped: documents skipped because their observed or held-out part is empty.
    """

    log_prob: Array
    num_tokens: Array
    num_docs: Array
    num_skipped: Array

    @property
    def per_word(self) -> Array:
        """Per-word held-out log predictive probability, log_prob / num_tokens.

        Raises:
          ValueError: starting "heldout has no tokens" when a concrete ``num_tokens`` is 0 (NaN under ``jit``).
        """
        _no_tokens(self.num_tokens, self.num_skipped)
        return self.log_prob / self.num_tokens


def document_completion(
    model, q_global, batch_observed, batch_heldout, key: PRNGKey | None = None
) -> DocumentCompletion:
    """Held-out log probability of ``batch_heldout`` given ``batch_observed`` (document completion).

    Args:
      model: a topic model offering ``log_predictive(q, observed, heldout)`` per document and ``check_data``.
      q_global: the fitted q(beta) (for LDA a Dirichlet of batch shape (K,)).
      batch_observed: BowBatch (S, L1), the observed part of each of S documents.
      batch_heldout: BowBatch (S, L2), the held-out part of the same documents, in the same order.
      key: unused by the deterministic mean-field fit; accepted for models whose fit samples.

    Returns:
      ``DocumentCompletion``, totals that add up over batches. Jit-able.

    Raises:
      ValueError: naming the batch for invalid data, ``q_global`` for NaN or infinite parameters.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.data import BowBatch
        >>> from vijax.models import LDA
        >>> model = LDA(num_topics=2, vocab_size=4)
        >>> q = model.init_globals(jax.random.PRNGKey(0))
        >>> obs = BowBatch(jnp.array([[0, 1]]), jnp.array([[2.0, 1.0]]))
        >>> held = BowBatch(jnp.array([[2]]), jnp.array([[1.0]]))
        >>> int(document_completion(model, q, obs, held).num_tokens)
        1
    """
    del key
    model.check_data(batch_observed)
    model.check_data(batch_heldout)
    _check_q(q_global)
    if q_global.__class__ is tuple and len(q_global) == 1:
        (q_global,) = q_global
    per_doc = model.log_predictive(q_global, batch_observed, batch_heldout)  # (S,)
    n_obs = jnp.sum(batch_observed.counts, axis=-1)
    n_held = jnp.sum(batch_heldout.counts, axis=-1).astype(per_doc.dtype)
    keep = (n_obs > 0) & (n_held > 0)
    return DocumentCompletion(
        log_prob=jnp.sum(jnp.where(keep, per_doc, 0.0)),
        num_tokens=jnp.sum(jnp.where(keep, n_held, 0.0)),
        num_docs=jnp.sum(keep.astype(jnp.int32)),
        num_skipped=jnp.sum((~keep).astype(jnp.int32)),
    )


def perplexity(model, q_global, batch_observed, batch_heldout, key: PRNGKey | None = None) -> Array:
    """exp(-per-word held-out log predictive) by document completion (see ``document_completion``).

    Raises:
      ValueError: as ``document_completion``; starting "heldout has no tokens" when none is scored.
    """
    return jnp.exp(-document_completion(model, q_global, batch_observed, batch_heldout, key).per_word)


_jitted_completion = filter_jit(document_completion)  # a model's arrays traced, the rest static


def corpus_document_completion(model, q_global, observed, heldout, batch_docs: int = 100) -> DocumentCompletion:
    """``document_completion`` over whole corpora, ``batch_docs`` documents at a time; the totals as Python numbers.

    Args:
      model: a topic model (e.g. :class:`vijax.models.LDA`).
      q_global: the fitted q(beta).
      observed: a ``vijax.data.Corpus``, the observed part of each document (``test.split_tokens(seed)[0]``).
      heldout: a ``vijax.data.Corpus`` of the held-out parts of the same documents, in the same order.
      batch_docs: documents per evaluation batch.

    Raises:
      ValueError: naming ``heldout`` (another number of documents, nothing to score), ``batch_docs`` or ``q_global``.
    """
    if observed.num_docs != heldout.num_docs:
        raise ArgumentError("heldout", f"heldout has {heldout.num_docs} documents but observed has {observed.num_docs}")
    check_int("batch_docs", batch_docs)
    if heldout.num_tokens == 0:
        raise ArgumentError(
            "heldout",
            f"heldout has no tokens: its {_docs(heldout.num_docs)} are all empty, so there is nothing to score",
        )
    _check_q(q_global)
    lp = nt = nd = ns = 0.0
    for start in range(0, observed.num_docs, batch_docs):
        idx = np.arange(start, min(start + batch_docs, observed.num_docs))
        r = _jitted_completion(
            model, q_global, observed.batch(idx, num_rows=batch_docs), heldout.batch(idx, num_rows=batch_docs)
        )
        lp, nt = lp + float(r.log_prob), nt + float(r.num_tokens)
        nd += int(r.num_docs)
        ns += int(r.num_skipped) - (batch_docs - len(idx))  # padding rows are not documents
    if nt == 0:
        raise ArgumentError(
            "heldout",
            f"heldout has no tokens in a document whose observed part has tokens: all {_docs(ns)} were "
            "skipped, so there is nothing to score",
        )
    return DocumentCompletion(lp, nt, int(nd), int(ns))
