"""``from_numpyro``: a NumPyro model as a :class:`~vijax.interop.Target`, through NumPyro's own handlers, init
strategies, ``biject_to``, ``log_density``, ``potential_energy`` and ``transform_fn``."""

from __future__ import annotations

import contextlib
import functools
import inspect
import warnings
from typing import Any, Callable, Mapping, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Literal

from vijax._compile import jit_or_eager, setup_jit
from vijax.interop._target import Site, Target, check_batch, check_no_discrete, check_no_locals, traced_once
from vijax.models import filter_jit
from vijax._validate import ArgumentError, enforce_value_checks, ids_in_range, is_tracer, require
from vijax.types import Array


def support_kind(support: Any) -> str:
    """The ``SUPPORTS`` name of a NumPyro constraint (an ``independent`` one by its base)."""
    from numpyro.distributions import constraints

    while isinstance(support, constraints.independent):
        support = support.base_constraint
    if support is constraints.real:
        return "real"
    if support is constraints.simplex:
        return "simplex"
    if isinstance(support, type(constraints.softplus_positive)):
        return "positive"
    if isinstance(support, constraints.greater_than) and _is(support.lower_bound, 0.0):
        return "positive"
    if isinstance(support, constraints.interval) and _is(support.lower_bound, 0.0) and _is(support.upper_bound, 1.0):
        return "unit_interval"
    return "other"


def _differs(scale, value: float) -> bool:
    return not is_tracer(scale) and not bool(np.allclose(np.asarray(scale), value, rtol=1e-6))


def _is(bound, value: float) -> bool:
    return not is_tracer(bound) and bool(np.all(np.asarray(bound) == value))


def enumerated(msg: dict) -> bool:
    """Whether the message is a latent site of finite support marked ``infer={"enumerate": "parallel"}``."""
    return (
        msg["type"] == "sample"
        and not msg["is_observed"]
        and msg["fn"].support.is_discrete
        and msg["infer"].get("enumerate") == "parallel"
        and bool(getattr(msg["fn"], "has_enumerate_support", False))
    )


def check_site(msg: dict, plates: dict) -> None:
    """Raises ArgumentError naming a site vijax cannot fit (see ``from_numpyro``)."""
    from numpyro.distributions.transforms import biject_to

    name = msg["name"]
    if msg["type"] == "param":
        _check_param(msg, plates)
        return
    fn = msg["fn"]
    if fn.support.is_discrete:
        _check_discrete(msg, plates)
        return
    subsampled = [frame for frame in msg["cond_indep_stack"] if frame.name in plates]
    if len(subsampled) > 1:
        raise ArgumentError(
            "model",
            f"site {name!r}: a latent site inside the subsampled plates {[f.name for f in subsampled]}; a local "
            "latent site lies in one subsampled plate",
        )
    if subsampled and len(msg["kwargs"].get("sample_shape", ())) + len(fn.batch_shape) + subsampled[0].dim != 0:
        raise ArgumentError(
            "model",
            f"site {name!r}: a local latent site whose subsampled plate {subsampled[0].name!r} is not its leading "
            f"axis (its shape {tuple(fn.shape(msg['kwargs'].get('sample_shape', ())))}); give that plate the "
            "leftmost dim (dim=-k for a site with k batch dims)",
        )
    try:
        biject_to(fn.support)
    except NotImplementedError as err:
        raise ArgumentError(
            "model",
            f"site {name!r}: NumPyro has no bijector onto its support {fn.support} "
            f"({type(fn).__name__}); vijax cannot fit it",
        ) from err


def discrete_support(support: Any) -> Optional[tuple[str, int]]:
    """(the ``DISCRETE_SUPPORTS`` name, K) of a discrete NumPyro constraint: ``("binary", 2)``, ``("finite", K)`` for
    {0, ..., K - 1} with a fixed K, ``("count", 0)`` for {0, 1, 2, ...}; None for any other (no q family)."""
    from numpyro.distributions import constraints

    if support is constraints.boolean:
        return "binary", 2
    if isinstance(support, type(constraints.integer_interval(0, 1))) and _is(support.lower_bound, 0):
        upper = support.upper_bound
        if isinstance(upper, (int, np.integer)) or (not is_tracer(upper) and np.ndim(upper) == 0):
            return "finite", int(upper) + 1
    if isinstance(support, type(constraints.integer_greater_than(0))) and _is(support.lower_bound, 0):
        return "count", 0
    return None


def _check_discrete(msg: dict, plates: dict) -> None:
    """Raises ArgumentError naming a discrete latent site that is neither summed out nor fitted by ``discrete_bbvi``
    (no q family for its support, or inside a subsampled plate)."""
    if enumerated(msg):
        return
    name, fn = msg["name"], msg["fn"]
    finite = bool(getattr(fn, "has_enumerate_support", False))
    mark = msg["infer"].get("enumerate")
    what = f"site {name!r}: a discrete latent site ({type(fn).__name__}, {'finite' if finite else 'infinite'} support"
    what += f", marked enumerate={mark!r})" if mark is not None else ")"
    exact = (
        'vijax sums such a site out where the model marks it infer={"enumerate": "parallel"} (needs funsor: pip '
        "install funsor)"
        if finite
        else "observe it, or marginalise it in the model"
    )
    if mark is not None:  # marked to be summed out, but not so that vijax can: no score-function fit in its place
        raise ArgumentError("model", f"{what}; {exact}")
    subsampled = [frame.name for frame in msg["cond_indep_stack"] if frame.name in plates]
    if subsampled:
        raise ArgumentError(
            "model",
            f"{what} inside the subsampled plate {subsampled[0]!r}: vijax fits discrete sites outside subsampled "
            f"plates; {exact}",
        )
    if discrete_support(fn.support) is None:
        raise ArgumentError(
            "model",
            f"{what}: its support {fn.support} has no q family (Bernoulli on {{0, 1}}, Categorical on "
            f"{{0, ..., K - 1}} of a fixed K, Poisson on {{0, 1, 2, ...}}); {exact}",
        )


