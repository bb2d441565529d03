"""Checks of arguments: one function per kind, each raising ValueError whose message starts with the argument's name."""

from __future__ import annotations

import functools
import math
import numbers
import os
from typing import Any, Protocol, Sequence

import jax
import jax.numpy as jnp
import numpy as np


_NO_VALUE = object()


class ArgumentError(ValueError):
    """A ValueError carrying ``argument`` (its name, or a config key's path) and the refused ``value``, for the CLI."""

    def __init__(self, argument: str, message: str, value: Any = _NO_VALUE):
        super().__init__(message)
        self.argument = argument
        self.value = value

    @property
    def has_value(self) -> bool:
        """Whether the error carries the offending value."""
        return self.value is not _NO_VALUE


ArgumentError.__module__ = "vijax._validate"  # its public home (tracebacks and doctests print it)


def is_tracer(x: Any) -> bool:
    """Whether ``x`` is a JAX tracer (an abstract value inside ``jit``/``vmap``/``grad``)."""
    return isinstance(x, jax.core.Tracer)


@functools.cache
def protocol_members(protocol: type) -> tuple[str, ...]:
    """The methods and attributes a ``typing.Protocol`` declares (its own and its bases')."""
    names = []
    for cls in protocol.__mro__:
        if cls in (Protocol, object) or not getattr(cls, "_is_protocol", False):
            continue
        for name in list(getattr(cls, "__annotations__", {})) + list(vars(cls)):
            if not name.startswith("_") and name not in names:
                names.append(name)
    return tuple(names)


def implements(obj: Any, protocol: type) -> bool:
    """Whether ``obj`` has every member of ``protocol`` by ``hasattr`` (unlike isinstance, through ``__getattr__``)."""
    return all(hasattr(obj, m) for m in protocol_members(protocol))


INT32_MAX = 2**31 - 1


