"""Draws from a fitted q as an ArviZ ``InferenceData``, so users get ArviZ's summaries and plots
(``az.summary``, ``az.plot_posterior``, ...) for any vijax fit."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import jax
import numpy as np

from vijax.expfam import is_family
from vijax.types import PRNGKey, PyTree


def _path_name(path) -> str:
    parts = []
    for p in path:
        if isinstance(p, jax.tree_util.DictKey):
            parts.append(str(p.key))
        elif isinstance(p, jax.tree_util.SequenceKey):
            parts.append(str(p.idx))
        elif isinstance(p, jax.tree_util.GetAttrKey):
            parts.append(str(p.name))
        else:
            parts.append(str(p))
    return ".".join(parts)


def _leaves(tree: PyTree):
    """(names, leaves) of a pytree whose leaves are families or arrays; names are the leaves' paths
    ('rate', '1', 'w.0'), a family's class name where the path is empty or numeric."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_family)
    names, leaves = [], []
    for path, leaf in flat:
        name = _path_name(path)
        if is_family(leaf) and (name == "" or name.replace(".", "").isdigit()):
            name = type(leaf).__name__ + (f"_{name}" if name else "")
        names.append(name or "x")
        leaves.append(leaf)
    return names, leaves


def _import_arviz():
    """ArviZ, or an ImportError that names the extra that installs it."""
    try:
        import arviz
    except ImportError as e:
        raise ImportError("to_arviz needs ArviZ: pip install 'vijax-toolkit[arviz]'", name="arviz") from e
    return arviz


def to_arviz(
    q_or_draws: PyTree,
    key: Optional[PRNGKey] = None,
    num_draws: int = 1000,
    *,
    names: Optional[Sequence[str]] = None,
    log_weights: Any = None,
    num_chains: int = 1,
):
    """An ``arviz.InferenceData`` holding draws from a fitted q.

    Args:
      q_or_draws: either a pytree of ``vijax.expfam`` families (a state's ``q_global`` from CAVI,
        SVI, SSVI, PG-SVI, ...), from which ``num_draws`` draws are taken with ``key``; or a pytree
        of arrays of draws, each with the same leading number of draws S (e.g. ``vijax.inference.sample(alg, state, key, S)``).
      key: the PRNG key for the draws (needed for families; each leaf gets its own split).
      num_draws: S, the number of draws from families.
      names: the posterior variables' names, one per leaf in pytree order (default: each leaf's
        path in the pytree, or its family's class name).
      log_weights: optional (S,) log importance weights log p(x, z_s) - log q(z_s) of the same draws
        (``vijax.inference.log_weights`` of a ``bbvi`` or ``ngvi`` algorithm, with the same key): stored in
        ``sample_stats.log_weight`` with PSIS-smoothed ones in ``sample_stats.psis_log_weight``, and
        the PSIS k-hat (``vijax.metrics.psis``) in ``sample_stats.attrs["khat"]``.
      num_chains: S draws are shown to ArviZ as ``num_chains`` chains of S / num_chains draws
        (independent draws, so any split is valid; R-hat is then about 1 by construction).

    Returns:
      ``arviz.InferenceData`` with a ``posterior`` group (and ``sample_stats`` with log_weights).

    Raises:
      ImportError: ArviZ is not installed (``pip install 'vijax-toolkit[arviz]'``).
      ValueError: naming ``key`` (families without a key), ``num_draws``, ``names`` (wrong
        count), ``q_or_draws`` (draws with unequal leading sizes, or neither families nor arrays),
        ``log_weights`` (not one per draw) or ``num_chains`` (not dividing S); ``q_or_draws``
        also for no draws (S = 0) and for draws that are not finite (naming the variable).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax import expfam
        >>> q = {"rate": expfam.Gamma.from_shape_rate(jnp.array([2.0, 5.0]), 1.0)}
        >>> idata = to_arviz(q, jax.random.PRNGKey(0), num_draws=100)
        >>> idata.posterior["rate"].shape   # (chain, draw, *event)
        (1, 100, 2)
    """
    from vijax._validate import check_int
    from vijax.metrics._psis import psis

    leaf_names, leaves = _leaves(q_or_draws)
    if not leaves:
        raise ValueError("q_or_draws holds no families and no arrays")
    if any(is_family(leaf) for leaf in leaves):
        if key is None:
            raise ValueError("key: a PRNG key is needed to draw from the families of q_or_draws")
        check_int("num_draws", num_draws)
        keys = jax.random.split(key, len(leaves))
        draws = [
            np.asarray(leaf.sample(k, (num_draws,))) if is_family(leaf) else np.asarray(leaf)
            for leaf, k in zip(leaves, keys)
        ]
    else:
        draws = [np.asarray(leaf) for leaf in leaves]
    sizes = {d.shape[0] if d.ndim else None for d in draws}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(
            f"q_or_draws: every leaf needs the same leading number of draws, got {sorted(map(str, sizes))}"
        )
    s = sizes.pop()
    if s == 0:
        raise ValueError("q_or_draws holds no draws (S = 0)")
    if names is not None:
        names = list(names)
        if len(names) != len(draws):
            raise ValueError(f"names: {len(draws)} variables, got {len(names)} names")
        leaf_names = names
    for name, d in zip(leaf_names, draws):
        if np.issubdtype(d.dtype, np.inexact) and not np.all(np.isfinite(d)):
            raise ValueError(f"q_or_draws: the draws of {name!r} have NaN or infinite entries")
    check_int("num_chains", num_chains)
    if s % num_chains:
        raise ValueError(f"num_chains={num_chains} must divide the number of draws {s}")
    az = _import_arviz()  # deferred (slow to import) until the arguments are checked

    shape = lambda a: a.reshape((num_chains, s // num_chains) + a.shape[1:])
    posterior = {n: shape(d) for n, d in zip(leaf_names, draws)}
    if log_weights is None:
        return az.from_dict(posterior=posterior)
    lw = np.asarray(log_weights, np.float64)
    if lw.shape != (s,):
        raise ValueError(f"log_weights must have one value per draw, shape ({s},), got {lw.shape}")
    result = psis(lw)
    idata = az.from_dict(
        posterior=posterior, sample_stats={"log_weight": shape(lw), "psis_log_weight": shape(result.log_weights)}
    )
    idata.sample_stats.attrs["khat"] = float(result.khat)
    idata.sample_stats.attrs["psis_ess"] = float(result.ess)
    return idata
