"""Neural networks as pure functions: a :class:`Network` is ``(apply, params)`` with ``apply(params, x) -> y``
for one datum. ``mlp`` builds one in plain JAX; ``from_equinox`` adapts an Equinox module."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vijax import _validate
from vijax.types import Array, PRNGKey, PyTree
from vijax._validate import ArgumentError, require

ACTIVATIONS = {
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
    "softplus": jax.nn.softplus,
    "elu": jax.nn.elu,
    "gelu": jax.nn.gelu,
}


class Network(NamedTuple):
    """``apply(params, x) -> y`` for one datum ``x``, and the parameters it starts from."""

    apply: Callable[[PyTree, Array], Any]
    params: PyTree


def mlp(key: PRNGKey, sizes: Sequence[int], activation: str = "tanh") -> Network:
    """A multilayer perceptron ``sizes[0] -> ... -> sizes[-1]``, the last layer linear; ``params`` a list
    of ``{"w": (d_in, d_out), "b": (d_out,)}``, weights N(0, 1/fan_in), biases zero."""
    _validate.check_key("key", key)
    sizes = tuple(sizes)
    if len(sizes) < 2:
        raise ArgumentError("sizes", f"sizes must name at least an input and an output width, got {sizes}", value=sizes)
    for i, s in enumerate(sizes):
        _validate.check_int(f"sizes[{i}]", s, minimum=1)
    _validate.check_choice("activation", activation, tuple(ACTIVATIONS))
    act = ACTIVATIONS[activation]
    keys = jax.random.split(key, len(sizes) - 1)
    params = [
        {"w": jax.random.normal(k, (a, b)) / jnp.sqrt(a), "b": jnp.zeros((b,))}
        for k, a, b in zip(keys, sizes[:-1], sizes[1:])
    ]

    def apply(params, x):
        h = x
        for i, layer in enumerate(params):
            h = h @ layer["w"] + layer["b"]
            if i < len(params) - 1:
                h = act(h)
        return h

    return Network(apply, params)


def from_equinox(module) -> Network:
    """A :class:`Network` from an Equinox module, its inexact-array leaves the parameters (needs ``equinox``)."""
    eqx = require("equinox", "nn", "from_equinox")
    if not isinstance(module, eqx.Module):  # anything else partitioned into params None, failing later
        raise ArgumentError("module", f"module must be an Equinox module (eqx.Module), got {type(module).__name__}")
    params, static = eqx.partition(module, eqx.is_inexact_array)

    def apply(params, x):
        return eqx.combine(params, static)(x)

    return Network(apply, params)


def check_network(net: Network, example: Array, expected_shape: tuple, name: str) -> None:
    """Raises ValueError naming ``name`` unless ``net.apply(net.params, example)`` has ``expected_shape``,
    or naming the parameter's path when a concrete floating parameter is not finite."""
    if not isinstance(net, Network):
        raise ArgumentError(name, f"{name} must be a vijax.models.Network (apply, params), got {type(net).__name__}")
    for path, leaf in jax.tree_util.tree_leaves_with_path(net.params):
        if _validate.is_tracer(leaf):
            continue
        a = np.asarray(leaf)
        if jnp.issubdtype(a.dtype, jnp.inexact) and not np.all(np.isfinite(a)):
            where = f"{name}.params{jax.tree_util.keystr(path)}"
            raise ArgumentError(
                where, f"{where} must be finite, got {int(np.size(a) - np.isfinite(a).sum())} NaN or infinite entries"
            )
    try:
        out = jax.eval_shape(net.apply, net.params, example)
    except Exception as err:  # the user's function failed on a datum of this shape
        raise ArgumentError(
            name, f"{name}: applying it to one datum of shape {tuple(jnp.shape(example))} failed: {err}"
        ) from err
    shapes = jax.tree_util.tree_map(lambda o: tuple(o.shape), out)
    if shapes != expected_shape:
        raise ArgumentError(
            name,
            f"{name} must map one datum of shape {tuple(jnp.shape(example))} to shape {expected_shape}, got {shapes}",
        )
