"""The parameters and data of the HMMs (``vijax.models.hmm``) and the checks of the parameters, shared
by the models and ``vijax.data.sample_hmm``."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from vijax._validate import (
    ArgumentError,
    check_float_dtype,
    finite_nonnegative,
    finite_values,
    values_in_interval,
    values_match,
)
from vijax.types import Array


class HMMData(NamedTuple):
    """Padded sequences: ``obs`` (B, T) ints or (B, T, D) floats, ``lengths`` (B,) ints in [1, T]."""

    obs: Array
    lengths: Array


class CategoricalEmissions(NamedTuple):
    probs: Array  # (K, V), rows sum to 1


class GaussianEmissions(NamedTuple):
    means: Array  # (K, D)
    variances: Array  # (K, D), > 0


class HMMParams(NamedTuple):
    initial_probs: Array  # (K,)
    transition_matrix: Array  # (K, K), rows: previous state
    emissions: Any  # CategoricalEmissions or GaussianEmissions


_SUM_RTOL = 5e-5  # a probability vector must sum to 1 within 2 * _SUM_RTOL = 1e-4 (values_match's scale)


def _field(name: str, value, shape: tuple, what: str = "") -> Array:
    """``value`` as an array after the checks that cost nothing at run time (also of a tracer): float32
    or float64 (half precision refused, as for a model's ``dtype``), and ``shape``."""
    a = value if hasattr(value, "dtype") and hasattr(value, "shape") else np.asarray(value)
    check_float_dtype(a.dtype, name)
    if tuple(a.shape) != tuple(shape):
        raise ArgumentError(name, f"{name} must have shape {tuple(shape)}{what}, got {tuple(a.shape)}")
    return jnp.asarray(a)


def _probability_checks(name: str, p: Array) -> list:
    return [
        finite_nonnegative(name, p),
        values_match(
            f"{name} row sum" if p.ndim > 1 else f"{name} sum",
            jnp.sum(p, -1),
            jnp.ones((), p.dtype),
            "1 (within 1e-4: probabilities sum to 1)",
            rtol=_SUM_RTOL,
        ),
    ]


def param_checks(
    params, num_states: int | None = None, emissions_type=None, emission_width: int | None = None, emission_checks=None
) -> list:
    """The checks of HMM parameters, shared by the models and ``vijax.data.sample_hmm``. Raises
    ValueError at once (also for traced parameters) naming the field for what costs nothing at run time:
    not an ``HMMParams``, emissions of another type, a dtype that is not float32 or float64,
    a shape that does not fit K = ``num_states`` (default: from ``params.initial_probs``) and the
    emission width (V symbols or D dimensions; default: from the emissions). Returns the checks of the
    values (``ValueCheck``s, for ``enforce_value_checks``): probabilities finite, >= 0 and summing to 1
    (pi, each row of A and of B), Gaussian means finite and variances finite and at least the smallest
    normal number of their dtype (1 / sigma^2 finite). Emissions of another type (a component's own
    ``point_type``) get the probability checks of pi and A, plus ``emission_checks(emissions, K)``."""
    if not isinstance(params, HMMParams):
        raise ArgumentError(
            "params",
            f"params must be HMMParams(initial_probs, transition_matrix, emissions), got {type(params).__name__}",
        )
    kinds = (CategoricalEmissions, GaussianEmissions) if emissions_type is None else (emissions_type,)
    em = params.emissions
    if not isinstance(em, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise ArgumentError("params", f"params.emissions must be {names}, got {type(em).__name__}")
    if num_states is None:
        shape = np.shape(params.initial_probs)
        if len(shape) != 1:
            raise ArgumentError("params", f"params.initial_probs must have shape (K,), got {shape}")
        pi = _field("params.initial_probs", params.initial_probs, shape)
        k, from_ = shape[0], " (K, from params.initial_probs)"
    else:
        k, from_ = num_states, ""
        pi = _field("params.initial_probs", params.initial_probs, (k,), " (K = num_states)")
    trans = _field("params.transition_matrix", params.transition_matrix, (k, k), from_)
    checks = _probability_checks("params.initial_probs", pi) + _probability_checks("params.transition_matrix", trans)
    if not isinstance(em, (CategoricalEmissions, GaussianEmissions)):
        return checks + list(emission_checks(em, k) if emission_checks else [])
    if isinstance(em, CategoricalEmissions):
        width = np.shape(em.probs)[-1:] if emission_width is None else (emission_width,)
        probs = _field("params.emissions.probs", em.probs, (k, *width), from_ or " (K, num_symbols)")
        return checks + _probability_checks("params.emissions.probs", probs)
    width = np.shape(em.means)[-1:] if emission_width is None else (emission_width,)
    means = _field("params.emissions.means", em.means, (k, *width), from_ or " (K, dim)")
    var = _field("params.emissions.variances", em.variances, (k, *width), from_ or " (K, dim)")
    tiny = float(jnp.finfo(var.dtype).tiny)
    return checks + [
        finite_values("params.emissions.means", means),
        finite_values("params.emissions.variances", var),
        values_in_interval("params.emissions.variances", var, tiny, float("inf")),
    ]
