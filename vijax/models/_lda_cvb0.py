"""The CVB0 local step of :class:`vijax.models.LDA` (Asuncion et al. 2009, eq. 5; Hoffman & Blei 2015,
§2.5), the tile sizes of LDA's E-steps, and the one-kernel ratio and log of the mean-field E-step's tile.

The E-steps pack documents, sorted by length, in chunks of ``TILE_WIDTH`` slots whole into tiles
of at least ``estep_slots(tile_slots)`` slots (:func:`vijax.solvers.by_length_tiles`): one
compiled E-step for any mix of lengths. The tiles run one after another; on a CPU small tiles
(``CPU_SLOTS``) keep a tile's arrays in cache and let each tile stop with its own documents, while
on an accelerator every tile's loop is a string of small kernel launches, so there a tile holds
a whole minibatch of typical size (``ACCELERATOR_SLOTS``: 256 documents of up to 128 distinct
words in one tile). A document's result does not depend on its tile (each row stops on its own).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from vijax.expfam import digamma
from vijax.models._base import entropy_of_probs
from vijax.solvers import by_length_tiles, iterate_per_row, tile_spread, tile_sum
from vijax.types import Array

TILE_WIDTH = 32
CPU_SLOTS = 512
ACCELERATOR_SLOTS = 32768


def estep_slots(tile_slots: int | None) -> int:
    """The least number of slots per E-step tile: ``tile_slots`` where given, else by the
    platform the program is traced for (JAX's default backend): ``CPU_SLOTS`` on a CPU,
    ``ACCELERATOR_SLOTS`` elsewhere."""
    if tile_slots is not None:
        return int(tile_slots)
    return CPU_SLOTS if jax.default_backend() == "cpu" else ACCELERATOR_SLOTS


def cvb0_estep(
    log_beta: Array, ids: Array, n: Array, alpha: Array, tol: float, max_sweeps: int, slots: int = CPU_SLOTS
) -> tuple[Array, Array, Array]:
    """CVB0 for a batch (see :class:`vijax.models.LDA`), in the length-sorted tiles of
    :meth:`vijax.models.LDA._meanfield`; returns gamma = alpha + N_d (S, K), the statistics c (K, V) and the
    local terms (the mean-field ELBO terms at phi = g, gamma). Each document stops after the
    first sweep that changes N_d by a mean absolute amount below ``tol``, or after
    ``max_sweeps`` sweeps. ``slots``: the least number of slots per tile."""
    k, v = log_beta.shape
    dt = log_beta.dtype
    log_b = (log_beta - jnp.max(log_beta, axis=0, keepdims=True)).T  # (V, K); the shift cancels in g

    def fit_tile(tile, acc):
        stats, term = acc
        ids_t, n_t = tile.ids, tile.n
        logb = jnp.take(log_b, ids_t, axis=0)  # (chunks, width, K)
        present = (n_t > 0).astype(dt)[..., None]  # a padding slot has no own token to remove

        def topic_counts(g):
            return tile_sum(tile, jnp.sum(n_t[..., None] * g, axis=1))  # (documents, K)

        def update(g):
            others = jnp.maximum(tile_spread(tile, topic_counts(g))[:, None, :] - present * g, 0.0)  # N_dk^{-dw}
            return jax.nn.softmax(jnp.log(alpha + others) + logb, axis=-1)

        g = iterate_per_row(update, topic_counts, jax.nn.softmax(logb, axis=-1), tol, max_sweeps, groups=tile.row)
        gamma = alpha + topic_counts(g)
        stats = stats.at[ids_t.reshape(-1)].add((n_t[..., None] * g).reshape(-1, k))
        e_log_theta = digamma(gamma) - digamma(jnp.sum(gamma, axis=-1, keepdims=True))
        elt = tile_spread(tile, e_log_theta)[:, None, :]
        term = term + jnp.sum(n_t * (jnp.sum(g * elt, axis=-1) + entropy_of_probs(g)))
        return gamma, (stats, term)

    gamma, (stats, term) = by_length_tiles(
        ids, n, k, fit_tile, (jnp.zeros((v, k), dt), jnp.zeros((), dt)), slots, TILE_WIDTH
    )
    return gamma, stats.T, term


def ratio_and_log(n: Array, z: Array) -> tuple[Array, Array]:
    """(n / z, n log z), computed together in one elementwise kernel (one array, held back from
    fusion with its users by an optimization barrier; the values are those of the two expressions).
    Fused into the sum that reads it, the log made XLA's CPU compiler unroll that reduction with a
    copy of the log's code per element (the step's largest kernel; such a sum compiled alone took
    about 0.2 s, an elementwise log or a plain sum about 0.03 s, on a loaded 2-core CPU)."""
    both = jax.lax.optimization_barrier(jnp.stack([n / z, n * jnp.log(z)]))
    return both[0], both[1]
