"""Combinators: algorithms built from algorithms (restarts, grids, lock step, a replaced ELBO). The
``vmap``ped ones enforce the step's batch checks outside the vmap (``vmap_with_checks``)."""

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
    check_scalar,
    implements,
    real_array,
    vmap_with_checks,
)
from vijax.inference._conjugate import float_leaf_dtype, inject_hyperparameters, model_hyperparameters
from vijax.inference.base import VIAlgorithm, bind_settings, safe_increment
from vijax.types import Array, PRNGKey, PyTree


def check_algorithm(name: str, alg) -> None:
    """Raises ValueError naming ``name`` unless ``alg`` has callable ``init`` and ``step``."""
    if not (callable(getattr(alg, "init", None)) and callable(getattr(alg, "step", None))):
        raise ArgumentError(
            name,
            f"{name} must be an algorithm (a VIAlgorithm with init and step, e.g. vijax.inference.svi(...)), "
            f"got {alg!r}",
        )


def restarts(alg: VIAlgorithm, num_restarts: int) -> VIAlgorithm:
    """Runs ``num_restarts`` independent copies of ``alg`` in lock step with ``vmap``: state and info gain
    a leading axis R, each restart its own key. Pick one with ``select_restart(state, jnp.argmax(info.elbo))``.

    Raises:
      ValueError: naming ``alg`` (not an algorithm) or ``num_restarts`` (< 1, or too many to fit in memory).
    """
    check_algorithm("alg", alg)
    num_restarts = check_int("num_restarts", num_restarts)
    check_allocation("num_restarts (the key of each restart)", num_restarts, 8)

    def init(key, batch=None):
        _check_memory(jax.eval_shape(lambda k: alg.init(k, batch), key), num_restarts, "num_restarts", "restarts")
        return jax.vmap(lambda k: alg.init(k, batch))(jax.random.split(key, num_restarts))

    return VIAlgorithm(init, bind_settings(_restarts_step, inner=alg.step, num_restarts=num_restarts))


def _restarts_step(key, state, batch, *, inner, num_restarts):
    return vmap_with_checks(inner, in_axes=(0, 0, None))(jax.random.split(key, num_restarts), state, batch)


def _grid_values(values: Mapping, what: str) -> tuple[dict[str, np.ndarray], int]:
    """The grid's values as NumPy arrays of one length G >= 1 (int64 for integers), and G."""
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
        if np.issubdtype(given.dtype, np.integer):
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


def _check_memory(state_shape, num: int, name: str, what: str = "points") -> None:
    """Refuses, before allocating, ``num`` states (and the ``num`` new ones a step makes) that would not fit."""
    per = sum(math.prod(x.shape) * x.dtype.itemsize for x in jax.tree_util.tree_leaves(state_shape))
    check_allocation(f"{name} ({num} {what} of a {per}-byte state, twice)", 2 * num * per, 1)


def hyperparameter_grid(alg: VIAlgorithm, model, **values) -> VIAlgorithm:
    """A grid of a model's hyperparameters (LDA's alpha and eta) as one ``vmap``ped program.

    ``init`` injects each point's values into a copy of one ``alg.init(key, batch)``
    (:func:`vijax.inference.inject_hyperparameters`); ``step`` is ``vmap(alg.step, in_axes=(None, 0,
    None))``, so point g follows ``alg``'s run with its values. Restarts go outside (axes (R, G)).

    Example (Hoffman and Blei 2015, §4.1: the grid of alpha x eta)::

        alphas, etas = zip(*itertools.product([0.01, 0.1, 0.5], [0.01, 0.1, 1.0]))
        alg = restarts(hyperparameter_grid(ssvi(model, num_data=N), model, alpha=alphas, eta=etas), 5)

    Args:
      alg: an algorithm whose state has a ``hyper`` field (``svi``, ``ssvi``, ``ssvi_a``, ``map``).
      model: the ``HyperparameterModel`` ``alg`` was built with.
      **values: hyperparameter name -> a 1-D sequence of G finite numbers in its domain.

    Raises:
      ValueError: naming the argument, for a bad one; at ``init``, a state without ``hyper`` or too large a grid.
    """
    check_algorithm("alg", alg)
    model_hyperparameters(model, values)
    arrays, num_points = _grid_values(values, "hyperparameter")
    if implements(model, ChecksHyperparameters):
        model.check_hyperparameters(dict(arrays))
    else:
        for name, a in arrays.items():
            check_positive(name, a)

    def init(key, batch=None):
        one = jax.eval_shape(lambda k: alg.init(k, batch), key)
        if "hyper" not in getattr(one, "_fields", ()):
            raise ValueError(
                f"state must be a state of svi, ssvi, ssvi_a or map (with a hyper field), got {type(one).__name__}"
            )
        _check_memory(one, num_points, "values")
        state = alg.init(key, batch)
        dt = float_leaf_dtype(state.q_global)
        vals = {n: jnp.asarray(a, dt) for n, a in arrays.items()}
        return jax.vmap(lambda v: inject_hyperparameters(state, model, **v))(vals)

    return VIAlgorithm(init, bind_settings(_grid_step, inner=alg.step))


