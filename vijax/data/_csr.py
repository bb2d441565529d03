"""``Corpus``: an immutable bag-of-words corpus in CSR form on the host, and its on-disk format."""

from __future__ import annotations

import dataclasses
import functools
import mmap
import os
from typing import Iterator, Optional, Sequence

import numpy as np

from vijax.data._bow import BowBatch, CorpusBatch
from vijax.data._npz import FileWriter, StreamingNpzWriter, open_npz
from vijax._validate import ArgumentError, check_scalar

MIN_BUCKET = 8
_FORMAT = "vijax.Corpus/1"
_CHUNK = 1 << 22  # entries examined at a time by validation and reductions over a corpus


def bucket_length(n: int, minimum: int = MIN_BUCKET) -> int:
    """The padded length for a longest document of ``n`` unique words: the next power of two >= ``n`` and ``minimum``.

    Examples:
      >>> [bucket_length(n) for n in (0, 5, 8, 9, 100)]
      [8, 8, 8, 16, 128]
    """
    n = max(int(n), int(minimum), 1)
    return 1 << (n - 1).bit_length()


def as_rng(seed) -> np.random.Generator:
    """A NumPy generator from an int seed or a JAX PRNG key (a ``np.random.Generator`` passes through)."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed_entropy(seed))


def seed_entropy(seed) -> list[int]:
    if isinstance(seed, (bool, np.bool_)) or seed is None:
        raise ArgumentError("seed", f"seed must be an int or a JAX PRNG key, got {seed!r}")
    if isinstance(seed, (int, np.integer)):
        if seed < 0:
            raise ArgumentError("seed", f"seed must be non-negative, got {seed}")
        return [int(seed)]
    import jax

    key = seed
    dtype = getattr(key, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    data = np.asarray(key)
    if data.size == 0 or not np.issubdtype(data.dtype, np.integer):
        raise ArgumentError("seed", f"seed must be an int or a JAX PRNG key, got {seed!r}")
    return [int(v) for v in data.astype(np.uint32).ravel()]


def vouched(corpus: "Corpus") -> "Corpus":
    """``corpus``, built unchecked from entries valid by construction, marked as checked."""
    object.__setattr__(corpus, "_values_checked", True)
    return corpus


def readonly(a: np.ndarray) -> np.ndarray:
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def _chunks(n: int, size: int = _CHUNK) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


def _gather_positions(starts: np.ndarray, lengths: np.ndarray):
    """Flat source positions of the entries of several documents, with their row and column."""
    total = int(lengths.sum())
    rows = np.repeat(np.arange(len(lengths)), lengths)
    first = np.cumsum(lengths) - lengths  # where each row begins in the flat output
    cols = np.arange(total, dtype=np.int64) - np.repeat(first, lengths)
    return np.repeat(starts, lengths) + cols, rows, cols


@dataclasses.dataclass(frozen=True, eq=False)
class Corpus:
    """A bag-of-words corpus of D documents over V words, in compressed sparse row form.

    Document ``d`` holds entries ``doc_ptr[d]:doc_ptr[d + 1]`` of ``word_ids`` and ``counts`` (its distinct words and
    their counts), read-only host arrays (memory-mapped by ``load_npz``); ``batch`` copies documents to a ``BowBatch``.

    Attributes:
      doc_ptr: (D + 1,) int64, non-decreasing, from 0 to nnz.
      word_ids: (nnz,) int32 in ``[0, vocab_size)``.
      counts: (nnz,) float32 non-negative whole numbers.
      vocab_size: V; if None, ``len(vocab)`` or else the largest word id plus one.
      vocab: the V words as a tuple of str, or None.
      validate: (init only) check the arrays, in blocks; an unchecked corpus's batches are plain ``BowBatch``es.

    Raises:
      ValueError: for a malformed ``doc_ptr``, a word id outside ``[0, vocab_size)``, or a bad count.

    Examples:
      >>> c = Corpus(np.array([0, 2, 2, 3]), np.array([0, 3, 1]), np.array([2.0, 1.0, 4.0]))
      >>> c.num_docs, c.vocab_size, c.num_tokens, c.num_empty
      (3, 4, 7, 1)
      >>> c.batch([0, 2]).word_ids.shape
      (2, 8)
    """

    doc_ptr: np.ndarray
    word_ids: np.ndarray
    counts: np.ndarray
    vocab_size: Optional[int] = None
    vocab: Optional[tuple] = None
    validate: dataclasses.InitVar[bool] = True

    def __post_init__(self, validate: bool):
        ptr, ids, cnt = np.asarray(self.doc_ptr), np.asarray(self.word_ids), np.asarray(self.counts)
        if ptr.ndim != 1 or ptr.shape[0] < 1:
            raise ValueError(f"doc_ptr must be 1-D with D + 1 >= 1 entries, got shape {ptr.shape}")
        if ids.ndim != 1 or cnt.ndim != 1 or ids.shape != cnt.shape:
            raise ValueError(f"word_ids and counts must be 1-D of equal length, got {ids.shape} and {cnt.shape}")
        if ptr.size and not np.issubdtype(ptr.dtype, np.integer):
            raise ValueError(f"doc_ptr must hold integers, got dtype {ptr.dtype}")
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"word_ids must hold integers, got dtype {ids.dtype}")
        if not (np.issubdtype(cnt.dtype, np.integer) or np.issubdtype(cnt.dtype, np.floating)):
            raise ValueError(f"counts must be integers or floats, got dtype {cnt.dtype}")
        vocab = None if self.vocab is None else tuple(str(w) for w in self.vocab)
        size = self.vocab_size
        if size is None and vocab is not None:
            size = len(vocab)
        elif size is None:
            size = max((int(ids[s].max()) for s in _chunks(ids.size)), default=-1) + 1
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise ValueError(f"vocab_size must be a non-negative integer, got {size!r}")
        size = int(size)
        if vocab is not None and len(vocab) != size:
            raise ValueError(f"vocab has {len(vocab)} words but vocab_size is {size}")
        if validate:
            self._check(ptr, ids, cnt, size)
        object.__setattr__(self, "doc_ptr", readonly(ptr.astype(np.int64, copy=False)))
        object.__setattr__(self, "word_ids", readonly(ids.astype(np.int32, copy=False)))
        object.__setattr__(self, "counts", readonly(cnt.astype(np.float32, copy=False)))
        object.__setattr__(self, "vocab_size", size)
        object.__setattr__(self, "vocab", vocab)
        # only a checked corpus (here, its parent's, or ``vouched``) cuts CorpusBatches that a step trusts
        object.__setattr__(self, "_values_checked", bool(validate))

    @staticmethod
    def _check(ptr, ids, cnt, size):
        nnz = ids.shape[0]
        if int(ptr[0]) != 0:
            raise ValueError(f"doc_ptr must start at 0, got {int(ptr[0])}")
        if int(ptr[-1]) != nnz:
            raise ValueError(f"doc_ptr must end at nnz = {nnz} (the length of word_ids), got {int(ptr[-1])}")
        for s in _chunks(ptr.shape[0] - 1):
            step = np.diff(ptr[s.start : s.stop + 1])
            if np.any(step < 0):
                d = s.start + int(np.argmax(step < 0))
                raise ValueError(
                    f"doc_ptr must be non-decreasing (monotone): doc_ptr[{d + 1}] = "
                    f"{int(ptr[d + 1])} < doc_ptr[{d}] = {int(ptr[d])}"
                )
        for s in _chunks(nnz):
            block = ids[s]
            if block.size and int(block.min()) < 0:
                raise ValueError(f"word ids must be >= 0, found negative word id {int(block.min())}")
            if block.size and int(block.max()) >= size:
                raise ValueError(f"word ids must be < vocab_size = {size}, found word id {int(block.max())}")
            c = cnt[s]
            if np.issubdtype(c.dtype, np.floating):
                if not np.all(np.isfinite(c)):
                    raise ValueError("counts must be finite, found a non-finite count")
                if np.any(c != np.floor(c)):
                    bad = c[c != np.floor(c)][0]
                    raise ValueError(f"counts must be whole numbers, found fractional count {bad}")
            if c.size and c.min() < 0:
                raise ValueError(f"counts must be non-negative, found negative count {c.min()}")
            if c.size and c.max() > 2**24:
                raise ValueError(f"counts above 2**24 are not exact in float32, found count {c.max()}")

    @property
    def num_docs(self) -> int:
        """D, the number of documents (empty ones included)."""
        return self.doc_ptr.shape[0] - 1

    @property
    def nnz(self) -> int:
        """The number of (document, word) entries."""
        return self.word_ids.shape[0]

    def __len__(self) -> int:
        return self.num_docs

    @functools.cached_property
    def doc_lengths(self) -> np.ndarray:
        """(D,) int64: the number of tokens of each document (the sum of its counts)."""
        out = np.empty(self.num_docs, np.int64)
        for s in _chunks(self.num_docs, 1 << 16):
            lo, hi = int(self.doc_ptr[s.start]), int(self.doc_ptr[s.stop])
            cum = np.concatenate([[0.0], np.cumsum(self.counts[lo:hi], dtype=np.float64)])
            ptr = self.doc_ptr[s.start : s.stop + 1] - lo
            out[s] = np.rint(cum[ptr[1:]] - cum[ptr[:-1]]).astype(np.int64)
        return readonly(out)

    @property
    def doc_unique_words(self) -> np.ndarray:
        """(D,) int64: the number of entries (distinct words) of each document."""
        return np.diff(self.doc_ptr)

    @property
    def num_tokens(self) -> int:
        """The total number of tokens (the sum of all counts)."""
        return int(self.doc_lengths.sum())

    @property
    def num_empty(self) -> int:
        """The number of documents without a single token."""
        return int(np.count_nonzero(self.doc_lengths == 0))

    def __repr__(self) -> str:
        vocab = "no vocab" if self.vocab is None else "with vocab"
        return f"Corpus(num_docs={self.num_docs}, vocab_size={self.vocab_size}, nnz={self.nnz}, {vocab})"

    def document(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """The word ids and counts of document ``d`` (read-only views)."""
        lo, hi = int(self.doc_ptr[d]), int(self.doc_ptr[d + 1])
        return self.word_ids[lo:hi], self.counts[lo:hi]

    def _doc_indices(self, doc_indices) -> np.ndarray:
        idx = np.asarray(doc_indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.num_docs):
            raise IndexError(
                f"document indices must lie in [0, {self.num_docs}), got {int(idx.min())}..{int(idx.max())}"
            )
        return idx

    def batch(
        self,
        doc_indices: Sequence[int],
        bucket: bool = True,
        *,
        num_rows: Optional[int] = None,
        length: Optional[int] = None,
        dtype=np.float32,
    ) -> BowBatch:
        """The padded minibatch of the given documents, in the given order (only their entries are read).

        Args:
          doc_indices: (S,) document indices.
          bucket: round L (the most distinct words of these documents) up by ``bucket_length``.
          num_rows: pad the batch with empty documents to this many rows.
          length: use this L instead (at least the longest document's).
          dtype: dtype of ``counts``.

        Returns:
          ``BowBatch`` of NumPy (S, L) ``word_ids`` and ``counts``, padded with 0 (a checked corpus: ``CorpusBatch``).
        """
        idx = self._doc_indices(doc_indices)
        rows = idx.size if num_rows is None else int(num_rows)
        if rows < idx.size:
            raise ArgumentError("num_rows", f"num_rows = {rows} is smaller than the {idx.size} documents requested")
        starts = self.doc_ptr[idx]
        lens = self.doc_ptr[idx + 1] - starts
        longest = int(lens.max()) if lens.size else 0
        if length is None:
            length = bucket_length(longest) if bucket else longest
        elif length < longest:
            raise ArgumentError(
                "length", f"length = {length} is shorter than the longest document of the batch ({longest})"
            )
        word_ids = np.zeros((rows, length), np.int32)
        counts = np.zeros((rows, length), dtype)
        src, r, c = _gather_positions(starts, lens)
        word_ids[r, c] = self.word_ids[src]
        counts[r, c] = self.counts[src]
        if not getattr(self, "_values_checked", False) or counts.dtype not in (np.float32, np.float64):
            return BowBatch(word_ids, counts)  # unchecked values, or a narrower type that may round a count
        return CorpusBatch._from_corpus_arrays(word_ids, counts, self.vocab_size)

    def release_pages(self) -> None:
        """Drops the pages of a memory-mapped corpus that this process has read from its resident memory (Linux's
        ``MADV_DONTNEED``): they stay in the kernel's page cache, so reading them again costs no disk, but a pass
        over a corpus larger than memory no longer counts every page it touched in the process's RSS (nor in a
        container's memory limit). ``Minibatcher.host_batches`` calls it after each chunk; an in-memory corpus: a
        no-op."""
        for a in (self.doc_ptr, self.word_ids, self.counts):
            while a is not None and getattr(a, "_mmap", None) is None:  # a view's base: the np.memmap
                a = a.base if isinstance(a, np.ndarray) else None
            if a is not None and hasattr(mmap, "MADV_DONTNEED"):
                a._mmap.madvise(mmap.MADV_DONTNEED)

    def entries(self, doc_indices: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The entries of the given documents, one document after another (only theirs are read).

        Returns:
          (word_ids, counts, lengths): (E,) the entries' word ids and counts, and (S,) each document's number of
          entries (E their sum).

        Examples:
          >>> c = Corpus(np.array([0, 2, 3]), np.array([0, 3, 1]), np.array([2.0, 1.0, 4.0]))
          >>> [a.tolist() for a in c.entries([1, 0])]
          [[1, 0, 3], [4.0, 2.0, 1.0], [1, 2]]
        """
        idx = self._doc_indices(doc_indices)
        starts = self.doc_ptr[idx]
        lens = self.doc_ptr[idx + 1] - starts
        src = _gather_positions(starts, lens)[0]
        return self.word_ids[src], self.counts[src], lens

    def subset(self, indices: Sequence[int]) -> "Corpus":
        """A corpus of the given documents, in the given order (repeats allowed): a new in-memory one, except that a
        ``range`` of consecutive documents (e.g. ``vijax.inference.process_shard``'s) gives views of this corpus's
        arrays, so a memory-mapped corpus's block stays mapped."""
        if isinstance(indices, range) and indices.step == 1 and 0 <= indices.start <= indices.stop <= self.num_docs:
            lo, hi = int(self.doc_ptr[indices.start]), int(self.doc_ptr[indices.stop])
            ptr = np.asarray(self.doc_ptr[indices.start : indices.stop + 1]) - lo
            return self._derived(ptr, self.word_ids[lo:hi], self.counts[lo:hi])
        idx = self._doc_indices(indices)
        starts = self.doc_ptr[idx]
        lens = self.doc_ptr[idx + 1] - starts
        src, _, _ = _gather_positions(starts, lens)
        ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        return self._derived(ptr, self.word_ids[src], self.counts[src])

    def split_documents(self, seed, test_fraction: float) -> tuple["Corpus", "Corpus"]:
        """A random split of the documents into (train, test) in corpus order, ``round(test_fraction * D)`` in test."""
        check_scalar("test_fraction", test_fraction, low=0.0, high=1.0, include_low=True)
        num_test = int(round(test_fraction * self.num_docs))
        perm = as_rng(seed).permutation(self.num_docs)
        test = np.sort(perm[:num_test])
        train = np.sort(perm[num_test:])
        return self.subset(train), self.subset(test)

    def split_tokens(self, seed, observed_fraction: float = 0.5) -> tuple["Corpus", "Corpus"]:
        """Splits every document's tokens at random into an observed and a held-out part (Hoffman et al., 2013, §4.2):
        document d keeps ``floor(observed_fraction * N_d + 1/2)`` of its N_d tokens, chosen uniformly.

        Returns:
          (observed, heldout): two corpora with the same documents, in the same order.
        """
        check_scalar("observed_fraction", observed_fraction, low=0.0, high=1.0, include_low=True)
        rng = as_rng(seed)
        obs = np.empty(self.nnz, np.float32)
        lengths = self.doc_lengths
        keep_all = np.floor(observed_fraction * lengths + 0.5).astype(np.int64)
        d = 0
        while d < self.num_docs:  # blocks of documents with about _CHUNK tokens at most
            cum = np.cumsum(lengths[d : d + (1 << 16)])
            e = d + max(1, int(np.searchsorted(cum, _CHUNK, side="right")))
            lo, hi = int(self.doc_ptr[d]), int(self.doc_ptr[e])
            c = self.counts[lo:hi].astype(np.int64)
            entry_doc = np.repeat(np.arange(e - d), np.diff(self.doc_ptr[d : e + 1]))
            token_entry = np.repeat(np.arange(hi - lo), c)  # tokens grouped by document
            token_doc = entry_doc[token_entry]
            order = np.lexsort((rng.random(token_entry.size), token_doc))  # shuffle within documents
            first = np.cumsum(lengths[d:e]) - lengths[d:e]
            rank = np.arange(token_entry.size) - first[token_doc]  # token_doc[order] == token_doc
            chosen = token_entry[order][rank < keep_all[d:e][token_doc]]
            obs[lo:hi] = np.bincount(chosen, minlength=hi - lo)
            d = e
        return self._keep_positive(obs), self._keep_positive(self.counts - obs)

    def _derived(self, ptr: np.ndarray, word_ids: np.ndarray, counts: np.ndarray) -> "Corpus":
        """A corpus of entries taken from this one's, not checked again: checked where this one is."""
        out = Corpus(ptr, word_ids, counts, self.vocab_size, self.vocab, validate=False)
        object.__setattr__(out, "_values_checked", getattr(self, "_values_checked", False))
        return out

    def _keep_positive(self, counts: np.ndarray) -> "Corpus":
        keep = counts > 0
        entry_doc = np.repeat(np.arange(self.num_docs), np.diff(self.doc_ptr))
        per_doc = np.bincount(entry_doc[keep], minlength=self.num_docs)
        ptr = np.concatenate([[0], np.cumsum(per_doc)]).astype(np.int64)
        return self._derived(ptr, self.word_ids[keep], counts[keep])

    def save_npz(self, path: str | os.PathLike) -> None:
        """Writes the corpus, in blocks, to an uncompressed ``.npz`` that ``load_npz`` can memory-map."""
        with CorpusWriter(path, self.vocab_size, self.vocab) as writer:
            for s in _chunks(self.num_docs, 1 << 16):
                lo, hi = int(self.doc_ptr[s.start]), int(self.doc_ptr[s.stop])
                writer.append_arrays(
                    np.diff(self.doc_ptr[s.start : s.stop + 1]), self.word_ids[lo:hi], self.counts[lo:hi]
                )

    @classmethod
    def load_npz(cls, path: str | os.PathLike, mmap: bool = True, validate: bool = True) -> "Corpus":
        """Reads a corpus written by ``save_npz`` or ``CorpusWriter``.

        Args:
          mmap: memory-map the arrays (read-only): a minibatch then reads only its documents' entries.
          validate: check the arrays (one pass over them, in blocks); skip for trusted files.
        """
        arrays = open_npz(path, mmap=mmap)
        fmt = str(arrays.get("format", ""))
        if fmt != _FORMAT:
            raise ValueError(f"{os.fspath(path)!r} is not a vijax corpus (format {fmt!r}, expected {_FORMAT!r})")
        vocab = tuple(arrays["vocab"].tolist()) if "vocab" in arrays else None
        return cls(
            arrays["doc_ptr"], arrays["word_ids"], arrays["counts"], int(arrays["vocab_size"]), vocab, validate=validate
        )


class CorpusWriter(FileWriter):
    """Writes a corpus to an ``.npz`` file a chunk of documents at a time; ``close`` assembles the archive.

    Args:
      vocab: optional sequence of V words.
      extra_streams: ``name -> (dtype, trailing_shape)`` of arrays with one row per document (``append_extra``).
      extra_arrays: small arrays stored whole (e.g. the true topics).

    Examples:
      >>> import tempfile, os
      >>> path = os.path.join(tempfile.mkdtemp(), "c.npz")
      >>> with CorpusWriter(path, vocab_size=5) as w:
      ...     w.append(Corpus(np.array([0, 1]), np.array([4]), np.array([2.0]), 5))
      ...     w.append(Corpus(np.array([0, 0, 2]), np.array([0, 1]), np.array([1.0, 1.0]), 5))
      >>> Corpus.load_npz(path).doc_lengths.tolist()
      [2, 0, 2]
    """

    def __init__(
        self,
        path: str | os.PathLike,
        vocab_size: int,
        vocab: Optional[Sequence[str]] = None,
        *,
        extra_streams: Optional[dict] = None,
        extra_arrays: Optional[dict] = None,
    ):
        reserved = {"doc_ptr", "word_ids", "counts", "vocab_size", "vocab", "format"}
        extra_streams = dict(extra_streams or {})
        extra_arrays = dict(extra_arrays or {})
        if reserved & (set(extra_streams) | set(extra_arrays)):
            raise ValueError(f"extra array names may not be any of {sorted(reserved)}")
        if vocab is not None and len(vocab) != vocab_size:
            raise ArgumentError("vocab", f"vocab has {len(vocab)} words but vocab_size is {vocab_size}")
        self.vocab_size = int(vocab_size)
        self._extra = set(extra_streams)
        self._npz = StreamingNpzWriter(
            path, {"doc_ptr": (np.int64, ()), "word_ids": (np.int32, ()), "counts": (np.float32, ()), **extra_streams}
        )
        self._npz.append("doc_ptr", np.zeros(1, np.int64))
        self._nnz = 0
        self._npz.put("format", np.array(_FORMAT))
        self._npz.put("vocab_size", np.array(self.vocab_size, np.int64))
        if vocab is not None:
            self._npz.put("vocab", np.array([str(w) for w in vocab], dtype=str))
        for name, array in extra_arrays.items():
            self._npz.put(name, array)

    @property
    def num_docs(self) -> int:
        """Documents appended so far."""
        return self._npz.length("doc_ptr") - 1

    def append(self, chunk: Corpus) -> None:
        """Appends the documents of ``chunk`` (a ``Corpus`` over the same vocabulary size)."""
        if chunk.vocab_size != self.vocab_size:
            raise ArgumentError("chunk", f"chunk has vocab_size {chunk.vocab_size}, the writer {self.vocab_size}")
        self._append(chunk.doc_unique_words, chunk.word_ids, chunk.counts)

    def append_arrays(self, doc_unique_words, word_ids, counts) -> None:
        """Appends documents given as their numbers of entries and their concatenated entries."""
        lens = np.asarray(doc_unique_words, np.int64)
        word_ids = np.asarray(word_ids)
        if int(lens.sum()) != word_ids.shape[0]:
            raise ValueError("the document sizes must add up to the number of entries")
        ptr = np.concatenate([[0], np.cumsum(lens)])
        Corpus._check(ptr, word_ids, np.asarray(counts), self.vocab_size)
        self._append(lens, word_ids, counts)

    def _append(self, lens, word_ids, counts):
        self._npz.append("doc_ptr", self._nnz + np.cumsum(lens, dtype=np.int64))
        self._npz.append("word_ids", word_ids)
        self._npz.append("counts", counts)
        self._nnz += int(np.sum(lens))

    def append_extra(self, name: str, rows) -> None:
        """Appends rows to a streamed extra array declared in ``extra_streams``."""
        if name not in self._extra:
            raise KeyError(f"{name!r} was not declared in extra_streams")
        self._npz.append(name, rows)

    def close(self) -> None:
        """Assembles the ``.npz`` file."""
        for name in self._extra:
            if self._npz.length(name) != self.num_docs:
                self._discard()
                raise ValueError(
                    f"extra stream {name!r} has {self._npz.length(name)} rows for {self.num_docs} documents"
                )
        self._npz.close()

    def _discard(self) -> None:
        self._npz._discard()