def discrete_start(fn: Any, rng_key: Array, sample_shape: tuple = ()) -> Array:
    """A discrete site's value in the start's trace: the median of 15 prior draws (a draw: 15 is odd)."""
    draws = fn.sample(rng_key, (15,) + tuple(sample_shape))
    return jnp.median(draws, axis=0).astype(draws.dtype)


def markov_blanket_terms(trace: dict, name: str, children: Mapping[str, Any]) -> Array:
    """For each element z_j of the latent site ``name``, the sum of the log-probability terms of ``children`` (the
    sites whose log-density reads it, itself included: child -> the plates in which it reads all of z) that z_j enters:
    each child's unreduced, masked, scaled terms at z_j's indices of the plates they share, summed over the rest
    (NumPyro's ``TraceGraph_ELBO`` sums its downstream costs so). Shape: the site's value's."""
    site = trace[name]
    shape = jnp.shape(site["value"])
    event_dim = site["fn"].event_dim
    batch_ndim = len(shape) - event_dim
    own = {f.name for f in site["cond_indep_stack"] if f.dim is not None}
    total = jnp.zeros((1,) * batch_ndim)
    for child, full in children.items():
        msg = trace[child]
        log_prob = _site_log_prob(msg)
        if msg.get("mask") is not None:
            log_prob = jnp.where(msg["mask"], log_prob, 0.0)
        if msg["scale"] is not None:
            log_prob = msg["scale"] * log_prob
        keep = {f.dim for f in msg["cond_indep_stack"] if f.dim is not None and f.name in own and f.name not in full}
        n = max([jnp.ndim(log_prob), batch_ndim] + [-d for d in keep])
        log_prob = jnp.reshape(log_prob, (1,) * (n - jnp.ndim(log_prob)) + jnp.shape(log_prob))
        summed = jnp.sum(log_prob, axis=tuple(a for a in range(n) if a - n not in keep), keepdims=True)
        total = total + summed.reshape(summed.shape[n - batch_ndim :])  # the leading axes, summed, are of size 1
    return jnp.broadcast_to(total.reshape(total.shape + (1,) * event_dim), shape)


def _check_param(msg: dict, plates: dict) -> None:
    """Raises ArgumentError naming a ``numpyro.param`` vijax cannot fit: a start that is a function of a key, one
    inside a subsampled plate, or a constraint NumPyro has no bijector onto."""
    from numpyro.distributions.transforms import biject_to

    name, init = msg["name"], msg["args"][0] if msg["args"] else None
    if init is None or callable(init):
        raise ArgumentError(
            "model", f"site {name!r}: a numpyro.param whose start is not an array; give its init_value as an array"
        )
    for frame in msg["cond_indep_stack"]:
        if frame.name in plates:
            raise ArgumentError(
                "model", f"site {name!r}: a numpyro.param inside the subsampled plate {frame.name!r} is not supported"
            )
    try:
        biject_to(param_constraint(msg))
    except NotImplementedError as err:
        raise ArgumentError(
            "model", f"site {name!r}: NumPyro has no bijector onto its constraint {param_constraint(msg)}"
        ) from err


def param_constraint(msg: dict) -> Any:
    """A ``numpyro.param`` message's constraint (``constraints.real`` where none is given)."""
    from numpyro.distributions import constraints

    return msg["kwargs"].get("constraint", constraints.real)


def plate_nesting(trace: dict) -> int:
    """The number of nested plates of a trace (NumPyro's ``max_plate_nesting``)."""
    dims = [-frame.dim for msg in trace.values() for frame in msg.get("cond_indep_stack", ()) if frame.dim is not None]
    return max(dims, default=0)


def enum_model(fn: Callable, nesting: int) -> Callable:
    """``fn`` under NumPyro's ``enum`` handler, its enumerated sites left of ``nesting`` plates."""
    from numpyro.contrib.funsor import enum

    return enum(fn, first_available_dim=-nesting - 1)