@runtime_checkable
class ChecksHyperparameters(Protocol):
    """A model that checks values of its hyperparameters itself, raising ValueError naming the value."""

    def check_hyperparameters(self, values: dict) -> None: ...


def _grid_step(key, state, batch, *, inner):
    return vmap_with_checks(inner, in_axes=(None, 0, None))(key, state, batch)


class GridState(NamedTuple):
    """The state of :func:`factory_grid`: the points' states (leading axis G) and ``values``, name -> (G,)."""

    state: PyTree
    values: dict


def factory_grid(factory: Callable[..., VIAlgorithm], **values) -> VIAlgorithm:
    """A grid of an algorithm factory's constants (a step size, a learning rate) as one ``vmap``ped
    program, the constants held in the state (as optax's ``inject_hyperparams``): ``init`` and ``step``
    run ``factory(**v)``'s under ``vmap`` over the points, so point g follows ``factory(**point_g)``'s
    run. Every point is also built once with concrete values, for the factory's own checks.

    Example (Khan et al. 2016, §6.1, Fig. 1: a sweep of PG-SVI's step size)::

        alg = factory_grid(lambda beta: prox_svi(model, num_data=N, schedule=beta), beta=[0.1, 0.3, 1.0])

    Args:
      factory: keyword arguments -> ``VIAlgorithm``.
      **values: a keyword argument of ``factory`` -> a 1-D sequence of G finite numbers (ints stay ints).

    Raises:
      ValueError: naming the argument: a factory that is not callable, no values, one the factory
        does not take, a bad sequence or length, a value the factory refuses (concrete or traced:
        one that sets a shape cannot be gridded); at ``init``, G states that would not fit in memory.
    """
    if not callable(factory):
        raise ArgumentError(
            "factory", f"factory must be a callable keyword arguments -> VIAlgorithm, got {factory!r}", value=factory
        )
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):  # no signature to read: the concrete builds below check
        sig = None
    try:
        if sig is not None:
            sig.bind_partial(**{n: None for n in values})
    except TypeError as e:
        bad = next((n for n in values if n not in sig.parameters), next(iter(values), "values"))
        raise ArgumentError(bad, f"{bad} is not an argument of factory {factory!r} ({e})") from None
    arrays, num_points = _grid_values(values, "argument of the factory")
    for g in range(num_points):
        check_algorithm("factory(...)", factory(**{n: a[g].item() for n, a in arrays.items()}))
    # each gridded argument built under vmap, so that one the factory needs concrete is refused, naming it
    first = {n: a[0].item() for n, a in arrays.items()}
    for name, a in arrays.items():

        def build(v, name=name):
            check_algorithm("factory(...)", factory(**{**first, name: v}))
            return v

        try:
            jax.vmap(build)(jnp.asarray(a))
        except (ValueError, TypeError) as e:
            raise ArgumentError(
                name,
                f"{name} cannot be gridded: every point of the grid runs in one vmapped program, where "
                f"factory(...) gets {name} as a traced array, and it refuses one ({type(e).__name__}: {e}). "
                "An argument that sets a shape or is checked on the host (a number of samples, an "
                "iteration count) needs one algorithm per value: run them side by side with lock_step",
            ) from e

    def init(key, batch=None):
        vals = {n: jnp.asarray(a) for n, a in arrays.items()}
        one = jax.eval_shape(lambda k, v: factory(**v).init(k, batch), key, {n: v[0] for n, v in vals.items()})
        _check_memory(one, num_points, "values")
        return GridState(jax.vmap(lambda v: factory(**v).init(key, batch))(vals), vals)

    def step(key, state, batch):
        one = lambda k, s, v, b: factory(**v).step(k, s, b)
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
    """Runs several algorithms side by side on the same batches, each with its own split of the key.

    The state is a dict name -> state; ``info`` a dict name -> {field: value} of ``info_fields``, plus
    ``info["elbo"]``, the ``primary`` algorithm's (default: the first that reports one).

    Args:
      algorithms: name -> ``VIAlgorithm``, in the order their keys are split.
      primary: the algorithm whose ELBO is ``info["elbo"]``.
      info_fields: the info fields kept per algorithm.
      init_groups: name -> group 0 .. G - 1, started from ``jax.random.split(key, G)[group]`` (None: ``key``).

    Raises:
      ValueError: naming the argument, for a bad one (a name that is not a string or is ``"elbo"``).
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
    info_fields = (info_fields,) if isinstance(info_fields, str) else tuple(info_fields)
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

    steps = tuple(algorithms[m].step for m in names)
    step = bind_settings(_lock_step_step, names=names, steps=steps, primary=primary, info_fields=info_fields)
    return VIAlgorithm(init, step, LockStep(names))


class LockStep(NamedTuple):
    """The ``extras`` of a :func:`lock_step`: its state and info are dicts per algorithm."""

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
    """``alg`` with ``info.elbo`` replaced by ``elbo_fn(new_state)`` (an exact ELBO for a method
    that reports an estimate), one real array shaped like ``info.elbo``.

    Raises:
      ValueError: naming ``alg`` (not an algorithm, a :func:`lock_step`, no ``info.elbo``) or ``elbo_fn``.
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
            out = jax.eval_shape(elbo_fn, state)
        except TypeError as e:
            raise ArgumentError(
                "elbo_fn", f"elbo_fn must return one real array (the ELBO of the state); on the initial state: {e}"
            ) from e
        _elbo_shape(elbo_fn, out)
        return state

    return VIAlgorithm(init, bind_settings(_replace_elbo_step, inner=alg.step, elbo_fn=elbo_fn))


