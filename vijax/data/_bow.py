"""The minibatch types of bag-of-words models (LDA and its relatives): ``BowBatch``, and
``CorpusBatch``, a batch cut from a ``Corpus``, whose values the corpus vouches for."""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import numpy as np

from vijax._validate import is_tracer, mark_source_checked, source_guarantee
from vijax.types import Array


class BowBatch(NamedTuple):
    """A padded minibatch of S documents, each as its unique word ids and their counts; L is this
    minibatch's padded length. A document whose counts are all zero is empty (metrics skip it)."""

    word_ids: Array  # (S, L) int32; padding slots hold 0
    counts: Array  # (S, L) float; padding slots hold 0


class CorpusBatch(BowBatch):
    """A :class:`BowBatch` cut from a ``Corpus`` that checked its values (``Corpus.batch``): read-only NumPy
    copies of its checked entries, whose value checks a model's step (of V >= the corpus's) skips. The guarantee
    belongs to the very arrays the corpus made (a ``_replace`` or ``device_put`` of the batch is checked as any
    other); under ``jit`` or ``vmap`` it travels in the batch's pytree metadata.

    Examples:
        >>> import numpy as np
        >>> from vijax.data import Corpus
        >>> c = Corpus(np.array([0, 2, 3]), np.array([0, 3, 1]), np.array([2.0, 1.0, 4.0]))
        >>> b = c.batch([0, 1])
        >>> type(b).__name__, b.checked_vocab_size()
        ('CorpusBatch', 4)
        >>> b._replace(counts=b.counts * 2).checked_vocab_size() is None
        True
    """

    @classmethod
    def _from_corpus_arrays(cls, word_ids: np.ndarray, counts: np.ndarray, vocab_size: int) -> "CorpusBatch":
        """The batch of two freshly filled arrays of checked corpus entries, made read-only and marked."""
        word_ids.flags.writeable = False
        counts.flags.writeable = False
        mark_source_checked(word_ids, ("word ids", int(vocab_size)))
        mark_source_checked(counts, ("counts",))
        return cls(word_ids, counts)

    def checked_vocab_size(self) -> Optional[int]:
        """V such that this batch's word ids are known to lie in [0, V) and its counts to be finite,
        >= 0 and whole, or None where they must be checked."""
        ids, counts = self
        if is_tracer(ids) and is_tracer(counts):
            return getattr(self, "_traced_vocab_size", None)
        return _concrete_vocab_size(ids, counts)


def _concrete_vocab_size(ids, counts) -> Optional[int]:
    mark = source_guarantee(ids)
    if mark is None or mark[0] != "word ids" or source_guarantee(counts) != ("counts",):
        return None
    return mark[1]


def _flatten(batch: CorpusBatch):
    # metadata vouches only for concrete, marked arrays; traced leaves give None (a batch made inside
    # a trace is checked); stand-ins (ShapeDtypeStruct, a lowered program's ArgInfo) keep theirs
    ids, counts = batch.word_ids, batch.counts
    if is_tracer(ids) or is_tracer(counts):
        return (ids, counts), None
    if isinstance(ids, (np.ndarray, jax.Array)) or isinstance(counts, (np.ndarray, jax.Array)):
        return (ids, counts), _concrete_vocab_size(ids, counts)
    return (ids, counts), getattr(batch, "_traced_vocab_size", None)


def _unflatten(vocab_size: Optional[int], leaves) -> CorpusBatch:
    out = CorpusBatch(*leaves)
    out._traced_vocab_size = vocab_size  # read only while the leaves are tracers or stand-ins
    return out


jax.tree_util.register_pytree_node(CorpusBatch, _flatten, _unflatten)