def marginal_log_prob(
    fn: Callable, args: tuple, kwargs: dict, params: dict, nesting: int, plates: Mapping, keep: Optional[str] = None
) -> Array:
    """The log-joint at ``params``, enumerated sites summed out; with ``keep`` (an observed site), its unscaled
    log-likelihood per element. Each subsampled plate's N / M is its power in funsor's ``sum_product``, so a minibatch
    gives the unbiased (N/M) log Σ_z p(z) p(y | z).

    Raises:
      ValueError: naming a site scaled by other than N / M, or summed out outside a subsampled plate that uses it.
    """
    import funsor
    from numpyro import handlers
    from numpyro.contrib.funsor import plate_to_enum_plate, trace as packed_trace

    model = handlers.substitute(enum_model(fn, nesting), data=params)
    with plate_to_enum_plate():
        trace = packed_trace(model).get_trace(*args, **kwargs)
    factors, plate_names, summed = [], set(), {}
    for name, site in trace.items():
        if site["type"] != "sample":
            continue
        if keep is not None and site["is_observed"] and name != keep:
            continue
        frames = [f.name for f in site["cond_indep_stack"] if f.dim is not None]
        if keep is not None and not site["is_observed"] and not enumerated(site):
            continue  # the continuous sites' priors: not part of the likelihood
        log_prob = _site_log_prob(site)
        expected = 1.0
        for frame in frames:
            if frame in plates:
                expected *= plates[frame][0] / plates[frame][1]
        scale = site["scale"]
        if scale is not None and _differs(scale, expected):
            raise ArgumentError(
                "model",
                f"site {name!r}: scaled by {scale} where its subsampled plates give {expected}; vijax sums "
                "out enumerated sites with a plate's N / M scale only (no handlers.scale)",
            )
        dim_to_name = site["infer"]["dim_to_name"]
        if all(d == 1 for d in jnp.shape(log_prob)) and not dim_to_name:
            log_prob = jnp.squeeze(log_prob)
        factors.append(funsor.to_funsor(log_prob, output=funsor.Real, dim_to_name=dim_to_name))
        plate_names |= set(frames)
        if enumerated(site):
            summed[name] = set(frames)
        for var in set(dim_to_name.values()) & set(summed):
            for frame in set(frames) & set(plates) - summed[var]:
                raise ArgumentError(
                    "model",
                    f"site {var!r}: summed out outside the subsampled plate {frame!r}, whose site {name!r} depends "
                    "on it; a minibatch's log-joint would not be unbiased (the plate's N / M would fall inside "
                    f"the sum over {var!r}); subsample no plate such a site reaches, or move it into the plate",
                )
    kept = set()
    if keep is not None:
        kept = {f.name for f in trace[keep]["cond_indep_stack"] if f.dim is not None}
    scales = {} if keep is not None else {p: plates[p][0] / plates[p][1] for p in plate_names if p in plates}
    with funsor.interpretations.lazy:
        lazy = funsor.sum_product.sum_product(
            funsor.ops.logaddexp,
            funsor.ops.add,
            factors,
            eliminate=frozenset(set(summed) | (plate_names - kept)),
            plates=frozenset(plate_names),
            pow_op=funsor.ops.mul,
            plate_to_scale=scales,
        )
    result = funsor.optimizer.apply_optimizer(lazy)
    if keep is None:
        return result.data
    site = trace[keep]
    name_to_dim = {f.name: f.dim for f in site["cond_indep_stack"] if f.dim is not None}
    value_shape = jnp.shape(site["value"])
    return jnp.broadcast_to(
        funsor.to_data(result, name_to_dim=name_to_dim), value_shape[: len(value_shape) - site["fn"].event_dim]
    )


def _site_log_prob(msg: dict) -> Array:
    """A sample site's ``log_prob`` at its value, given its intermediates (as NumPyro's ``log_density``)."""
    fn, value = msg["fn"], msg["value"]
    return fn.log_prob(value, msg["intermediates"]) if msg["intermediates"] else fn.log_prob(value)


def check_plate(name: str, size: Any, sub: Any) -> None:
    """Raises ArgumentError naming the plate unless its ``subsample_size`` ``sub`` is an integer in [1, ``size``]."""
    if isinstance(sub, (bool, np.bool_)) or not isinstance(sub, (int, np.integer)) or not 1 <= int(sub) <= int(size):
        raise ArgumentError(
            "model",
            f"plate {name!r}: subsample_size={sub!r} where the plate has {size} elements; a minibatch holds an "
            f"integer number of them between 1 and {size} (or give no subsample_size)",
        )


def check_observed_shape(msg: dict) -> None:
    """Raises ArgumentError naming an observed site whose values do not fit its distribution's and plates' shape."""
    value_shape, shape = tuple(jnp.shape(msg["value"])), tuple(msg["fn"].shape())
    try:
        jnp.broadcast_shapes(value_shape, shape)
    except ValueError:
        frames = [f"{f.name!r} (size {f.size}, dim {f.dim})" for f in msg["cond_indep_stack"] if f.dim is not None]
        raise ArgumentError(
            "model",
            f"site {msg['name']!r}: observed values of shape {value_shape} do not fit the shape {shape} its "
            f"distribution {_dist_name(msg['fn'])}"
            + (f" and plates {', '.join(frames)} give it" if frames else " gives it")
            + "; make the plates' sizes those of the data",
        ) from None


def _eval_vector_gamma(jaxpr, consts, *args) -> list:
    """``jax.core.eval_jaxpr`` with each one-key ``random_gamma`` drawn by ``expfam.sample_log_gamma`` (vectorised)."""
    from vijax.expfam import sample_log_gamma

    env: dict = {}

    def read(v):
        return v.val if isinstance(v, Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        vals = [read(v) for v in eqn.invars]
        if eqn.primitive.name == "random_gamma" and jnp.ndim(vals[0]) == 0:
            log_g = sample_log_gamma(vals[0], vals[1])
            out = [log_g if eqn.params["log_space"] else jnp.exp(log_g)]
        elif eqn.primitive.name in ("jit", "pjit"):
            inner = eqn.params["jaxpr"]
            out = _eval_vector_gamma(inner.jaxpr, inner.consts, *vals)
        else:
            with eqn.ctx.manager:
                out = eqn.primitive.bind(*vals, **eqn.primitive.get_bind_params(eqn.params))
            out = out if eqn.primitive.multiple_results else [out]
        env.update(zip(eqn.outvars, out))
    return [read(v) for v in jaxpr.outvars]


class VectorGammaDraws:
    """A NumPyro distribution ``fn`` whose draws take their Gamma variables from ``_eval_vector_gamma``."""

    def __init__(self, fn: Any):
        self.fn = fn

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fn, name)

    def __call__(self, sample_shape: tuple = (), *, rng_key: Array) -> Array:
        closed = jax.make_jaxpr(lambda k: self.fn(sample_shape=sample_shape, rng_key=k))(rng_key)
        return _eval_vector_gamma(closed.jaxpr, closed.consts, rng_key)[0]


@functools.partial(jax.jit, static_argnames=("sample_shape",))
def prior_median(fn: Any, rng_key: Array, sample_shape: tuple = ()) -> Array:
    """NumPyro's ``init_to_median`` (15 prior draws) at ``fn``; a boundary median moves into [-2, 2] unconstrained."""
    from numpyro.distributions.transforms import biject_to
    from numpyro.infer import init_to_median

    site = {
        "type": "sample",
        "name": "",
        "fn": VectorGammaDraws(fn),
        "is_observed": False,
        "value": None,
        "kwargs": {"rng_key": rng_key, "sample_shape": sample_shape},
        "infer": {},
    }
    with jax.numpy_rank_promotion("allow"):
        median = init_to_median(site, num_samples=15)
        bijector = biject_to(fn.support)
        u = bijector.inv(median)
        return jnp.where(jnp.any(jnp.isinf(u)), bijector(jnp.clip(u, -2.0, 2.0)), median)


