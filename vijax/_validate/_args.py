"""Checks of arguments: one function per kind of check, each raising ValueError whose message
starts with the argument's name (see the package docstring)."""

from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np


def is_tracer(x: Any) -> bool:
    """Whether ``x`` is a JAX tracer (an abstract value inside ``jit``/``vmap``/``grad``)."""
    return isinstance(x, jax.core.Tracer)


def check_int(name: str, value: Any, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` as a Python int, after checking that it is an integer (not a bool) in
    ``[minimum, maximum]``.

    Examples:
        >>> check_int("num_topics", 3)
        3
        >>> check_int("num_topics", 0)
        Traceback (most recent call last):
        ...
        ValueError: num_topics must be an integer >= 1, got 0
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer))
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")
    return int(value)


def _interval(low, high, include_low, include_high) -> str:
    if low is None and high is None:
        return "a finite number"
    if high is None:
        return f"a finite number {'>=' if include_low else '>'} {low:g}"
    if low is None:
        return f"a finite number {'<=' if include_high else '<'} {high:g}"
    return f"a finite number in {'[' if include_low else '('}{low:g}, {high:g}{']' if include_high else ')'}"


def check_scalar(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    include_low: bool = False,
    include_high: bool = True,
) -> float:
    """``value`` as a Python float, after checking that it is a finite real scalar (not a bool)
    in the interval from ``low`` to ``high`` (open at ``low`` and closed at ``high`` unless told
    otherwise; None: unbounded on that side).

    Examples:
        >>> check_scalar("kappa", 0.7, low=0.5, high=1.0)
        0.7
        >>> check_scalar("rho", 0.0, low=0.0, high=1.0)
        Traceback (most recent call last):
        ...
        ValueError: rho must be a finite number in (0, 1], got 0.0
    """
    ok = not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Real) and math.isfinite(value)
    if ok and low is not None:
        ok = value >= low if include_low else value > low
    if ok and high is not None:
        ok = value <= high if include_high else value < high
    if not ok:
        raise ValueError(f"{name} must be {_interval(low, high, include_low, include_high)}, got {value!r}")
    return float(value)


def check_positive(name: str, value: Any) -> None:
    """Raises ValueError naming ``name`` unless every entry of a concrete ``value`` (a scalar or
    an array) is finite and > 0. Tracers pass.

    Examples:
        >>> check_positive("concentration", [1.0, 0.0])
        Traceback (most recent call last):
        ...
        ValueError: concentration must be finite and > 0, got min 0.0
    """
    if is_tracer(value):
        return
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be finite and > 0, got non-numeric {value!r}") from None
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite and > 0, got non-finite entries")
    if a.size and not np.all(a > 0):
        raise ValueError(f"{name} must be finite and > 0, got min {float(a.min())!r}")


def check_positive_scalar(name: str, value: Any) -> None:
    """:func:`check_positive` for a scalar: also raises ValueError naming ``name`` when a concrete
    ``value`` has dimensions. Tracers pass (a step size may be traced).

    Examples:
        >>> check_positive_scalar("beta", [0.5, 0.5])
        Traceback (most recent call last):
        ...
        ValueError: beta must be a scalar, got shape (2,)
    """
    check_positive(name, value)
    if not is_tracer(value) and np.ndim(value) != 0:
        raise ValueError(f"{name} must be a scalar, got shape {np.shape(value)}")


def check_positive_fields(obj: Any, names: Sequence[str]) -> None:
    """:func:`check_positive` of each field ``names`` of ``obj`` (a dataclass's hyperparameters),
    in order; the ValueError names the first field that is not finite and > 0."""
    for name in names:
        check_positive(name, getattr(obj, name))


def check_finite(name: str, value: Any) -> None:
    """Raises ValueError naming ``name`` when a concrete ``value`` has NaN or infinite entries
    (or is not numeric). Tracers pass."""
    if is_tracer(value):
        return
    a = np.asarray(value)
    if not np.issubdtype(a.dtype, np.number) and a.dtype != bool:
        raise ValueError(f"{name} must be numeric and finite, got dtype {a.dtype}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite, got NaN or infinite entries")


def check_choice(name: str, value: Any, choices: Sequence) -> Any:
    """``value`` after checking that it is one of ``choices``.

    Examples:
        >>> check_choice("divergence", "l2", ("kl", "euclidean"))
        Traceback (most recent call last):
        ...
        ValueError: divergence must be one of ('kl', 'euclidean'), got 'l2'
    """
    if isinstance(value, (list, dict, set)) or value not in tuple(choices):
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """``value`` after checking that it is True or False."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def float_dtype(dtype=None):
    """``dtype`` as a ``jnp.dtype``, or JAX's default float dtype when None."""
    return jnp.dtype(dtype) if dtype is not None else jnp.result_type(float)


def check_float_dtype(dtype, name: str = "dtype") -> None:
    """Raises ValueError naming ``name`` unless ``dtype`` is None or a floating dtype."""
    if dtype is None:
        return
    try:
        ok = jnp.issubdtype(jnp.dtype(dtype), jnp.floating)
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"{name} must be a float dtype, got {dtype!r}")


def check_data_array(name: str, x: Any, ndim: int, last_dim: int | None = None) -> None:
    """Shape and finiteness checks of data: ``ndim`` dimensions, at least one row, ``last_dim``
    columns when given, a numeric dtype (all of these also of a tracer, at trace time), and finite
    values (concrete arrays only)."""
    shape = np.shape(x)
    if len(shape) != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {shape}")
    if last_dim is not None and shape[-1] != last_dim:
        raise ValueError(f"{name} must have {last_dim} columns (the model's dim), got shape {shape}")
    if shape[0] < 1:
        raise ValueError(f"{name} is empty")
    if is_tracer(x):
        if not jnp.issubdtype(x.dtype, jnp.number):
            raise ValueError(f"{name} must be numeric, got dtype {x.dtype}")
        return
    a = np.asarray(x)
    if not np.issubdtype(a.dtype, np.number) or not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be numeric and finite (no NaN or inf)")


def set_static_floats(obj: Any, names: Sequence[str]) -> None:
    """Replaces the fields ``names`` of a frozen dataclass by plain Python floats (hashable, so
    the object can be a static argument under ``jit``); raises ValueError naming a field that is
    not a real scalar."""
    for name in names:
        value = getattr(obj, name)
        try:
            if isinstance(value, (bool, str)) or np.ndim(value) != 0:
                raise TypeError
            value = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a real scalar, got {value!r}") from None
        object.__setattr__(obj, name, value)


def batch_size(batch: Any) -> int:
    """S (or M): the leading dimension of the batch's first leaf (static under ``jit``).

    Raises:
      ValueError: for a batch without arrays or whose first leaf is a scalar.
    """
    leaves = jax.tree_util.tree_leaves(batch)
    if not leaves or jnp.ndim(leaves[0]) == 0:
        raise ValueError("batch must hold arrays with a leading minibatch dimension")
    return leaves[0].shape[0]


def check_key(name: str, key: Any) -> None:
    """Raises ValueError naming ``name`` unless ``key`` is a PRNG key (a typed key or a raw
    ``uint32[2]`` array, possibly batched or traced): keys are always passed, never None."""
    if key is None:
        raise ValueError(f"{name} must be a PRNG key (jax.random.key or PRNGKey), got None")
    dtype = getattr(key, "dtype", None)
    if dtype is None or not (jnp.issubdtype(dtype, jax.dtypes.prng_key) or dtype == jnp.uint32):
        raise ValueError(f"{name} must be a PRNG key (jax.random.key or PRNGKey), got {key!r}")
