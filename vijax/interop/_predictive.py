"""Posterior predictive draws, pointwise log-likelihoods and the observed data of a target at draws of its latent
sites, through NumPyro's ``Predictive`` and ``log_likelihood`` or TFP's ``sample`` and ``sample_distributions``."""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

import jax
import jax.numpy as jnp

from vijax._compile import jit_or_eager
from vijax._validate import ArgumentError, check_key
from vijax.interop._target import Target, check_in_support
from vijax.interop._tfp import as_parts, part_names
from vijax.types import Array, PRNGKey


def _check_target(target: Any) -> Target:
    if not isinstance(target, Target) or target.bind is None:
        raise ArgumentError(
            "target", f"target must be a target of vijax.from_numpyro or vijax.from_tfp, got {type(target).__name__}"
        )
    return target


def _flatten(target: Target, draws: Any) -> tuple[dict, tuple[int, ...]]:
    """(draws with their leading axes flattened to one, the leading shape), or ValueError naming ``draws``."""
    if not isinstance(draws, Mapping):
        raise ArgumentError(
            "draws",
            f"draws must be a dict of the target's latent sites (vijax.inference.sample), got {type(draws).__name__}",
        )
    sites = {**target.sites, **target.discrete}
    for name in draws:
        if name not in sites:
            raise ArgumentError(
                "draws", f"draws[{name!r}]: the target has no latent site {name!r}; its sites are {list(sites)}"
            )
    lead = None
    flat = {}
    for name, site in sites.items():
        if name not in draws:
            raise ArgumentError(
                "draws", f"draws: the latent site {name!r} has no draws; give every site of {list(sites)}"
            )
        value = jnp.asarray(draws[name])
        k = value.ndim - len(site.shape)
        if k < 1 or tuple(value.shape[k:]) != site.shape:
            raise ArgumentError(
                "draws",
                f"draws[{name!r}]: shape {value.shape}, expected (S, *{site.shape}) (draws on leading axes of the "
                f"site's shape {site.shape})",
            )
        if lead is None:
            lead = tuple(value.shape[:k])
        elif tuple(value.shape[:k]) != lead:
            raise ArgumentError("draws", f"draws[{name!r}]: leading shape {value.shape[:k]}, other sites have {lead}")
        check_in_support(f"draws[{name!r}]", value, site.support)
        flat[name] = value.reshape((-1,) + site.shape)
    if math.prod(lead) == 0:
        raise ArgumentError("draws", "draws: no draws (a leading axis of size 0)")
    return flat, lead


def _unflatten(values: Mapping[str, Array], lead: tuple[int, ...]) -> dict:
    return {n: jnp.reshape(v, lead + tuple(jnp.shape(v)[1:])) for n, v in values.items()}


def _numpyro_trace(fn, args, kwargs, params):
    from numpyro import handlers

    with jax.numpy_rank_promotion("allow"):
        seeded = handlers.seed(handlers.substitute(fn, data=params), rng_seed=0)
        return handlers.trace(seeded).get_trace(*args, **kwargs)


def _unobserved(model):
    """``model`` with its observed sample sites drawn as latent ones, for ``Predictive`` to draw them."""
    from numpyro.primitives import Messenger

    class Unobserved(Messenger):
        def process_message(self, msg):
            if msg["type"] == "sample" and msg["is_observed"]:
                msg["value"], msg["is_observed"] = None, False

    return Unobserved(model)


def observed_data(target: Target, batch: Any = None) -> dict:
    """The observed sites' values by site name at ``batch``: a NumPyro model's ``obs=``, or a TFP joint's pinned ones.

    Raises:
      ValueError: naming ``target`` (no observed site, not a NumPyro or TFP target) or ``batch``.
    """
    target = _check_target(target)
    if target.library == "tfp":
        _, observed = target.bind(batch)
        values = dict(observed)
    else:
        fn, args, kwargs = target.bind(batch)
        trace = _numpyro_trace(fn, args, kwargs, target.constrain(target.init_params))
        values = {n: m["value"] for n, m in trace.items() if m["type"] == "sample" and m["is_observed"]}
    if not values:
        raise ArgumentError("target", "target: the model has no observed site (no obs= value, no pinned part)")
    return values


def site_dims(target: Target, batch: Any = None) -> dict:
    """site name (latent, observed, deterministic) -> its axes' names, as ``az.from_numpyro`` infers ArviZ's
    ``dims``: a NumPyro plate's axis is named after the plate, any other axis of site ``name`` is ``name_dim_i``.
    ValueError naming ``target`` or ``batch``."""
    target = _check_target(target)
    if target.library == "tfp":
        joint, observed = target.bind(batch)
        shapes = {n: tuple(s.shape) for n, s in target.sites.items()}
        shapes.update({n: tuple(jnp.shape(v)) for n, v in observed.items()})
        return {n: tuple(f"{n}_dim_{i}" for i in range(len(shape))) for n, shape in shapes.items()}
    fn, args, kwargs = target.bind(batch)
    return _shapes_only(lambda: _numpyro_dims(_numpyro_trace(fn, args, kwargs, target.constrain(target.init_params))))