def _elbo_shape(elbo_fn, out) -> tuple:
    """The shape of ``elbo_fn``'s value ``out``; ValueError naming ``elbo_fn`` unless one real array."""
    if isinstance(out, (int, float, np.number)) and not isinstance(out, (bool, np.bool_)):
        out = jnp.asarray(out)
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
    if shape != want:
        raise ArgumentError(
            "elbo_fn",
            f"elbo_fn must return an array shaped like the algorithm's info.elbo, {want} (a scalar for one "
            f"run), got shape {shape}",
        )
    return state, info._replace(elbo=elbo)


def select_restart(tree: PyTree, index) -> PyTree:
    """Restart ``index`` of a pytree whose leaves have a leading restart axis."""
    return jax.tree_util.tree_map(lambda a: a[index], tree)


class AveragedState(NamedTuple):
    """inner: the algorithm's state (its iterate); mean: the weighted average of its iterates, a state of the
    algorithm (what ``sample``, ``log_weights``... read); count: int32 iterates averaged."""

    inner: PyTree
    mean: PyTree
    count: Array

    @property
    def q_global(self) -> PyTree:
        """q of the averaged iterates."""
        return self.mean.q_global


def averaged(alg: VIAlgorithm, *, eta: float = 3.0) -> VIAlgorithm:
    """``alg`` whose iterates are averaged (Polyak and Juditsky 1992, "Acceleration of stochastic approximation by
    averaging"), with polynomial-decay weights (Shamir and Zhang 2013, "Stochastic gradient descent for non-smooth
    optimization: convergence results and optimal averaging schemes"):

        mean_t = (1 - w_t) mean_{t-1} + w_t x_t,    w_t = (eta + 1) / (t + eta + 1),    t = 0, 1, ...

    over every float leaf of the state (a ``vijax.expfam`` family's leaves are its natural parameters, so q's
    average is the natural parameters' average, in their convex domain). The weights forget the start as
    (t_0 / t)^(eta + 1) and keep about (2 eta + 1) / (eta + 1)^2 of the t iterates' worth of averaging: a stochastic
    step's noise (minibatches, Monte Carlo draws) falls as 1 / sqrt(t) in the average, against the last iterate's
    noise floor of a step size's. ``step`` moves the iterate as ``alg`` does and reports its info; ``sample``,
    ``log_weights``, ``local_q`` and ``fitted_params`` read the average (``state.mean``).

    Raises:
      ArgumentError: naming ``alg`` (not an algorithm) or ``eta`` (not >= 0).
    """
    check_algorithm("alg", alg)
    eta = check_scalar("eta", eta, low=0.0, include_low=True, high=None)

    def init(key, batch=None):
        state = alg.init(key, batch)
        return AveragedState(state, state, jnp.zeros((), jnp.int32))

    return VIAlgorithm(init, bind_settings(_averaged_step, inner=alg.step, eta=eta), _AveragedExtras(alg))


def _averaged_step(key, state, batch, *, inner, eta):
    if not isinstance(state, AveragedState):
        raise ArgumentError(
            "state", f"state must be the averaged algorithm's AveragedState (from its init), got {type(state).__name__}"
        )
    new, info = inner(key, state.inner, batch)
    w = (eta + 1.0) / (state.count.astype(jnp.float32) + eta + 1.0)

    def move(m, x):
        if not jnp.issubdtype(x.dtype, jnp.inexact):
            return x
        return (m + w.astype(x.dtype) * (x - m)).astype(x.dtype)

    return AveragedState(new, jax.tree.map(move, state.mean, new), safe_increment(state.count)), info


class _AveragedExtras:
    """``averaged``'s ``VIAlgorithm.extras``: ``alg``'s, at the averaged iterates."""

    def __init__(self, alg: VIAlgorithm):
        self.alg = alg

    def _inner(self, what: str):
        method = getattr(self.alg.extras, what, None)
        if method is None:
            raise ArgumentError("alg", f"alg: the averaged algorithm offers no {what}")
        return method

    def sample(self, key: PRNGKey, state, num_samples: int) -> PyTree:
        return self._inner("sample")(key, state.mean, num_samples)

    def log_weights(self, key: PRNGKey, state, batch: PyTree, num_samples: int) -> Array:
        return self._inner("log_weights")(key, state.mean, batch, num_samples)

    def local_q(self, state, batch: PyTree) -> dict:
        return self._inner("local_q")(state.mean, batch)

    def fitted_params(self, state) -> dict:
        return self._inner("fitted_params")(state.mean)

    def inner_state(self, state) -> PyTree:
        """``alg``'s state at the averaged iterates."""
        return state.mean