def first_support_value(fn: Any, sample_shape: tuple) -> Array:
    """A summed-out site's placeholder in the start's trace: the first value of its support, at every element."""
    return jnp.broadcast_to(fn.enumerate_support(expand=False)[0], fn.shape(sample_shape))


def _checked_strategy(strategy: Callable, plates: dict) -> Callable:
    """``strategy`` as a ``substitute_fn`` that records subsampled plates in ``plates`` and checks each site."""

    def substitute_fn(msg):
        if msg["type"] == "plate":
            size, sub = msg["args"]
            if sub is not None and sub != size:
                check_plate(msg["name"], size, sub)
                plates[msg["name"]] = (int(size), int(sub))
                msg["args"] = (size, None)  # the plate of all N indices, unscaled (no mismatch warning)
                return jnp.arange(size)
            return None
        if msg["type"] == "sample" and msg["is_observed"]:
            check_observed_shape(msg)
            return None
        if msg["type"] == "param":
            check_site(msg, plates)
            return jnp.asarray(msg["args"][0])
        if msg["type"] == "sample" and not msg["is_observed"]:
            check_site(msg, plates)
            if enumerated(msg):
                return first_support_value(msg["fn"], tuple(msg["kwargs"].get("sample_shape", ())))
            if msg["fn"].support.is_discrete:
                return discrete_start(msg["fn"], msg["kwargs"]["rng_key"], tuple(msg["kwargs"].get("sample_shape", ())))
            value = strategy(msg["fn"], msg["kwargs"]["rng_key"], tuple(msg["kwargs"].get("sample_shape", ())))
            _check_start(msg["name"], msg["fn"], value)  # before the model's next sites read it
            return value
        return None

    return substitute_fn


def _site_keys(model: Callable) -> Callable:
    """``model`` with each message ``seed`` would key given ``jax.random.key(i)``, i = 1, 2, ... in model order."""
    from numpyro.primitives import Messenger

    class SiteKeys(Messenger):
        def __init__(self, fn):
            super().__init__(fn)
            self.count = 0

        def process_message(self, msg):
            if msg["type"] not in ("sample", "prng_key", "plate", "control_flow"):
                return
            if msg["kwargs"]["rng_key"] is not None or msg["value"] is not None:
                return  # as seed: no key where the message has one or a value
            self.count += 1
            msg["kwargs"]["rng_key"] = jax.random.key(self.count)

    return SiteKeys(model)


def fixed_support(support: Any) -> bool:
    """Whether a NumPyro constraint has fixed bounds (no JAX array leaf, which may move with the latent values)."""
    return all(isinstance(x, (int, float, np.ndarray, np.number)) for x in jax.tree_util.tree_leaves(support))


def _check_start(name: str, fn: Any, value: Array, unconstrained: Optional[Array] = None) -> None:
    """Raises ArgumentError naming latent site ``name`` where its start is not finite, constrained or not."""
    from numpyro.distributions.transforms import biject_to

    if is_tracer(value) or is_tracer(unconstrained):  # under jit: not known here
        return
    c = np.asarray(value)
    if not np.all(np.isfinite(c)):
        u = c
    elif unconstrained is not None:
        u = np.asarray(unconstrained)
    else:
        with jax.numpy_rank_promotion("allow"):
            u = np.asarray(biject_to(fn.support).inv(value))
    if np.all(np.isfinite(c)) and np.all(np.isfinite(u)):
        return
    prior = _dist_name(fn)
    if not np.all(np.isfinite(c)):
        why = (
            f"the median of 15 draws of its {prior} prior is {c.ravel()[~np.isfinite(c.ravel())][0]}: the "
            "prior's draws are not finite (a parameter that is not finite, as Uniform(-inf, inf); for a flat "
            "prior use dist.ImproperUniform(constraints.real, (), ()))"
        )
    else:
        where = int(np.argmax(~np.isfinite(u.ravel()))) if u.size else 0
        bound = c.ravel()[min(where, c.size - 1)]
        why = (
            f"the median of 15 draws of its {prior} prior is {bound}, on its support's boundary, which the "
            f"map to the unconstrained space sends to {u.ravel()[where]} (draws that underflow in "
            f"{u.dtype}, as those of Gamma(1e-3, 1e-3) in float32): enable float64 "
            "(jax.config.update('jax_enable_x64', True)) or give a less diffuse prior"
        )
    raise ArgumentError("model", f"site {name!r}: its start is not finite: {why}")


def _site_log_probs(trace: dict, summed: tuple) -> dict:
    """site name -> its summed, masked, unscaled log-probability at the start."""
    out = {}
    for name, m in trace.items():
        if m["type"] != "sample" or name in summed or (summed and m["is_observed"]):
            continue
        log_prob = _site_log_prob(m)
        if m.get("mask") is not None:
            log_prob = jnp.where(m["mask"], log_prob, 0.0)
        out[name] = jnp.sum(log_prob)
    return out


def _check_log_probs(log_probs: dict, latent: list) -> None:
    """Raises ArgumentError naming the first site whose log-probability at the start is not finite."""
    for name, lp in log_probs.items():
        if not is_tracer(lp) and not np.isfinite(float(lp)):
            kind = "log-likelihood" if name not in latent else "prior log-density"
            raise ArgumentError(
                "model",
                f"site {name!r}: its {kind} at the start (each latent site at the median of 15 prior draws) is "
                f"{float(lp)}; vijax starts where the log-joint is finite (check the site's parameters and data at "
                "those values, or a bound the model computes from a latent site)",
            )