def _shapes_only(run):
    """``run()`` under ``jax.eval_shape``; as it is where it needs concrete values."""
    out = []
    try:
        jax.eval_shape(lambda: out.append(run()))
    except TypeError:
        return run()
    return out[0]


def _numpyro_dims(trace) -> dict:
    dims = {}
    for name, msg in trace.items():
        if msg["type"] not in ("sample", "deterministic"):
            continue
        ndim = jnp.ndim(msg["value"])
        axes = [f"{name}_dim_{i}" for i in range(ndim)]
        batch_ndim = ndim - (getattr(msg.get("fn"), "event_dim", 0) if msg["type"] == "sample" else 0)
        for frame in msg["cond_indep_stack"]:
            if 0 <= batch_ndim + frame.dim < ndim:
                axes[batch_ndim + frame.dim] = frame.name
        dims[name] = tuple(axes)
    return dims


def predictive(
    target: Target,
    draws: Mapping[str, Array],
    key: PRNGKey,
    batch: Any = None,
    *,
    sites: Optional[Sequence[str]] = None,
) -> dict:
    """Posterior predictive draws: for each draw of the latent sites, a draw of the model's observed sites (or of
    ``sites``) given them, in constrained space under the model's site names.

    NumPyro's ``Predictive`` (a summed-out site first drawn from its conditional posterior, ``infer_discrete``), or
    a TFP joint's ``sample`` with the latent parts given. A ``batch`` of new inputs gives predictions there.

    Args:
      target: from ``vijax.from_numpyro`` or ``vijax.from_tfp``.
      draws: every latent site's draws, each of shape (*lead, *site.shape) with one ``lead`` ((S,) from
        ``vijax.inference.sample``; (C, S) for chains of restarts).
      key: the PRNG key of the predictive draws.
      batch: the target's batch (None: the data the target was built with).
      sites: the sites to return (default: the observed sites, even where ``batch`` sets their value to None); any
        sample or deterministic site of a NumPyro model, any part of a TFP joint (a latent one returns its draws).

    Returns:
      A dict, site name -> array of shape (*lead, *site's shape).

    Raises:
      ValueError: naming ``sites`` (unknown; no observed site), ``draws`` (a missing or unknown site, shapes),
        ``key``, ``target`` or ``batch``.

    Examples:
        >>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> import vijax
        >>> def model(y):
        ...     mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        ...     with numpyro.plate("data", y.shape[0]):
        ...         numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)
        >>> target = vijax.from_numpyro(model, jnp.array([0.5, 1.5, 1.0]))
        >>> draws = {"mu": jnp.array([0.0, 1.0, 2.0, 3.0, 4.0])}    # five posterior draws
        >>> vijax.predictive(target, draws, jax.random.PRNGKey(0))["y"].shape
        (5, 3)
    """
    target = _check_target(target)
    check_key("key", key)
    flat, lead = _flatten(target, draws)
    sites = (sites,) if isinstance(sites, str) else sites if sites is None else tuple(sites)
    return _unflatten(jit_or_eager(_JITTED[_predictive], _predictive)(target, flat, key, batch, sites), lead)


def _predictive(target: Target, flat, key, batch, sites) -> dict:
    if target.library == "tfp":
        joint, observed = target.bind(batch)
        names = part_names(joint)
        wanted = _wanted(sites, names, tuple(observed))

        def one(k, params):
            with jax.numpy_rank_promotion("allow"):
                out = joint.sample(seed=k, **params)
            out = as_parts(out, names)
            return {n: out[n] for n in wanted}

        n = next(iter(flat.values())).shape[0]
        return jax.vmap(one)(jax.random.split(key, n), flat)
    from numpyro.infer import Predictive

    fn, args, kwargs = target.bind(batch)
    trace = _numpyro_trace(fn, args, kwargs, {n: v[0] for n, v in flat.items()})
    known = tuple(n for n, m in trace.items() if m["type"] in ("sample", "deterministic"))
    # every sample site but the latent and summed-out ones (a batch's obs None makes a site latent in the trace)
    observed = tuple(
        n for n, m in trace.items() if m["type"] == "sample" and n not in target.sites and n not in target.enumerated
    )
    wanted = _wanted(sites, known, observed)
    with jax.numpy_rank_promotion("allow"):
        if target.enumerated:  # the summed-out sites drawn first (infer_discrete), then the observed ones
            key, key_discrete = jax.random.split(key)
            discrete = Predictive(
                fn, posterior_samples=flat, return_sites=list(target.enumerated), infer_discrete=True, parallel=True
            )(key_discrete, *args, **kwargs)
            flat = {**flat, **{n: discrete[n] for n in target.enumerated}}
        out = Predictive(_unobserved(fn), posterior_samples=flat, return_sites=list(wanted), parallel=True)(
            key, *args, **kwargs
        )
    return {n: out[n] for n in wanted}


