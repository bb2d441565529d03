"""The N/S multipliers that every stochastic algorithm for conjugate models shares.

S is the number of data points a minibatch holds: the batch's leading size (``batch_size``,
static under jit), or, for a model that defines ``present_rows(batch)`` (the optional hook of
``ConditionallyConjugateModel``: a bool per row), the number of rows that hold data. A
``Minibatcher`` fills a batch with empty rows (all counts 0) when the corpus is smaller than the
batch or at the end of an epoch; LDA counts only its documents with a token, so that a padded
batch gives the update and ELBO estimate of the same batch without its padding (S is then a traced
scalar: the step still compiles once per shape).
"""

from __future__ import annotations

import jax.numpy as jnp

from vijax._validate import ArgumentError, ValueCheck, batch_size, enforce_value_checks, implements, is_tracer
from vijax.types import Array, PyTree
from vijax.models import PaddedBatchModel


def present_rows(model, batch: PyTree):
    """``model.present_rows(batch)`` ((S,) bool: the rows that hold a data point) where the model
    defines it, else None (every row does)."""
    return jnp.asarray(model.present_rows(batch)) if implements(model, PaddedBatchModel) else None


def num_present(model, batch: PyTree):
    """S: the number of ``present_rows`` (an int32 scalar, traced under jit) where the model
    defines them, else the batch's leading size (a static int)."""
    rows = present_rows(model, batch)
    return batch_size(batch) if rows is None else jnp.sum(rows.astype(jnp.int32))


def check_num_data(num_data: int, model, batch: PyTree, count=None) -> None:
    """Raises ValueError when the batch holds more data points than ``num_data`` = N, which would
    weight each of them by N / S < 1 (the likelihood silently down-weighted).

    For a static S (every row a data point) the error comes at trace time; for a model with
    ``present_rows`` S may be traced: the check is then a value check of the step
    (``enforce_value_checks``, with the step number ``count + 1``), the rows past the N-th present
    one being its bad entries. A padded batch with at most N rows of data (a corpus smaller than
    the batch) passes. A batch of at most N rows cannot hold more than N present ones: the value
    check is left out of the step (nothing for it to find, and nothing to compile).
    """
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
    bad = rows & (values > num_data)
    enforce_value_checks(
        [
            ValueCheck(
                f"num_data = {num_data} is smaller than the batch's number of rows with data: data row",
                values,
                bad,
                "is beyond num_data (N, the number of data points the minibatches are drawn from)",
            )
        ],
        count,
    )


def data_scale(count: Array, present, num_data: int, ramp: bool, dtype=None):
    """(N_t / S, N / S): the multiplier of a minibatch's statistics in the update and the one that
    makes its ELBO an estimate of the full data's. N_t = N, or with ``ramp``
    N_t = min((t + 1) S, N) over the first sweep (Hoffman and Blei 2015, Structured stochastic
    variational inference, Algorithm 1 and §2.6), so that N_t / S = min(t + 1, N / S).

    ``present`` is S (``num_present``): a static int gives Python floats; a traced count gives
    arrays of ``dtype`` (q's float dtype), N / max(S, 1) (a batch without data has zero
    statistics whatever their multiplier; its step is not taken, see ``step_size``)."""
    if is_tracer(present) or hasattr(present, "shape"):
        full = jnp.asarray(num_data, dtype) / jnp.maximum(jnp.asarray(present), 1).astype(dtype)
    else:
        full = num_data / present
    if not ramp:
        return full, full
    t = count.astype(jnp.float32 if dtype is None else dtype)
    return jnp.minimum(t + 1.0, full), full


def step_size(rho, present):
    """rho_t, or 0 for a batch that holds no data point (a traced ``present`` of 0): no information,
    so no step (the state is kept exactly: (1 - 0) lambda + 0 lambda_hat = lambda)."""
    if is_tracer(present) or hasattr(present, "shape"):
        return jnp.where(jnp.asarray(present) > 0, rho, jnp.zeros_like(rho))
    return rho


__all__ = ["check_num_data", "data_scale", "num_present", "present_rows", "step_size"]