def check_int(name: str, value: Any, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` as a Python int, after checking that it is an integer (not a bool) in ``[minimum, maximum]``.

    Examples:
        >>> check_int("num_topics", 0)
        Traceback (most recent call last):
        ...
        vijax._validate.ArgumentError: num_topics must be an integer >= 1, got 0
    """
    not_int = isinstance(value, bool) or not isinstance(value, (int, np.integer))
    if not_int or value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ArgumentError(name, f"{name} must be an integer {bound}, got {value!r}", value)
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
    """``value`` as a Python float, once checked a finite real scalar (not a bool) from ``low`` to ``high``.

    Examples:
        >>> check_scalar("rho", 0.0, low=0.0, high=1.0)
        Traceback (most recent call last):
        ...
        vijax._validate.ArgumentError: rho must be a finite number in (0, 1], got 0.0
    """
    scalar_array = isinstance(value, (np.ndarray, jax.Array)) and not is_tracer(value) and np.ndim(value) == 0
    if scalar_array and (jnp.issubdtype(value.dtype, jnp.integer) or jnp.issubdtype(value.dtype, jnp.floating)):
        value = value.item() if isinstance(value, np.ndarray) else float(value)
    ok = not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Real) and math.isfinite(value)
    if ok and low is not None:
        ok = value >= low if include_low else value > low
    if ok and high is not None:
        ok = value <= high if include_high else value < high
    if not ok:
        raise ArgumentError(
            name, f"{name} must be {_interval(low, high, include_low, include_high)}, got {value!r}", value
        )
    return float(value)


def real_array(name: str, value: Any, expected: str) -> np.ndarray:
    """A concrete ``value`` of real numbers (scalar, array, nested list) as float64 NumPy, else ValueError naming it."""
    if value is None or isinstance(value, (str, bytes, bool, np.bool_)):
        raise ArgumentError(name, f"{name} must be {expected}, got {value!r}", value)
    try:
        a = np.asarray(value)
    except (TypeError, ValueError):
        raise ArgumentError(name, f"{name} must be {expected}, got {value!r}", value) from None
    if not (jnp.issubdtype(a.dtype, jnp.integer) or jnp.issubdtype(a.dtype, jnp.floating)):
        raise ArgumentError(name, f"{name} must be {expected}, got {value!r} (dtype {a.dtype})")
    return a.astype(np.float64)


def check_positive(name: str, value: Any) -> None:
    """Raises ValueError naming ``name`` unless every entry of a concrete ``value`` is a finite number > 0.

    Examples:
        >>> check_positive("concentration", [1.0, 0.0])
        Traceback (most recent call last):
        ...
        vijax._validate.ArgumentError: concentration must be finite and > 0, got min 0.0
    """
    _check_positive(name, value, scalar=False)


def check_positive_scalar(name: str, value: Any) -> None:
    """:func:`check_positive` for a scalar (a concrete ``value`` with dimensions is refused too).

    Examples:
        >>> check_positive_scalar("beta", [0.5, 0.5])
        Traceback (most recent call last):
        ...
        vijax._validate.ArgumentError: beta must be a scalar, got shape (2,)
    """
    _check_positive(name, value, scalar=True)


def _check_positive(name: str, value: Any, scalar: bool) -> None:
    if is_tracer(value):
        return
    a = real_array(name, value, "a finite number > 0" if scalar else "a finite number > 0 (or an array of them)")
    if scalar and a.ndim != 0:
        raise ArgumentError(name, f"{name} must be a scalar, got shape {a.shape}")
    finite = np.all(np.isfinite(a))
    if not finite or (a.size and not np.all(a > 0)):
        got = repr(value) if scalar else f"min {float(a.min())!r}" if finite else "non-finite entries"
        raise ArgumentError(name, f"{name} must be finite and > 0, got {got}")


def check_positive_fields(obj: Any, names: Sequence[str], scalar: bool = False) -> None:
    """:func:`check_positive` (or :func:`check_positive_scalar`) of the fields ``names`` of ``obj``."""
    check = check_positive_scalar if scalar else check_positive
    for name in names:
        check(name, getattr(obj, name))


def check_finite(name: str, value: Any) -> None:
    """Raises ValueError naming ``name`` when a concrete ``value`` is not numeric or not finite."""
    if is_tracer(value):
        return
    a = np.asarray(value)
    if not np.issubdtype(a.dtype, np.number) and a.dtype != bool:
        raise ArgumentError(name, f"{name} must be numeric and finite, got dtype {a.dtype}")
    if not np.all(np.isfinite(a)):
        raise ArgumentError(name, f"{name} must be finite, got NaN or infinite entries")


def check_float_tree(name: str, tree: Any) -> None:
    """Raises ArgumentError naming ``name`` (and the leaf's path) unless ``tree`` holds at least one array, each of
    finite floats: a parameter pytree, q's start."""
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    if not leaves:
        raise ArgumentError(name, f"{name} must hold at least one array")
    for path, leaf in leaves:
        a, where = np.asarray(leaf), name + jax.tree_util.keystr(path)
        if not np.issubdtype(a.dtype, np.floating):
            raise ArgumentError(name, f"{where} must be a float array, got dtype {a.dtype}")
        if not np.all(np.isfinite(a)):
            raise ArgumentError(name, f"{where} has NaN or infinite entries")


def check_choice(name: str, value: Any, choices: Sequence) -> Any:
    """``value`` after checking that it is one of ``choices``.

    Examples:
        >>> check_choice("divergence", "l2", ("kl", "euclidean"))
        Traceback (most recent call last):
        ...
        vijax._validate.ArgumentError: divergence must be one of ('kl', 'euclidean'), got 'l2'
    """
    if isinstance(value, (list, dict, set)) or value not in tuple(choices):
        raise ArgumentError(name, f"{name} must be one of {tuple(choices)}, got {value!r}", value)
    return value


def check_bool(name: str, value: Any) -> bool:
    """``value`` after checking that it is True or False."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentError(name, f"{name} must be True or False, got {value!r}", value)
    return bool(value)


def float_dtype(dtype=None):
    """``dtype`` as a ``jnp.dtype``, or JAX's default float dtype when None."""
    return jnp.dtype(dtype) if dtype is not None else jnp.result_type(float)


def check_draw_args(sizes: dict, positive: dict | None = None, dtype=None, key: Any = _NO_VALUE):
    """Checks ``key``, ``sizes`` (name -> int >= 1, or ``(int, min[, max])``) and ``positive``; the float dtype."""
    if key is not _NO_VALUE:
        check_key("key", key)
    for name, v in sizes.items():
        check_int(name, *(v if isinstance(v, tuple) else (v,)))
    for name, v in (positive or {}).items():
        check_positive(name, v)
    return float_dtype(dtype)


HALF_PRECISION = ("float16", "bfloat16")


def check_float_dtype(dtype, name: str = "dtype") -> None:
    """Raises ValueError naming ``name`` unless ``dtype`` is None, float32 or float64 (no half precision).

    Examples:
        >>> check_float_dtype("float16")
        Traceback (most recent call last):
        ...
        vijax._validate.ArgumentError: dtype must be float32 or float64 (half precision is not supported: the models compute in float32 or float64), got float16
    """
    if dtype is None:
        return
    try:
        dt = jnp.dtype(dtype)
        ok = jnp.issubdtype(dt, jnp.floating)
    except TypeError:
        dt, ok = None, False
    if ok and dt.name in HALF_PRECISION:
        raise ArgumentError(
            name,
            f"{name} must be float32 or float64 (half precision is not supported: the models compute in "
            f"float32 or float64), got {dt.name}",
        )
    if not ok:
        raise ArgumentError(name, f"{name} must be a float dtype (float32 or float64), got {dtype!r}")


def physical_memory_bytes() -> int | None:
    """The machine's physical memory in bytes (not the accelerator's), None where it is not known."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def check_allocation(name: str, num_elements: int, itemsize: int) -> None:
    """Raises ValueError naming ``name`` when ``num_elements`` entries of ``itemsize`` bytes exceed the machine memory.

    Examples:
        >>> check_allocation("num_topics * vocab_size", 10**30 * 6, 4)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        vijax._validate.ArgumentError: num_topics * vocab_size asks for an array of 6e+30 entries (2.4e+31 bytes), more than the ... bytes of memory available
    """
    num_elements, itemsize = int(num_elements), int(itemsize)
    need = num_elements * itemsize
    have = physical_memory_bytes()
    if have is not None and need > have:
        raise ArgumentError(
            name,
            f"{name} asks for an array of {num_elements:.3g} entries ({need:.3g} bytes), more than the "
            f"{have:.3g} bytes of memory available",
        )


def check_enough_points(name: str, num_components: int, num_points: int, how: str = "k-means++") -> None:
    """Raises ValueError naming ``name`` when a model seeded at its data (``how``) has more components than points.

    Examples:
        >>> check_enough_points("num_components", 10, 5)
        Traceback (most recent call last):
        ...
        vijax._validate.ArgumentError: num_components (10) must be <= the number of data points given to init (5): each component is seeded at a distinct data point (k-means++); give init more data or use fewer components
    """
    if int(num_components) > int(num_points):
        raise ArgumentError(
            name,
            f"{name} ({num_components}) must be <= the number of data points given to init ({num_points}): "
            f"each component is seeded at a distinct data point ({how}); give init more data or use fewer components",
        )


def constant_columns(x: Any) -> np.ndarray:
    """(D,) bool: the columns of concrete (N, D) ``x`` constant to float32 rounding (variance <= (1e-6 max |x_d|)^2)."""
    a = np.asarray(x, dtype=np.float64)
    return ~(a.var(0) > (1e-6 * np.max(np.abs(a), axis=0)) ** 2)


def check_nonconstant_columns(name: str, x: Any) -> None:
    """Raises ValueError naming ``name`` and a constant column (:func:`constant_columns`) of the (N, D) data ``x``.

    Examples:
        >>> check_nonconstant_columns("x", [[1.0, 5.0], [2.0, 5.0]])
        Traceback (most recent call last):
        ...
        vijax._validate.ArgumentError: x column 1 is constant (variance 0): a prior fitted to the data's spread (from_data) would have no scale there (an unbounded precision, NaN at every step); drop the column or give the prior's parameters explicitly
    """
    a = np.asarray(x, dtype=np.float64)
    var = a.var(0)
    flat = np.flatnonzero(constant_columns(a))
    if not flat.size:
        return
    what = (
        f"has identical rows (every column is constant, variance {float(var.max()):.3g})"
        if flat.size == a.shape[1]
        else f"column {int(flat[0])} is constant (variance {float(var[flat[0]]):.3g})"
    )
    raise ArgumentError(
        name,
        f"{name} {what}: a prior fitted to the data's spread (from_data) would have no scale there (an "
        "unbounded precision, NaN at every step); drop the column or give the prior's parameters explicitly",
    )


def check_data_dtype(name: str, x: Any) -> None:
    """Raises ValueError naming ``name`` when the data ``x`` are in half precision (float16, bfloat16).

    Examples:
        >>> check_data_dtype("x", np.zeros(2, np.float16))
        Traceback (most recent call last):
        ...
        vijax._validate.ArgumentError: x must be float32 or float64 (or integer) data, got float16: half precision is not supported (the models compute in float32 or float64); cast it with .astype('float32')
    """
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        dtype = np.asarray(x).dtype
    if jnp.dtype(dtype).name in HALF_PRECISION:
        raise ArgumentError(
            name,
            f"{name} must be float32 or float64 (or integer) data, got {jnp.dtype(dtype).name}: half precision "
            f"is not supported (the models compute in float32 or float64); cast it with .astype('float32')",
        )


def check_data_array(name: str, x: Any, ndim: int, last_dim: int | None = None) -> None:
    """Checks ``ndim`` dimensions, at least one row, ``last_dim`` columns, a numeric dtype and finite values."""
    shape = np.shape(x)
    if len(shape) != ndim:
        raise ArgumentError(name, f"{name} must have {ndim} dimension(s), got shape {shape}")
    if last_dim is not None and shape[-1] != last_dim:
        raise ArgumentError(name, f"{name} must have {last_dim} columns (the model's dim), got shape {shape}")
    if shape[0] < 1:
        raise ArgumentError(name, f"{name} is empty")
    check_data_dtype(name, x)
    if is_tracer(x):
        if not jnp.issubdtype(x.dtype, jnp.number):
            raise ArgumentError(name, f"{name} must be numeric, got dtype {x.dtype}")
        return
    a = np.asarray(x)
    if not np.issubdtype(a.dtype, np.number) or not np.all(np.isfinite(a)):
        raise ArgumentError(name, f"{name} must be numeric and finite (no NaN or inf)")


def batch_size(batch: Any) -> int:
    """S (or M): the leading dimension of the batch's first leaf; ValueError where there is none."""
    leaves = jax.tree_util.tree_leaves(batch)
    if not leaves or jnp.ndim(leaves[0]) == 0:
        raise ArgumentError("batch", "batch must hold arrays with a leading minibatch dimension")
    return leaves[0].shape[0]


def check_key(name: str, key: Any) -> None:
    """Raises ValueError naming ``name`` unless ``key`` is a PRNG key (typed or raw ``uint32``)."""
    if key is None:
        raise ArgumentError(name, f"{name} must be a PRNG key (jax.random.key or PRNGKey), got None")
    dtype = getattr(key, "dtype", None)
    if dtype is None or not (jnp.issubdtype(dtype, jax.dtypes.prng_key) or dtype == jnp.uint32):
        raise ArgumentError(name, f"{name} must be a PRNG key (jax.random.key or PRNGKey), got {key!r}")


def check_structures(name: str, tree: Any, like: Any, like_name: str, is_leaf=None) -> None:
    """Raises ValueError naming ``name`` unless ``tree`` has the tree structure of ``like``."""
    got = jax.tree_util.tree_structure(tree, is_leaf=is_leaf)
    want = jax.tree_util.tree_structure(like, is_leaf=is_leaf)
    if got != want:
        raise ArgumentError(name, f"{name} must have the pytree structure of {like_name}: got {got}, expected {want}")


def check_shapes(name: str, tree: Any, like: Any, like_name: str, is_leaf=None) -> None:
    """``check_structures``, then a ValueError naming ``name`` and the first leaf whose shape differs from ``like``'s."""
    check_structures(name, tree, like, like_name, is_leaf=is_leaf)
    got = jax.tree_util.tree_flatten_with_path(tree)[0]
    want = jax.tree_util.tree_leaves(like)
    for (path, a), b in zip(got, want):
        if jnp.shape(a) != jnp.shape(b):
            raise ArgumentError(
                name,
                f"{name}{jax.tree_util.keystr(path)} must have shape {tuple(jnp.shape(b))} (as in {like_name}), "
                f"got {tuple(jnp.shape(a))}",
            )