def _wanted(sites, known: tuple, observed: tuple) -> tuple:
    if sites is None:
        if not observed:
            raise ArgumentError("sites", "sites: the model has no observed site to draw; name the sites to return")
        return observed
    for name in sites:
        if name not in known:
            raise ArgumentError("sites", f"sites: the model has no site {name!r}; its sites are {list(known)}")
    return tuple(sites)


def _pointwise_tfp(dist, value):
    """log p of ``value`` per element of an ``Independent`` or ``Sample`` of a scalar distribution, else ``log_prob``."""
    name = type(dist).__name__
    if name == "Independent":
        return _pointwise_tfp(dist.distribution, value)
    inner = getattr(dist, "distribution", None)
    if name == "Sample" and tuple(inner.batch_shape) == () and tuple(inner.event_shape) == ():
        return inner.log_prob(value)
    return dist.log_prob(value)


def log_likelihood(target: Target, draws: Mapping[str, Array], batch: Any = None) -> dict:
    """The pointwise log-likelihood of the observed sites at each draw of the latent sites, as ArviZ's
    ``log_likelihood`` group holds it (``az.loo``, ``az.waic``, ``az.compare``).

    NumPyro's ``log_likelihood`` (one term per element of a site's batch shape, without a plate's N / M; with
    summed-out sites, log Σ_z p(z | θ) p(y | z, θ)), or each observed TFP part's ``log_prob`` (per element of an
    ``Independent`` or ``Sample`` of a scalar distribution).

    Args:
      target: from ``vijax.from_numpyro`` or ``vijax.from_tfp``.
      draws: as ``predictive`` takes them.
      batch: the target's batch (None: the data the target was built with).

    Returns:
      A dict, observed site name -> array of shape (*lead, *the site's batch shape).

    Raises:
      ValueError: naming ``target`` (no observed site), ``draws`` or ``batch``.

    Examples:
        >>> import jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> import vijax
        >>> def model(k):
        ...     rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
        ...     numpyro.sample("k", dist.Poisson(rate).expand([k.shape[0]]), obs=k)
        >>> target = vijax.from_numpyro(model, jnp.array([3.0, 1.0, 4.0]))
        >>> vijax.interop.log_likelihood(target, {"rate": jnp.array([0.5, 1.0])})["k"].shape
        (2, 3)
    """
    target = _check_target(target)
    flat, lead = _flatten(target, draws)
    observed_data(target, batch)  # the error naming target when there is no observed site
    return _unflatten(jit_or_eager(_JITTED[_log_likelihood], _log_likelihood)(target, flat, batch, None), lead)


def _log_likelihood(target: Target, flat, batch, _) -> dict:
    if target.library == "tfp":
        joint, observed = target.bind(batch)
        names = part_names(joint)

        def one(params):
            with jax.numpy_rank_promotion("allow"):
                dists, _ = joint.sample_distributions(seed=jax.random.PRNGKey(0), **params, **observed)
                dists = as_parts(dists, names)
                return {n: _pointwise_tfp(dists[n], jnp.asarray(v)) for n, v in observed.items()}

        return jax.vmap(one)(flat)
    from numpyro.infer import log_likelihood as numpyro_log_likelihood

    fn, args, kwargs = target.bind(batch)
    if target.enumerated:
        from vijax.interop._numpyro import marginal_log_prob, plate_nesting

        trace = _numpyro_trace(fn, args, kwargs, {n: v[0] for n, v in flat.items()})
        nesting = plate_nesting(trace)
        names = [n for n, m in trace.items() if m["type"] == "sample" and m["is_observed"]]

        def one(params):
            with jax.numpy_rank_promotion("allow"):
                return {n: marginal_log_prob(fn, args, kwargs, params, nesting, target.plates, keep=n) for n in names}

        return jax.vmap(one)(flat)
    with jax.numpy_rank_promotion("allow"):
        return numpyro_log_likelihood(fn, flat, *args, parallel=True, **kwargs)


_JITTED = {  # the target and the last argument static; eager where the model needs concrete values
    _predictive: jax.jit(_predictive, static_argnums=(0, 4)),
    _log_likelihood: jax.jit(_log_likelihood, static_argnums=(0, 3)),
}


__all__ = ["log_likelihood", "observed_data", "predictive", "site_dims"]