def _dist_name(fn: Any) -> str:
    """A distribution's class name, through the wrappers a plate or a mask put round it."""
    while type(fn).__name__ in ("MaskedDistribution", "ExpandedDistribution"):
        fn = fn.base_dist
    return type(fn).__name__


def _law(fn: Any) -> str:
    return f"{_dist_name(fn)}, support {fn.support}" if fixed_support(fn.support) else _dist_name(fn)


def _first(bad: np.ndarray) -> tuple[int, int]:
    """(how many entries of ``bad`` hold, the first flat index)."""
    return int(np.sum(bad)), int(np.argmax(np.ravel(bad)))


def name_failed_argument(arguments: Mapping, err: Exception) -> None:
    """Raises ArgumentError naming the first of the model's ``arguments`` (name -> value) that explains why the model
    failed with ``err``: a Python list or tuple of numbers (a TypeError: the distributions take arrays), or a
    non-finite float (a ValueError: the distributions refuse the parameters made from it)."""
    for name, value in arguments.items():
        leaves = jax.tree_util.tree_leaves(value)
        if isinstance(err, TypeError):
            numbers = isinstance(value, (list, tuple)) and leaves
            if numbers and all(isinstance(v, (int, float, np.number)) for v in leaves):
                raise ArgumentError(
                    name,
                    f"{name}: a Python {type(value).__name__} of numbers, on which the model fails ({err}); "
                    f"NumPyro's distributions take arrays: pass jnp.asarray({name})",
                ) from err
            continue
        for leaf in leaves:
            leaf = None if is_tracer(leaf) else np.asarray(leaf)
            if leaf is None or not np.issubdtype(leaf.dtype, np.inexact):
                continue
            count, first = _first(~np.isfinite(leaf))
            if count:
                raise ArgumentError(
                    name,
                    f"{name}: holds {count} non-finite {'entry' if count == 1 else 'entries'} (the first, "
                    f"{leaf.ravel()[first]}, at flat index {first}), and the model's distributions refused the "
                    f"parameters made from it ({err}); vijax fits finite data",
                ) from err


def _check_scale(name: str, scale: Any) -> None:
    """Raises ArgumentError naming site ``name`` where its ``handlers.scale`` factor is not finite and > 0."""
    if is_tracer(scale):
        return
    scale = np.asarray(scale, np.float64)
    count, first = _first(~(np.isfinite(scale) & (scale > 0)))
    if count:
        where = f" (the first of {count} such entries, at flat index {first})" if scale.ndim else ""
        raise ArgumentError(
            "model",
            f"site {name!r}: its scale factor (handlers.scale) is {float(scale.ravel()[first])}{where}; a site's "
            "log-density is scaled by a finite factor > 0 (give handlers.scale such a scale)",
        )


def _in_support(msg: dict) -> Optional[Array]:
    """Whether each batch element of an observed site's values lies in its fixed support; else None."""
    fn = msg["fn"]
    if not fixed_support(fn.support) or jnp.size(msg["value"]) == 0:
        return None
    value = jnp.asarray(msg["value"])
    with jax.numpy_rank_promotion("allow"):
        return jnp.broadcast_to(fn.support(value), value.shape[: value.ndim - fn.event_dim])


def _check_observed(msg: dict, inside: Optional[Array]) -> None:
    """Raises ArgumentError naming an observed site with kept values not finite or outside ``inside``'s support."""
    from numpyro.distributions.distribution import MaskedDistribution

    name, fn = msg["name"], msg["fn"]
    masks = (msg.get("mask"), fn._mask if isinstance(fn, MaskedDistribution) else None)
    masks = [m for m in masks if m is not None and m is not True]
    if any(is_tracer(x) for x in [msg["value"], inside, *masks]) or np.size(msg["value"]) == 0:
        return
    value = np.asarray(msg["value"])
    batch_shape = value.shape[: value.ndim - fn.event_dim]
    keep = np.ones(batch_shape, bool)
    for mask in masks:
        keep = keep & np.asarray(mask)
    if np.issubdtype(value.dtype, np.inexact):  # the batch shape's mask, broadcast over the event dims
        count, first = _first(~np.isfinite(value) & np.reshape(keep, keep.shape + (1,) * fn.event_dim))
        if count:
            raise ArgumentError(
                "model",
                f"site {name!r}: its observed values hold {count} non-finite "
                f"{'entry' if count == 1 else 'entries'} (the first, {float(value.ravel()[first])}, "
                f"at flat index {first}); vijax fits finite data (mark missing entries with "
                "numpyro.sample(..., obs_mask=...), or drop them)",
            )
    if inside is None:
        return
    count, first = _first(~np.asarray(inside) & keep)
    if count:
        where = (
            f"the first, {float(value.ravel()[first])}, at flat index {first}"
            if fn.event_dim == 0
            else f"the first at flat index {first} of its batch, each value a vector"
        )
        raise ArgumentError(
            "model",
            f"site {name!r}: {count} of its observed values {'lies' if count == 1 else 'lie'} outside "
            f"its distribution's support ({_law(fn)}; {where}); "
            "the likelihood of such a value is not a density of the data (a count that is not a non-negative "
            "integer, a Bernoulli value other than 0 or 1...): correct the data or the distribution",
        )


def _arguments_valid(trace: dict) -> Any:
    """Whether NumPyro's argument checks (``validate_args``) that ``jit`` skipped hold for every distribution."""
    from numpyro.distributions import Distribution, constraints

    checks = []
    stack = [m["fn"] for m in trace.values() if m["type"] == "sample"]
    while stack:
        d = stack.pop()
        if getattr(d, "_validate_args", False):
            for param, value in d.get_args().items():
                constraint = d.arg_constraints[param]
                if not constraints.is_dependent(constraint):
                    ok = constraint(value)
                    if is_tracer(ok):
                        checks.append(jnp.all(ok))
        stack.extend(v for v in vars(d).values() if isinstance(v, Distribution))
    return jnp.all(jnp.stack(checks)) if checks else True


