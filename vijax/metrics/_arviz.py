"""Draws from a fitted q as an ArviZ ``InferenceData``, so users get ArviZ's summaries and plots
(``az.summary``, ``az.plot_posterior``, ...) for any vijax fit."""

from __future__ import annotations

import functools
from typing import Any, Optional, Sequence

import jax
import numpy as np

from vijax.expfam import is_family
from vijax.types import PRNGKey, PyTree
from vijax._validate import ArgumentError, require


def _leaves(tree: PyTree):
    """(names, leaves) of a pytree of families or arrays: the paths ('rate', 'w.0'), or a family's class name."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_family)
    names, leaves = [], []
    for path, leaf in flat:
        name = jax.tree_util.keystr(path, simple=True, separator=".")
        if is_family(leaf) and (name == "" or name.replace(".", "").isdigit()):
            name = type(leaf).__name__ + (f"_{name}" if name else "")
        names.append(name or "x")
        leaves.append(leaf)
    return names, leaves


def _import_arviz():
    return require("arviz", "arviz", "to_arviz")


def to_arviz(
    q_or_draws: PyTree,
    key: Optional[PRNGKey] = None,
    num_draws: int = 1000,
    *,
    names: Optional[Sequence[str]] = None,
    log_weights: Any = None,
    num_chains: int = 1,
    target: Any = None,
    batch: Any = None,
):
    """An ``arviz.InferenceData`` holding draws from a fitted q.

    With ``target`` (``vijax.from_numpyro``, ``vijax.from_tfp``), ``q_or_draws`` is the draws of its latent sites
    ((S, ...), or (C, S, ...) for C chains of restarts) and the result also holds ``posterior_predictive`` (drawn
    with ``key``), ``log_likelihood`` and ``observed_data``, with NumPyro's plate names as dims, so that
    ``az.loo``, ``az.compare`` and ``az.plot_ppc`` work as on a NumPyro MCMC fit.

    Args:
      q_or_draws: a pytree of ``vijax.expfam`` families, from which ``num_draws`` draws are taken with ``key``; or
        a pytree of arrays of draws with one leading number of draws S.
      key: the PRNG key for the draws (needed for families).
      num_draws: S, the number of draws from families.
      names: the posterior variables' names, one per leaf (default: each leaf's path, or its family's name).
      log_weights: optional (S,) log importance weights of the same draws (``vijax.inference.log_weights``),
        stored in ``sample_stats`` with the PSIS-smoothed ones and k-hat (``attrs["khat"]``).
      num_chains: S draws are shown to ArviZ as ``num_chains`` chains of S / num_chains draws (with (C, S)
        draws, 1 or C).
      target: a ``vijax.interop.Target`` whose latent sites ``q_or_draws`` holds.
      batch: with ``target``, the target's batch (None: the data the target was built with).

    Returns:
      ``arviz.InferenceData`` with a ``posterior`` group (and ``sample_stats`` with ``log_weights``).

    Raises:
      ImportError: ArviZ is not installed (``pip install "vijax-toolkit[arviz]"``).
      ValueError: naming the argument: ``key`` missing, ``num_draws``, ``names`` (wrong count), ``q_or_draws``
        (unequal leading sizes, no draws, not finite; with ``target``, not its sites), ``log_weights`` (not one per
        draw), ``num_chains`` (not dividing S); with ``target``, ``names`` or ``num_draws`` given, ``target``, ``batch``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax import expfam
        >>> q = {"rate": expfam.Gamma.from_shape_rate(jnp.array([2.0, 5.0]), 1.0)}
        >>> idata = to_arviz(q, jax.random.PRNGKey(0), num_draws=100)
        >>> idata.posterior["rate"].shape   # (chain, draw, *event)
        (1, 100, 2)
    """
    from vijax._validate import check_int

    if target is not None:
        return _target_inference_data(q_or_draws, key, target, batch, names, num_draws, num_chains, log_weights)
    if batch is not None:
        raise ArgumentError("batch", "batch: taken with a target only (the target's data for the predictive draws)")
    leaf_names, leaves = _leaves(q_or_draws)
    if not leaves:
        raise ArgumentError("q_or_draws", "q_or_draws holds no families and no arrays")
    if any(is_family(leaf) for leaf in leaves):
        if key is None:
            raise ArgumentError("key", "key: a PRNG key is needed to draw from the families of q_or_draws")
        check_int("num_draws", num_draws)
        families = {i: leaf for i, leaf in enumerate(leaves) if is_family(leaf)}
        sampled = _draw(families, key, len(leaves), num_draws)
        draws = [np.asarray(sampled[i]) if i in sampled else np.asarray(leaf) for i, leaf in enumerate(leaves)]
    else:
        draws = [np.asarray(leaf) for leaf in leaves]
    sizes = {d.shape[0] if d.ndim else None for d in draws}
    if len(sizes) != 1 or None in sizes:
        raise ArgumentError(
            "q_or_draws",
            f"q_or_draws: every leaf needs the same leading number of draws, got {sorted(map(str, sizes))}",
        )
    s = sizes.pop()
    if s == 0:
        raise ArgumentError("q_or_draws", "q_or_draws holds no draws (S = 0)")
    if names is not None:
        names = list(names)
        if len(names) != len(draws):
            raise ArgumentError("names", f"names: {len(draws)} variables, got {len(names)} names")
        leaf_names = names
    for name, d in zip(leaf_names, draws):
        if np.issubdtype(d.dtype, np.inexact) and not np.all(np.isfinite(d)):
            raise ArgumentError("q_or_draws", f"q_or_draws: the draws of {name!r} have NaN or infinite entries")
    check_int("num_chains", num_chains)
    if s % num_chains:
        raise ArgumentError("num_chains", f"num_chains={num_chains} must divide the number of draws {s}")
    az = _import_arviz()  # deferred (slow to import) until the arguments are checked

    shape = lambda a: a.reshape((num_chains, s // num_chains) + a.shape[1:])
    posterior = {n: shape(d) for n, d in zip(leaf_names, draws)}
    if log_weights is None:
        return az.from_dict(posterior=posterior)
    return _with_log_weights(az, {"posterior": posterior}, log_weights, (num_chains, s // num_chains))


@functools.partial(jax.jit, static_argnums=(2, 3))
def _draw(families: dict, key: PRNGKey, num_keys: int, num_draws: int) -> dict:
    """``num_draws`` draws of each family of ``families`` (index -> family), the i-th with the i-th key split."""
    keys = jax.random.split(key, num_keys)
    return {i: f.sample(keys[i], (num_draws,)) for i, f in families.items()}


def _with_log_weights(az, groups: dict, log_weights: Any, chains_draws: tuple[int, int]):
    """``az.from_dict(**groups)`` with ``sample_stats`` holding the log-weights and their PSIS-smoothed ones."""
    from vijax.metrics._psis import psis

    s = chains_draws[0] * chains_draws[1]
    lw = np.asarray(log_weights, np.float64)
    if lw.shape not in ((s,), chains_draws):
        raise ArgumentError("log_weights", f"log_weights must have one value per draw, shape ({s},), got {lw.shape}")
    lw = lw.reshape(-1)
    result = psis(np.reshape(log_weights, -1))  # in their own dtype: its rounding is what makes weights equal
    shape = lambda a: a.reshape(chains_draws)  # noqa: E731
    stats = {"log_weight": shape(lw), "psis_log_weight": shape(result.log_weights)}
    idata = az.from_dict(**groups, sample_stats=stats)
    idata.sample_stats.attrs["khat"] = float(result.khat)
    idata.sample_stats.attrs["psis_ess"] = float(result.ess)
    return idata


def _target_inference_data(draws, key, target, batch, names, num_draws, num_chains, log_weights):
    """``to_arviz`` with a target (see its docstring)."""
    from vijax._validate import check_int
    from vijax.interop import Target, log_likelihood, observed_data, predictive, site_dims

    if not isinstance(target, Target):
        raise ArgumentError(
            "target",
            f"target must be a vijax.interop.Target (vijax.from_numpyro, from_tfp), got {type(target).__name__}",
        )
    if names is not None:
        raise ArgumentError(
            "names", "names: with a target the variables are named after the model's sites; give no names"
        )
    if num_draws != 1000:
        raise ArgumentError(
            "num_draws",
            "num_draws: with a target q_or_draws holds the draws (vijax.inference.sample); give no num_draws",
        )
    if key is None:
        raise ArgumentError("key", "key: a PRNG key is needed for the posterior predictive draws")
    if not isinstance(draws, dict) or any(is_family(v) for v in draws.values()):
        raise ValueError(
            "q_or_draws: with a target, a dict of draws of its latent sites (vijax.inference.sample(alg, key, state, S))"
        )
    num_chains = check_int("num_chains", num_chains)
    arrays = {}
    lead = None
    sites = {**target.sites, **target.discrete}
    for name, value in draws.items():
        site = sites.get(name)
        if site is None:
            raise ValueError(
                f"q_or_draws[{name!r}]: the target has no latent site {name!r}; its sites are {list(sites)}"
            )
        value = np.asarray(value)
        k = value.ndim - len(site.shape)
        if k not in (1, 2) or value.shape[k:] != site.shape or (lead is not None and value.shape[:k] != lead):
            raise ValueError(
                f"q_or_draws[{name!r}]: shape {value.shape}; every site needs (S, *site shape) or, chains of "
                f"restarts, (C, S, *site shape), the same (S,) or (C, S) for all (site shape {site.shape})"
            )
        lead = value.shape[:k]
        if np.issubdtype(value.dtype, np.inexact) and not np.all(np.isfinite(value)):
            raise ValueError(f"q_or_draws: the draws of {name!r} have NaN or infinite entries")
        arrays[name] = value
    missing = [n for n in sites if n not in arrays]
    if missing:
        raise ValueError(f"q_or_draws: the latent sites {missing} have no draws; give every site of {list(sites)}")
    if lead is None or 0 in lead:
        raise ValueError("q_or_draws holds no draws")
    if len(lead) == 2 and num_chains not in (1, lead[0]):
        raise ArgumentError(
            "num_chains", f"num_chains={num_chains}: the draws hold {lead[0]} chains (leading axes {lead})"
        )
    if len(lead) == 1:
        if lead[0] % num_chains:
            raise ArgumentError("num_chains", f"num_chains={num_chains} must divide the number of draws {lead[0]}")
        lead = (num_chains, lead[0] // num_chains)
        arrays = {n: v.reshape(lead + v.shape[1:]) for n, v in arrays.items()}
    observed = observed_data(target, batch)
    every_dims = site_dims(target, batch)
    # a NumPyro model's deterministic sites, in the posterior group as az.from_numpyro puts them
    derived = tuple(n for n in every_dims if n not in target.sites and n not in observed)
    drawn = predictive(target, arrays, key, batch, sites=tuple(observed) + derived)
    groups = {
        "posterior": {**arrays, **{n: drawn[n] for n in derived}},
        "posterior_predictive": {n: drawn[n] for n in observed},
        "log_likelihood": log_likelihood(target, arrays, batch),
        "observed_data": observed,
    }
    az = _import_arviz()
    groups = {g: {n: np.asarray(v) for n, v in d.items()} for g, d in groups.items()}
    dims = {n: list(d) for n, d in every_dims.items() if n in groups["posterior"] or n in observed}
    if log_weights is None:
        return az.from_dict(**groups, dims=dims)
    return _with_log_weights(az, {**groups, "dims": dims}, log_weights, lead)
