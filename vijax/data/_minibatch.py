"""Minibatches: ``Minibatcher`` (shuffled epochs of fixed-size ``BowBatch``es of a corpus, on the host)
and ``epoch_batches`` (shuffled index minibatches of data in memory, on the device)."""

from __future__ import annotations

import itertools
from typing import Callable, Iterable, Iterator, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import ArgumentError, check_allocation, check_bool, check_int, enforce_value_checks, ids_in_range
from vijax._validate import is_tracer
from vijax.data._bow import BowBatch, PackedBowBatch
from vijax.data._csr import Corpus, readonly, seed_entropy, bucket_length


class Minibatcher:
    """Host-side minibatches of a ``Corpus``: each epoch visits every document once, in a fresh random order,
    S documents at a time.

    Epoch ``e``'s order is drawn from ``(seed, e)`` alone, so ``step_batch(t)`` and ``host_batches(t0, n)`` are
    random access and a resumed run gets the batches of an uninterrupted one. Every batch has S rows: the last
    batch of an epoch is padded with empty documents, or skipped with ``drop_remainder``.

    Args:
      batch_size: S.
      seed: int seed or JAX PRNG key (required: there is no default).
      num_epochs: epochs to run, or None for an endless iterator.
      drop_remainder: skip the last partial batch of each epoch rather than padding it.
      bucket: round each batch's length L up to a power of two (>= 8).
      length: None (each batch's own L), an int L for every batch, or ``"corpus"`` (one L for a whole run).
      packed: ``host_batches`` gives ``PackedBowBatch`` chunks, the documents' entries without padding (their L:
        ``length``, else the corpus's), which the runner pads on the device a step at a time: the host holds the
        entries a chunk has rather than chunk x S x L slots (a long-tailed corpus's L is many times the typical
        document's).
      start_epoch: the first epoch (to resume a run).
      dtype: dtype of the counts.

    Examples:
      >>> from vijax.data import sample_lda_corpus
      >>> corpus = sample_lda_corpus(0, 10, 2, 30, doc_length_mean=5).corpus
      >>> batches = list(Minibatcher(corpus, 4, seed=1, num_epochs=1))
      >>> len(batches), batches[-1].counts.shape[0]
      (3, 4)
    """

    def __init__(
        self,
        corpus: Corpus,
        batch_size: int,
        seed,
        *,
        num_epochs: Optional[int] = None,
        drop_remainder: bool = False,
        bucket: bool = True,
        start_epoch: int = 0,
        dtype=np.float32,
        length: Optional[int | str] = None,
        packed: bool = False,
    ):
        if not isinstance(corpus, Corpus):
            raise ArgumentError(
                "corpus",
                f"corpus must be a vijax.data.Corpus (read_ldac, read_uci_bow, prepare_corpus, Corpus(...)), "
                f"got {type(corpus).__name__}",
            )
        check_int("batch_size", batch_size)
        if drop_remainder and batch_size > corpus.num_docs:
            raise ArgumentError(
                "batch_size",
                f"batch_size = {batch_size} exceeds the {corpus.num_docs} documents, so "
                "drop_remainder would leave no batch",
            )
        if corpus.num_docs == 0:
            raise ValueError("the corpus has no documents")
        if num_epochs is not None:
            check_int("num_epochs", num_epochs, 0)
        longest = int(np.max(corpus.doc_unique_words))
        if packed and length is None:
            length = "corpus"
        if length == "corpus":
            length = bucket_length(longest)
        elif length is not None:
            check_int("length", length)
            if length < longest:
                raise ArgumentError(
                    "length",
                    f"length = {length} is shorter than the corpus's longest document ({longest} "
                    "distinct words); use length='corpus'",
                )
        self.length = None if length is None else int(length)
        # the largest batch: S rows of int32 ids and counts, padded to the longest document's length
        width = self.length or (bucket_length(longest) if bucket else longest)
        check_allocation("batch_size", int(batch_size) * width, 4 + np.dtype(dtype).itemsize)
        self.corpus = corpus
        self.batch_size = int(batch_size)
        self.num_epochs = num_epochs
        self.drop_remainder = drop_remainder
        self.bucket = bucket
        self.start_epoch = int(start_epoch)
        self.dtype = dtype
        self.packed = check_bool("packed", packed)
        # a packed chunk's entries per step: a power of two, at least 1.25 S times the mean document's distinct
        # words (a sum of S documents rarely exceeds it), so that chunks of one run share one shape
        mean = float(np.mean(corpus.doc_unique_words))
        self._min_entries = bucket_length(int(np.ceil(1.25 * self.batch_size * mean)))
        self._entropy = seed_entropy(seed)
        self._cached_epoch = (None, None)

    @property
    def steps_per_epoch(self) -> int:
        """Batches per epoch."""
        d, s = self.corpus.num_docs, self.batch_size
        return d // s if self.drop_remainder else -(-d // s)

    def epoch_order(self, epoch: int) -> np.ndarray:
        """(D,) the permutation of the documents visited in ``epoch``."""
        epoch = int(epoch)
        if self._cached_epoch[0] != epoch:
            rng = np.random.default_rng(np.random.SeedSequence(self._entropy, spawn_key=(epoch,)))
            self._cached_epoch = (epoch, readonly(rng.permutation(self.corpus.num_docs)))
        return self._cached_epoch[1]

    def step_indices(self, t: int) -> np.ndarray:
        """(S,) int64 documents of update ``t`` (0-based, from epoch 0), -1 on padding rows."""
        epoch, b = divmod(int(t), self.steps_per_epoch)
        s = self.batch_size
        idx = self.epoch_order(epoch)[b * s : (b + 1) * s]
        if idx.size < s:
            idx = np.concatenate([idx, np.full(s - idx.size, -1, idx.dtype)])
        return idx

    def step_batch(self, t: int) -> BowBatch:
        """The minibatch of update ``t`` (S rows; see ``step_indices``)."""
        idx = self.step_indices(t)
        return self.corpus.batch(
            idx[idx >= 0], self.bucket, num_rows=self.batch_size, length=self.length, dtype=self.dtype
        )

    def host_batches(self, t0: int, n: int, length: Optional[int] = None) -> BowBatch | PackedBowBatch:
        """The minibatches of updates ``t0 .. t0 + n - 1`` stacked (n, S, L) for a ``lax.scan`` (L: the longest
        batch's, or ``length``), or with ``packed``, their entries (n, E) and lengths (n, S); ``num_epochs`` and
        ``start_epoch`` do not apply. A memory-mapped corpus's pages read for each step are released after it
        (``Corpus.release_pages``)."""
        steps = range(int(t0), int(t0) + int(n))
        if not self.packed:
            chunk = stack_batches([self._released(self.step_batch(t)) for t in steps], length)
        elif length is not None and check_int("length", length) < self.length:
            raise ArgumentError("length", f"length = {length} is shorter than the minibatcher's ({self.length})")
        else:
            chunk = self._packed([self.step_indices(t) for t in steps], length or self.length)
        return chunk

    def _released(self, batch: BowBatch) -> BowBatch:
        self.corpus.release_pages()  # a mapped corpus: the pages read stay in the page cache, not in this process
        return batch

    def _packed(self, indices: list, length: int) -> PackedBowBatch:
        steps = []
        for idx in indices:  # each step's entries copied, the mapped pages they read released (fault-around maps more)
            steps.append(self.corpus.entries(idx[idx >= 0]))
            self.corpus.release_pages()
        width = max(self._min_entries, bucket_length(max(ids.size for ids, _, _ in steps)))
        word_ids = np.zeros((len(steps), width), np.int32)
        counts = np.zeros((len(steps), width), self.dtype)
        lengths = np.zeros((len(steps), self.batch_size), np.int32)
        for t, (ids, n, lens) in enumerate(steps):
            word_ids[t, : ids.size], counts[t, : ids.size], lengths[t, : lens.size] = ids, n, lens
        return PackedBowBatch(word_ids, counts, lengths, int(length))

    def with_indices(self) -> Iterator[tuple[np.ndarray, BowBatch]]:
        """Yields ``(doc_indices, batch)``; ``doc_indices`` is (S,) int64 with -1 on padding rows."""
        for epoch in itertools.islice(itertools.count(self.start_epoch), self.num_epochs):
            for b in range(self.steps_per_epoch):
                t = epoch * self.steps_per_epoch + b
                yield self.step_indices(t), self.step_batch(t)

    def __iter__(self) -> Iterator[BowBatch]:
        return (batch for _, batch in self.with_indices())

    def chunks(self, steps: int) -> Iterator[BowBatch]:
        """Yields ``stack_batches`` of ``steps`` consecutive minibatches, (steps, S, L) each (the last may be shorter)."""
        check_int("steps", steps)
        it = iter(self)
        while True:
            group = list(itertools.islice(it, steps))
            if not group:
                return
            yield stack_batches(group)