def _start_values(model: Callable, args: tuple, kwargs: dict) -> dict:
    """The model's start: one trace with ``prior_median`` as ``initialize_model`` applies it, as a dict."""
    from numpyro import handlers
    from numpyro.distributions.transforms import biject_to
    from numpyro.infer.util import transform_fn

    plates: dict = {}
    with jax.numpy_rank_promotion("allow"):
        seeded = handlers.substitute(_site_keys(model), substitute_fn=_checked_strategy(prior_median, plates))
        trace = handlers.trace(seeded).get_trace(*args, **kwargs)
        summed = tuple(n for n, m in trace.items() if enumerated(m))
        hidden = [n for n, m in trace.items() if m["type"] == "sample" and not m["is_observed"] and n not in summed]
        discrete = [n for n in hidden if trace[n]["fn"].support.is_discrete]
        latent = [n for n in hidden if n not in discrete]
        values = {n: trace[n]["value"] for n in latent}
        supports = {n: trace[n]["fn"].support for n in hidden}
        init = transform_fn({n: biject_to(supports[n]) for n in latent}, values, invert=True)
        init_params = {n: jnp.asarray(init[n]) for n in latent}
        params = {n: (m["value"], param_constraint(m)) for n, m in trace.items() if m["type"] == "param"}
        sample = {n: m for n, m in trace.items() if m["type"] == "sample"}
        checked = {
            "starts": {n: (trace[n]["fn"], values[n], init_params[n]) for n in latent},
            "scales": {n: m["scale"] for n, m in sample.items() if m["scale"] is not None},
            "observed": {
                n: ({k: m.get(k) for k in ("name", "fn", "value", "mask")}, _in_support(m))
                for n, m in sample.items()
                if m["is_observed"]
            },
            "latent": hidden,
            "arguments_valid": _arguments_valid(trace),
        }
        _check_values(checked)  # before the log-probabilities, of which NumPyro warns at values off the support
        checked["log_probs"] = _site_log_probs(trace, summed)
    _check_log_probs(checked["log_probs"], hidden)
    return {
        "plates": plates,
        "summed": summed,
        "latent": latent,
        "discrete": [(n, *discrete_support(trace[n]["fn"].support), jnp.shape(trace[n]["value"])) for n in discrete],
        "locals": {n: f.name for n in latent for f in trace[n]["cond_indep_stack"] if f.name in plates},
        "nesting": plate_nesting(trace) if summed else 0,
        "supports": supports,
        "values": values,
        "init_params": init_params,
        "params": params,
        "checked": checked,
    }


def _check_values(checked: dict) -> None:
    """The start's checks on its concrete values (``_start_values``' ``checked``); traced values pass."""
    for n, (fn, value, unconstrained) in checked["starts"].items():
        _check_start(n, fn, value, unconstrained)
    for n, scale in checked["scales"].items():
        _check_scale(n, scale)
    for msg, inside in checked["observed"].values():
        _check_observed(msg, inside)
    _check_log_probs(checked.get("log_probs", {}), checked["latent"])


class _Static:
    """A Python value carried through ``jax.jit``'s output as pytree metadata (no leaves)."""

    def __init__(self, value: Any):
        self.value = value


jax.tree_util.register_pytree_node(_Static, lambda s: ((), s.value), lambda value, _: _Static(value))


def _start_parts(model: Callable, args: tuple, kwargs: dict) -> tuple:
    """``_start_values`` as a jit output: its traced leaves, and the rest as ``_Static`` metadata."""
    leaves, treedef = jax.tree_util.tree_flatten(_start_values(model, args, kwargs))
    return [x for x in leaves if is_tracer(x)], _Static((treedef, [None if is_tracer(x) else x for x in leaves]))


def _jitted_start(model: Callable, args: tuple, kwargs: dict) -> dict:
    """``_start_values`` by one jitted program, then its checks; op by op where a check fails, to name the site."""
    traced, static = filter_jit(_start_parts, setup_jit)(model, args, kwargs)
    treedef, leaves = static.value
    it = iter(traced)
    start = jax.tree_util.tree_unflatten(treedef, [next(it) if x is None else x for x in leaves])
    try:
        if bool(start["checked"]["arguments_valid"]):
            _check_values(start["checked"])
            return start
    except ArgumentError:
        pass  # a failed check: the eager run below raises it again, naming the site as it fails
    return _start_values(model, args, kwargs)


def _start(model: Callable, args: tuple, kwargs: dict) -> dict:
    return jit_or_eager(_jitted_start, _start_values)(model, args, kwargs)


def _checks_left(batch, params):
    """NumPyro's validation, off for traced latent values with the model's own data (the start validated them)."""
    if batch is None and any(is_tracer(x) for x in jax.tree_util.tree_leaves(params)):
        from numpyro.distributions.distribution import validation_enabled

        return validation_enabled(False)
    return contextlib.nullcontext()


