"""The algorithm interface every vijax inference method implements (optax/blackjax style)."""
from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import jax
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


def safe_increment(count: Array) -> Array:
    """count + 1, saturating at the int32 maximum (as optax does)."""
    big = jnp.array(jnp.iinfo(jnp.int32).max, jnp.int32)
    return jnp.where(count < big, count + 1, big)




def initial_globals(key: PRNGKey, batch: PyTree, model) -> PyTree:
    """``model.init_globals(key, batch)`` after checking ``batch`` (when given) with
    ``model.check_data``: the start shared by every conjugate-model algorithm."""
    if batch is not None:
        model.check_data(batch)
    return model.init_globals(key, batch)


def check_local(model, local: str) -> None:
    """Raises ValueError, before anything compiles, when ``model`` offers no local step ``local``."""
    offered = getattr(model, "local_methods", ())
    if local not in offered:
        raise ValueError(f"local={local!r} is not offered by {type(model).__name__}; choose one of {offered}")


def restarts(alg: VIAlgorithm, num_restarts: int) -> VIAlgorithm:
    """Runs ``num_restarts`` independent copies of ``alg`` in lock step with ``vmap``.

    The state gains a leading axis of size ``num_restarts``; every restart sees the same batch
    and its own key (``jax.random.split`` of the step's key). ``info`` fields gain the same axis,
    so the runner's stopping rule sees the mean ELBO over restarts. Pick the winner with
    ``select_restart(state, jnp.argmax(info.elbo))``.
    """
    if isinstance(num_restarts, bool) or not isinstance(num_restarts, int) or num_restarts < 1:
        raise ValueError(f"num_restarts must be an integer >= 1, got {num_restarts!r}")

    def init(key, batch=None):
        return jax.vmap(lambda k: alg.init(k, batch))(jax.random.split(key, num_restarts))

    def step(state, batch, key):
        return jax.vmap(alg.step, in_axes=(0, None, 0))(state, batch, jax.random.split(key, num_restarts))

    return VIAlgorithm(init, step)


def lock_step(algorithms: dict, *, primary: str | None = None, info_fields: tuple[str, ...] = ("elbo",)) -> VIAlgorithm:
    """Runs several algorithms side by side on the same batches, for comparisons in one run.

    The state is a dict name -> that algorithm's state; every ``init`` gets the same key (so
    algorithms that initialise alike start from the same point), and each step gets its own split
    of the step's key. ``info`` is a dict name -> {field: value} for the ``info_fields`` each
    algorithm's info has, plus ``info["elbo"]``, the ``primary`` algorithm's (default: the first
    one that reports an ELBO), for the runner's stopping rule.
    """
    if not algorithms:
        raise ValueError("lock_step needs at least one algorithm")
    names = tuple(algorithms)
    if primary is not None and primary not in algorithms:
        raise ValueError(f"primary={primary!r} is not one of {names}")

    def init(key, batch=None):
        return {m: alg.init(key, batch) for m, alg in algorithms.items()}

    def step(state, batch, key):
        keys = jax.random.split(key, len(names))
        new, info = {}, {}
        for m, k in zip(names, keys):
            new[m], inf = algorithms[m].step(state[m], batch, k)
            info[m] = {f: getattr(inf, f) for f in info_fields if hasattr(inf, f)}
        lead = primary if primary is not None else next((m for m in names if "elbo" in info[m]), None)
        if lead is not None and "elbo" in info[lead]:
            info["elbo"] = info[lead]["elbo"]
        return new, info

    return VIAlgorithm(init, step)


def select_restart(tree: PyTree, index) -> PyTree:
    """Restart ``index`` of a pytree whose leaves have a leading restart axis."""
    return jax.tree_util.tree_map(lambda a: a[index], tree)


__all__ = ["InitFn", "StepFn", "VIAlgorithm", "check_local", "initial_globals", "lock_step", "restarts", "safe_increment",
           "select_restart"]
