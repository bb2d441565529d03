"""The base of every model: a registered pytree whose arrays are leaves and whose settings are static
metadata (Equinox's ``Module`` idea, without the dependency)."""

from __future__ import annotations

import abc
import functools
import inspect
import types
from typing import Any, Callable, ClassVar, Mapping

import jax
import numpy as np

from vijax._validate import ArgumentError


def _is_array(value: Any) -> bool:
    return isinstance(value, (jax.Array, np.ndarray))


_ATOMS = (bool, int, float, complex, str, bytes, np.generic, np.dtype, type)


def static_float(name: str, value: Any) -> float:
    """``value`` as a Python float (hashable static metadata); ArgumentError naming ``name`` for
    anything that is not a real scalar."""
    try:
        if isinstance(value, (bool, np.bool_, str, bytes)) or value is None or np.ndim(value) != 0:
            raise TypeError
        return float(value)
    except (TypeError, ValueError):
        raise ArgumentError(name, f"{name} must be a real scalar, got {value!r}", value) from None


class TraceCache(dict):
    """A model's cache of what its traces found: static metadata outside the model's equality and hash."""

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TraceCache)

    def __hash__(self) -> int:
        return 0


def array_or_float(name: str, value: Any) -> Any:
    """A real scalar as a Python float (static), a real array-like as a float64 NumPy array (a leaf),
    anything else as it is (for the model's own checks)."""
    if isinstance(value, jax.Array) or value is None:
        return value
    try:
        a = np.asarray(value)
    except Exception:  # noqa: BLE001 -- ragged lists, objects: the model's check names them
        return value
    if a.dtype.kind not in "biuf" or a.dtype == np.bool_:
        return value
    return float(a) if a.ndim == 0 else a.astype(np.float64)


def optional_float(name: str, value: Any) -> Any:
    """None, or ``value`` as :func:`static_float` makes it."""
    return None if value is None else static_float(name, value)


def split_arrays(tree: Any) -> tuple[list, Callable[[list], Any]]:
    """(the arrays among ``tree``'s leaves, ``rebuild(arrays)``): Equinox's ``partition``/``combine``."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    is_array = [_is_array(leaf) for leaf in leaves]
    arrays = [leaf for leaf, a in zip(leaves, is_array) if a]

    def rebuild(new_arrays: list) -> Any:
        it = iter(new_arrays)
        return jax.tree_util.tree_unflatten(treedef, [next(it) if a else leaf for leaf, a in zip(leaves, is_array)])

    return arrays, rebuild


class _Static:
    """The non-array leaves of a call's arguments and their tree: a hashable static argument of ``jit``."""

    def __init__(self, treedef, leaves: tuple):
        self.treedef, self.leaves = treedef, leaves
        self._hash = hash((treedef, leaves))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _Static) and self.treedef == other.treedef and self.leaves == other.leaves


_ARRAY = object()  # the place of an array among a call's leaves


def filter_jit(fn: Callable, jit: Callable = jax.jit) -> Callable:
    """``fn`` compiled by ``jit`` with the arrays among its arguments' leaves traced and every other
    leaf static (Equinox's ``filter_jit``): one program per distinct static part."""

    @functools.partial(jit, static_argnums=0)
    def compiled(static: _Static, arrays: list):
        it = iter(arrays)
        args, kwargs = static.treedef.unflatten([next(it) if leaf is _ARRAY else leaf for leaf in static.leaves])
        return fn(*args, **kwargs)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
        static = _Static(treedef, tuple(_ARRAY if _is_array(leaf) else leaf for leaf in leaves))
        return compiled(static, [leaf for leaf in leaves if _is_array(leaf)])

    call.jitted = compiled  # the jitted function (its ``_cache_size()`` counts the programs)
    return call


