"""The conjugate sites of a NumPyro model or a TFP joint (``vijax.conjugate_sites``) in closed form, the rest
by ``bbvi`` or ``ngvi``: q = q(conjugate sites) q(rest), each conjugate site's q in its prior's family,
q(rest) ``bbvi``'s Gaussian on unconstrained values or ``ngvi``'s families on constrained ones. One step

1. draws S values of the rest and of every conjugate site from q;
2. moves each conjugate site in turn towards its complete conditional averaged over the draws
   (Blei, Kucukelbir & McAuliffe 2017, eq. 37): lambda <- (1 - rho_t) lambda + rho_t eta_hat
   (Hoffman et al. 2013, eq. 24);
3. takes one ``bbvi`` or ``ngvi`` step on the rest, the conjugate sites at one fresh draw.

The ELBO is the rest's estimate less log q of the conjugate sites at the draw its step saw; where every
site is conjugate (a CAVI sweep at rho = 1), log p - log q at one fresh draw. Its mean is that of the
estimate with the sites' entropies in place of -log q; where q is the exact posterior it is log p(data),
with no variance, so that a stopping rule on the ELBO's change can stop a sweep there.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp

from vijax import expfam
from vijax._validate import ArgumentError, check_choice, check_int
from vijax.interop import SiteConjugacy, Target, check_report, complete_conditional, complete_conditionals
from vijax.inference._bbvi import bbvi
from vijax.inference._guides import auto_family
from vijax.inference._ngvi import ngvi
from vijax.inference.base import VIAlgorithm, bind_settings, reject_non_finite, safe_increment, validated_step
from vijax.inference.schedules import as_schedule, constant
from vijax.types import Array, PRNGKey, PyTree, Schedule


class SplitState(NamedTuple):
    """q_global: conjugate site -> its q's family; rest: the rest's ``bbvi``/``ngvi`` state (or None); count."""

    q_global: dict
    rest: Any
    count: Array


class SplitInfo(NamedTuple):
    """elbo (module docstring); step_size: rho_t; num_damped: conjugate elements damped; rest: the rest's info."""

    elbo: Array
    step_size: Array
    num_damped: Array
    rest: Any


def _numpyro_bijection(b):
    def bijection(u):
        x = b(u)
        return x, jnp.sum(b.log_abs_det_jacobian(u, x))

    return bijection


def _tfp_bijection(site):
    b, ndims = site.constraint, len(site.unconstrained_shape)

    def bijection(u):
        with jax.numpy_rank_promotion("allow"):  # TFP's code broadcasts by rank promotion
            u = jnp.array(u)  # TFP caches by the input's identity
            return b.forward(u), b.forward_log_det_jacobian(u, event_ndims=ndims)

    return bijection


def _constrain(bijectors: dict, params_u: dict) -> tuple[dict, Array]:
    """The rest's constrained values and log |det J| (one draw)."""
    pairs = {n: b(params_u[n]) for n, b in bijectors.items()}
    logdet = sum(ld for _, ld in pairs.values())
    return {n: x for n, (x, _) in pairs.items()}, jnp.asarray(logdet)


def _rest_log_density(params: dict, pair, *, target: Target, bijectors: dict):
    """log p(rest, conjugate draw, data) (+ the rest's log |det J|); ``pair`` is (batch, conjugate values)."""
    batch, conjugate = pair
    values, logdet = _constrain(bijectors, params) if bijectors else (params, 0.0)
    return target.log_prob({**values, **conjugate}, batch) + logdet


def _draw_all(families: list, names: tuple, key: PRNGKey, num: int) -> dict:
    """name -> ``num`` draws of each family, (num, *batch, *event)."""
    return dict(zip(names, expfam.reparam_sample(families, key, num)))


