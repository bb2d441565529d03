"""Conjugate sites in closed form, the rest by ``bbvi`` or ``ngvi``, in one step (``conjugate_split``).

For a NumPyro model or a TFP joint distribution some of whose latent sites are conditionally conjugate
(``vijax.conjugate_sites``: a Gamma rate of Poisson counts, a Dirichlet over categorical draws, a
Normal mean with known scale, ...), q factorises as q(conjugate sites) q(rest): each conjugate
site's q is its prior's exponential family, and q(rest) is either (``rest="bbvi"``) a Gaussian
``bbvi`` family on the rest's unconstrained values or (``rest="ngvi"``) an ``ngvi`` exponential
family per site over its constrained values, matched to its support (``auto_family``: Normal,
Gamma, Beta, Dirichlet). One step

1. draws S values of the rest from q(rest) and of every conjugate site from its q;
2. moves each conjugate site's natural parameters towards its complete conditional's, averaged
   over those draws (``vijax.interop.complete_conditional``: the S-draw estimate of the CAVI
   update E_q[eta(others, data)], Blei, Kucukelbir & McAuliffe 2017, eq. 37), by the step size
   rho_t: lambda <- (1 - rho_t) lambda + rho_t eta_hat (rho = 1 at full batch is a coordinate
   update; rho_t with subsampled plates is natural-gradient SVI, Hoffman et al. 2013, eq. 24, the
   complete conditional already scaled by the plates' N / M); the sites in turn, each seeing the
   others' new draws;
3. takes one step on the rest, with the conjugate sites at one fresh draw from their new q: a
   ``bbvi`` step on the log-joint at the rest's constrained values plus the rest's log |det J|, or
   an ``ngvi`` step (a natural-gradient step of its own step size, Khan and Lin 2017) on the
   log-joint at the rest's constrained values (no Jacobian: ngvi's q is over those values).

The reported ELBO is the rest's step's estimate at that draw plus the conjugate sites' entropies:
an unbiased estimate of E_q[log p(x, data)] + H[q] (with ``bbvi`` the rest's Jacobian inside, as
``bbvi`` on a target counts it; with ``ngvi`` the entropy of q(rest) over constrained values).

Where every latent site is conjugate there is no rest: a step is the closed-form sweep of 2.
alone (at rho = 1 and full batch, a CAVI sweep, Blei, Kucukelbir & McAuliffe 2017, Algorithm 1,
its expectations estimated from S draws where a site's complete conditional is not linear in the
others'), the state's ``inner`` and the info's ``inner`` are None, and the ELBO is log p at one
fresh draw of the sites plus their entropies.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax._compile import setup_jit, split_on_host
from vijax._validate import ArgumentError, check_choice, check_int, is_tracer
from vijax.interop import SiteConjugacy, Target, check_report, complete_conditional, complete_conditionals
from vijax.inference import _bbvi, _ngvi
from vijax.inference._bbvi import bbvi
from vijax.inference._guides import auto_family
from vijax.inference._ngvi import ngvi
from vijax.inference.base import Proposal, VIAlgorithm, bind_settings, checked_step
from vijax.inference.schedules import as_schedule, constant
from vijax.types import Array, PRNGKey, PyTree, Schedule


class SplitState(NamedTuple):
    """q_global: site name -> the ``vijax.expfam`` family of each conjugate site's q; inner:
    the state of ``bbvi`` or ``ngvi`` over the other sites (``inner.q_global``: ``bbvi``'s
    variational parameters, or ``ngvi``'s dict site name -> family), None where every site is
    conjugate; count:
    int32 steps taken; num_rejected: int32 steps not applied (non-finite)."""

    q_global: dict
    inner: Any
    count: Array
    num_rejected: Array


class SplitInfo(NamedTuple):
    """elbo: the Monte Carlo ELBO estimate (module docstring); step_size: rho_t of the conjugate
    sites; num_damped: their natural-parameter elements pulled back into the domain; inner:
    the info of the rest's ``bbvi`` or ``ngvi`` step; accepted: whether the step was applied."""

    elbo: Array
    step_size: Array
    num_damped: Array
    inner: Any
    accepted: Array = None


def _bijectors(target: Target, names) -> dict:
    """site -> ``u -> (its constrained value, log |det J|)`` of each site of ``names``: NumPyro's
    ``biject_to`` of its support, or the TFP bijector of the site (``Site.constraint``)."""
    if target.library == "tfp":
        return {n: _tfp_bijection(target.sites[n]) for n in names}
    from numpyro.distributions.transforms import biject_to

    return {n: _numpyro_bijection(biject_to(target.sites[n].constraint)) for n in names}


def _numpyro_bijection(b):
    def bijection(u):
        x = b(u)
        return x, jnp.sum(b.log_abs_det_jacobian(u, x))

    return bijection


def _tfp_bijection(site):
    b, ndims = site.constraint, len(site.unconstrained_shape)

    def bijection(u):
        with jax.numpy_rank_promotion("allow"):  # TFP's code broadcasts by rank promotion
            u = jnp.array(u)  # a fresh copy: TFP caches by the input's identity (``from_tfp``)
            return b.forward(u), b.forward_log_det_jacobian(u, event_ndims=ndims)

    return bijection


def _constrain(bijectors: dict, params_u: dict) -> tuple[dict, Array]:
    """The rest's constrained values and log |det J| (one draw)."""
    pairs = {n: b(params_u[n]) for n, b in bijectors.items()}
    logdet = sum(ld for _, ld in pairs.values())
    return {n: x for n, (x, _) in pairs.items()}, jnp.asarray(logdet)


def _rest_log_density(params_u: dict, pair, *, target: Target, bijectors: dict):
    """log p(rest, conjugate draw, data) + log |det J| of the rest, for ``bbvi``; ``pair`` is
    (the target's batch, the conjugate sites' constrained values)."""
    batch, conjugate = pair
    values, logdet = _constrain(bijectors, params_u)
    return target.log_prob({**values, **conjugate}, batch) + logdet


def _rest_log_density_ngvi(values: dict, pair, *, target: Target):
    """log p(rest, conjugate draw, data) at the rest's constrained values, for ``ngvi``."""
    batch, conjugate = pair
    return target.log_prob({**values, **conjugate}, batch)


def _draw(q: PyTree, key: PRNGKey, num: int):
    """``num`` draws of the family ``q``, (num, *batch, *event): ``expfam.reparam_sample(q, key, num)``
    (exact samplers: a Gamma-based family by one vectorised rejection loop over all the draws),
    not ``q.sample`` (``jax.random.gamma``'s sampler, a loop element by element whose program
    costs several times more to compile; ``benchmarks/numpyro_models.py``)."""
    return _draw_all([q], ("q",), key, num)["q"]


def _draw_all(families: list, names: tuple, key: PRNGKey, num: int) -> dict:
    """``num`` draws of each family (``_draw``), in one ``expfam.reparam_sample`` of the list: each
    family on its split of ``key`` (one per family, in the list's order), and the Gamma-based ones
    together, by one rejection loop."""
    return dict(zip(names, expfam.reparam_sample(families, key, num)))


def init(
    key: PRNGKey, batch: PyTree = None, *, target: Target, conjugate: tuple, inner: VIAlgorithm, bijectors: dict
) -> SplitState:
    """q(rest) from its algorithm's start; each conjugate site's q the complete conditional at one
    draw of q(rest) (``ngvi``'s: drawn on the host by numpy's samplers) and the other conjugate
    sites' starting values (the target's start)."""
    # made on the host from a concrete key: no program compiles for the split
    k_inner, k_rest = jax.random.split(key) if is_tracer(key) else split_on_host(key)
    conj = _start(target, conjugate)
    inner_state = None if inner is None else inner.init(k_inner, (batch, conj))
    if inner is None:
        rest = {}
    elif inner.step.func is _ngvi.step:  # one draw of q(rest) on the host: no sampler to compile for it
        rest = _ngvi._start_draws(k_rest, inner_state.q_global, 1)
    else:
        rest = _rest_draws(inner, k_rest, inner_state, bijectors, 1)
    draws = {**rest, **{n: (v if is_tracer(v) else np.asarray(v))[None] for n, v in conj.items()}}  # host: no program
    requests = {n: {m: v for m, v in draws.items() if m != n} for n in conjugate}
    try:  # complete_conditional's, one program, which checks each site's linearity at these draws
        q = complete_conditionals(target, requests, **_batch_kwargs(batch))
    except ArgumentError as e:
        if e.argument != "site":
            raise
        raise ArgumentError(
            "conjugate",
            f"conjugate: the report marks site {e.value!r} conjugate, but this target's {e}; "
            "give conjugate_sites' report of this target (vijax.conjugate_sites(target, key))",
        ) from e
    zero = jnp.asarray(np.int32(0))  # no program to compile for a constant
    return SplitState(q, inner_state, zero, zero)


# the conjugate sites' start (the target's, constrained): one small program, not one per operation
_start = setup_jit(
    lambda target, names: {n: target.constrain(target.init_params)[n] for n in names}, static_argnums=(0, 1)
)


def _batch_kwargs(batch) -> dict:
    return {} if batch is None else dict(batch)


def _rest_draws(inner: VIAlgorithm, key: PRNGKey, inner_state, bijectors: dict, num: int) -> dict:
    """``num`` draws of the rest from q(rest), constrained: (num, ...) per site (none without a rest)."""
    if inner is None:
        return {}
    if inner.step.func is _ngvi.step:  # q over the constrained values already
        return _ngvi.sample(inner_state.q_global, key, num)
    params_u = _bbvi.sample(inner_state.q_global, key, num, guide=inner.step.keywords["guide"])
    return jax.vmap(lambda u: _constrain(bijectors, u)[0])(params_u)


def sample(state: SplitState, key: PRNGKey, num_samples: int, *, inner: VIAlgorithm, conjugate: tuple, bijectors: dict):
    """``num_samples`` draws of every latent site from q, constrained, stacked on a leading axis: the
    rest from q(rest), each conjugate site from its family (``vijax.inference.sample``)."""
    k_rest, k_conj = jax.random.split(key)
    out = _rest_draws(inner, k_rest, state.inner, bijectors, num_samples)
    out.update(_draw_all([state.q_global[n] for n in conjugate], conjugate, k_conj, num_samples))
    return out


@checked_step
def step(
    key: PRNGKey,
    state: SplitState,
    batch: PyTree,
    *,
    model: Target,
    conjugate: tuple,
    inner: VIAlgorithm,
    bijectors: dict,
    schedule: Schedule,
    num_draws: int,
) -> Proposal:
    """One step (module docstring)."""
    target = model
    k_rest, k_conj, k_new, k_inner = jax.random.split(key, 4)
    rho = jnp.asarray(schedule(state.count))
    draws = _rest_draws(inner, k_rest, state.inner, bijectors, num_draws)
    draws.update(_draw_all([state.q_global[n] for n in conjugate], conjugate, k_conj, num_draws))
    q_new, damped = {}, jnp.zeros((), jnp.int32)
    new_keys = dict(zip(conjugate, jax.random.split(k_new, len(conjugate))))
    for n in conjugate:
        others = {m: v for m, v in draws.items() if m != n}
        eta_hat = complete_conditional(target, n, others, **_batch_kwargs(batch))
        q_new[n], d = expfam.tree_interpolate(state.q_global[n], expfam.tree_natural_params(eta_hat), rho)
        damped = damped + d
        draws[n] = _draw(q_new[n], new_keys[n], num_draws)  # the next site sees the new q
    conj_now = {n: draws[n][0] for n in conjugate}  # one fresh draw for the rest's step
    entropy = sum(jnp.sum(q_new[n].entropy()) for n in conjugate)
    if inner is None:  # every site conjugate: log p at that draw
        inner_state, inner_info = None, None
        elbo = target.log_prob(conj_now, batch) + entropy
    else:
        inner_state, inner_info = inner.step(k_inner, state.inner, (batch, conj_now))
        elbo = inner_info.elbo + entropy
    info = SplitInfo(elbo, rho, damped, inner_info)
    return Proposal(SplitState(q_new, inner_state, state.count, state.num_rejected), info, (elbo,))


RESTS = ("bbvi", "ngvi")
_BBVI_ONLY = ("optimizer", "learning_rate")
# the exponential families a user may give ngvi for a rest site, by the site's support
_NGVI_FAMILIES = {
    "real": (expfam.Normal, expfam.MultivariateNormal),
    "positive": (expfam.Gamma,),
    "unit_interval": (expfam.Beta,),
    "simplex": (expfam.Dirichlet,),
}
_NGVI_ONLY = ("rest_schedule", "gradient")


def as_top_level_api(
    target: Target,
    conjugate: Mapping[str, SiteConjugacy],
    *,
    schedule=None,
    num_draws: int = 8,
    rest: str = "bbvi",
    family: Any = None,
    optimizer: Any = None,
    learning_rate: Union[float, Schedule, None] = None,
    num_samples: int = 1,
    init_scale: float = 0.1,
    rest_schedule=None,
    gradient: Optional[str] = None,
) -> VIAlgorithm:
    """Conjugate sites of a NumPyro model or a TFP joint distribution in closed form, the other
    sites by ``bbvi`` or ``ngvi``,
    in one step (see the module docstring).

    Args:
      target: a NumPyro target (``vijax.from_numpyro``; its batch is the model's arguments and
        subsampled plates' indices, as for ``bbvi``) or a TFP one (``vijax.from_tfp``; its batch
        is None or observed values in place of the pinned ones, full batch: a TFP joint has no
        subsampled plate).
      conjugate: ``vijax.conjugate_sites(target, key)``'s report of this target (or of a target
        of the same model): the sites it found conjugate get closed-form updates (run it with
        ``force=[...]`` to refuse a site you expect to be conjugate and is not); at least one.
        Where every site is conjugate, the algorithm is the closed-form sweep alone (module
        docstring), and the options of the rest are not used. The report is checked against the
        target: here, that it has an entry for each latent site of the target and for no other,
        and that each site it marks conjugate has the prior and family it records; at ``init``,
        that each such site's log-joint is linear in its family's statistics at the start's draws
        (``complete_conditional``'s check, in float64). The report of another model is refused by
        one or the other, never used for closed-form updates of a site that is not conjugate.
      schedule: rho_t of the conjugate sites: a number in (0, 1] or a callable ``count -> rho``
        (default 1.0: a coordinate update, for full batches; use a decreasing schedule, e.g.
        ``schedules.robbins_monro(1.0, tau=1.0, kappa=0.7)``, with subsampled plates).
      num_draws: S, draws of the other sites per conjugate update (>= 1).
      rest: how the other sites are fitted: ``"bbvi"`` (a Gaussian family on their unconstrained
        values, by a stochastic optimizer) or ``"ngvi"`` (an exponential family per site over its
        constrained values, ``auto_family``'s choice for its support, by natural-gradient steps).
      family: with ``rest="bbvi"``, its family for the rest (``"meanfield"``, the default,
        ``"fullrank"``, ``"lowrank"``); with ``rest="ngvi"``, a dict of rest site -> exponential
        family of ``vijax.expfam`` over the site's constrained values, for the sites whose
        ``auto_family`` choice you replace (a ``MultivariateNormal`` over a real vector site, say);
        a Normal or MultivariateNormal for a real site, a Gamma for a positive one, a Beta for the
        unit interval, a Dirichlet for the simplex, each drawing the site's shape.
      optimizer: ``bbvi``'s optimizer for the rest (default ``"adam"``); ``rest="bbvi"`` only.
      learning_rate: its learning rate, a number or an optax schedule ``count -> rate``
        (``optax.cosine_decay_schedule(0.05, 2000)``, say; default: the optimizer's);
        ``rest="bbvi"`` only.
      num_samples: draws of q(rest) per step of ``bbvi`` or ``ngvi`` (>= 1).
      init_scale: q(rest)'s initial spread: ``bbvi``'s standard deviation on the unconstrained
        space, or for ``ngvi`` ``auto_family``'s ``init_scale`` (the same spread, matched).
      rest_schedule: ``ngvi``'s step size rho_t for the rest, a number in (0, 1] or a callable
        ``count -> rho`` (default ``ngvi``'s: rho_t = 0.5 ((t + tau) / tau)^-0.7, tau = 10 with
        the Hessian estimate and 1 otherwise); ``rest="ngvi"`` only.
      gradient: ``ngvi``'s estimator for the rest, ``"reparam"``, ``"hessian"`` or ``"secant"``
        (default, as ``ngvi`` chooses: ``"hessian"`` when a rest site is real, so that its q has a
        Normal factor, ``"secant"`` where those Normals hold more than 64 coordinates,
        ``"reparam"`` otherwise); ``rest="ngvi"`` only.

    Returns:
      ``VIAlgorithm(init, step)``; the state is a :class:`SplitState` (``q_global``: the conjugate
      sites' families; ``inner``: the state of ``bbvi`` or ``ngvi``, None without a rest), the
      info a :class:`SplitInfo`.

    Raises:
      ArgumentError: naming the argument: a target that is not a NumPyro or TFP one, a ``conjugate``
        that is not ``conjugate_sites``' report of this target (see ``conjugate``; at ``init``
        too), no conjugate site, a bad ``schedule``, ``num_draws`` or ``rest``, an option of the other
        ``rest`` (``optimizer``, ``learning_rate`` with ``"ngvi"``; ``rest_schedule``,
        ``gradient`` with ``"bbvi"``), with ``"ngvi"`` a rest site whose support no exponential
        family matches (``rest``) or a ``family`` that names no rest site, is not an exponential
        family, does not match its site's support or does not draw its site's shape (``family``).
        With ``"bbvi"`` and a TFP target, a rest site of support ``"other"`` (``rest``: its
        bijector may depend on other sites).
    """
    if not isinstance(target, Target) or target.library not in ("numpyro", "tfp"):
        raise ArgumentError(
            "target",
            f"target must be a target of a NumPyro model or a TFP joint (vijax.from_numpyro, vijax.from_tfp), "
            f"got {type(target).__name__}",
        )
    check_report(target, conjugate, "conjugate")
    rest = check_choice("rest", rest, RESTS)
    given = dict(family=family, optimizer=optimizer, learning_rate=learning_rate)
    given.update(rest_schedule=rest_schedule, gradient=gradient)
    other = _BBVI_ONLY if rest == "ngvi" else _NGVI_ONLY
    for name in other:
        if given[name] is not None:
            raise ArgumentError(
                name, f"{name}: an option of rest={RESTS[rest == 'bbvi']!r} only; with rest={rest!r} give no {name}"
            )
    sites = tuple(n for n in target.sites if n in conjugate and conjugate[n].conjugate)
    others = tuple(n for n in target.sites if n not in sites)
    if not sites:
        raise ArgumentError("conjugate", "conjugate: the report finds no conjugate site; use bbvi or ngvi")
    num_draws = check_int("num_draws", num_draws)
    rho = as_schedule(schedule, "schedule", default=constant(1.0))
    if not others:  # every site conjugate: the closed-form sweep alone
        inner, bijectors = None, {}
    elif rest == "ngvi":
        inner = _ngvi_rest(target, others, num_samples, init_scale, rest_schedule, gradient, family)
        bijectors = {}
    else:
        _check_tfp_supports(target, others)
        bijectors = _bijectors(target, others)
        log_density = bind_settings(_rest_log_density, target=target, bijectors=bijectors)
        options = {} if learning_rate is None else {"schedule": learning_rate}
        inner = bbvi(
            log_density,
            family="meanfield" if family is None else family,
            init_params={n: jnp.asarray(target.init_params[n]) for n in others},
            optimizer="adam" if optimizer is None else optimizer,
            num_samples=num_samples,
            init_scale=init_scale,
            **options,
        )
    settings = dict(conjugate=sites, inner=inner, bijectors=bijectors)
    return VIAlgorithm(
        init=bind_settings(init, target=target, **settings),
        step=bind_settings(step, model=target, schedule=rho, num_draws=num_draws, **settings),
    )


def _check_tfp_supports(target: Target, others: tuple) -> None:
    """With ``bbvi``, a TFP rest site is mapped by its own bijector (``Site.constraint``, built at
    one prior draw): refused where its support is none of the four named ones (a bounded
    ``Uniform``'s, say), whose bounds may be other sites' values."""
    odd = [n for n in others if target.library == "tfp" and target.sites[n].support == "other"]
    if odd:
        raise ArgumentError(
            "rest",
            f"rest='bbvi': the TFP sites {odd} have a support other than the real line, the positive reals, "
            "the unit interval or the simplex; its bijector may depend on other sites' values, which the split "
            "does not follow (fit the whole joint by bbvi, or give the site one of those supports)",
        )


def _ngvi_rest(target: Target, others: tuple, num_samples, init_scale, rest_schedule, gradient, given) -> VIAlgorithm:
    """``ngvi`` over the rest's constrained values: the ``given`` family of a site, else
    ``auto_family``'s."""
    given = _given_families(target, others, given)
    try:
        families = auto_family(target, init_scale=init_scale)  # one program
    except ArgumentError:
        raise
    except ValueError as e:  # a site whose support no exponential family matches (none can be given for it)
        raise ArgumentError("rest", f"rest='ngvi': {e}; here, give rest='bbvi' (its Gaussian families)") from e
    log_density = bind_settings(_rest_log_density_ngvi, target=target)
    return ngvi(
        log_density,
        family={n: given[n] if n in given else families[n] for n in others},
        schedule=rest_schedule,
        num_samples=num_samples,
        gradient=gradient,
    )


def _given_families(target: Target, others: tuple, given) -> dict:
    """The user's families for rest sites (``family`` with ``rest="ngvi"``), checked against the
    sites: names, exponential families, supports and the shapes they draw."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise ArgumentError(
            "family", f"family: with rest='ngvi', a dict of rest site -> exponential family, got {given!r}"
        )
    unknown = sorted(set(given) - set(others))
    if unknown:
        raise ArgumentError(
            "family", f"family names sites that are not left for ngvi: {unknown} (rest: {list(others)})"
        )
    start = jax.eval_shape(lambda p: target.constrain(p), target.init_params)
    for name, f in given.items():
        site = target.sites[name]
        allowed = _NGVI_FAMILIES.get(site.support, ())
        if not expfam.is_family(f) or not isinstance(f, allowed):
            names = " or ".join(c.__name__ for c in allowed) or "none (use rest='bbvi')"
            raise ArgumentError(
                "family",
                f"family[{name!r}]: site {name!r} has support {site.support!r}, which takes {names}; "
                f"got {type(f).__name__}",
            )
        drawn = jax.eval_shape(lambda q: expfam.reparam_sample(q, jax.random.PRNGKey(0)), f).shape
        if tuple(drawn) != tuple(start[name].shape):
            raise ArgumentError(
                "family",
                f"family[{name!r}] draws shape {tuple(drawn)}; site {name!r} has shape {tuple(start[name].shape)}",
            )
    return dict(given)


conjugate_split = as_top_level_api

__all__ = ["SplitInfo", "SplitState", "conjugate_split"]