def minibatches(
    corpus: Corpus,
    batch_size: int,
    seed,
    *,
    num_epochs: Optional[int] = None,
    drop_remainder: bool = False,
    bucket: bool = True,
) -> Iterator[BowBatch]:
    """An iterator over shuffled minibatches of S documents (see ``Minibatcher``).

    Examples:
      >>> from vijax.data import sample_lda_corpus
      >>> corpus = sample_lda_corpus(0, 10, 2, 30, doc_length_mean=5).corpus
      >>> [b.counts.shape[0] for b in minibatches(corpus, 4, seed=0, num_epochs=2)]
      [4, 4, 4, 4, 4, 4]
    """
    return iter(
        Minibatcher(corpus, batch_size, seed, num_epochs=num_epochs, drop_remainder=drop_remainder, bucket=bucket)
    )


def stack_batches(batches: Iterable[BowBatch] | Sequence[BowBatch], length: Optional[int] = None) -> BowBatch:
    """T ``BowBatch``es (same S and dtypes) stacked (T, S, L), padded to the longest batch's L or to ``length``."""
    batches = list(batches)
    if not batches:
        raise ValueError("stack_batches needs at least one batch")
    rows = {np.shape(b.word_ids)[0] for b in batches}
    if len(rows) != 1:
        raise ValueError(f"all batches must have the same batch size S, got {sorted(rows)}")
    longest = max(np.shape(b.word_ids)[1] for b in batches)
    length = longest if length is None else int(length)
    if length < longest:
        raise ArgumentError("length", f"length = {length} is shorter than a batch ({longest})")
    (s,) = rows
    word_ids = np.zeros((len(batches), s, length), np.int32)
    counts = np.zeros((len(batches), s, length), np.asarray(batches[0].counts).dtype)
    for t, b in enumerate(batches):
        n = np.shape(b.word_ids)[1]
        word_ids[t, :, :n] = np.asarray(b.word_ids)
        counts[t, :, :n] = np.asarray(b.counts)
    return BowBatch(word_ids, counts)


