"""The target: a model from another library as what vijax's algorithms take (see the package docstring)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional

import jax
import numpy as np
from jax.extend.core import jaxpr_as_fun

from vijax.types import Array, PyTree
from vijax._validate import ArgumentError, ids_in_range, is_tracer

# the supports ``vijax.inference.auto_family`` matches to a family; every other support is "other"
SUPPORTS = ("real", "positive", "unit_interval", "simplex", "other")
# a discrete site's support: {0, 1}, {0, ..., K - 1}, {0, 1, 2, ...} (q: Bernoulli, Categorical, Poisson)
DISCRETE_SUPPORTS = ("binary", "finite", "count")


@dataclasses.dataclass(frozen=True)
class Site:
    """A latent site of a target.

    Attributes:
      name: the site's name in the model.
      shape: the shape of its constrained value.
      unconstrained_shape: the shape of its unconstrained value (one less in the last axis for a simplex); a discrete
        site's, the shape of its q's natural parameter (``shape + (K,)`` logits for ``"finite"``).
      support: one of ``SUPPORTS`` (``"other"``: no exponential family matches it), or of ``DISCRETE_SUPPORTS``.
      constraint: the library's own description of the support: a NumPyro constraint, or the TFP bijector onto it.
    """

    name: str
    shape: tuple[int, ...]
    unconstrained_shape: tuple[int, ...]
    support: str
    constraint: Any


@dataclasses.dataclass(frozen=True, eq=False)
class Target:
    """A model's log-density over its latent sites, on the constrained and the unconstrained space.

    Parameters are dicts keyed by site name. ``transform`` is the library's map from the unconstrained space, so that

        log_density(u, batch) = log_prob(constrain(u), batch) + log |det d constrain / du|.

    Attributes:
      log_prob: ``(params, batch) -> scalar``, the log-joint at constrained values, with the model's own scaling.
      log_density: ``(params_u, batch) -> scalar``, the log-joint on the unconstrained space, Jacobian included.
      transform: ``params_u -> (params, log |det J|)``.
      unconstrain: ``params -> params_u``, the inverse of ``constrain``.
      sites: site name -> :class:`Site`, the latent sites in the model's order.
      init_params: the unconstrained starting point (the median of 15 prior draws).
      plates: the subsampled plates, name -> (size N, subsample size M); a batch gives each one's indices.
      batch_keys: the argument names (NumPyro) or observed sites (TFP) a batch may hold; None for ``**kwargs``.
      library: ``"numpyro"`` or ``"tfp"``.
      bind: ``batch -> (model, args, kwargs)`` (NumPyro) or ``(joint_dist, observed)`` (TFP) at that batch.
      enumerated: the discrete latent sites summed out of ``log_prob`` and ``log_density`` (not in ``sites``).
      params: name -> :class:`Site` of each ``numpyro.param`` (a point, not a distribution: no prior, no Jacobian).
        A batch gives their constrained values under their names; where it does not, each is at its start.
      param_init: the params' unconstrained starts (the model's ``init_value``).
      locals: the local latent sites, name -> (:class:`Site`, the subsampled plate it lies in): one value per data
        point, not in ``sites``. Their ``shape`` is a minibatch's, the plate's subsample size M first; ``log_prob``
        and ``log_density`` take their values at a batch's indices (scaled by N / M as the model scales them), and
        ``transform``'s Jacobian is the global sites'. Only ``vijax.inference.amortized`` fits such a target.
      local_inputs: ``batch -> {plate: (M, D) array}``, each plate's observed values at the batch's indices, one
        flattened row per data point (what an encoder of the plate's local sites reads); None without locals.
      discrete: the discrete latent sites not summed out, name -> :class:`Site` (support in ``DISCRETE_SUPPORTS``),
        not in ``sites``: ``log_prob`` and ``log_density`` take their values; ``transform`` leaves them as they are.
        Only ``vijax.inference.discrete_bbvi`` fits such a target.
      blanket_terms: ``(params, batch) -> {discrete site: array of its shape}``, for each element z_j the log-joint's
        terms in its Markov blanket (its own and its children's, scaled as the model scales them); None without
        discrete sites.
    """

    log_prob: Callable[[PyTree, Any], Array]
    log_density: Callable[[PyTree, Any], Array]
    transform: Callable[[PyTree], tuple[PyTree, Array]]
    unconstrain: Callable[[PyTree], PyTree]
    sites: Mapping[str, Site]
    init_params: dict
    plates: Mapping[str, tuple[int, int]]
    batch_keys: Optional[tuple[str, ...]]
    library: str
    bind: Optional[Callable[[Any], tuple]] = None
    enumerated: tuple[str, ...] = ()
    params: Mapping[str, Site] = dataclasses.field(default_factory=dict)
    param_init: dict = dataclasses.field(default_factory=dict)
    locals: Mapping[str, tuple[Site, str]] = dataclasses.field(default_factory=dict)
    local_inputs: Optional[Callable[[Any], dict]] = None
    discrete: Mapping[str, Site] = dataclasses.field(default_factory=dict)
    blanket_terms: Optional[Callable[[PyTree, Any], dict]] = None

    def check_global(self, algorithm: str, discrete: bool = False) -> None:
        """Raises ArgumentError naming the first local site (``algorithm`` fits global sites only), or, unless
        ``discrete`` (``algorithm`` fits discrete sites), the first discrete site."""
        check_no_locals(self.locals, algorithm)
        if not discrete:
            check_no_discrete(self.discrete, algorithm)

    def constrain(self, params_u: PyTree) -> dict:
        """The constrained values of unconstrained ``params_u`` (a dict keyed by site name)."""
        return self.transform(params_u)[0]

    def check_data(self, batch: Any, name: str = "batch") -> None:
        """Raises ValueError naming ``name`` unless ``batch`` is None or a dict of what the model takes that gives
        every subsampled plate's indices."""
        check_batch(batch, self.batch_keys, self.plates, name)

    def batch_checks(self, batch: Any) -> list:
        """The value checks of a step's batch: every subsampled plate's indices in [0, its size)."""
        data = check_batch(batch, self.batch_keys, self.plates, "batch")
        return [ids_in_range(f"batch[{plate!r}] index", data[plate], size) for plate, (size, _) in self.plates.items()]


def check_no_locals(local_sites: Mapping[str, tuple[Site, str]], algorithm: str, params: Any = None) -> None:
    """Raises ArgumentError naming a local site (of ``Target.locals``): ``algorithm`` fits global sites only; with
    ``params``, only a local site whose values ``params`` lacks."""
    for name, (_, plate) in local_sites.items():
        if params is None or name not in params:
            raise ArgumentError(
                "target",
                f"site {name!r}: a local latent site inside the subsampled plate {plate!r} (one value per data "
                f"point); {algorithm} fits global sites only: fit the model by vijax.inference.amortized (an "
                "encoder of each data point), as vijax.fit does",
            )


def check_no_discrete(discrete: Mapping[str, Site], algorithm: str, params: Any = None) -> None:
    """Raises ArgumentError naming a discrete site (of ``Target.discrete``): ``algorithm`` fits continuous sites only;
    with ``params``, only a discrete site whose values ``params`` lacks."""
    for name, site in discrete.items():
        if params is None or name not in params:
            raise ArgumentError(
                "target",
                f"site {name!r}: a discrete latent site (support {site.support!r}) not summed out; {algorithm} fits "
                "continuous sites only: fit the model by vijax.inference.discrete_bbvi (score-function gradients), as "
                "vijax.fit does, or sum the site out (a finite one, marked infer={'enumerate': 'parallel'})",
            )


def check_in_support(name: str, value: Any, support: str) -> None:
    """Raises ValueError naming ``name`` when concrete values of a site are not finite or outside its ``support``."""
    if is_tracer(value):
        return
    a = np.asarray(value)  # its own float type: no float64 copy of many draws
    if not np.issubdtype(a.dtype, np.inexact):
        a = a.astype(np.float64)
    bad = ~np.isfinite(a)
    if support == "positive":
        bad |= a < 0
    elif support == "unit_interval":
        bad |= (a < 0) | (a > 1)
    elif support == "simplex":
        bad |= (a < 0) | (np.abs(np.sum(a, axis=-1, keepdims=True) - 1.0) > 1e-3)
    if np.any(bad):
        where = np.unravel_index(int(np.argmax(bad)), a.shape) if a.ndim else ()
        count = int(np.sum(bad))
        raise ArgumentError(
            name,
            f"{name}: {count} {'entry is' if count == 1 else 'entries are'} not finite or outside the site's "
            f"support ({support}); the first, {a[where]}, at {list(map(int, where))}",
        )


def check_batch(
    batch: Any, keys: Optional[tuple[str, ...]], plates: Mapping[str, tuple[int, int]], name: str, ranges: bool = False
) -> dict:
    """``batch`` as a dict (None: empty), a plate's indices a JAX array, or ValueError naming ``name``; with
    ``ranges``, concrete indices are checked to lie in [0, the plate's size)."""
    if batch is None:
        data = {}
    elif isinstance(batch, Mapping):
        data = dict(batch)
    else:
        raise ArgumentError(
            name,
            f"{name} must be None or a dict of the model's arguments (or observed values) and subsampled "
            f"plates' indices, got {type(batch).__name__}",
        )
    for key in data:
        if not isinstance(key, str):
            raise ArgumentError(
                name, f"{name}: its keys must be strings (argument, observed site or plate names), got {key!r}"
            )
        if keys is not None and key not in keys and key not in plates:
            raise ArgumentError(
                name,
                f"{name}[{key!r}]: the model has no such argument, observed site or subsampled plate; "
                f"it takes {sorted(set(keys) | set(plates))}",
            )
    for plate, (size, sub) in plates.items():
        if plate not in data:
            raise ArgumentError(
                name,
                f"{name}[{plate!r}]: the model's plate {plate!r} subsamples {sub} of {size}; give the "
                f"minibatch's indices as {name}[{plate!r}] (an int array), so that the model scales by N / M",
            )
        idx = data[plate]
        if isinstance(idx, (list, tuple)):  # a list of ints (or of their tracers, under a step's jit)
            idx = data[plate] = jax.numpy.asarray(idx) if idx else np.zeros((0,), np.float32)
        if jax.numpy.ndim(idx) != 1 or not jax.numpy.issubdtype(jax.numpy.result_type(idx), jax.numpy.integer):
            raise ArgumentError(
                name,
                f"{name}[{plate!r}]: the plate's indices must be a 1-d int array, got shape "
                f"{jax.numpy.shape(idx)} dtype {jax.numpy.result_type(idx)}",
            )
        if is_tracer(idx):
            continue
        bad = (np.asarray(idx) < 0) | (np.asarray(idx) >= size)
        if ranges and np.any(bad):
            first, count = int(np.argmax(bad)), int(np.sum(bad))
            raise ArgumentError(
                name,
                f"{name}[{plate!r}] index {int(idx[first])} at [{first}] is out of range [0, {size})"
                + (f" ({count} indices are)" if count > 1 else "")
                + f"; the plate's indices run from 0 to {size - 1}",
            )
        data[plate] = jax.numpy.asarray(idx)
    return data


def traced_once(fn: Callable[[PyTree, Any], Any]) -> Callable[[PyTree, Any], Any]:
    """``fn(params, batch)`` replayed, for traced ``params`` and no batch, from one jaxpr per parameter types instead
    of running the library's Python again; concrete parameters or a batch call ``fn`` itself."""
    cache: dict = {}

    def wrapped(params: PyTree, batch: Any = None) -> Any:
        leaves, treedef = jax.tree_util.tree_flatten(params)
        if batch is not None or not any(is_tracer(x) for x in leaves):
            return fn(params, batch)
        avals = tuple(jax.typeof(x) for x in leaves)
        key = (treedef, avals, bool(jax.config.jax_enable_x64))
        if key not in cache:
            structs = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in avals]
            closed, out = jax.make_jaxpr(
                lambda *xs: fn(jax.tree_util.tree_unflatten(treedef, xs), None), return_shape=True
            )(*structs)
            cache[key] = closed, jax.tree_util.tree_structure(out)
        closed, out_tree = cache[key]
        with jax.numpy_rank_promotion("allow"):
            out = jaxpr_as_fun(closed)(*leaves)
        return jax.tree_util.tree_unflatten(out_tree, out)

    return wrapped


__all__ = [
    "DISCRETE_SUPPORTS",
    "SUPPORTS",
    "Site",
    "Target",
    "check_batch",
    "check_in_support",
    "check_no_discrete",
    "check_no_locals",
    "traced_once",
]
