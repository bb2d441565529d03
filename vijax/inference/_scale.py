"""The N/S multipliers of the stochastic algorithms: S is the batch's leading size or, for a
``PaddedBatchModel`` (``present_rows(batch)``, a bool per row), its number of rows with data (traced).
"""

from __future__ import annotations

import jax.numpy as jnp

from vijax._validate import ArgumentError, ValueCheck, batch_size, enforce_value_checks, implements, is_tracer
from vijax.types import Array, PyTree
from vijax.models import PaddedBatchModel


def present_rows(model, batch: PyTree):
    """``model.present_rows(batch)`` ((S,) bool) where the model defines it, else None."""
    return jnp.asarray(model.present_rows(batch)) if implements(model, PaddedBatchModel) else None


def num_present(model, batch: PyTree):
    """S: the number of ``present_rows`` (int32) where the model defines them, else the batch size."""
    rows = present_rows(model, batch)
    return batch_size(batch) if rows is None else jnp.sum(rows.astype(jnp.int32))


def check_num_data(num_data: int, model, batch: PyTree, count=None) -> None:
    """Raises ValueError when the batch holds more data points than ``num_data`` = N (each would be
    weighted by N / S < 1): at trace time for a static S, else a value check of the step."""
    rows = present_rows(model, batch)
    if rows is not None and rows.shape[0] <= num_data:
        return
    if rows is None:
        s = batch_size(batch)
        if s > num_data:
            raise ArgumentError(
                "num_data",
                f"num_data = {num_data} is smaller than the batch's {s} data points (its leading size): "
                "num_data is N, the number of data points the minibatches are drawn from",
            )
        return
    values = jnp.cumsum(rows.astype(jnp.int32))  # the ordinal of each present row
    check = ValueCheck(
        f"num_data = {num_data} is smaller than the batch's number of rows with data: data row",
        values,
        rows & (values > num_data),
        "is beyond num_data (N, the number of data points the minibatches are drawn from)",
    )
    enforce_value_checks([check], count)


def check_whole_data(algorithm: str, batch: PyTree, num_data) -> None:
    """Raises ValueError unless the batch holds ``num_data`` data points (where given)."""
    if num_data is not None and batch_size(batch) != num_data:
        raise ValueError(
            f"{algorithm} takes the whole data set at every step: the batch has {batch_size(batch)} "
            f"data points but num_data={num_data}"
        )


def data_scale(count: Array, present, num_data: int, ramp: bool, dtype=None):
    """(N_t / S, N / S): the multipliers of a minibatch's statistics in the update and in the ELBO.
    N_t = N, or with ``ramp`` min((t + 1) S, N) (Hoffman and Blei 2015, Algorithm 1 and §2.6).
    A traced ``present`` = S gives arrays of ``dtype``, N / max(S, 1)."""
    if is_tracer(present) or hasattr(present, "shape"):
        full = jnp.asarray(num_data, dtype) / jnp.maximum(jnp.asarray(present), 1).astype(dtype)
    else:
        full = num_data / present
    if not ramp:
        return full, full
    t = count.astype(jnp.float32 if dtype is None else dtype)
    return jnp.minimum(t + 1.0, full), full


def step_size(rho, present):
    """rho_t, or 0 for a batch that holds no data point (the state is kept exactly)."""
    if is_tracer(present) or hasattr(present, "shape"):
        return jnp.where(jnp.asarray(present) > 0, rho, jnp.zeros_like(rho))
    return rho
