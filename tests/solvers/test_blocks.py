"""Rows of unequal length packed into tiles of one fixed shape (``vijax.solvers.by_length_tiles``,
``tile_shape``, ``tile_sum``, ``tile_spread``): every row of a batch of very unequal rows
(interleaved zero slots, empty rows) is fitted exactly once, whole in one tile, with its output in
the batch's order and the accumulator summed over real rows only; and the tile function is traced
once. LDA's use: tests/models/test_lda.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.solvers import by_length_tiles, tile_shape, tile_spread, tile_sum
from vijax.testing import primitive_counts


@pytest.mark.parametrize("length", [1, 20, 32, 33, 100, 128, 256, 1000, 2048])
def test_tile_shape_holds_any_row_and_the_slot_budget(length):
    r, w, m = tile_shape(length, 512, 32)
    assert w == 32 and r * w >= max(length, 512)
    assert r * w < max(length, 512) + 32
    assert 8 <= m <= r


def _batch(lengths, length, seed=0):
    r = np.random.default_rng(seed)
    s = len(lengths)
    ids = r.integers(0, 50, (s, length))
    n = np.zeros((s, length))
    for d, m in enumerate(lengths):
        slots = np.sort(r.choice(m, max(m // 2, min(m, 1)), replace=False)) if m else []
        n[d, slots] = r.integers(1, 4, len(slots))
        if m:
            n[d, m - 1] = 1.0  # the row's length is m
    return ids, n


@pytest.mark.parametrize(
    "lengths", [[220, 3, 40, 60, 7, 0, 25, 12, 50, 5, 33, 100, 1], [0, 0, 0], [256] * 5, [1] * 40 + [0] * 3]
)
def test_every_row_is_fitted_once_in_the_batch_order(lengths):
    ids, n = _batch(lengths, 256)
    traces = []

    def fit_tile(tile, acc):
        traces.append(tile.ids.shape)
        m = tile.member.shape[0]
        rows = jnp.stack(
            [
                tile_sum(tile, jnp.sum(tile.n, 1)),
                tile_sum(tile, jnp.sum(tile.ids * tile.n, 1)),
                tile_sum(tile, jnp.ones(tile.n.shape[0])),
            ],
            1,
        )  # counts, id-weighted counts, chunks
        spread = tile_spread(tile, rows[:, 0])  # each chunk sees its row's total
        check = jnp.sum(jnp.where(tile.row < m, (spread - rows[jnp.minimum(tile.row, m - 1), 0]) ** 2, 0.0))
        return rows, acc + jnp.sum(tile.n) + check

    out, total = jax.jit(lambda i, c: by_length_tiles(i, c, 3, fit_tile, jnp.zeros(()), 512, 32))(
        jnp.asarray(ids), jnp.asarray(n)
    )
    np.testing.assert_allclose(out[:, 0], n.sum(1))
    np.testing.assert_allclose(out[:, 1], (ids * n).sum(1))
    np.testing.assert_allclose(out[:, 2], [-(-m // 32) for m in lengths])  # a row's chunks: ceil(length / 32)
    np.testing.assert_allclose(total, n.sum())
    assert traces == [(16, 32)]  # one tile shape, traced once


def test_the_tiles_are_one_loop_with_no_copy_of_the_batch():
    """The program's structure, which sets what XLA compiles: one loop (the tiles'; the chunks'
    rows found by a comparison, not by searchsorted's loop), one sort (the lengths), no sorted
    copy of the batch and no scatter back to the batch's order (each tile writes its rows in
    place: one scatter)."""
    ids, n = _batch([220, 3, 40, 0, 25], 256)

    def fit_tile(tile, acc):
        return tile_sum(tile, jnp.sum(tile.n, 1))[:, None], acc + jnp.sum(tile.n)

    counts = primitive_counts(
        lambda i, c: by_length_tiles(i, c, 1, fit_tile, jnp.zeros(()), 512, 32), jnp.asarray(ids), jnp.asarray(n)
    )
    assert counts["while"] == 1 and counts["sort"] == 1 and counts["scatter"] == 1, counts
    assert "scan" not in counts and "dynamic_update_slice" not in counts, counts  # searchsorted's loop; the copy
    assert "iota" not in counts, counts  # index vectors are constants, not kernels of their own
    assert counts["gather"] <= 6, counts  # the tile's chunks, counts and rows: no sorted (S, L) copy