def from_numpyro(model: Callable, *args: Any, **kwargs: Any) -> Target:
    """A NumPyro model as a target, for ``vijax.inference.bbvi`` and ``ngvi``.

    A batch is None or a dict: entries named after the model's arguments replace them; the entry named after a
    subsampled plate (``numpyro.plate(name, N, subsample_size=M)``) gives the minibatch's indices (required). A
    discrete latent site of finite support marked ``infer={"enumerate": "parallel"}`` is summed out (needs funsor)
    and listed in the target's ``enumerated``. A ``numpyro.param`` is listed in the target's ``params``: a batch
    may give its value under its name (else it is at its ``init_value``). A continuous latent site inside a subsampled
    plate, that plate its leading axis, is local (one value per data point): it is listed in the target's ``locals``,
    not its ``sites``, for ``vijax.inference.amortized``. Any other discrete latent site outside subsampled plates
    whose support has a q family (Bernoulli, Categorical, Poisson) is listed in the target's ``discrete``, for
    ``vijax.inference.discrete_bbvi``. NumPyro's calls run with JAX's rank promotion allowed.

    Args:
      model: a function of NumPyro primitives, called as ``model(*args, **kwargs)``.

    Returns:
      A :class:`~vijax.interop.Target`, its ``init_params`` NumPyro's ``init_to_median`` (15 prior draws).

    Raises:
      ValueError: naming the site (discrete, not summed out and with no q family, no bijector, a ``numpyro.param`` without an array
        start, a param in a subsampled plate, a local site in two subsampled plates, off their leading axis or with
        enumerated sites, bad observed values, a start or scale not finite) or
        the plate or ``batch`` (bad indices), or the model's argument on which it fails: a non-finite value its
        distributions refuse, a Python list of numbers.
      ImportError: naming the site, where a site is to be summed out and funsor is missing.

    Examples:
        >>> import jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> import vijax
        >>> def model(y):
        ...     mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        ...     sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
        ...     with numpyro.plate("data", y.shape[0]):
        ...         numpyro.sample("y", dist.Normal(mu, sigma), obs=y)
        >>> target = vijax.from_numpyro(model, jnp.array([0.5, 1.5, 1.0]))
        >>> [(s.name, s.support) for s in target.sites.values()]
        [('mu', 'real'), ('sigma', 'positive')]
        >>> round(float(target.constrain({"mu": 0.0, "sigma": 0.0})["sigma"]), 6)  # exp(0)
        1.0
    """
    require("numpyro", "numpyro", "vijax.from_numpyro")
    from numpyro import handlers
    from numpyro.distributions.transforms import biject_to
    from numpyro.infer.util import log_density, potential_energy, transform_fn

    if not callable(model):
        raise ArgumentError("model", f"model must be a function of NumPyro primitives, got {model!r}", value=model)
    signature = inspect.signature(model)
    try:
        signature.bind(*args, **kwargs)
    except TypeError as err:
        raise ArgumentError("model", f"model: it does not take these arguments: {err}") from err
    named = tuple(n for n, p in signature.parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
    takes_any = any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values())
    try:
        start = _start(model, args, kwargs)
    except (TypeError, ValueError) as err:  # the model on its arguments, or a distribution's own check
        if not isinstance(err, ArgumentError):
            name_failed_argument(signature.bind(*args, **kwargs).arguments, err)
        raise
    plates, summed, latent, local_plate = start["plates"], start["summed"], start["latent"], start["locals"]
    discrete = start["discrete"]
    if not latent and not discrete:
        raise ArgumentError(
            "model",
            "model: it has no continuous latent sample site to fit (every site is observed"
            + (f" or summed out: {list(summed)})" if summed else ")"),
        )
    for other, what in ((summed, "sites summed out by enumeration"), (local_plate, "local latent sites")):
        if discrete and other:
            raise ArgumentError(
                "model",
                f"site {discrete[0][0]!r}: a discrete latent site not summed out, in a model with {what} "
                f"({list(other)}); vijax fits such a discrete site in a model of global continuous sites only",
            )
    if summed and local_plate:
        raise ArgumentError(
            "model",
            f"site {next(iter(local_plate))!r}: a local latent site with sites summed out by enumeration "
            f"({list(summed)}); vijax fits local continuous sites of models without enumerated ones",
        )
    if summed:
        require("funsor", "numpyro", f"site {summed[0]!r}, summed out by enumeration,")
    nesting = start["nesting"]
    transforms = {n: biject_to(start["supports"][n]) for n in latent}
    shapes = {n: tuple(jnp.shape(start["values"][n])) for n in latent}
    supports = start["supports"]
    for n, plate in local_plate.items():  # a minibatch's shape: M values along the plate's (leading) axis
        shapes[n] = (plates[plate][1],) + shapes[n][1:]
    all_sites = {
        n: Site(n, shapes[n], tuple(transforms[n].inverse_shape(shapes[n])), support_kind(supports[n]), supports[n])
        for n in latent
    }
    sites = {n: s for n, s in all_sites.items() if n not in local_plate}
    local_sites = {n: (all_sites[n], plate) for n, plate in local_plate.items()}
    param_values = {n: v for n, (v, _) in start["params"].items()}  # the params' starts, constrained
    param_maps = {n: biject_to(c) for n, (_, c) in start["params"].items()}
    params = {
        n: Site(n, tuple(jnp.shape(v)), tuple(param_maps[n].inverse_shape(jnp.shape(v))), support_kind(c), c)
        for n, (v, c) in start["params"].items()
    }
    param_init = {n: jnp.asarray(param_maps[n].inv(v)) for n, v in param_values.items()}
    discrete_sites = {
        n: Site(n, tuple(shape), tuple(shape) + ((k,) if kind == "finite" else ()), kind, supports[n])
        for n, kind, k, shape in discrete
    }

    def call(batch):  # (the model with the batch's plate indices and params substituted, its args, its kwargs)
        keys = None if takes_any else named + tuple(params)
        data = check_batch(batch, keys, plates, "batch", ranges=True)
        fixed = {p: data.pop(p) for p in plates}
        fixed.update({n: data.pop(n, v) for n, v in param_values.items()})
        bound = signature.bind_partial(*args, **kwargs)
        bound.arguments.update({k: v for k, v in data.items() if k in signature.parameters})
        extra = {k: v for k, v in data.items() if k not in signature.parameters}
        fn = handlers.substitute(model, data=fixed) if fixed else model
        if any(jnp.shape(fixed[p])[0] != plates[p][1] for p in plates):
            fn = _other_subsample_size(fn, tuple(plates))
        return fn, bound.args, {**bound.kwargs, **extra}

    def log_prob(params, batch=None):
        check_no_locals(local_sites, "this algorithm", params)
        check_no_discrete(discrete_sites, "this algorithm", params)
        fn, a, kw = call(batch)
        with jax.numpy_rank_promotion("allow"), _checks_left(batch, params):
            if summed:
                return marginal_log_prob(fn, a, kw, params, nesting, plates)
            return log_density(fn, a, kw, params)[0]

    def log_density_u(params_u, batch=None):
        if summed or discrete_sites:  # NumPyro's potential energy maps every site it is given, and a discrete one
            # has no bijector
            params, log_det = transform(params_u)
            return log_prob(params, batch) + log_det
        check_no_locals(local_sites, "this algorithm", params_u)
        fn, a, kw = call(batch)
        with jax.numpy_rank_promotion("allow"), _checks_left(batch, params_u):
            return -potential_energy(fn, a, kw, params_u)

    def transform(params_u):
        with jax.numpy_rank_promotion("allow"):
            params = transform_fn({**transforms, **param_maps}, params_u)
            latent = () if params_u and set(params_u) <= set(param_maps) else sites  # params alone: no Jacobian
            log_det = sum(
                jnp.sum(transforms[n].log_abs_det_jacobian(jnp.asarray(params_u[n]), params[n])) for n in latent
            )
        return params, log_det

    def unconstrain(params):
        with jax.numpy_rank_promotion("allow"):
            return transform_fn({**transforms, **param_maps}, params, invert=True)

    def local_inputs(batch):  # the latent values are prior draws that only run the model: the data do not read them
        fn, a, kw = call(batch)
        with jax.numpy_rank_promotion("allow"), handlers.block():
            trace = handlers.trace(handlers.seed(fn, jax.random.PRNGKey(0))).get_trace(*a, **kw)
        return {p: plate_rows(trace, p, plates[p][1]) for p in set(local_plate.values())}

    children = _children(model, args, kwargs, discrete_sites) if discrete_sites else {}

    def blanket_terms(params, batch=None):
        check_no_discrete(discrete_sites, "blanket_terms", params)
        fn, a, kw = call(batch)
        with jax.numpy_rank_promotion("allow"), _checks_left(batch, params):
            trace = handlers.trace(handlers.substitute(fn, data=params)).get_trace(*a, **kw)
        return {n: markov_blanket_terms(trace, n, children[n]) for n in discrete_sites}

    fns = traced_once(log_prob), traced_once(log_density_u), transform, unconstrain
    keys = None if takes_any else named + tuple(params)
    init_params = {n: v for n, v in start["init_params"].items() if n not in local_plate}
    extra = (local_sites, local_inputs if local_plate else None)
    extra += (discrete_sites, traced_once(blanket_terms) if discrete_sites else None)
    return Target(*fns, sites, init_params, plates, keys, "numpyro", call, summed, params, param_init, *extra)


