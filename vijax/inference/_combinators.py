"""Combinators: algorithms built from algorithms, so that experiments never write their own loops.

- :func:`restarts`: R independent copies in lock step under ``vmap``;
- :func:`lock_step`: several algorithms side by side on the same batches, one state dict, for
  comparisons in one run (and one checkpoint);
- :func:`replace_elbo`: an algorithm whose ``info.elbo`` is another function of the new state
  (e.g. an exact ELBO where the algorithm reports a Monte Carlo estimate).
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import jax

from vijax._validate import check_allocation, check_int, vmap_with_checks
from vijax.inference.base import VIAlgorithm
from vijax.types import Array, PyTree


def check_algorithm(name: str, alg) -> None:
    """Raises ValueError naming ``name`` unless ``alg`` is an algorithm: an object with callable
    ``init`` and ``step`` (a ``VIAlgorithm``, ``BBVI``, ``NGVI``...)."""
    if not (callable(getattr(alg, "init", None)) and callable(getattr(alg, "step", None))):
        raise ValueError(
            f"{name} must be an algorithm (a VIAlgorithm with init and step, e.g. vijax.inference.svi(...)), "
            f"got {alg!r}"
        )


def restarts(alg: VIAlgorithm, num_restarts: int) -> VIAlgorithm:
    """Runs ``num_restarts`` independent copies of ``alg`` in lock step with ``vmap``.

    The state gains a leading axis of size ``num_restarts``; every restart sees the same batch
    and its own key (``jax.random.split`` of the step's key). ``info`` fields gain the same axis,
    so the runner's stopping rule sees the mean ELBO over restarts. Pick the winner with
    ``select_restart(state, jnp.argmax(info.elbo))``. The step's batch checks run inside the vmap and
    are enforced outside it (``vmap_with_checks``), so that ``jit_step`` and the runner can return
    them as outputs of the program (no host callback at every step, and a cacheable program).

    Raises:
      ValueError: naming ``alg`` when it is not an algorithm, or ``num_restarts`` when it is not an
        integer >= 1 or the restarts' keys (at construction) or states (at ``init``, from
        ``jax.eval_shape`` of one restart's) would not fit in the machine's memory
        (``vijax._validate.check_allocation``).
    """
    check_algorithm("alg", alg)
    num_restarts = check_int("num_restarts", num_restarts)
    # each step splits the key into one per restart (8 bytes each): refused before any allocation
    check_allocation("num_restarts (the key of each restart)", num_restarts, 8)

    def init(key, batch=None):
        one = jax.eval_shape(lambda k: alg.init(k, batch), key)  # a restart's state, nothing allocated
        per = sum(math.prod(x.shape) * x.dtype.itemsize for x in jax.tree_util.tree_leaves(one))
        # the R states, and the R new ones a step makes before the old are freed
        check_allocation(
            f"num_restarts ({num_restarts} restarts of a {per}-byte state, twice)", 2 * num_restarts * per, 1
        )
        return jax.vmap(lambda k: alg.init(k, batch))(jax.random.split(key, num_restarts))

    def step(state, batch, key):
        # the restarts' batch checks enforced once, outside the vmap (vmap_with_checks)
        return vmap_with_checks(alg.step, in_axes=(0, None, 0))(state, batch, jax.random.split(key, num_restarts))

    return VIAlgorithm(init, step)


def lock_step(
    algorithms: Mapping[str, VIAlgorithm],
    *,
    primary: str | None = None,
    info_fields: tuple[str, ...] = ("elbo",),
    init_groups: Mapping[str, int] | None = None,
) -> VIAlgorithm:
    """Runs several algorithms side by side on the same batches, for comparisons in one run.

    The state is a dict name -> that algorithm's state. Each step gets its own split of the step's
    key (``jax.random.split(key, len(algorithms))``, in the dict's order). ``info`` is a dict
    name -> {field: value} for the ``info_fields`` each algorithm's info has, plus
    ``info["elbo"]``, the ``primary`` algorithm's (default: the first one that reports an ELBO),
    for the runner's stopping rule.

    Args:
      algorithms: name -> ``VIAlgorithm``, in the order their keys are split.
      primary: the algorithm whose ELBO is ``info["elbo"]``.
      info_fields: the info fields kept per algorithm.
      init_groups: name -> group index (0, 1, ...). Algorithms of the same group start from the
        same key, ``jax.random.split(key, num_groups)[group]`` (so that algorithms that
        initialise alike start from the same point); None: every algorithm gets the init key
        itself.

    Raises:
      ValueError: for no algorithms or a value of ``algorithms`` that is not an algorithm (naming
        it), an unknown ``primary``, or ``init_groups`` that do not name every algorithm with a
        group in 0 .. G - 1.
    """
    if not isinstance(algorithms, Mapping) or not algorithms:
        raise ValueError(f"algorithms must be a non-empty dict name -> VIAlgorithm, got {algorithms!r}")
    for name, alg in algorithms.items():
        check_algorithm(f"algorithms[{name!r}]", alg)
    names = tuple(algorithms)
    if primary is not None and primary not in algorithms:
        raise ValueError(f"primary={primary!r} is not one of {names}")
    if init_groups is not None:
        groups = sorted(set(init_groups.values()))
        if set(init_groups) != set(names) or groups != list(range(len(groups))):
            raise ValueError(
                f"init_groups must map every algorithm of {names} to a group 0 .. G - 1, got {dict(init_groups)!r}"
            )

    def init(key, batch=None):
        if init_groups is None:
            return {m: alg.init(key, batch) for m, alg in algorithms.items()}
        keys = jax.random.split(key, len(set(init_groups.values())))
        return {m: alg.init(keys[init_groups[m]], batch) for m, alg in algorithms.items()}

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


def replace_elbo(alg: VIAlgorithm, elbo_fn: Callable[[PyTree], Array]) -> VIAlgorithm:
    """``alg`` with ``info.elbo`` replaced by ``elbo_fn(new_state)`` (e.g. the exact ELBO of a
    batch method that reports a Monte Carlo estimate, so that the runner's stopping rule and trace
    see the exact value). ``info`` must be a NamedTuple with an ``elbo`` field."""

    def step(state, batch, key):
        state, info = alg.step(state, batch, key)
        return state, info._replace(elbo=elbo_fn(state))

    return VIAlgorithm(alg.init, step)


def select_restart(tree: PyTree, index) -> PyTree:
    """Restart ``index`` of a pytree whose leaves have a leading restart axis."""
    return jax.tree_util.tree_map(lambda a: a[index], tree)


__all__ = ["check_algorithm", "lock_step", "replace_elbo", "restarts", "select_restart"]
