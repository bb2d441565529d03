"""Which latent sites of a NumPyro model or a TFP joint are conditionally conjugate, and their closed-form updates.

A site with an exponential-family prior is conditionally conjugate when the log-joint, every other latent site
fixed, is linear in its statistics t(x): log p(x, rest, data) = <c(rest, data), t(x)> + const (Blei, Kucukelbir and
McAuliffe 2017, §4.1, eq. 36-37); its complete conditional has natural parameters c, its CAVI update E_q[c(rest)].

The check moves the site to points u_m of an unconstrained coordinate, solves c per element from the gradients at
the first points (grad_u f = J_t(u)^T c, least squares) and needs the log-joint f's relative secant gap under 1e4
ulps of float64:

    |f(u_m) - f(u_0) - <c, t(u_m) - t(u_0)>| / (|f(u_m)| + |f(u_0)| + |<c, t(u_m) - t(u_0)>| + 1).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax._compile import setup_jit
from vijax._validate import ArgumentError, is_tracer
from vijax.interop._numpyro import from_numpyro
from vijax.interop._target import Target, check_in_support
from vijax.interop._tfp import as_parts, part_names, unwrap
from vijax.types import PRNGKey, tfp_jax


_NUM_FIT = 3  # the points whose gradients give the coefficients
_NUM_POINTS = 5  # all points whose values are compared with the linear prediction


@dataclasses.dataclass(frozen=True)
class _Spec:
    """A vijax family with the unconstrained coordinate the check moves the site along."""

    family: type
    stats: str  # the statistics as the report names them
    num_params: int  # its natural parameters (and statistics), each of the value's shape
    event_ndims: int  # of the value: 1 for Dirichlet (the simplex is the last axis)
    value: Callable  # u -> x
    unvalue: Callable  # x -> u
    describe: Callable  # one element's natural parameters (floats) -> the family's parameters, in words
    bound: float = 30.0  # the points' |u| at most: x, log x and log(1 - x) stay finite and distinct
    centre: float = 3.0  # the points' centre's |u| at most: statistics of order 1, whatever the prior's scale


def _gamma_words(eta) -> str:
    return f"shape {eta[0] + 1:.4g} and rate {-eta[1]:.4g} (both must be > 0)"


def _normal_words(eta) -> str:
    return f"precision {-2 * eta[1]:.4g} (must be > 0)"


def _beta_words(eta) -> str:
    return f"concentrations {eta[0] + 1:.4g} and {eta[1] + 1:.4g} (both must be > 0)"


def _dirichlet_words(eta) -> str:
    return f"concentrations {[float(f'{e + 1:.4g}') for e in eta[0]]} (each must be > 0)"


_GAMMA = _Spec(expfam.Gamma, "[log x, x]", 2, 0, jnp.exp, jnp.log, _gamma_words)
_NORMAL = _Spec(expfam.Normal, "[x, x^2]", 2, 0, lambda u: u, lambda x: x, _normal_words, float("inf"))
_BETA = _Spec(expfam.Beta, "[log x, log(1 - x)]", 2, 0, jax.nn.sigmoid, jax.scipy.special.logit, _beta_words)
_DIRICHLET = _Spec(expfam.Dirichlet, "[log x]", 1, 1, lambda u: jax.nn.softmax(u, axis=-1), jnp.log, _dirichlet_words)
_MATCHED = "Gamma (and Exponential, Chi2), Normal, Beta, Dirichlet"


def prior_specs(target: Target, key: PRNGKey, batch, values: dict) -> dict:
    """site -> (the spec matched to its prior or None, the prior's class name), the others at constrained ``values``."""
    if target.library == "tfp":
        joint, observed = target.bind(batch)
        with jax.numpy_rank_promotion("allow"):
            dists = as_parts(joint.sample_distributions(seed=key, **values, **observed)[0], part_names(joint))
        return {n: _spec_of(dists[n], "tfp") for n in target.sites}
    from numpyro import handlers

    fn, a, kw = target.bind(batch)
    with jax.numpy_rank_promotion("allow"):
        trace = handlers.trace(handlers.substitute(handlers.seed(fn, key), data=values)).get_trace(*a, **kw)
    return {n: _spec_of(trace[n]["fn"], "numpyro") for n in target.sites}


def _spec_of(fn: Any, library: str) -> tuple[Optional[_Spec], str]:
    """(the spec of the family matched to a prior or None, the prior's class name inside its wrappers)."""
    if library == "tfp":
        d = tfp_jax().distributions
        fn, gammas = unwrap(fn), (d.Gamma, d.Chi2)  # Exponential is a Gamma's subclass
    else:
        import numpyro.distributions as d

        while isinstance(fn, (d.Independent, d.ExpandedDistribution)):
            fn = fn.base_dist
        gammas = (d.Gamma, d.Exponential)  # Chi2 is a Gamma's subclass
    pairs = ((gammas, _GAMMA), (d.Normal, _NORMAL), (d.Beta, _BETA), (d.Dirichlet, _DIRICHLET))
    return next((spec for cls, spec in pairs if isinstance(fn, cls)), None), type(fn).__name__


def _element_stats(spec: _Spec, u_e):
    """The family's statistics of one element (unconstrained ``u_e`` of shape (k,)), concatenated: (d,)."""
    x = spec.value(u_e) if spec.event_ndims else spec.value(u_e[0])
    fam = spec.family.from_natural((jnp.zeros_like(x),) * spec.num_params)  # one element's family
    return jnp.concatenate([jnp.ravel(t) for t in fam.sufficient_stats(x)])


def _draws(target: Target, key: PRNGKey, num: int) -> tuple[dict, dict]:
    """``num`` values of every site (the start moved by U(-2, 2) noise, unconstrained) and each site's points' noise."""
    dtype = jnp.float64
    shapes = []
    for n, u in target.init_params.items():
        shapes += [(num, *jnp.shape(u)), (num, _NUM_POINTS, *target.sites[n].shape)]
    sizes = [int(np.prod(s, dtype=int)) for s in shapes]
    flat = jax.random.uniform(key, (sum(sizes),), dtype, -2.0, 2.0)
    parts = [p.reshape(s) for p, s in zip(jnp.split(flat, np.cumsum(sizes)[:-1]), shapes)]
    moved, noise = {}, {}
    for i, (n, u) in enumerate(target.init_params.items()):
        moved[n] = _float64(u)[None] + parts[2 * i]
        noise[n] = parts[2 * i + 1]
    return jax.vmap(target.constrain)(moved), noise


def _fit(target: Target, batch, site: str, spec: _Spec, others: dict, x, noise) -> tuple:
    """Coefficients c (E, d) of the site's statistics from the first ``_NUM_FIT`` points; the largest gap over all."""
    u = _points(spec, x, noise)
    shape = u.shape[1:]
    k = shape[-1] if spec.event_ndims else 1
    elements = u.reshape(u.shape[0], -1, k)  # (M, E, k)

    def f(u1):
        return target.log_prob({**others, site: spec.value(u1)}, batch)

    values, grads = jax.vmap(jax.value_and_grad(f))(u)
    grads = grads.reshape(elements.shape)
    stats_of = jax.vmap(jax.vmap(lambda ue: _element_stats(spec, ue)))
    jac = jax.vmap(jax.vmap(jax.jacfwd(lambda ue: _element_stats(spec, ue))))(elements)  # (M, E, d, k)
    t = stats_of(elements)  # (M, E, d)
    a = jnp.swapaxes(jac[:_NUM_FIT], -1, -2)  # (F, E, k, d): grad_u f = J^T c per element
    a = jnp.moveaxis(a, 0, 1).reshape(a.shape[1], -1, a.shape[-1])  # (E, F k, d)
    b = jnp.moveaxis(grads[:_NUM_FIT], 0, 1).reshape(a.shape[0], -1)  # (E, F k)
    c = _least_squares(a, b)  # (E, d)
    change = jnp.sum((t[1:] - t[:1]) * c[None], axis=(1, 2))  # (M - 1,)
    gaps = jnp.abs(values[1:] - values[0] - change) / (jnp.abs(values[1:]) + jnp.abs(values[0]) + jnp.abs(change) + 1.0)
    finite = jnp.all(jnp.isfinite(values)) & jnp.all(jnp.isfinite(grads)) & jnp.all(jnp.isfinite(c))
    return c, jnp.where(finite, jnp.max(gaps), jnp.nan)


def _least_squares(a, b) -> jax.Array:
    """c (E, d) minimizing |a_e c_e - b_e| for each element e; a (E, n, d), b (E, n). Two statistics (the scalar
    families): the columns scaled to unit norm, a = QR by Gram-Schmidt with one reorthogonalization, c = R^-1 Q^T b, in
    closed form: elementwise arithmetic over the elements, not one LAPACK call per element. More: ``lstsq`` per element."""
    if a.shape[-1] != 2:
        return jax.vmap(lambda a_e, b_e: jnp.linalg.lstsq(a_e, b_e)[0])(a, b)
    norms = jnp.linalg.norm(a, axis=-2)  # (E, 2)
    q1, a2 = a[..., 0] / norms[..., :1], a[..., 1] / norms[..., 1:]
    r12 = jnp.sum(q1 * a2, axis=-1)
    v = a2 - r12[..., None] * q1
    again = jnp.sum(q1 * v, axis=-1)  # Gram-Schmidt twice: v orthogonal to q1 to rounding
    v, r12 = v - again[..., None] * q1, r12 + again
    c2 = jnp.sum(v * b, axis=-1) / jnp.sum(v * v, axis=-1)
    c1 = jnp.sum(q1 * b, axis=-1) - r12 * c2
    return jnp.stack([c1, c2], axis=-1) / norms


def _natural(spec: _Spec, c, shape: tuple) -> tuple:
    """The per-element coefficients (E, num_params k) as the family's natural parameters of the site's shape."""
    c = c.reshape(c.shape[0], spec.num_params, -1)
    return tuple(c[:, j].reshape(shape) for j in range(spec.num_params))


def _points(spec: _Spec, x, noise) -> jax.Array:
    """(points, *shape): u of ``x`` clipped to [-centre, centre], moved by ``noise`` (1 + |u|) / 2, within +-bound."""
    u = jnp.clip(spec.unvalue(x), -spec.centre, spec.centre)[None]
    return jnp.clip(u + noise * 0.5 * (1.0 + jnp.abs(u)), -spec.bound, spec.bound)


def _float64(a) -> jax.Array:
    return jnp.asarray(a, jnp.float64)


def _tolerance(values) -> float:
    return 1e4 * float(jnp.finfo(jnp.result_type(values)).eps)


# over draws of the other sites (and their points)
_fit_over_draws = jax.vmap(_fit, in_axes=(None, None, None, None, 0, 0, 0))


def _worst(gaps) -> float:
    gaps = np.asarray(gaps)
    return float("nan") if np.isnan(gaps).any() else float(gaps.max())


def _gap_reason(site: str, spec: _Spec, gap: float, tol: float) -> str:
    """Why a gap above ``tol`` (or NaN) makes ``site`` no family ``spec`` of its statistics."""
    family = spec.family.__name__
    if np.isnan(gap):
        return (
            f"log-joint not finite at a point checked ({family}'s statistics of {site!r}, {spec.stats}): the model's "
            f"density is not defined at some value of the site's support (a Normal site used as a scale, say), so "
            f"it is no {family} of the site"
        )
    return f"log-joint not linear in {spec.stats} ({family}'s statistics of {site!r}): secant gap {gap:.3g} (tolerance {tol:.3g})"


class SiteConjugacy(NamedTuple):
    """What ``conjugate_sites`` found for one latent site.

    Attributes:
      name: the site's name in the model.
      conjugate: whether the log-joint is linear in the prior family's statistics at every draw and point checked.
      family: the name of the ``vijax.expfam`` family matched to the prior, None where none matches.
      prior: the class name of the prior's distribution, its wrappers removed.
      stats: the family's statistics as the reason names them (``"[log x, x]"``), None without a family.
      gap: the largest relative secant gap over the draws and points; NaN where not finite, or not checked.
      tolerance: the gap under which the site counts as conjugate.
      reason: why the site is not conjugate, None when it is.
    """

    name: str
    conjugate: bool
    family: Optional[str]
    prior: str
    stats: Optional[str]
    gap: float
    tolerance: float
    reason: Optional[str]


def _as_target(target_or_model: Any, args: tuple, kwargs: dict) -> tuple[Target, Any]:
    """(the target, its batch): a target and ``kwargs`` as its batch, or a NumPyro model and its arguments."""
    if isinstance(target_or_model, Target):
        if args:
            raise ArgumentError(
                "target_or_model",
                "target_or_model: a target takes its batch as keyword arguments (the model's arguments and "
                "subsampled plates' indices, or a TFP joint's observed values), got "
                f"{len(args)} positional arguments",
            )
        batch = dict(kwargs) or None
        target_or_model.check_data(batch)
        return target_or_model, batch
    if not callable(target_or_model):
        raise ArgumentError(
            "target_or_model",
            "target_or_model must be a NumPyro model (a function) or a target (vijax.from_numpyro, "
            f"vijax.from_tfp), got {type(target_or_model).__name__}",
            value=target_or_model,
        )
    if any(is_tracer(a) for a in jax.tree_util.tree_leaves((args, kwargs))):
        raise ArgumentError(
            "target_or_model",
            "target_or_model: the model's arguments are traced (inside jit or vmap), and a target is built "
            "from concrete data; build it outside: target = vijax.from_numpyro(model, *args, **kwargs), "
            "then pass the traced data as the target's batch, by the arguments' names "
            "(complete_conditional(target, site, draws, y=y))",
        )
    return from_numpyro(target_or_model, *args, **kwargs), None


def _own_data(target: Target, batch) -> Any:
    """``batch`` with fresh copies of the model's NumPy data where the checks enable float64 (JAX caches typed ones)."""
    if jax.config.jax_enable_x64:
        return batch
    data = dict(batch or {})
    if target.library == "tfp":
        data = {**target.bind(batch)[1], **data}
    elif target.batch_keys is not None:
        _, a, kw = target.bind(batch)
        if len(a) <= len(target.batch_keys):  # positional arguments named (none taken as *args)
            data = {
                **dict(zip(target.batch_keys, a)),
                **{k: v for k, v in kw.items() if k in target.batch_keys},
                **data,
            }
    copies = {k: np.array(v) for k, v in data.items() if isinstance(v, (np.ndarray, np.generic))}
    return {**(batch or {}), **copies} if copies else batch


def _check_names(argument: str, names: Any, sites) -> tuple:
    if isinstance(names, str):
        names = (names,)
    try:
        names = tuple(names)
    except TypeError:
        raise ArgumentError(argument, f"{argument} must be a sequence of site names, got {names!r}") from None
    for n in names:
        if n not in sites:
            raise ArgumentError(
                argument, f"{argument}: {n!r} is not a latent site of the model; its latent sites are {list(sites)}"
            )
    return names


def conjugate_sites(
    target_or_model: Any, key: PRNGKey, *args: Any, force: Sequence[str] = (), num_draws: int = 2, **kwargs: Any
) -> dict:
    """Which latent sites of a NumPyro model or a TFP joint distribution are conditionally conjugate, checked numerically.

    A site with a Gamma (Exponential, Chi2), Normal, Beta or Dirichlet prior is conjugate when the log-joint, the other
    sites fixed, is linear in its family's statistics (Blei, Kucukelbir and McAuliffe 2017, eq. 36-37), checked by a
    relative secant gap at ``num_draws`` draws of the other sites, five points each.

    Args:
      target_or_model: a NumPyro model (``*args``, ``**kwargs``: its arguments) or a target (``**kwargs``: its batch).
      key: a PRNG key, for the draws of the other sites and the points.
      force: names of sites that must be conjugate: ArgumentError naming the first that is not.
      num_draws: the number of draws of the other sites (>= 1).

    Returns:
      A dict site name -> :class:`SiteConjugacy`, in the model's order.

    Raises:
      ArgumentError: naming ``force`` (a forced site not conjugate, or unknown) or ``target_or_model``; as from_numpyro.

    Examples:
        >>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> import vijax
        >>> def model(k):
        ...     rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
        ...     w = numpyro.sample("w", dist.Normal(0.0, 1.0))
        ...     with numpyro.plate("data", k.shape[0]):
        ...         numpyro.sample("k", dist.Poisson(rate * jax.nn.sigmoid(w)), obs=k)
        >>> report = vijax.conjugate_sites(model, jax.random.PRNGKey(0), jnp.array([3.0, 1.0, 4.0]))
        >>> [(s.name, s.family, s.conjugate) for s in report.values()]
        [('rate', 'Gamma', True), ('w', 'Normal', False)]
        >>> report["w"].reason.startswith("log-joint not linear in [x, x^2]")
        True
    """
    target, batch = _as_target(target_or_model, args, kwargs)
    if isinstance(num_draws, bool) or not isinstance(num_draws, (int, np.integer)) or num_draws < 1:
        raise ArgumentError("num_draws", f"num_draws must be an int >= 1, got {num_draws!r}", value=num_draws)
    forced = _check_names("force", force, target.sites)
    batch = _own_data(target, batch)
    with jax.enable_x64(True):  # float64 whatever the process's setting: a tolerance of 2e-12, not 1e-3
        return _report(target, key, batch, num_draws, forced)


def _gaps(target: Target, key: PRNGKey, batch, num_draws: int, checked: tuple) -> dict:
    """site -> (its gaps over the draws, its coefficients (draws, E, d), whether each draw's conditional is proper)."""
    draws, noises = _draws(target, key, num_draws)  # (draws, *shape) per site
    out = {}
    for site, spec in checked:
        others = {n: v for n, v in draws.items() if n != site}
        c, gaps = _fit_over_draws(target, batch, site, spec, others, draws[site], noises[site])
        shape = target.sites[site].shape
        proper = jax.vmap(lambda c_s: spec.family.from_natural(_natural(spec, c_s, shape)).is_valid())(c)
        out[site] = gaps, c, proper
    return out


def _improper(spec: _Spec, c, proper) -> Optional[str]:
    """Why the complete conditional is improper, at its first element outside the domain; None where ``proper``."""
    proper = np.asarray(proper)
    if proper.all():
        return None
    c = np.asarray(c).reshape(-1, np.shape(c)[-1])  # (draws E, d)
    first = int(np.argmax(~proper.ravel()))
    eta = c[first].reshape(spec.num_params, -1)
    eta = tuple(e if spec.event_ndims else float(e[0]) for e in eta)
    family = spec.family.__name__
    return (
        f"its complete conditional is improper: the log-joint is linear in {spec.stats} but its coefficients "
        f"give a {family} with {spec.describe(eta)}, no distribution; a term that grows with the site faster "
        f"than its prior falls (numpyro.factor adding c * x to a Gamma site beyond its rate, or x^2 to a Normal "
        f"site) leaves the log-joint unbounded"
    )


_gaps_jit = setup_jit(_gaps, static_argnums=(0, 3, 4))


def _report(target: Target, key: PRNGKey, batch, num_draws: int, forced: tuple) -> dict:
    specs = _priors(target, batch, False)
    checked = tuple((n, spec) for n, (spec, _) in specs.items() if spec is not None)
    gaps_of = _gaps_jit(target, key, batch, num_draws, checked)
    report = {}
    for site in target.sites:
        spec, prior = specs[site]
        if spec is None:
            why = (
                f"its prior is a {prior}: no exponential family of vijax.expfam is matched to it (matched: {_MATCHED})"
            )
            report[site] = SiteConjugacy(site, False, None, prior, None, float("nan"), float("nan"), why)
            continue
        gaps, c, proper = gaps_of[site]
        gap, tol = _worst(gaps), _tolerance(gaps)
        ok = bool(gap <= tol)  # NaN: not finite at a point
        reason = None
        if ok:
            reason = _improper(spec, c, proper)
            ok = reason is None
        else:
            reason = _gap_reason(site, spec, gap, tol)
            shape = target.sites[site].shape
            if not np.isnan(gap) and np.prod(shape[: len(shape) - spec.event_ndims], dtype=int) > 1:
                reason += (
                    "; or its elements interact (a product of two of them, as a linear regression's weights: the "
                    f"complete conditional is then correlated, not a product of {spec.family.__name__}s)"
                )
        report[site] = SiteConjugacy(site, ok, spec.family.__name__, prior, spec.stats, gap, tol, reason)
    for site in forced:
        if not report[site].conjugate:
            raise ArgumentError(
                "force", f"force: site {site!r} is not conditionally conjugate: {report[site].reason}", value=site
            )
    return report


def complete_conditional(target_or_model: Any, site: str, draws: dict, *args: Any, **kwargs: Any):
    """The closed-form update of a conditionally conjugate site: its complete conditional.

    The coefficients c of the site's statistics in the log-joint are the natural parameters of p(site | others, data);
    their mean over S draws of the others from a fitted q is the Monte Carlo CAVI update E_q[c(others)] (Blei,
    Kucukelbir and McAuliffe 2017, eq. 37). Checked, in float64, unless traced.

    Args:
      target_or_model: a NumPyro model, or a target, as for :func:`conjugate_sites`.
      site: the site's name.
      draws: dict name -> draws (S, ...) of every other latent site (``vijax.inference.sample``).
      *args: the model's positional arguments.
      **kwargs: the model's keyword arguments, or the target's batch.

    Returns:
      The ``vijax.expfam`` family (Gamma, Normal, Beta or Dirichlet) of the site's shape (Dirichlet: with its simplex).

    Raises:
      ArgumentError: naming ``site`` (unknown, no family matched, not linear at the draws, improper), ``draws`` (a
        missing site, no common leading axis) or ``target_or_model`` (traced arguments: build the target outside jit).

    Examples:
        >>> import jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> from vijax.interop import complete_conditional
        >>> def model(k):
        ...     rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
        ...     with numpyro.plate("data", k.shape[0]):
        ...         numpyro.sample("k", dist.Poisson(rate), obs=k)
        >>> q = complete_conditional(model, "rate", {}, jnp.array([3.0, 1.0, 4.0]))
        >>> [round(float(v), 6) for v in (q.concentration, q.rate)]  # Gamma(2 + 8, 1 + 3)
        [10.0, 4.0]
    """
    target, batch = _as_target(target_or_model, args, kwargs)
    return _conditionals(target, batch, {site: _checked_draws(target, site, draws)})[site]


def _checked_draws(target: Target, site: str, draws: Any) -> dict:
    """``complete_conditional``'s ``site`` and ``draws`` checked: the other sites' draws."""
    _check_names("site", site, target.sites)
    others = [n for n in target.sites if n != site]
    if not isinstance(draws, dict):
        raise ArgumentError("draws", f"draws must be a dict site name -> values, got {type(draws).__name__}")
    missing = [n for n in others if n not in draws]
    if missing:
        raise ArgumentError("draws", f"draws: no values of the other latent sites {missing}")
    shapes = {n: tuple(np.shape(draws[n])) for n in others}
    sizes = {s[0] if s else None for s in shapes.values()}
    if len(sizes) > 1 or None in sizes or 0 in sizes:
        raise ArgumentError(
            "draws", f"draws: every site needs the same leading (draw) axis >= 1, got {sorted(map(str, sizes))}"
        )
    for n, shape in shapes.items():
        if shape[1:] != target.sites[n].shape:
            raise ArgumentError("draws", f"draws[{n!r}]: shape {shape}, expected (draws, *{target.sites[n].shape})")
        check_in_support(f"draws[{n!r}]", draws[n], target.sites[n].support)
    return {n: draws[n] for n in others}


def complete_conditionals(target_or_model: Any, requests: dict, *args: Any, **kwargs: Any) -> dict:
    """:func:`complete_conditional` of several sites at once: ``requests`` maps each site to its ``draws``.

    Returns:
      A dict site name -> its ``vijax.expfam`` family, in the order of ``requests``.

    Raises:
      ArgumentError: as :func:`complete_conditional`, for the first site that fails; naming ``requests`` (not a dict).
    """
    target, batch = _as_target(target_or_model, args, kwargs)
    if not isinstance(requests, dict):
        raise ArgumentError("requests", f"requests must be a dict site name -> draws, got {type(requests).__name__}")
    return _conditionals(target, batch, {site: _checked_draws(target, site, d) for site, d in requests.items()})


def _conditionals(target: Target, batch, requests: dict) -> dict:
    """The sites' families: on concrete values jitted in float64 and checked; traced, unchecked."""
    # traced: the draws or the batch, or the caller's program (a step with one site and no batch under jit or scan)
    traced = any(is_tracer(a) for a in jax.tree_util.tree_leaves((requests, batch, jnp.zeros(()))))
    own = batch if traced else _own_data(target, batch)
    with contextlib.nullcontext() if traced else jax.enable_x64(True):  # float64 whatever the process's setting
        priors = _priors(target, own, traced)
        specs = tuple((n, _site_spec(n, priors[n])) for n in requests)
        fits = (_solve if traced else _solve_jit)(target, own, specs, list(requests.values()), not traced)
    for (site, spec), (_, gaps, c, proper) in [] if traced else zip(specs, fits):
        gap, tol = _worst(gaps), _tolerance(gaps)
        if not gap <= tol:
            why = _gap_reason(site, spec, gap, tol)
            raise ArgumentError(
                "site", f"site {site!r} is not conditionally conjugate at these draws: {why}", value=site
            )
        improper = _improper(spec, c, proper)
        if improper is not None:
            raise ArgumentError("site", f"site {site!r} at these draws: {improper}", value=site)
    return {n: spec.family.from_natural(nat) for (n, spec), (nat, *_) in zip(specs, fits)}


def _priors(target: Target, batch, traced: bool) -> dict:
    """site -> (spec or None, the prior's class name) at the model's start (under ``eval_shape`` unless ``traced``)."""
    found = {}

    def read(b):
        # in the default float (the checks': float64), as the arrays a site's transform makes (CorrCholesky's zeros)
        start = target.constrain({n: jnp.asarray(u, float) for n, u in target.init_params.items()})
        found.update(prior_specs(target, jax.random.PRNGKey(0), b, start))
        return 0.0

    read(batch) if traced else jax.eval_shape(read, batch)
    return found


def check_report(target: Target, report: Any, name: str = "conjugate") -> None:
    """Raises ArgumentError naming ``name`` unless ``report`` reads as :func:`conjugate_sites`' report of ``target``."""
    if not isinstance(report, Mapping) or not all(isinstance(s, SiteConjugacy) for s in report.values()):
        raise ArgumentError(
            name, f"{name} must be the report of vijax.conjugate_sites(target, key): a dict of SiteConjugacy"
        )
    unknown = [n for n in report if n not in target.sites]
    missing = [n for n in target.sites if n not in report]
    if unknown or missing:
        what = (
            f"it names sites the target does not have: {unknown}"
            if unknown
            else f"it has no entry for the target's latent sites {missing}"
        )
        raise ArgumentError(
            name,
            f"{name}: {what} (the target's latent sites are {list(target.sites)}), so it is not "
            "conjugate_sites' report of this target; run vijax.conjugate_sites(target, key)",
        )
    misnamed = [n for n in target.sites if report[n].name != n]
    if misnamed:
        raise ArgumentError(name, f"{name}[{misnamed[0]!r}] is the report of site {report[misnamed[0]].name!r}")
    marked = [n for n in target.sites if report[n].conjugate]
    if not marked:
        return
    # a subsampled plate needs a minibatch's indices to run the model: its first M
    plates = {p: jnp.arange(m) for p, (_, m) in target.plates.items()}
    priors = _priors(target, plates or None, False)
    for n in marked:
        spec, prior = priors[n]
        family = None if spec is None else spec.family.__name__
        if (report[n].prior, report[n].family) != (prior, family):
            raise ArgumentError(
                name,
                f"{name}[{n!r}]: the report finds site {n!r} conjugate with a {report[n].prior} prior "
                f"({report[n].family}), but in this target its prior is a {prior}"
                + ("" if family is None else f" ({family})")
                + ", so it is not conjugate_sites' report of this target; run vijax.conjugate_sites(target, key)",
            )


def _site_spec(site: str, spec_prior: tuple) -> _Spec:
    spec, prior = spec_prior
    if spec is None:
        raise ArgumentError(
            "site",
            f"site {site!r}: its prior is a {prior}: no exponential family is matched to it (matched: {_MATCHED})",
        )
    return spec


def _solve(target: Target, batch, specs: tuple, draws: list, checked: bool) -> list:
    """Per site (natural parameters of the mean c, gaps, mean c (E, d), proper); ``checked``: float64, all points."""
    cast = _float64 if checked else jnp.asarray
    start = target.constrain({n: cast(u) for n, u in target.init_params.items()})
    points = _NUM_POINTS if checked else _NUM_FIT
    out = []
    for (site, spec), d in zip(specs, draws):
        d = {n: cast(v) for n, v in d.items()}
        x = jnp.asarray(start[site])
        noise = jnp.asarray(np.random.default_rng(0).uniform(-2.0, 2.0, (_NUM_POINTS, *x.shape))[:points], x.dtype)
        num = int(next(iter(d.values())).shape[0]) if d else 1
        x_n, noise_n = jnp.broadcast_to(x, (num, *x.shape)), jnp.broadcast_to(noise, (num, *noise.shape))
        c, gaps = _fit_over_draws(target, batch, site, spec, d, x_n, noise_n)
        dtype = jnp.result_type(target.init_params[site])
        mean = jnp.mean(c, axis=0)
        nat = _natural(spec, mean, x.shape)
        proper = spec.family.from_natural(nat).is_valid()
        out.append((tuple(p.astype(dtype) for p in nat), gaps, mean, proper))
    return out


_solve_jit = setup_jit(_solve, static_argnums=(0, 2, 4))


__all__ = ["SiteConjugacy", "check_report", "complete_conditional", "complete_conditionals", "conjugate_sites"]
