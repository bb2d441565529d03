"""Rows of unequal length packed into tiles of one fixed shape, so that an iteration over a padded
batch costs what the rows' own lengths cost: each row cut into chunks of ``width`` slots, the rows,
sorted by length, packed whole into tiles of R chunks (:func:`tile_shape`) that a ``while_loop`` runs
in turn (:func:`by_length_tiles`); :func:`tile_sum` and :func:`tile_spread` map chunks to rows and back.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vijax.types import Array


class Tile(NamedTuple):
    """One tile of :func:`by_length_tiles`: ``ids`` and ``n`` (R, W) hold R chunks of W slots,
    ``row`` (R,) int32 the tile-local row (0 .. M-1) each chunk belongs to (M on unused chunks,
    whose counts are 0), and ``member`` (M, R) the one-hot matrix ``member[j, c] = (row[c] == j)``."""

    ids: Array
    n: Array
    row: Array
    member: Array


def tile_sum(tile: Tile, x: Array) -> Array:
    """Sums per-chunk values ``x`` (R, ...) over the chunks of each tile row: (M, ...)."""
    return jnp.tensordot(tile.member.astype(x.dtype), x, axes=1)


def tile_spread(tile: Tile, x: Array) -> Array:
    """Per-row values ``x`` (M, ...) repeated on each of the row's chunks: (R, ...); unused chunks
    get the last row's (their counts are zero)."""
    return jnp.take(x, tile.row, axis=0, mode="clip")


def tile_shape(length: int, slots: int = 512, width: int = 32) -> tuple[int, int, int]:
    """(R, W, M) for rows padded to ``length``: W = ``width``, R = max(``slots``, ``length`` rounded up
    to W) // W chunks per tile (any one row fits), M = min(R, max(8, R // 2)) rows per tile at most.

    Examples:
        >>> tile_shape(128), tile_shape(2048), tile_shape(20)
        ((16, 32, 8), (64, 32, 32), (16, 32, 8))
    """
    width = int(width)
    padded = -(-int(length) // width) * width
    r = max(int(slots), padded) // width
    return r, width, min(r, max(8, r // 2))


def by_length_tiles(ids: Array, n: Array, k: int, fit_tile: Callable, acc0, slots: int = 512, width: int = 32):
    """Runs ``fit_tile(tile, acc) -> (out (M, k), acc)`` over the tiles of rows sorted (stably) by length,
    a row's length being one past its last slot with a nonzero count; returns the per-row outputs (S, k)
    in the batch's order and the final acc.

    Args:
      ids: (S, L) int, e.g. the word ids of each slot.
      n: (S, L) float counts, 0 on padding slots; the outputs have its dtype.
      k: the width of a row's output.
      fit_tile: (Tile, acc) -> (out (M, k), acc); rows independent, zero-count chunks adding nothing.
      acc0: the initial accumulator (any pytree).
      slots: the least number of slots per tile (R * W).
      width: W, the chunk width.
    """
    s, l = ids.shape
    dt = n.dtype
    r, w, m = tile_shape(l, slots, width)
    per_row = -(-l // w)  # chunks of a padded row
    lengths = jnp.max(jnp.where(n > 0, np.arange(1, l + 1, dtype=np.int32), 0), axis=-1)  # (S,)
    _, order = jax.lax.sort((lengths, np.arange(s, dtype=np.int32)), num_keys=1, is_stable=True)
    pad_cols = ((0, 0), (0, per_row * w - l))
    # chunk c of row d: d * per_row + c, in the batch's own order (no sorted copy of the batch)
    ids_c = jnp.pad(ids, pad_cols).reshape(s * per_row, w)
    n_c = jnp.pad(n, pad_cols).reshape(s * per_row, w)
    chunks = (jnp.take(lengths, order, mode="clip") + (w - 1)) // w  # (S,) chunks per sorted row
    # first chunk of each sorted row in the packed stream; past the last row, a value no tile reaches
    never = jnp.full((m,), jnp.iinfo(jnp.int32).max // 2, jnp.int32)
    first = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(chunks, dtype=jnp.int32), never])
    local = np.arange(r, dtype=np.int32)  # chunks of a tile
    rows = np.arange(m, dtype=np.int32)  # rows of a tile

    def body(carry):
        start, out, acc = carry
        bounds = jax.lax.dynamic_slice(first, (start,), (m + 1,)) - first[start]  # (M + 1,)
        count = jnp.sum(bounds[1:] <= r).astype(jnp.int32)  # rows that fit (>= 1: any row fits a tile)
        used = bounds[count]
        # (R,) row of each chunk: how many rows end at or before it (searchsorted, side="right")
        row = jnp.sum(bounds[None, 1:] <= local[:, None], axis=1, dtype=jnp.int32)
        valid = local < used
        # the tile's rows in the batch (clip: past the last row, a row no valid chunk or kept output uses)
        batch_row = jnp.take(order, start + rows, mode="clip")  # (M,)
        src = jnp.take(batch_row, row, mode="clip") * per_row + (local - jnp.take(bounds, row, mode="clip"))
        src = jnp.where(valid, src, 0)
        n_t = jnp.where(valid[:, None], jnp.take(n_c, src, axis=0, mode="clip"), 0).astype(dt)
        row = jnp.where(valid, row, m)
        member = (row[None, :] == rows[:, None]).astype(dt)
        out_t, acc = fit_tile(Tile(jnp.take(ids_c, src, axis=0, mode="clip"), n_t, row, member), acc)
        # each kept row's output written at its row of the batch; the others (index S) dropped
        out = out.at[jnp.where(rows < count, batch_row, s)].set(out_t, mode="drop")
        return start + count, out, acc

    carry = (jnp.zeros((), jnp.int32), jnp.zeros((s, k), dt), acc0)
    _, out, acc = jax.lax.while_loop(lambda c: c[0] < s, body, carry)
    return out, acc
