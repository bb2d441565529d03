"""The numerical part of ``conjugate_sites`` and ``complete_conditional``: a site's coefficients in
the statistics of its prior's family, solved and checked on the target's log-joint, and the one
part that reads the library's model, each site's prior (:func:`prior_specs`).

The check. ``conjugate_model``'s checks (``vijax.models.conjugate_model``) take a log-joint
written in the statistics, a function on the whole space of t; they read the program of its
gradient with respect to t and test it along straight lines in that space. A NumPyro model or a
TFP joint distribution gives its log-joint at values x only: a function on the curve {t(x)}, not
on the space around it (no x has the statistics (log x, x) + h r for a generic line r), and its
gradient with respect to x depends on x even where it is linear in t (a / x + b for Gamma's
(log x, x)). Neither check applies, so this is a small one of its own, in the same spirit as
``conjugate_model``'s secant test: the site is moved to a few points u_m of an unconstrained
coordinate (log x for Gamma, x for Normal, logit x for Beta, log x for Dirichlet, x = softmax(u));
the coefficients c are solved per element of the site from the gradients at the first points
(grad_u f = J_t(u)^T c, J_t the Jacobian of the statistics, by least squares), and the values at
every point are compared with the linear prediction: the relative secant gap

    |f(u_m) - f(u_0) - <c, t(u_m) - t(u_0)>| / (|f(u_m)| + |f(u_0)| + |<c, t(u_m) - t(u_0)>| + 1)

must stay under 1e4 ulps of the values' float type (the tolerance of ``conjugate_model``'s secant
test). The check runs with float64 enabled whatever the process's setting, so the tolerance is
2.2e-12: at float32's 1.2e-3 a Poisson log-linear coefficient with covariates within +-0.1 (gaps
of 1e-5 to 1.6e-4 at five keys) passed. A product of two elements, a term not linear in the
statistics (a logistic likelihood of a Normal coefficient), or a step function of the value (a
zero gradient: the values are compared, not the gradients) leaves a gap.

f is the target's ``log_prob`` (the log-joint at constrained values, the observed values fixed),
whichever library the target comes from; the library's part is the prior of each site, read by
:func:`prior_specs`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax.interop._target import Target
from vijax.interop._tfp import _unwrap, as_parts, part_names
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
    """site -> (the spec of the family matched to its prior or None, the prior's class name): the
    prior of each latent site given the others at constrained ``values`` (its parents' values),
    read from the library's model: NumPyro's trace with ``values`` substituted, or the
    distributions of a TFP joint at ``values`` and the observed ones (``sample_distributions``)."""
    if target.library == "tfp":
        joint, observed = target.bind(batch)
        with jax.numpy_rank_promotion("allow"):
            dists = as_parts(joint.sample_distributions(seed=key, **values, **observed)[0], part_names(joint))
        return {n: _tfp_spec(dists[n]) for n in target.sites}
    trace = _trace(target, key, batch, values)
    return {n: _numpyro_spec(trace[n]["fn"]) for n in target.sites}


def _trace(target: Target, key: PRNGKey, batch, values: Optional[dict] = None) -> dict:
    """The NumPyro model's trace at a prior draw of its latent sites (``values`` substituted)."""
    from numpyro import handlers

    fn, a, kw = target.bind(batch)
    fn = handlers.seed(fn, key)
    if values is not None:
        fn = handlers.substitute(fn, data=values)
    with jax.numpy_rank_promotion("allow"):
        return handlers.trace(fn).get_trace(*a, **kw)


def _numpyro_spec(fn: Any) -> tuple[Optional[_Spec], str]:
    """(the spec of the family matched to a NumPyro prior or None, the prior's class name)."""
    import numpyro.distributions as dist

    while isinstance(fn, (dist.Independent, dist.ExpandedDistribution)):
        fn = fn.base_dist
    gammas = ((dist.Gamma, _GAMMA), (dist.Exponential, _GAMMA))  # Chi2 is a Gamma's subclass
    return _match(fn, gammas + ((dist.Normal, _NORMAL), (dist.Beta, _BETA), (dist.Dirichlet, _DIRICHLET)))


def _tfp_spec(fn: Any) -> tuple[Optional[_Spec], str]:
    """(the spec of the family matched to a TFP prior or None, the prior's class name), inside its
    ``Sample`` and ``Independent`` wrappers (they add axes on the left of a Dirichlet's simplex:
    the site's value keeps its simplex last, as the spec takes it)."""
    tfd = tfp_jax().distributions
    fn = _unwrap(fn)
    gammas = ((tfd.Gamma, _GAMMA), (tfd.Chi2, _GAMMA))  # Exponential is a Gamma's subclass
    return _match(fn, gammas + ((tfd.Normal, _NORMAL), (tfd.Beta, _BETA), (tfd.Dirichlet, _DIRICHLET)))


def _match(fn: Any, pairs: tuple) -> tuple[Optional[_Spec], str]:
    """(the spec of the first class of ``pairs`` that ``fn`` is an instance of, or None; ``fn``'s
    class name)."""
    for cls, spec in pairs:
        if isinstance(fn, cls):
            return spec, type(fn).__name__
    return None, type(fn).__name__


def _element_stats(spec: _Spec, u_e):
    """The family's statistics of one element (unconstrained ``u_e`` of shape (k,)), concatenated:
    (d,) = (num_params k,)."""
    x = spec.value(u_e) if spec.event_ndims else spec.value(u_e[0])
    fam = spec.family.from_natural((jnp.zeros_like(x),) * spec.num_params)  # one element's family
    return jnp.concatenate([jnp.ravel(t) for t in fam.sufficient_stats(x)])


def _draws(target: Target, key: PRNGKey, num: int) -> tuple[dict, dict]:
    """(``num`` values of every latent site, (num, *shape) each: the target's start moved by uniform
    noise in (-2, 2) on the unconstrained space, the spread of NumPyro's ``init_to_uniform``; the
    noise that moves each site to its points, (num, points, *shape)). All the noise is one
    ``jax.random.uniform`` call, cut into the sites' parts (no sampler is run: NumPyro's Gamma and
    Dirichlet samplers, and each random call, cost a compilation of their own)."""
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
    """Coefficients c of the site's statistics, per element (E, d), and the largest relative gap.

    The site is moved to the points ``_points(spec, x, noise)`` ((points, *site shape), unconstrained);
    the first ``_NUM_FIT`` give c."""
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
    c = jax.vmap(lambda a_e, b_e: jnp.linalg.lstsq(a_e, b_e)[0])(a, b)  # (E, d)
    change = jnp.sum((t[1:] - t[:1]) * c[None], axis=(1, 2))  # (M - 1,)
    gaps = jnp.abs(values[1:] - values[0] - change) / (jnp.abs(values[1:]) + jnp.abs(values[0]) + jnp.abs(change) + 1.0)
    finite = jnp.all(jnp.isfinite(values)) & jnp.all(jnp.isfinite(grads)) & jnp.all(jnp.isfinite(c))
    return c, jnp.where(finite, jnp.max(gaps), jnp.nan)


def _natural(spec: _Spec, c, shape: tuple) -> tuple:
    """The per-element coefficients (E, num_params k) as the family's natural parameters, each of
    the site's shape."""
    c = c.reshape(c.shape[0], spec.num_params, -1)
    return tuple(c[:, j].reshape(shape) for j in range(spec.num_params))


def _points(spec: _Spec, x, noise) -> jax.Array:
    """(points, *shape): the unconstrained value u of ``x``, taken within [-centre, centre], moved by
    ``noise`` (in (-2, 2)) times (1 + |u|) / 2, within [-bound, bound] (a Beta's points never reach
    the float's 0 or 1). The centre's bound keeps the points where the statistics are of order 1
    whatever the prior's scale: a vague Gamma(1e-3, 1e-3) has its median at x = e^-539, where every
    point would sit at the bound, the statistics x all below 1e-13 and x's coefficient lost; a
    Normal mean of prior precision 1e-3 tau with such a tau starts near 1e118, where x^2 swamps x.
    The log-joint of a conjugate site is linear in its statistics everywhere, so the points need
    not be where the prior's mass is."""
    u = jnp.clip(spec.unvalue(x), -spec.centre, spec.centre)[None]
    return jnp.clip(u + noise * 0.5 * (1.0 + jnp.abs(u)), -spec.bound, spec.bound)


def _float64(a) -> jax.Array:
    """``a`` in float64 (the checks run with float64 enabled, whatever the process's setting)."""
    return jnp.asarray(a, jnp.float64)


def _tolerance(values) -> float:
    """1e4 ulps of the float type of the log-joint's values (``conjugate_model``'s secant tolerance)."""
    return 1e4 * float(jnp.finfo(jnp.result_type(values)).eps)


# over draws of the other sites (and their points)
_fit_over_draws = jax.vmap(_fit, in_axes=(None, None, None, None, 0, 0, 0))


def _worst(gaps) -> float:
    """The largest gap, NaN where any is NaN (the log-joint not finite at a point)."""
    gaps = np.asarray(gaps)
    return float("nan") if np.isnan(gaps).any() else float(gaps.max())
