"""The N/S multipliers that every stochastic algorithm for conjugate models shares (the batch size
itself is ``vijax._validate.batch_size``)."""

from __future__ import annotations

import jax.numpy as jnp

from vijax.types import Array


def data_scale(count: Array, s: int, num_data: int, ramp: bool):
    """(N_t / S, N / S): the multiplier of a minibatch's statistics in the update and the one that
    makes its ELBO an estimate of the full data's. N_t = N, or with ``ramp``
    N_t = min((t + 1) S, N) over the first sweep (Hoffman and Blei 2015, Structured stochastic
    variational inference, Algorithm 1 and §2.6)."""
    full = num_data / s
    if not ramp:
        return full, full
    n_t = jnp.minimum((count.astype(jnp.float32) + 1.0) * s, float(num_data))
    return n_t / s, full


__all__ = ["data_scale"]
