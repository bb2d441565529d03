"""The algorithm interface every vijax inference method implements (optax/blackjax style).

An algorithm is a ``VIAlgorithm(init, step)`` of pure functions built by a factory that takes the
model first and keyword-only ``num_data`` and ``schedule`` (and the algorithm's own settings)::

    alg = vijax.inference.svi(model, num_data=N, schedule=0.5)
    state = alg.init(key, batch)               # batch optional: data-dependent starts may use it
    state, info = alg.step(state, batch, key)  # jit-able; info.elbo, info.step_size, ...

Every state holds the global variational distribution as ``q_global`` and an int32 ``count``;
keys are always passed (never None) and never reused.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import jax.numpy as jnp

from vijax.types import Array, PRNGKey, PyTree


class InitFn(Protocol):
    def __call__(self, key: PRNGKey, batch: PyTree = None) -> PyTree:
        """Returns the initial state. ``batch`` lets data-dependent initializations see data."""


class StepFn(Protocol):
    def __call__(self, state: PyTree, batch: PyTree, key: PRNGKey) -> tuple[PyTree, Any]:
        """One jit-able update: ``(state, batch, key) -> (new_state, info)``. ``info.elbo`` holds
        the ELBO (or its minibatch estimate scaled to the full data)."""


class VIAlgorithm(NamedTuple):
    """A pair of pure functions; see ``vijax.run.run`` for the loop that drives them."""

    init: InitFn
    step: StepFn


def protocol_members(protocol: type) -> list[str]:
    """The methods and attributes a ``typing.Protocol`` declares (its own and its bases')."""
    names = []
    for cls in protocol.__mro__:
        if cls in (Protocol, object) or not getattr(cls, "_is_protocol", False):
            continue
        for name in list(getattr(cls, "__annotations__", {})) + list(vars(cls)):
            if not name.startswith("_") and name not in names:
                names.append(name)
    return names


def check_protocol(model: Any, protocol: type, algorithm: str) -> None:
    """Raises ValueError, before anything compiles, unless ``model`` satisfies ``protocol`` (a
    runtime-checkable ``typing.Protocol``), naming the members it lacks."""
    if not isinstance(model, protocol):
        missing = [m for m in protocol_members(protocol) if not hasattr(model, m)]
        raise ValueError(f"{algorithm} needs a {protocol.__name__}: {type(model).__name__} offers no "
                         f"{', '.join(missing) or 'member of it'}")


def safe_increment(count: Array) -> Array:
    """count + 1, saturating at the int32 maximum (as optax does)."""
    big = jnp.array(jnp.iinfo(jnp.int32).max, jnp.int32)
    return jnp.where(count < big, count + 1, big)


__all__ = ["InitFn", "StepFn", "VIAlgorithm", "check_protocol", "protocol_members", "safe_increment"]