def _flatten_with_keys(model: PytreeModel):
    """Children: attributes that are (pytrees of) arrays, and the arrays of an attribute mixing arrays
    with other leaves (a ``Network``); metadata: every other attribute."""
    children, static, mixed = [], [], []
    for name, value in sorted(vars(model).items()):
        if _is_array(value):
            children.append((jax.tree_util.GetAttrKey(name), value))
            continue
        if value is None or isinstance(value, _ATOMS) or callable(value) and not isinstance(value, PytreeModel):
            static.append((name, value))
            continue
        leaves, treedef = jax.tree_util.tree_flatten(value)
        arrays = [_is_array(leaf) for leaf in leaves]
        if not any(arrays):
            static.append((name, value))
        elif all(arrays):
            children.append((jax.tree_util.GetAttrKey(name), value))
        else:
            rest = tuple(None if a else leaf for leaf, a in zip(leaves, arrays))
            children.append((jax.tree_util.GetAttrKey(name), tuple(x for x, a in zip(leaves, arrays) if a)))
            mixed.append((name, treedef, rest))
    return children, (tuple(k.name for k, _ in children), tuple(static), tuple(mixed))


def _flatten(model: PytreeModel):
    children, aux = _flatten_with_keys(model)
    return [v for _, v in children], aux


def _unflatten(cls: type, aux, children) -> PytreeModel:
    model = object.__new__(cls)  # no __init__: the leaves may be tracers or placeholders
    names, static, mixed = aux
    model.__dict__.update(zip(names, children))
    model.__dict__.update(static)
    for name, treedef, rest in mixed:
        arrays = iter(model.__dict__[name])
        model.__dict__[name] = treedef.unflatten([next(arrays) if r is None else r for r in rest])
    return model


class _ModelType(abc.ABCMeta):
    """Registers every subclass as a pytree and converts its ``static_floats`` and ``converters``
    arguments before ``__init__`` sees them."""

    def __init__(cls, name, bases, namespace, **kwargs):
        super().__init__(name, bases, namespace, **kwargs)
        jax.tree_util.register_pytree_with_keys(
            cls, _flatten_with_keys, functools.partial(_unflatten, cls), flatten_func=_flatten
        )

    @property
    def __signature__(cls) -> inspect.Signature:
        """The constructor's signature (``inspect.signature(Model)``), not this ``__call__``'s."""
        sig = _signature(cls.__init__)
        return sig.replace(parameters=list(sig.parameters.values())[1:])

    def __call__(cls, *args, **kwargs):
        converters = {**dict.fromkeys(cls.static_floats, static_float), **cls.converters}
        if converters:
            bound = _signature(cls.__init__).bind_partial(None, *args, **kwargs)  # None: self
            for name, convert in converters.items():
                if name in bound.arguments:
                    bound.arguments[name] = convert(name, bound.arguments[name])
            args, kwargs = bound.args[1:], bound.kwargs
        return super().__call__(*args, **kwargs)


@functools.lru_cache(maxsize=None)
def _signature(init: Callable) -> inspect.Signature:
    return inspect.signature(init)


class PytreeModel(metaclass=_ModelType):
    """Base of vijax's models and components: a registered pytree, so a model is an argument of
    ``jax.jit``/``vmap`` like any other.

    Attributes holding arrays are the children; every other attribute is static metadata, compared by
    value. Unflattening does not call ``__init__``, so a model's checks run once, at construction.
    ``static_floats`` names the scalar hyperparameters converted to Python floats before ``__init__``;
    ``converters`` maps other arguments to a ``convert(name, value)``. Equal: same type, equal
    metadata, the same arrays.

    Examples:
        >>> import dataclasses, jax
        >>> @dataclasses.dataclass(frozen=True, eq=False)
        ... class Scaled(PytreeModel):
        ...     weights: jax.Array
        ...     scale: float = 1.0
        ...     static_floats = ("scale",)
        >>> m = Scaled(jax.numpy.ones(3), scale=jax.numpy.float32(2.0))
        >>> type(m.scale).__name__, len(jax.tree_util.tree_leaves(m))
        ('float', 1)
        >>> float(jax.jit(lambda m: m.scale * m.weights.sum())(m))
        6.0
    """

    static_floats: ClassVar[tuple[str, ...]] = ()
    converters: ClassVar[Mapping[str, Callable[[str, Any], Any]]] = types.MappingProxyType({})

    def __eq__(self, other: Any) -> bool:
        if type(self) is not type(other):
            return NotImplemented
        (a, sa), (b, sb) = _flatten(self), _flatten(other)
        a, b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
        return sa == sb and len(a) == len(b) and all(x is y for x, y in zip(a, b))

    def __hash__(self) -> int:
        return hash((type(self), _flatten(self)[1]))
