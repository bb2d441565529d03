"""The minibatch types of bag-of-words models (LDA and its relatives): ``BowBatch``, and
``CorpusBatch``, a batch cut from a ``Corpus``, whose values the corpus vouches for."""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import numpy as np

from vijax._validate import is_tracer, mark_source_checked, source_guarantee
from vijax.types import Array


class BowBatch(NamedTuple):
    """A padded minibatch of S documents, each as its unique word ids and their counts.

    Attributes:
      word_ids: (S, L) int32 word ids; padding slots hold 0.
      counts: (S, L) float counts; padding slots hold 0, so they contribute nothing. A document
        whose counts are all zero is empty (allowed; metrics skip it).

    L is the padded length of this minibatch (the largest number of unique words of its documents,
    rounded up to a bucket so that few shapes are compiled), never of the whole corpus.
    """

    word_ids: Array
    counts: Array


class CorpusBatch(BowBatch):
    """A :class:`BowBatch` cut from a ``Corpus`` that checked its values (``Corpus.batch``, every
    ``Minibatcher`` batch; a corpus built with ``validate=False`` cuts plain ``BowBatch``es, except
    vijax's own synthetic corpora, valid by construction), whose values the corpus vouches for: its
    arrays are read-only NumPy copies of the corpus's checked entries (word ids in
    ``[0, vocab_size)``, counts finite, >= 0 and whole; padding 0).

    A model's step therefore skips the value checks of such a batch (ids in range for the
    model's V >= the corpus's, counts finite and >= 0): the compiled step holds no host
    callback for them, so that JAX's persistent compilation cache stores a user's plain
    ``jax.jit(alg.step)``, and no pass over the batch is spent on them. The guarantee belongs to
    the very arrays the corpus made: a batch made from them (another array, a ``_replace``, a
    ``jax.tree.map`` or ``jax.device_put`` of it, any map of it inside your own ``jit``) is
    checked as any other, and so is every batch given to a model whose vocabulary is smaller
    than the corpus's. Under ``jit`` (or ``vmap``) the guarantee travels in the batch's pytree
    metadata, from the concrete batch the call was given to the traced one the step sees.

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
        """The batch of two freshly filled arrays of checked corpus entries: both made read-only
        and marked (``vijax._validate.mark_source_checked``) with what the corpus guarantees."""
        word_ids.flags.writeable = False
        counts.flags.writeable = False
        mark_source_checked(word_ids, ("word ids", int(vocab_size)))
        mark_source_checked(counts, ("counts",))
        return cls(word_ids, counts)

    def checked_vocab_size(self) -> Optional[int]:
        """V such that this batch's word ids are known to lie in [0, V) and its counts to be finite,
        >= 0 and whole, or None where they must be checked. Concrete: from the arrays' own marks;
        traced: from the pytree metadata of the batch the call was given."""
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
    # the metadata vouches only for concrete, marked arrays: traced leaves (the batch inside a
    # trace, being mapped by jax.tree.map there) give None, so that a batch made inside a trace
    # from another is checked. Leaves that are neither (JAX's stand-ins of the arrays, such as the
    # ArgInfo of a lowered program or a ShapeDtypeStruct: no values to vouch for) keep the
    # metadata they were made with, so that ``jax.jit(step).lower(...).compile()`` takes the
    # batch it was lowered for (its tree is the batch's; an unmarked batch is refused, not run
    # unchecked)
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
