"""The minibatch types of bag-of-words models (LDA and its relatives): ``BowBatch``; ``CorpusBatch``, a batch cut
from a ``Corpus``, whose values the corpus vouches for; and ``PackedBowBatch``, host minibatches stored by their
entries alone, padded on the device."""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import ArgumentError, is_tracer, mark_source_checked, source_guarantee
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


@functools.partial(
    jax.tree_util.register_dataclass, data_fields=["word_ids", "counts", "lengths"], meta_fields=["length"]
)
@dataclasses.dataclass(frozen=True)
class PackedBowBatch:
    """Minibatches of S documents stored by their entries alone, one document after another, without the
    padding slots of a :class:`BowBatch` (S, L): the host's memory and the copy to the device follow the entries
    the documents hold, not S times the longest document's length. ``padded()`` makes one step's
    ``BowBatch`` inside the compiled program (``Minibatcher(packed=True)``'s host chunks; the runner unpacks
    them with :func:`device_batch`). Leading axes (a chunk's steps) come before E and S.

    Attributes:
      word_ids: (..., E) int32 the entries' word ids, document after document, then 0 on the E - sum(lengths)
        padding entries.
      counts: (..., E) the entries' counts, 0 on padding.
      lengths: (..., S) int32 each document's number of entries (0: an empty row).
      length: L, the padded length of ``padded()`` (static, at least the longest document's).

    Examples:
      >>> import numpy as np
      >>> b = PackedBowBatch(np.array([4, 1, 2, 0]), np.array([2.0, 1.0, 3.0, 0.0]), np.array([2, 0, 1]), 2)
      >>> p = b.padded()
      >>> np.asarray(p.word_ids).tolist(), np.asarray(p.counts).tolist()
      ([[4, 1], [0, 0], [2, 0]], [[2.0, 1.0], [0.0, 0.0], [3.0, 0.0]])
    """

    word_ids: Array
    counts: Array
    lengths: Array
    length: int

    def __post_init__(self):
        leaves = (self.word_ids, self.counts, self.lengths)
        if not all(isinstance(x, (np.ndarray, jax.Array)) and not is_tracer(x) for x in leaves):
            return  # inside a trace, or a pytree's stand-ins: the arrays were checked where they were made
        ids, counts, lengths = (np.asarray(x) for x in leaves)
        if ids.shape != counts.shape or ids.ndim < 1 or lengths.shape[:-1] != ids.shape[:-1]:
            raise ArgumentError(
                "lengths",
                f"PackedBowBatch: word_ids and counts (..., E) and lengths (..., S) with the same leading axes, got "
                f"{ids.shape}, {counts.shape} and {lengths.shape}",
            )
        if lengths.size and (lengths.min() < 0 or lengths.max() > self.length):
            raise ArgumentError(
                "lengths",
                f"PackedBowBatch: lengths must lie in [0, length = {self.length}], got "
                f"{int(lengths.min())}..{int(lengths.max())}",
            )
        if lengths.size and lengths.sum(-1).max() > ids.shape[-1]:
            raise ArgumentError(
                "lengths",
                f"PackedBowBatch: a step's lengths sum to {int(lengths.sum(-1).max())}, more than its "
                f"{ids.shape[-1]} entries",
            )

    def padded(self) -> BowBatch:
        """One step's (S, L) ``BowBatch`` (``vmap`` it over leading axes)."""
        lengths = jnp.asarray(self.lengths)
        if lengths.ndim != 1 or np.ndim(self.word_ids) != 1 or np.shape(self.word_ids) != np.shape(self.counts):
            raise ValueError(
                f"padded(): one step's (E,) word_ids and counts and (S,) lengths, got shapes {np.shape(self.word_ids)}, "
                f"{np.shape(self.counts)} and {lengths.shape}"
            )
        s, e = lengths.shape[0], np.shape(self.word_ids)[0]
        ends = jnp.cumsum(lengths)
        pos = jnp.arange(e, dtype=ends.dtype)
        row = jnp.searchsorted(ends, pos, side="right")  # S past the last document: those updates are dropped
        col = pos - (ends - lengths)[jnp.minimum(row, s - 1)]

        def place(values, dtype):
            return jnp.zeros((s, self.length), dtype).at[row, col].set(jnp.asarray(values, dtype), mode="drop")

        return BowBatch(place(self.word_ids, jnp.int32), place(self.counts, jnp.asarray(self.counts).dtype))


def device_batch(batch):
    """A host batch as a step takes it: a :class:`PackedBowBatch`'s ``padded()``, any other batch as it is."""
    return batch.padded() if isinstance(batch, PackedBowBatch) else batch
