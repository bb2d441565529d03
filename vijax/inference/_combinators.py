"""Combinators: algorithms built from algorithms, so that experiments never write their own loops.

- :func:`restarts`: R independent copies in lock step under ``vmap``;
- :func:`hyperparameter_grid`: a grid of a model's hyperparameters (LDA's alpha x eta) as one
  ``vmap``ped program, the values held in each point's state (``inject_hyperparameters``);
- :func:`factory_grid`: a grid of an algorithm factory's constants (a step size, a learning rate)
  as one ``vmap``ped program, the values held in the state (:class:`GridState`);
- :func:`lock_step`: several algorithms side by side on the same batches, one state dict, for
  comparisons in one run (and one checkpoint);
- :func:`replace_elbo`: an algorithm whose ``info.elbo`` is another function of the new state
  (e.g. an exact ELBO where the algorithm reports a Monte Carlo estimate).
"""

from __future__ import annotations

import inspect
import math
from typing import Callable, Mapping, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import (
    ArgumentError,
    check_allocation,
    check_int,
    check_positive,
    implements,
    real_array,
    vmap_with_checks,
)
from vijax.inference._conjugate import float_leaf_dtype, inject_hyperparameters
from vijax.inference.base import VIAlgorithm, bind_settings
from vijax.types import Array, PyTree