def subsample(key, num_data: int, batch_size: int) -> jax.Array:
    """(M,) int32 indices of a uniformly random M-subset of range(N), in random order, as a plate's
    ``subsample_size`` draws them. Where M is small beside N: the first M distinct of M + m
    uniform draws of range(N) with replacement (sequential sampling: each new index uniform among those not yet
    drawn; m well above the expected number of repeats, about M^2 / 2N). Where those draws hold fewer than M
    distinct indices (almost never), or M is not small beside N: the M largest of N uniform keys (a partial sort,
    O(N), where ``jax.random.choice(..., replace=False)`` sorts all N). Either way every M-subset is equally likely:
    the event that selects the way is the same for every relabelling of range(N).

    Examples:
        >>> idx = subsample(jax.random.PRNGKey(0), 10, 4)
        >>> idx.shape, len(set(idx.tolist()))
        ((4,), 4)
    """
    check_int("num_data", num_data)
    check_int("batch_size", batch_size, maximum=num_data)
    extra = 2 * -(-batch_size * batch_size // num_data) + 32  # twice M^2 / N, and 32: repeats stay below it
    if 2 * extra > batch_size:  # M not small beside N
        return _largest_keys(key, num_data, batch_size)
    return _first_distinct(key, num_data, batch_size, extra)


def _largest_keys(key, num_data: int, batch_size: int) -> jax.Array:
    return jax.lax.top_k(jax.random.uniform(key, (num_data,)), batch_size)[1]


def _first_distinct(key, num_data: int, batch_size: int, extra: int) -> jax.Array:
    """The first M distinct of M + ``extra`` uniform draws of range(N), or ``_largest_keys`` where they are fewer."""
    k_draws, k_keys = jax.random.split(key)
    draws = jax.random.randint(k_draws, (batch_size + extra,), 0, num_data, dtype=jnp.int32)
    number = jnp.arange(draws.shape[0], dtype=jnp.int32)
    firsts = jnp.full((num_data,), draws.shape[0], jnp.int32).at[draws].min(number)  # each index's first draw
    first = firsts[draws] == number  # the draw is its index's first
    where = jnp.nonzero(first, size=batch_size, fill_value=0)[0]  # the first M of them, in draw order
    return jax.lax.cond(
        jnp.sum(first) >= batch_size, lambda: draws[where], lambda: _largest_keys(k_keys, num_data, batch_size)
    )


FEISTEL_ROUNDS = 8  # rounds of ``shuffled_positions``'s Feistel network (4 leave small N's fixed points too likely)


def _mix32(x: jax.Array) -> jax.Array:
    """A 32-bit integer hash (xorshift-multiply rounds): each output bit depends on every input bit."""
    x = (x ^ (x >> 16)) * jnp.uint32(0x7FEB352D)
    x = (x ^ (x >> 15)) * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def shuffled_positions(key, positions: jax.Array, num_data: int) -> jax.Array:
    """Entries ``positions`` of a pseudo-random permutation of range(N) chosen by ``key``, in O(len(positions)):
    a ``FEISTEL_ROUNDS``-round Feistel network on the 2h bits with 4^h >= N (a bijection of range(4^h)),
    cycle-walked into range(N) (applied again while the value is >= N: fewer than 4 times on average), as
    TensorFlow's ``index_shuffle`` (Black and Rogaway 2002, "Ciphers with arbitrary finite domains").

    Examples:
        >>> p = shuffled_positions(jax.random.PRNGKey(0), jnp.arange(10), 10)
        >>> sorted(p.tolist()) == list(range(10)), p.tolist() == list(range(10))
        (True, False)

    Raises:
      ValueError: naming ``num_data`` (not in [1, 2^31)) or ``positions`` (concrete, and not in range(N)).
    """
    num_data = check_int("num_data", num_data, maximum=2**31 - 1)
    if not is_tracer(positions):  # traced (``epoch_batches``'s own, in range by construction): not checked
        enforce_value_checks([ids_in_range("positions", positions, num_data)])
    half = max(1, -(-max(num_data - 1, 1).bit_length() // 2))
    mask = jnp.uint32((1 << half) - 1)
    round_keys = jax.random.bits(key, (FEISTEL_ROUNDS,), jnp.uint32)

    def permute(x):
        def one_round(i, lr):
            left, right = lr
            return right, left ^ (_mix32(right ^ round_keys[i]) & mask)

        left, right = jax.lax.fori_loop(0, FEISTEL_ROUNDS, one_round, (x >> half, x & mask))
        return (left << half) | right

    n = jnp.uint32(num_data)
    walked = jax.lax.while_loop(
        lambda y: jnp.any(y >= n), lambda y: jnp.where(y >= n, permute(y), y), permute(positions.astype(jnp.uint32))
    )
    return walked.astype(jnp.int32)


def epoch_batches(num_data: int, batch_size: int, key) -> tuple[Callable, int]:
    """``(key, t) -> indices``: minibatch t of a fresh random permutation every pass of floor(N / M) minibatches.

    The device-side counterpart of :class:`Minibatcher`, jit-able with a traced t. Pass p uses the permutation
    of ``fold_in(key, p)`` (``shuffled_positions``: O(M) a minibatch, where a full permutation sorts N keys); the
    returned function ignores its own ``key`` argument. Each point is in a minibatch with probability M / N, and
    in exactly one minibatch of a pass.

    Returns:
      (batch_fn, steps_per_pass) with ``batch_fn(key, t)`` an int32 array (M,); ValueError unless 1 <= M <= N.

    Examples:
        >>> batch_fn, spp = epoch_batches(10, 3, jax.random.PRNGKey(0))
        >>> spp, batch_fn(None, 0).shape
        (3, (3,))
    """
    check_int("num_data", num_data, maximum=2**31 - 1)
    check_int("batch_size", batch_size, maximum=num_data)
    spp = num_data // batch_size

    def batch_fn(_key, t):
        positions = (t % spp) * batch_size + jnp.arange(batch_size)
        return shuffled_positions(jax.random.fold_in(key, t // spp), positions, num_data)

    return batch_fn, spp