def init(
    key: PRNGKey, batch: PyTree = None, *, target: Target, conjugate: tuple, rest_alg: VIAlgorithm, bijectors: dict
) -> SplitState:
    """q(rest) from its algorithm's start; each conjugate site's q its complete conditional at one
    draw of q(rest) and the target's start."""
    k_step, k_rest = jax.random.split(key)
    start = target.constrain(target.init_params)
    conj = {n: start[n] for n in conjugate}
    rest_state = None if rest_alg is None else rest_alg.init(k_step, (batch, conj))
    draws = _rest_draws(rest_alg, k_rest, rest_state, bijectors, 1)
    draws.update({n: jnp.asarray(v)[None] for n, v in conj.items()})
    requests = {n: {m: v for m, v in draws.items() if m != n} for n in conjugate}
    try:  # checks each site's linearity at these draws
        q = complete_conditionals(target, requests, **_batch_kwargs(batch))
    except ArgumentError as e:
        if e.argument != "site":
            raise
        raise ArgumentError(
            "conjugate",
            f"conjugate: the report marks site {e.value!r} conjugate, but this target's {e}; "
            "give conjugate_sites' report of this target (vijax.conjugate_sites(target, key))",
        ) from e
    return SplitState(q, rest_state, jnp.zeros((), jnp.int32))


def _batch_kwargs(batch) -> dict:
    return {} if batch is None else dict(batch)


def _rest_draws(rest_alg: VIAlgorithm, key: PRNGKey, rest_state, bijectors: dict, num: int) -> dict:
    """``num`` constrained draws of the rest from q(rest), (num, ...) per site."""
    if rest_alg is None:
        return {}
    draws = rest_alg.extras.sample(key, rest_state, num)
    if not bijectors:
        return dict(draws)
    return jax.vmap(lambda u: _constrain(bijectors, u)[0])(draws)


@validated_step
def step(
    key: PRNGKey, state: SplitState, batch: PyTree, *, model, conjugate, rest_alg, bijectors, schedule, num_draws: int
) -> tuple[SplitState, SplitInfo]:
    """One step (module docstring)."""
    target = model
    k_rest, k_conj, k_new, k_step = jax.random.split(key, 4)
    rho = jnp.asarray(schedule(state.count))
    draws = _rest_draws(rest_alg, k_rest, state.rest, bijectors, num_draws)
    draws.update(_draw_all([state.q_global[n] for n in conjugate], conjugate, k_conj, num_draws))
    q_new, damped = {}, jnp.zeros((), jnp.int32)
    new_keys = dict(zip(conjugate, jax.random.split(k_new, len(conjugate))))
    for n in conjugate:
        others = {m: v for m, v in draws.items() if m != n}
        eta_hat = complete_conditional(target, n, others, **_batch_kwargs(batch))
        q_new[n], d = expfam.tree_interpolate(state.q_global[n], expfam.tree_natural_params(eta_hat), rho)
        damped = damped + d
        draws[n] = expfam.reparam_sample(q_new[n], new_keys[n], num_draws)  # the next site sees the new q
    conj_now = {n: draws[n][0] for n in conjugate}  # one fresh draw for the rest's step
    log_q = sum(jnp.sum(q_new[n].log_prob(conj_now[n])) for n in conjugate)
    if rest_alg is None:  # every site conjugate
        rest_state, rest_info = None, None
        elbo = target.log_prob(conj_now, batch) - log_q
    else:
        rest_state, rest_info = rest_alg.step(k_step, state.rest, (batch, conj_now))
        elbo = rest_info.elbo - log_q
    info = SplitInfo(elbo, rho, damped, rest_info)
    return SplitState(q_new, rest_state, safe_increment(state.count)), info