def check_algorithm(name: str, alg) -> None:
    """Raises ValueError naming ``name`` unless ``alg`` is an algorithm: an object with callable
    ``init`` and ``step`` (a ``VIAlgorithm``, as every factory returns)."""
    if not (callable(getattr(alg, "init", None)) and callable(getattr(alg, "step", None))):
        raise ArgumentError(
            name,
            f"{name} must be an algorithm (a VIAlgorithm with init and step, e.g. vijax.inference.svi(...)), "
            f"got {alg!r}",
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
        ``jax.eval_shape`` of one restart's) would not fit in the machine's memory.
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

    return VIAlgorithm(init, bind_settings(_restarts_step, inner=alg.step, num_restarts=num_restarts))


def _restarts_step(key, state, batch, *, inner, num_restarts):
    # the restarts' batch checks enforced once, outside the vmap (vmap_with_checks)
    return vmap_with_checks(inner, in_axes=(0, 0, None))(jax.random.split(key, num_restarts), state, batch)


def _grid_values(values: Mapping, what: str) -> tuple[dict[str, np.ndarray], int]:
    """The grid's values as NumPy arrays of one length G >= 1 (int64 where they are all integers,
    as given, else float64), and G; ValueError naming the argument that is not a non-empty 1-D
    sequence of finite numbers, or whose length differs."""
    if not values:
        raise ArgumentError(
            "values", f"values: name at least one {what} with one value per grid point (e.g. alpha=[0.1, 0.5])"
        )
    arrays, length = {}, None
    for name, v in values.items():
        a = real_array(name, v, "a 1-D sequence of finite numbers, one per grid point")
        if a.ndim != 1 or a.size == 0:
            raise ArgumentError(
                name, f"{name} must be a non-empty 1-D sequence (one value per grid point), got shape {a.shape}"
            )
        if not np.all(np.isfinite(a)):
            raise ArgumentError(name, f"{name} must be finite, got {a.tolist()}")
        given = np.asarray(v)
        if np.issubdtype(given.dtype, np.integer):  # integers stay integers: the values as given
            a = given.astype(np.int64)
        if length is not None and a.size != length:
            first = next(iter(arrays))
            raise ArgumentError(
                name,
                f"{name} has {a.size} values but {first} has {length}: every value lists one entry per grid "
                "point (expand a product of settings, e.g. with itertools.product, before passing it)",
            )
        arrays[name], length = a, a.size
    return arrays, length


def _check_grid_memory(state_shape, num_points: int, name: str) -> None:
    """Refuses, before allocating, G states (and the G new ones a step makes) that would not fit."""
    per = sum(math.prod(x.shape) * x.dtype.itemsize for x in jax.tree_util.tree_leaves(state_shape))
    check_allocation(f"{name} ({num_points} points of a {per}-byte state, twice)", 2 * num_points * per, 1)


def hyperparameter_grid(alg: VIAlgorithm, model, **values) -> VIAlgorithm:
    """A grid of a model's hyperparameters (LDA's alpha and eta) as one ``vmap``ped program.

    ``values`` maps each hyperparameter to G values, one per grid point (a product of settings
    already expanded: ``alpha=[a1, a1, a2, a2], eta=[e1, e2, e1, e2]``). ``init(key, batch=None)``
    makes ONE initial state, ``alg.init(key, batch)``, and holds each point's values in a copy of
    it (:func:`vijax.inference.inject_hyperparameters`, under ``vmap``): the state is ``alg``'s with
    a leading axis of size G (``state.hyper[name][g]`` is point g's value). ``step(key, state, batch)``
    is ``vmap(alg.step, in_axes=(None, 0, None))``: every point sees the same batch and the same
    key, so point g follows exactly the run of ``alg`` built with the model's hyperparameters set to
    point g's values, from the same key (up to the rounding of the batched program), and the whole
    grid compiles once. ``info`` fields gain the leading axis G. As in :func:`restarts`, the step's
    batch checks are collected inside the vmap and enforced outside it (``vmap_with_checks``).

    Restarts go outside: ``restarts(hyperparameter_grid(alg, model, ...), R)`` has states with
    leading axes (R, G); restart r of point g equals restart r of ``restarts(alg_g, R)``, ``alg_g``
    the algorithm of point g's model (the same R keys at init and at every step). (The other order
    would inject unbatched values into states with a restart axis.) Point g of every restart:
    ``jax.tree_util.tree_map(lambda a: a[:, g], state)``.

    Example (Hoffman and Blei, "Structured Stochastic Variational Inference", 2015, §4.1: the grid
    of alpha x eta)::

        alphas, etas = zip(*itertools.product([0.01, 0.1, 0.5], [0.01, 0.1, 1.0]))
        alg = restarts(hyperparameter_grid(ssvi(model, num_data=N), model, alpha=alphas, eta=etas), 5)

    Args:
      alg: an algorithm whose state has a ``hyper`` field (``svi``, ``ssvi``, ``ssvi_a``, ``map``).
      model: the ``HyperparameterModel`` ``alg`` was built with.
      **values: hyperparameter name -> a 1-D sequence of G finite numbers, each checked as the
        model checks its own (``model.check_hyperparameters`` where the model has one, e.g. LDA's
        concentrations; else a positive number); the hyperparameters not named keep the model's
        values.

    Raises:
      ValueError: naming ``alg`` when it is not an algorithm, ``model`` without hyperparameters,
        ``values`` when none is given, the value that is not a hyperparameter of the model, not a
        non-empty 1-D sequence of finite numbers, of another length than the first, or outside
        the hyperparameter's domain (the model's own check); at ``init``,
        ``state`` for an algorithm without a ``hyper`` field, and ``values`` when the G states would
        not fit in memory.
    """
    from vijax.models import HyperparameterModel

    check_algorithm("alg", alg)
    if not implements(model, HyperparameterModel):
        raise ArgumentError(
            "model", f"model must offer hyperparameters() (a HyperparameterModel), got {type(model).__name__}"
        )
    known = model.hyperparameters()
    unknown = [n for n in values if n not in known]
    if unknown:
        raise ArgumentError(
            unknown[0], f"{unknown[0]} is not a hyperparameter of {type(model).__name__}; choose from {sorted(known)}"
        )
    arrays, num_points = _grid_values(values, "hyperparameter")
    _check_hyperparameter_values(model, arrays)

    def init(key, batch=None):
        one = jax.eval_shape(lambda k: alg.init(k, batch), key)
        if "hyper" not in getattr(one, "_fields", ()):
            raise ValueError(
                f"state must be a state of svi, ssvi, ssvi_a or map (with a hyper field), got {type(one).__name__}"
            )
        _check_grid_memory(one, num_points, "values")
        state = alg.init(key, batch)
        dt = float_leaf_dtype(state.q_global)
        vals = {n: jnp.asarray(a, dt) for n, a in arrays.items()}  # the dtype a model's own value would get
        return jax.vmap(lambda v: inject_hyperparameters(state, model, **v))(vals)

    return VIAlgorithm(init, bind_settings(_grid_step, inner=alg.step))


@runtime_checkable
class ChecksHyperparameters(Protocol):
    """A model that checks values of its hyperparameters itself (LDA: each a concentration in
    (0, c] of its dtype), raising ValueError naming the value."""

    def check_hyperparameters(self, values: dict) -> None: ...


def _check_hyperparameter_values(model, arrays: Mapping[str, np.ndarray]) -> None:
    """The grid's values checked as the model checks its own (a :class:`ChecksHyperparameters`),
    else as the positive numbers a ``HyperparameterModel``'s hyperparameters are."""
    if implements(model, ChecksHyperparameters):
        model.check_hyperparameters(dict(arrays))
        return
    for name, a in arrays.items():
        check_positive(name, a)


def _grid_step(key, state, batch, *, inner):
    # the points' batch checks enforced once, outside the vmap (vmap_with_checks)
    return vmap_with_checks(inner, in_axes=(None, 0, None))(key, state, batch)


def _check_traced_arguments(factory: Callable, arrays: Mapping[str, np.ndarray]) -> None:
    """Builds ``factory`` once per gridded argument under ``vmap`` over that argument's values (the
    others at the first point), as the grid's ``init`` and ``step`` do, so that an argument the
    factory needs concrete (one that sets a shape, e.g. a number of samples) is refused here,
    naming it; only the factory runs (no ``init`` or ``step``)."""
    first = {n: a[0].item() for n, a in arrays.items()}
    for name, a in arrays.items():

        def build(v, name=name):
            check_algorithm("factory(...)", factory(**{**first, name: v}))
            return v

        try:
            jax.vmap(build)(jnp.asarray(a))  # as init and step call it; nothing is computed
        except (ValueError, TypeError) as e:
            raise ArgumentError(
                name,
                f"{name} cannot be gridded: every point of the grid runs in one vmapped program, where "
                f"factory(...) gets {name} as a traced array, and it refuses one ({type(e).__name__}: {e}). "
                "An argument that sets a shape or is checked on the host (a number of samples, an "
                "iteration count) needs one algorithm per value: run them side by side with lock_step",
            ) from e


class GridState(NamedTuple):
    """The state of :func:`factory_grid`: ``state``, the algorithm's state at each point (leaves with
    a leading axis G); ``values``, name -> (G,) array, the factory's constants at each point."""

    state: PyTree
    values: dict


def factory_grid(factory: Callable[..., VIAlgorithm], **values) -> VIAlgorithm:
    """A grid of an algorithm factory's constants (a step size, a learning rate, a schedule's
    scale) as one ``vmap``ped program: the constants live in the state (as optax's
    ``inject_hyperparams`` holds an optimizer's), so that every point shares one compiled step.

    ``factory(**point)`` builds the algorithm of one grid point; ``values`` maps each of its keyword
    arguments to G values, one per point. The state is a :class:`GridState`: the points' states
    (leading axis G) and their values. ``init(key, batch=None)`` is
    ``vmap(lambda v: factory(**v).init(key, batch))`` over the values (every point from the same
    key); ``step(key, state, batch)`` calls ``factory(**v).step(key, s, batch)`` under ``vmap`` over
    the points with the same batch and the same key, so point g follows the run of
    ``factory(**point_g)`` exactly (up to the rounding of the batched program). Inside the vmap the
    factory gets traced scalars, which the factories' argument checks let through
    (``vijax.inference.schedules.as_schedule``); every point is also built once with its concrete
    values at construction, so that a bad value is refused by the factory's own checks, naming its
    argument. The step's batch checks are collected inside the vmap and enforced outside it
    (``vmap_with_checks``). Restarts go outside, as with :func:`hyperparameter_grid`:
    ``restarts(factory_grid(...), R)``.

    Example (Khan et al., "Faster Stochastic Variational Inference using Proximal-Gradient Methods
    with General Divergence Functions", 2016, §6.1, Fig. 1: a sweep of PG-SVI's step size)::

        alg = factory_grid(lambda beta: prox_svi(model, num_data=N, schedule=beta), beta=[0.1, 0.3, 1.0])

    Args:
      factory: keyword arguments -> ``VIAlgorithm``.
      **values: a keyword argument of ``factory`` -> a 1-D sequence of G finite numbers; integers
        stay integers (the factory gets ``int`` values at construction, integer arrays under the
        ``vmap``).

    Raises:
      ValueError: naming ``factory`` when it is not callable, ``values`` when none is given, the
        value that ``factory`` does not take, that is not a non-empty 1-D sequence of finite numbers
        or has another length than the first, that the factory refuses (its own ValueError), or
        that it refuses as a traced value (an argument that sets a shape, such as a number of
        samples, cannot be gridded in one program); at ``init``, ``values`` when the G states
        would not fit in memory.
    """
    if not callable(factory):
        raise ArgumentError(
            "factory", f"factory must be a callable keyword arguments -> VIAlgorithm, got {factory!r}", value=factory
        )
    try:
        inspect.signature(factory).bind_partial(**{n: None for n in values})
    except TypeError as e:
        bad = next(iter(values)) if values else "values"
        try:
            params = inspect.signature(factory).parameters
            bad = next((n for n in values if n not in params), bad)
        except (TypeError, ValueError):
            pass
        raise ArgumentError(bad, f"{bad} is not an argument of factory {factory!r} ({e})") from None
    except ValueError:  # no signature (a builtin): the calls below tell
        pass
    arrays, num_points = _grid_values(values, "argument of the factory")
    for g in range(num_points):  # the factory's own checks, on concrete values (ints stay ints)
        check_algorithm("factory(...)", factory(**{n: a[g].item() for n, a in arrays.items()}))
    _check_traced_arguments(factory, arrays)

    def init(key, batch=None):
        vals = {n: jnp.asarray(a) for n, a in arrays.items()}
        one = jax.eval_shape(lambda k, v: factory(**v).init(k, batch), key, {n: v[0] for n, v in vals.items()})
        _check_grid_memory(one, num_points, "values")
        return GridState(jax.vmap(lambda v: factory(**v).init(key, batch))(vals), vals)

    def step(key, state, batch):
        def one(k, s, v, b):
            return factory(**v).step(k, s, b)

        new, info = vmap_with_checks(one, in_axes=(None, 0, 0, None))(key, state.state, state.values, batch)
        return GridState(new, state.values), info

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
      ValueError: for no algorithms, a name that is not a string or is ``"elbo"`` (naming
        ``algorithms``), a value of ``algorithms`` that is not an algorithm (naming it), an unknown
        ``primary``, ``info_fields`` that are not strings, or ``init_groups`` that do not name every
        algorithm with a group in 0 .. G - 1.
    """
    if not isinstance(algorithms, Mapping) or not algorithms:
        raise ArgumentError(
            "algorithms",
            f"algorithms must be a non-empty dict name -> VIAlgorithm, got {algorithms!r}",
            value=algorithms,
        )
    for name, alg in algorithms.items():
        if not isinstance(name, str) or name == "elbo":
            raise ArgumentError(
                "algorithms",
                f"algorithms: every name must be a string other than 'elbo' (the names key the state and "
                f"info dicts, beside info['elbo']), got {name!r} ({type(name).__name__}); "
                "name them e.g. {'svi': ..., 'cavi': ...}",
                value=algorithms,
            )
        check_algorithm(f"algorithms[{name!r}]", alg)
    names = tuple(algorithms)
    if primary is not None and primary not in algorithms:
        raise ArgumentError("primary", f"primary={primary!r} is not one of {names}")
    if isinstance(info_fields, str):  # one field; tuple("elbo") would be its letters
        info_fields = (info_fields,)
    info_fields = tuple(info_fields)
    if not all(isinstance(f, str) for f in info_fields):
        raise ArgumentError(
            "info_fields", f"info_fields must be names of info fields (strings), got {info_fields!r}", value=info_fields
        )
    if init_groups is not None:
        groups = sorted(set(init_groups.values()))
        if set(init_groups) != set(names) or groups != list(range(len(groups))):
            raise ArgumentError(
                "init_groups",
                f"init_groups must map every algorithm of {names} to a group 0 .. G - 1, got {dict(init_groups)!r}",
            )

    def init(key, batch=None):
        if init_groups is None:
            return {m: alg.init(key, batch) for m, alg in algorithms.items()}
        keys = jax.random.split(key, len(set(init_groups.values())))
        return {m: alg.init(keys[init_groups[m]], batch) for m, alg in algorithms.items()}

    steps = tuple(algorithms[m].step for m in names)  # a tuple: the split keys follow the names' order
    step = bind_settings(_lock_step_step, names=names, steps=steps, primary=primary, info_fields=info_fields)
    return VIAlgorithm(init, step, LockStep(names))


class LockStep(NamedTuple):
    """The ``extras`` of a :func:`lock_step` algorithm: it declares that its state and info are
    dicts per algorithm (of ``names``)."""

    names: tuple


def _lock_step_step(key, state, batch, *, names, steps, primary, info_fields):
    keys = jax.random.split(key, len(names))
    new, info = {}, {}
    for m, step, k in zip(names, steps, keys):
        new[m], inf = step(k, state[m], batch)
        info[m] = {f: getattr(inf, f) for f in info_fields if hasattr(inf, f)}
    lead = primary if primary is not None else next((m for m in names if "elbo" in info[m]), None)
    if lead is not None and "elbo" in info[lead]:
        info["elbo"] = info[lead]["elbo"]
    return new, info


def replace_elbo(alg: VIAlgorithm, elbo_fn: Callable[[PyTree], Array]) -> VIAlgorithm:
    """``alg`` with ``info.elbo`` replaced by ``elbo_fn(new_state)`` (e.g. the exact ELBO of a
    batch method that reports a Monte Carlo estimate, so that the runner's stopping rule and trace
    see the exact value). ``info`` must be a NamedTuple with an ``elbo`` field, and ``elbo_fn``
    return one real array shaped like it: a scalar for one run, ``(R,)`` for
    ``replace_elbo(restarts(alg, R), elbo_fn)`` (``restarts(replace_elbo(alg, elbo_fn), R)``
    calls ``elbo_fn`` on each restart's state, for a scalar).

    Raises:
      ValueError: naming ``alg`` when it is not an algorithm or is a :func:`lock_step` (its info
        is a dict per algorithm: replace the ELBO of an algorithm before ``lock_step``), or its step
        reports no ``info.elbo``; naming ``elbo_fn`` when it is not callable, at ``init`` when it
        does not return one real array for the initial state, and when the step is traced when
        its value has another shape than the algorithm's ``info.elbo``.
    """
    check_algorithm("alg", alg)
    if isinstance(alg.extras, LockStep):
        raise ArgumentError(
            "alg",
            "alg is a lock_step of several algorithms, whose info is a dict per algorithm; replace the "
            "ELBO of an algorithm before lock_step, e.g. lock_step({'a': replace_elbo(alg_a, elbo_fn), ...})",
        )
    if not callable(elbo_fn):
        raise ArgumentError(
            "elbo_fn", f"elbo_fn must be a function state -> ELBO (a real array), got {elbo_fn!r}", value=elbo_fn
        )

    def init(key, batch=None):
        state = alg.init(key, batch)
        try:
            out = jax.eval_shape(elbo_fn, state)  # on shapes: nothing is computed
        except TypeError as e:  # a value that is no JAX type (a string, an object)
            raise ArgumentError(
                "elbo_fn", f"elbo_fn must return one real array (the ELBO of the state); on the initial state: {e}"
            ) from e
        _elbo_shape(elbo_fn, out)
        return state

    return VIAlgorithm(init, bind_settings(_replace_elbo_step, inner=alg.step, elbo_fn=elbo_fn))


def _elbo_shape(elbo_fn, out) -> tuple:
    """The shape of ``elbo_fn``'s value ``out`` (an array or its ``ShapeDtypeStruct``), after
    checking that it is one real array; ValueError naming ``elbo_fn`` otherwise."""
    if isinstance(out, (int, float, np.number)) and not isinstance(out, (bool, np.bool_)):
        out = jnp.asarray(out)  # a Python number: a weakly typed scalar
    dtype = getattr(out, "dtype", None)
    if dtype is None or not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
        got = type(out).__name__ if dtype is None else f"an array of dtype {dtype}"
        raise ArgumentError("elbo_fn", f"elbo_fn must return one real array (the ELBO of the state), got {got}")
    return tuple(out.shape)


def _replace_elbo_step(key, state, batch, *, inner, elbo_fn):
    state, info = inner(key, state, batch)
    if "elbo" not in getattr(info, "_fields", ()):
        raise ArgumentError(
            "alg", f"alg's step must report an info NamedTuple with an elbo field to replace, got {type(info).__name__}"
        )
    elbo = elbo_fn(state)
    shape, want = _elbo_shape(elbo_fn, elbo), tuple(jnp.shape(info.elbo))
    elbo = jnp.asarray(elbo)
    if shape != want:  # shapes are static: checked when the step is traced, not in the program
        raise ArgumentError(
            "elbo_fn",
            f"elbo_fn must return an array shaped like the algorithm's info.elbo, {want} (a scalar for one "
            f"run), got shape {shape}",
        )
    return state, info._replace(elbo=elbo)


def select_restart(tree: PyTree, index) -> PyTree:
    """Restart ``index`` of a pytree whose leaves have a leading restart axis."""
    return jax.tree_util.tree_map(lambda a: a[index], tree)


__all__ = [
    "GridState",
    "check_algorithm",
    "factory_grid",
    "hyperparameter_grid",
    "lock_step",
    "replace_elbo",
    "restarts",
    "select_restart",
]