def _children(model: Callable, args: tuple, kwargs: dict, discrete: Mapping) -> dict:
    """discrete site -> {site whose log-density reads its value (itself included): the plates in which it reads all
    of the site}, by NumPyro's provenance tracking (``numpyro.infer.inspect.get_dependencies``)."""
    from numpyro.infer.inspect import get_dependencies

    with jax.numpy_rank_promotion("allow"):
        prior = get_dependencies(model, args, kwargs)["prior_dependencies"]
    return {z: {s: frozenset(up[z]) for s, up in prior.items() if z in up} for z in discrete}


def plate_rows(trace: dict, plate: str, size: int) -> Array:
    """(M, D), M the batch's indices (else ``size``): the observed sites inside ``plate`` (in model order), each moved to the plate's axis first and
    flattened per data point, side by side; D = 0 where the plate holds no observed site."""
    rows = []
    for msg in trace.values():
        frames = [f for f in msg.get("cond_indep_stack", ()) if f.name == plate]
        if msg["type"] != "sample" or not msg["is_observed"] or not frames:
            continue
        fn = msg["fn"]
        value = jnp.broadcast_to(jnp.asarray(msg["value"]), fn.shape())
        value = jnp.moveaxis(value, len(fn.batch_shape) + frames[0].dim, 0)
        rows.append(value.reshape(value.shape[0], -1))
    if not rows:
        return jnp.zeros((size, 0), jnp.result_type(float))
    return jnp.concatenate([r.astype(jnp.result_type(float, *rows)) for r in rows], axis=1)


def _other_subsample_size(fn: Callable, plates: tuple) -> Callable:
    """``fn`` whose ``plates``, given other than ``subsample_size`` indices, check them against their size where the
    model runs (new arguments may make a plate smaller than the fit's data), without NumPyro's warning on their
    number: a batch may index more or fewer points on purpose (all of them: a posterior's predictive,
    log-likelihood and PSIS of the whole data), and the plate then scales by its size over their number."""
    from numpyro.primitives import Messenger

    class IndicesInRange(Messenger):
        def process_message(self, msg):  # after ``substitute`` (inside it) has set the plate's indices
            if msg["type"] == "plate" and msg["name"] in plates and msg["value"] is not None:
                size = msg["args"][0]
                enforce_value_checks([ids_in_range(f"batch[{msg['name']!r}]", msg["value"], size)])

        def __call__(self, *args, **kwargs):
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "subsample_size does not match", UserWarning)
                return super().__call__(*args, **kwargs)

    return IndicesInRange(fn)


__all__ = [
    "discrete_start",
    "discrete_support",
    "enum_model",
    "enumerated",
    "from_numpyro",
    "marginal_log_prob",
    "markov_blanket_terms",
    "plate_nesting",
    "plate_rows",
    "support_kind",
]