RESTS = ("bbvi", "ngvi")
_BBVI_ONLY = ("optimizer", "learning_rate")
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
    """Conjugate sites of a NumPyro model or a TFP joint in closed form, the others by ``bbvi``
    or ``ngvi``, in one step (module docstring).

    Args:
      target: a NumPyro target (``vijax.from_numpyro``) or a TFP one (``vijax.from_tfp``).
      conjugate: ``vijax.conjugate_sites(target, key)``'s report of this target (linearity checked at ``init``).
      schedule: rho_t of the conjugate sites in (0, 1] or ``count -> rho`` (default 1.0).
      num_draws: S, draws of the other sites per conjugate update (>= 1).
      rest: ``"bbvi"`` or ``"ngvi"`` for the other sites.
      family: with ``"bbvi"`` its Gaussian family (default ``"meanfield"``); with ``"ngvi"`` a dict
        rest site -> ``vijax.expfam`` family replacing ``auto_family``'s choice.
      optimizer: ``bbvi``'s optimizer (default ``"adam"``); ``"bbvi"`` only.
      learning_rate: its learning rate, a number or an optax schedule; ``"bbvi"`` only.
      num_samples: draws of q(rest) per step of the rest (>= 1).
      init_scale: q(rest)'s initial spread.
      rest_schedule: ``ngvi``'s step size for the rest; ``"ngvi"`` only.
      gradient: ``ngvi``'s estimator for the rest; ``"ngvi"`` only.

    Returns:
      The ``VIAlgorithm`` (:class:`SplitState`, :class:`SplitInfo`); ``vijax.inference.sample`` draws every site.

    Raises:
      ArgumentError: naming the argument: a bad target, report, setting or ``family``, an option of the other ``rest``.
    """
    if not isinstance(target, Target) or target.library not in ("numpyro", "tfp"):
        raise ArgumentError(
            "target",
            f"target must be a target of a NumPyro model or a TFP joint (vijax.from_numpyro, vijax.from_tfp), "
            f"got {type(target).__name__}",
        )
    target.check_global("conjugate_split")
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
    if not others:
        rest_alg, bijectors = None, {}
    elif rest == "ngvi":  # over the rest's constrained values: a given family of a site, else auto_family's
        given = _given_families(target, others, family)
        try:
            families = auto_family(target, init_scale=init_scale)
        except ArgumentError:
            raise
        except ValueError as e:
            raise ArgumentError("rest", f"rest='ngvi': {e}; here, give rest='bbvi' (its Gaussian families)") from e
        log_density, bijectors = bind_settings(_rest_log_density, target=target, bijectors={}), {}
        family = {n: given[n] if n in given else families[n] for n in others}
        rest_alg = ngvi(log_density, family=family, schedule=rest_schedule, num_samples=num_samples, gradient=gradient)
    else:
        odd = [n for n in others if target.library == "tfp" and target.sites[n].support == "other"]
        if odd:
            raise ArgumentError(
                "rest",
                f"rest='bbvi': the TFP sites {odd} have a support other than the real line, the positive reals, "
                "the unit interval or the simplex; its bijector may depend on other sites' values, which the split "
                "does not follow (fit the whole joint by bbvi, or give the site one of those supports)",
            )
        if target.library == "tfp":  # site -> u -> (constrained value, log |det J|)
            bijectors = {n: _tfp_bijection(target.sites[n]) for n in others}
        else:
            from numpyro.distributions.transforms import biject_to

            bijectors = {n: _numpyro_bijection(biject_to(target.sites[n].constraint)) for n in others}
        log_density = bind_settings(_rest_log_density, target=target, bijectors=bijectors)
        init_params = {n: jnp.asarray(target.init_params[n]) for n in others}
        family = "meanfield" if family is None else family
        options = dict(family=family, schedule=learning_rate, num_samples=num_samples, init_scale=init_scale)
        optimizer = "adam" if optimizer is None else optimizer
        rest_alg = bbvi(log_density, init_params=init_params, optimizer=optimizer, **options)
    settings = dict(conjugate=sites, rest_alg=rest_alg, bijectors=bijectors)
    init_fn = bind_settings(init, target=target, **settings)
    step_fn = bind_settings(step, model=target, schedule=rho, num_draws=num_draws, **settings)
    return reject_non_finite(VIAlgorithm(init_fn, step_fn, SplitExtras(**settings)))


class SplitExtras:
    """``conjugate_split``'s ``VIAlgorithm.extras``: constrained draws of every latent site from q."""

    def __init__(self, conjugate: tuple, rest_alg: VIAlgorithm, bijectors: dict):
        self.conjugate, self.rest_alg, self.bijectors = conjugate, rest_alg, bijectors

    def sample(self, key: PRNGKey, state: SplitState, num_samples: int) -> dict:
        k_rest, k_conj = jax.random.split(key)
        out = _rest_draws(self.rest_alg, k_rest, state.rest, self.bijectors, num_samples)
        out.update(_draw_all([state.q_global[n] for n in self.conjugate], self.conjugate, k_conj, num_samples))
        return out


def _given_families(target: Target, others: tuple, given) -> dict:
    """The user's families for rest sites, checked against the sites' names, supports and shapes."""
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
