"""Length bucketing and blocks sized by width (``vijax.solvers.length_buckets``, ``block_size``,
``by_length_blocks``): the buckets' bounds, and that every row of a batch of very unequal rows
(interleaved zero slots, empty rows) is fitted exactly once, at a width that holds it, with its
output in the batch's order and the accumulator summed over real rows only. LDA's use:
tests/models/test_lda.py."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.solvers import block_size, by_length_blocks, length_buckets


@pytest.mark.parametrize("length", [1, 20, 32, 33, 100, 128, 256, 1000, 2048])
def test_length_buckets_bound_the_padding(length):
    buckets = length_buckets(length)
    assert buckets[-1] == length
    assert list(buckets) == sorted(set(buckets))
    assert all(4 * b <= 3 * length for b in buckets[:-1])
    # below the last bucket (the batch's own length), a row of length m goes to the smallest
    # bucket >= m, which wastes at most a third of it
    for m in range(buckets[0], buckets[-2] + 1 if len(buckets) > 1 else 0):
        width = next(b for b in buckets if b >= m)
        assert width <= 1.5 * m + 1


def test_block_size_is_clipped():
    assert block_size(64, 512, 8) == 8
    assert block_size(100, 512, 8) == 5
    assert block_size(4096, 512, 8) == 1
    assert block_size(8, 512, 8) == 8


def test_every_row_is_fitted_once_in_the_batch_order():
    r = np.random.default_rng(0)
    s, length, k = 13, 256, 3
    lengths = [220, 3, 40, 60, 7, 0, 25, 12, 50, 5, 33, 100, 1]
    ids = r.integers(0, 50, (s, length))
    n = np.zeros((s, length))
    for d, m in enumerate(lengths):
        slots = np.sort(r.choice(m, max(m // 2, min(m, 1)), replace=False)) if m else []
        n[d, slots] = r.integers(1, 4, len(slots))
        if m:
            n[d, m - 1] = 1.0  # the row's length is m
    widths = []

    def fit_block(ids_b, n_b, acc):
        widths.append(ids_b.shape[1])
        row = jnp.stack([jnp.sum(n_b, 1), jnp.sum(ids_b * n_b, 1), jnp.full((n_b.shape[0],), ids_b.shape[1], n_b.dtype)], 1)
        return row, acc + jnp.sum(n_b)

    out, total = jax.jit(lambda i, c: by_length_blocks(i, c, k, fit_block, jnp.zeros(()), 512, 8))(
        jnp.asarray(ids), jnp.asarray(n))
    np.testing.assert_allclose(out[:, 0], n.sum(1))
    np.testing.assert_allclose(out[:, 1], (ids * n).sum(1))
    np.testing.assert_allclose(total, n.sum())
    buckets = length_buckets(length)
    assert len(set(widths)) == len(buckets) > 3  # one compiled loop per width
    for d, m in enumerate(lengths):  # each row at the smallest width that holds it
        assert out[d, 2] == next(b for b in buckets if b >= max(m, 1))
