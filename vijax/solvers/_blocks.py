"""Rows of unequal length, processed in blocks padded only to their own length.

A minibatch of bag-of-words documents (or of sequences) comes zero-padded to its longest row.
When a per-row computation iterates (a local step's fixed point), padding every row to that
length makes one long row set the cost of all. Here the rows are sorted by length, each is
assigned the smallest of a few static widths (:func:`length_buckets`) that holds it, and the rows
of one width run in blocks of :func:`block_size` rows at that width (:func:`by_length_blocks`):
a handful of compiled shapes, and a cost close to that of the rows' own lengths. Short rows share
a block (and the loop's per-iteration overhead); long rows, whose iterations cost more than the
overhead, do not wait for each other's slowest iteration counts.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from vijax.types import Array


def length_buckets(length: int, minimum: int = 32) -> tuple[int, ...]:
    """The static widths at which :func:`by_length_blocks` processes a block of rows padded to
    ``length``: the powers of two p and 1.5 p from max(``minimum``, length / 16) up to 3/4 of
    ``length``, then ``length``.

    Padding a block to its bucket wastes at most a third of its slots; the floor keeps the number
    of compiled loops small (each bucket compiles the block's loop once), and short batches, where
    padding costs little, run as one bucket.

    Examples:
        >>> length_buckets(128)
        (32, 48, 64, 96, 128)
        >>> length_buckets(2048)
        (128, 192, 256, 384, 512, 768, 1024, 1536, 2048)
        >>> length_buckets(20)
        (20,)
    """
    p = max(int(minimum), 1 << max(int(length) // 16 - 1, 0).bit_length())
    out = []
    while p < length:
        out += [x for x in (p, p + p // 2) if 4 * x <= 3 * length]
        p *= 2
    return tuple(out) + (int(length),)


def block_size(width: int, slots: int, max_block: int) -> int:
    """Rows per block at padded width ``width``: ``slots // width`` clipped to [1, max_block].

    Examples:
        >>> block_size(64, 512, 8), block_size(96, 512, 8), block_size(1024, 512, 8)
        (8, 5, 1)
    """
    return max(1, min(int(max_block), int(slots) // int(width)))


def by_length_blocks(ids: Array, n: Array, k: int, fit_block: Callable, acc0, slots: int, max_block: int):
    """Runs ``fit_block(ids_b, n_b, acc) -> (out_b, acc)`` over blocks of rows sorted by length;
    returns the per-row outputs (S, k) in the batch's order and the final acc.

    The length of a row is one past its last slot with a nonzero count, so slots beyond it
    (count 0) are dropped exactly. A row goes to the smallest width of ``length_buckets(L)``
    holding it; after sorting, the rows of one width are contiguous, and run in blocks of
    ``block_size(width, slots, max_block)`` rows: one ``fori_loop`` with dynamic bounds per
    width. The last block of a width may reach into the next width's rows: those enter it
    with all counts zero (``fit_block`` must let them add nothing to acc, as zero counts do in
    sums of statistics) and their output is not written, so every row is fitted once, at its own
    width.

    Args:
      ids: (S, L) int, e.g. the word ids of each slot.
      n: (S, L) float counts, 0 on padding slots; the outputs have its dtype.
      k: the width of a row's output.
      fit_block: (ids_b (B, w), n_b (B, w), acc) -> (out_b (B, k), acc), rows independent.
      acc0: the initial accumulator (any pytree, e.g. statistics summed over rows).
      slots: the budget of padded slots per block (B * w), see :func:`block_size`.
      max_block: the most rows per block.

    Returns:
      (out (S, k), acc).
    """
    s, l = ids.shape
    dt = n.dtype
    buckets = length_buckets(l)
    sizes = [min(block_size(w, slots, max_block), s) for w in buckets]
    pad = max(sizes)
    lengths = jnp.max(jnp.where(n > 0, jnp.arange(1, l + 1, dtype=jnp.int32), 0), axis=1)  # (S,)
    order = jnp.argsort(lengths, stable=True)
    ids_s = jnp.pad(jnp.take(ids, order, axis=0), ((0, pad), (0, 0)))
    n_s = jnp.pad(jnp.take(n, order, axis=0), ((0, pad), (0, 0)))
    which = jnp.searchsorted(jnp.asarray(buckets, jnp.int32), jnp.take(lengths, order), side="left")  # ascending

    carry = (jnp.zeros((s + pad, k), dt), acc0)
    for j, (width, block) in enumerate(zip(buckets, sizes)):
        lo = jnp.searchsorted(which, j, side="left")
        hi = jnp.searchsorted(which, j, side="right")

        def body(c, carry, width=width, block=block, lo=lo, hi=hi):
            gam, acc = carry
            start = (lo + c * block).astype(jnp.int32)
            inside = (start + jnp.arange(block)) < hi  # (block,): rows of this width
            n_b = jnp.where(inside[:, None], jax.lax.dynamic_slice(n_s, (start, jnp.int32(0)), (block, width)), 0)
            gamma, acc = fit_block(jax.lax.dynamic_slice(ids_s, (start, jnp.int32(0)), (block, width)), n_b, acc)
            gamma = jnp.where(inside[:, None], gamma, jax.lax.dynamic_slice(gam, (start, jnp.int32(0)), (block, k)))
            return jax.lax.dynamic_update_slice(gam, gamma, (start, jnp.int32(0))), acc

        carry = jax.lax.fori_loop(0, (hi - lo + block - 1) // block, body, carry)
    gam, acc = carry
    return jnp.zeros((s, k), dt).at[order].set(gam[:s]), acc


__all__ = ["block_size", "by_length_blocks", "length_buckets"]
