"""Natural-gradient VI on any JAX log-density: the conjugate-computation / KL-proximal step.

For q in an exponential family with natural parameters lambda, mean parameters mu and base
measure h, grad_mu L = grad_mu E_q[log p(x, z) - log h(z)] - lambda, so a natural-gradient step of
size rho is

    lambda <- (1 - rho) lambda + rho g_hat,        g_hat = grad_mu E_q[log p(x, z) - log h(z)],

and with a prior in q's family (natural parameters eta) and a log-likelihood,
lambda <- (1 - rho) lambda + rho (eta + grad_mu E_q[log p(x | z)]): the KL-proximal step of Khan
et al. (2016, iteration 9) in its conjugate-computation form (Khan and Lin 2017); rho = 1 on a
conjugate term is CAVI. The update goes through ``expfam.tree_interpolate``'s domain guard.

Estimating g_hat (``gradient``):

- ``"reparam"``: g_hat = F(lambda)^-1 (1/S) sum_s grad_lambda f(z_s(lambda)), z_s drawn by
  inversion (Hoffman and Blei 2015, appendix B), F = hess A.
- ``"hessian"`` (Normals and unbatched MultivariateNormals): Bonnet's and Price's theorems,
  g_mu2 = 1/2 E[hess f], g_mu1 = E[grad f] - E[hess f] m, with antithetic pairs m +- L eps (exact
  for a quadratic log p); a stochastic Newton step. Other factors take ``"reparam"`` over the
  same draws. Costs D gradient passes per draw.
- ``"secant"`` (Normal factors only): ``"hessian"``'s update with the Hessian's diagonal estimated
  from the antithetic gradients, per coordinate
  h_i = sum_s (grad_i f(z_s) - grad_i f(m - d_s)) d_si / (2 sum_s d_si^2) (``secant_diagonal``);
  exact for a separable quadratic, two gradients per pair.

``info.elbo`` is the Monte Carlo ELBO before the step. A step whose result is not finite, or that
the domain guard left wholly unchanged (``moved``), is rejected.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from vijax import expfam
from vijax._validate import ArgumentError, check_choice, check_int, check_key, check_shapes, check_structures, is_tracer
from vijax.inference import schedules
from vijax.interop import Target
from vijax.models import filter_jit
from vijax.inference._bbvi import check_start, check_target_arguments, log_joint
from vijax.inference._start_checks import NUM_START_DRAWS
from vijax.inference._guides import DEFAULT_INIT_SCALE, auto_family
from vijax.inference.base import VIAlgorithm, bind_settings, reject_non_finite, safe_increment, validated_step
from vijax.types import Array, PRNGKey, PyTree

GRADIENTS = ("reparam", "hessian", "secant")
HESSIAN_TAU = 10.0  # the default schedule's tau with the Hessian and secant estimates (below)
# the largest total size of mean-field Normal factors whose default estimate is the exact Hessian;
# larger ones take "secant" (the Hessian costs D gradient passes per draw)
HESSIAN_MAX_SIZE = 64


class NGVIState(NamedTuple):
    """q_global: the pytree of families; count: int32 steps taken."""

    q_global: PyTree
    count: Array


class NGVIInfo(NamedTuple):
    """elbo: the Monte Carlo ELBO estimate before the step; step_size: rho; num_damped: elements
    damped by the domain guard."""

    elbo: Array
    step_size: Array
    num_damped: Array


def _log_h(q: PyTree, z: PyTree) -> Array:
    lh = jax.tree_util.tree_map(lambda f, x: jnp.sum(f.log_base_measure(x)), q, z, is_leaf=expfam.is_family)
    return sum(jax.tree_util.tree_leaves(lh))


def _reparam_gradient(q, f, key, num_samples):
    """(g_hat structured like the natural parameters, mean f over the draws)."""
    nat = expfam.tree_natural_params(q)

    def g(n):
        qq = expfam.tree_from_natural(q, n)
        z = expfam.reparam_sample(qq, key, num_samples)
        fz = jax.vmap(f)(z)
        return jnp.mean(fz - jax.vmap(lambda zz: _log_h(qq, zz))(z)), jnp.mean(fz)

    (_, val), g_lam = jax.value_and_grad(g, has_aux=True)(nat)
    return expfam.tree_inv_fisher_vp(q, g_lam), val


def _default_gradient(fams: list) -> str:
    """``"reparam"`` without Gaussian factors; with them ``"hessian"``, or ``"secant"`` where every
    one is a Normal and their total size exceeds ``HESSIAN_MAX_SIZE``."""
    gauss = [f for f in fams if _is_gaussian(f)]
    if not gauss:
        return "reparam"
    if all(type(f) is expfam.Normal for f in gauss) and sum(math.prod(f.batch_shape) for f in gauss) > HESSIAN_MAX_SIZE:
        return "secant"
    return "hessian"


def _is_gaussian(f_) -> bool:
    """Whether Price's theorem gives this family's update (a Normal, or one unbatched MultivariateNormal)."""
    return type(f_) is expfam.Normal or (type(f_) is expfam.MultivariateNormal and f_.batch_shape == ())


def _value_grad_hessian(fn, x, *args):
    """fn(x, *args)'s value, gradient and Hessian in x from one forward-over-reverse pass."""

    def value_and_grad(y):
        val, grad = jax.value_and_grad(fn)(y, *args)
        return grad, (val, grad)

    hess, (val, grad) = jax.jacfwd(value_and_grad, has_aux=True)(x)
    return val, grad, hess


def _price_updates(gauss: list, g: Array, h: Array) -> list:
    """Each Gaussian factor's mean-parameter gradient (g_mu1, g_mu2) = (E[grad f] - E[hess f] m,
    E[hess f] / 2) from ``g`` = E[grad f] and ``h`` = E[hess f] over the factors' flat coordinates
    (in ``gauss``'s order): ``h`` the full matrix, or its diagonal where every factor is a Normal."""
    out, start = [], 0
    for f_ in gauss:
        part = slice(start, start + f_.mean.size)
        start = part.stop
        if type(f_) is expfam.MultivariateNormal:
            hb = h[part, part]
            hb = 0.5 * (hb + hb.T)
            out.append((g[part] - hb @ f_.mean, 0.5 * hb))
        else:
            d = (h[part] if h.ndim == 1 else jnp.diag(h[part, part])).reshape(f_.mean.shape)
            out.append((g[part].reshape(f_.mean.shape) - d * f_.mean, 0.5 * d))
    return out


def secant_diagonal(grads: Array, d: Array, num_pairs: int) -> Array:
    """``"secant"``'s Hessian diagonal (module docstring): ``grads`` (2 S, D) at the draws m + d_s
    then at their mirrors, ``d`` (2 S, D) the draws less the mean; 0 where no draw moved."""
    d = d[:num_pairs]
    num = jnp.sum((grads[:num_pairs] - grads[num_pairs:]) * d, axis=0)
    den = 2.0 * jnp.sum(d * d, axis=0)
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), 0.0)


def _hessian_gradient(q, f, key, num_samples, secant=False):
    """``"hessian"`` and ``"secant"``: Price's theorem for q's Gaussian factors (each draw paired
    with its mirror about the mean), the reparameterization gradient for the others over the same
    draws (unbiased, as q factorizes)."""
    fams, treedef = jax.tree_util.tree_flatten(q, is_leaf=expfam.is_family)
    gi = [i for i, f_ in enumerate(fams) if _is_gaussian(f_)]
    ri = [i for i in range(len(fams)) if i not in gi]
    gauss, rest = [fams[i] for i in gi], [fams[i] for i in ri]
    flat_mean, unravel = ravel_pytree([f_.mean for f_ in gauss])
    key_g, key_r = jax.random.split(key) if rest else (key, None)
    zg = jax.vmap(lambda d: ravel_pytree(d)[0])(expfam.reparam_sample(gauss, key_g, num_samples))
    zg = jnp.concatenate([zg, 2.0 * flat_mean[None, :] - zg])  # (2 S, D): the draws and their mirrors

    def fz(flat, others):
        leaves = [None] * len(fams)
        for i, x in zip(gi, unravel(flat)):
            leaves[i] = x
        for i, x in zip(ri, others):
            leaves[i] = x
        return f(jax.tree_util.tree_unflatten(treedef, leaves))

    def twice(tree):
        return jax.tree.map(lambda a: jnp.concatenate([a, a]), tree)

    def rest_objective(nat):
        qq = [f_.replace_natural(n) for f_, n in zip(rest, nat)]
        zr = expfam.reparam_sample(qq, key_r, num_samples)
        log_h = jnp.mean(jax.vmap(lambda zz: _log_h(qq, zz))(zr))
        return jnp.mean(jax.vmap(fz)(jax.lax.stop_gradient(zg), twice(zr))) - log_h, zr

    if rest:
        g_lam, zr = jax.grad(rest_objective, has_aux=True)([f_.natural_params for f_ in rest])
    else:  # Gaussian factors only
        g_lam, zr = [], []

    mean_field = all(type(f_) is expfam.Normal for f_ in gauss)  # the Hessian's diagonal is all they need
    others = jax.lax.stop_gradient(twice(zr))
    if secant:
        vals, grads = jax.vmap(jax.value_and_grad(fz))(zg, others)
        h = secant_diagonal(grads, zg - flat_mean[None, :], num_samples)
    else:

        def at(x, o):
            val, grad, hess = _value_grad_hessian(fz, x, o)
            return val, grad, (jnp.diag(hess) if mean_field else hess)

        vals, grads, hess = jax.vmap(at)(zg, others)
        h = jnp.mean(hess, 0)
    out = [None] * len(fams)
    for i, pair in zip(gi, _price_updates(gauss, jnp.mean(grads, 0), h)):
        out[i] = pair
    for i, f_, gl in zip(ri, rest, g_lam):
        out[i] = f_.inv_fisher_vp(tuple(gl))
    return jax.tree_util.tree_unflatten(treedef, out), jnp.mean(vals)


def init(
    key: PRNGKey,
    batch: PyTree = None,
    *,
    family: PyTree,
    joint: Optional[Callable] = None,
    log_density: Optional[Callable] = None,
    has_prior: bool = False,
) -> NGVIState:
    """The initial q (``family``), after ``bbvi``'s ``check_start`` on concrete inputs."""
    check_key("key", key)
    concrete = not any(is_tracer(x) for x in jax.tree_util.tree_leaves((key, batch)))
    if concrete and joint is not None and (batch is not None or log_density is not None):
        mean = None if batch is None else _family_means
        check_start(key, batch, _start_draws, family, mean, joint, log_density, has_prior)
    return NGVIState(family, jnp.zeros((), jnp.int32))


def _start_draws(family, key):
    """``NUM_START_DRAWS`` reparameterized draws of q (``family``)."""
    return expfam.reparam_sample(family, key, NUM_START_DRAWS)


def _family_means(family):
    """E_q[x] of each family of q."""
    return jax.tree_util.tree_map(_family_mean, family, is_leaf=expfam.is_family)


def _family_mean(f):
    """E_q[x] of a family (closed forms for Normal, MultivariateNormal, Gamma, Beta, Dirichlet)."""
    t = type(f)
    if t in (expfam.Normal, expfam.MultivariateNormal):
        return f.mean
    if t is expfam.Gamma:
        return f.concentration / f.rate
    if t is expfam.Beta:
        return f.concentration1 / (f.concentration1 + f.concentration0)
    if t is expfam.Dirichlet:
        return f.concentration / jnp.sum(f.concentration, axis=-1, keepdims=True)
    return f.to_tfp().mean()


@validated_step
def step(
    key: PRNGKey,
    state: NGVIState,
    batch: PyTree,
    *,
    model: Any,
    joint: Callable,
    schedule: Callable,
    num_samples: int,
    gradient: str,
    prior: Any = None,
    family: PyTree = None,
) -> tuple[NGVIState, NGVIInfo]:
    """One natural-gradient step (module docstring). The batch is checked by ``model`` where it
    declares its checks; ``state.q_global`` must be shaped like ``family``, else ValueError."""
    if family is not None:
        check_shapes("state.q_global", state.q_global, family, "this ngvi's family")
    q = state.q_global
    rho = schedule(state.count)
    f = lambda z: joint(z, batch)  # noqa: E731
    if gradient == "reparam":
        g_hat, mean_f = _reparam_gradient(q, f, key, num_samples)
    else:
        g_hat, mean_f = _hessian_gradient(q, f, key, num_samples, secant=gradient == "secant")
    if prior is None:
        target = g_hat
        entropies = jax.tree_util.tree_map(lambda f_: jnp.sum(f_.entropy()), q, is_leaf=expfam.is_family)
        elbo = mean_f + sum(jax.tree_util.tree_leaves(entropies))
    else:
        target = jax.tree.map(jnp.add, expfam.tree_natural_params(prior), g_hat)
        elbo = mean_f - expfam.tree_kl(q, prior)
    new_q, num_damped = expfam.tree_interpolate(q, target, rho)
    info = NGVIInfo(elbo, jnp.asarray(rho, elbo.dtype), num_damped)
    return NGVIState(new_q, safe_increment(state.count)), info


def moved(old: NGVIState, new: NGVIState, info: NGVIInfo) -> Array:
    """Whether a step made progress: q changed, or nothing was damped (a fixed point, such as an
    exact gradient at the optimum), or rho = 0. A step the domain guard left wholly unchanged (no
    halving of rho was valid: an indefinite Hessian estimate, say) is rejected."""
    pairs = zip(jax.tree_util.tree_leaves(old.q_global), jax.tree_util.tree_leaves(new.q_global))
    changed = jnp.any(jnp.stack([jnp.any(a != b) for a, b in pairs]))
    return changed | (info.step_size == 0) | (info.num_damped == 0)


def as_top_level_api(
    log_density: Union[Callable, Target],
    *,
    family: PyTree = None,
    schedule=None,
    num_data: Optional[int] = None,
    num_samples: int = 1,
    gradient: Optional[str] = None,
    prior: PyTree = None,
    log_prior: Optional[Callable] = None,
) -> VIAlgorithm:
    """Natural-gradient VI on ``log_density`` with q in an exponential family.

    Args:
      log_density: ``(z, batch) -> scalar``, jit-able, with ``z`` structured like the draws of
        ``family`` (a family's draw in place of each family); the log-joint, or the
        log-likelihood when ``prior`` or ``num_data`` is given. Or a ``vijax.interop.Target``
        (``vijax.from_numpyro``, ``vijax.from_tfp``): its ``log_prob`` at constrained values,
        ``z`` a dict keyed by site name; ``num_data``, ``prior`` and ``log_prior`` are then
        refused. A ``log_density`` (or target) that declares ``vijax.models.BatchChecked`` checks
        each batch.
      family: the initial q, a family or pytree of ``vijax.expfam`` families with a reparameterized
        sampler (Normal, MultivariateNormal, Gamma, Beta, Dirichlet). With a target, None (the
        default) is ``vijax.inference.auto_family(target)``: a family per site matched to its
        support.
      schedule: rho, a number in (0, 1] or a callable ``count -> rho``. Default
        rho_t = 0.5 ((t + tau) / tau)^-0.7 (a half Newton step first), tau = ``HESSIAN_TAU`` (10)
        with the Hessian and secant estimates and 1 with the noisier reparameterization one.
      num_data: N for the N / M scaling of ``log_density`` over a minibatch of M.
      num_samples: S >= 1 Monte Carlo draws per step.
      gradient: ``"reparam"``, ``"hessian"`` or ``"secant"`` (module docstring); None:
        ``"hessian"`` when q has a Gaussian factor, ``"secant"`` where those are Normals of more
        than ``HESSIAN_MAX_SIZE`` coordinates in all, else ``"reparam"``.
      prior: the prior as a pytree of families of q's types (its natural parameters eta enter the
        update; ``log_density`` is then the log-likelihood).
      log_prior: ``z -> scalar`` added once per step (the whole log-joint then reaches g_hat).

    Returns:
      ``reject_non_finite(VIAlgorithm(init, step), is_valid=moved)``; ``state.q_global`` is the
      pytree of families; ``vijax.inference.sample`` and ``log_weights`` read its ``extras``.

    Raises:
      ValueError: naming the argument: a family without a reparameterized sampler, ``"hessian"``
        for a q without a Gaussian factor, zero samples, a prior shaped unlike q, ``prior`` with ``log_prior``,
        an argument a target carries itself, a family shaped unlike a target's sites; naming the
        site whose support ``auto_family`` cannot match.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.expfam import Normal
        >>> q0 = Normal.from_mean_variance(jnp.zeros(2), jnp.ones(2))
        >>> alg = ngvi(lambda z, batch: -0.5 * jnp.sum((z - 1.0) ** 2), family=q0, schedule=1.0,
        ...            gradient="hessian")
        >>> state, info = alg.step(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0)), None)
        >>> [round(float(m), 6) for m in state.q_global.mean]  # the exact posterior N(1, 1)
        [1.0, 1.0]
    """
    target = log_density if isinstance(log_density, Target) else None
    if target is not None:
        check_target_arguments(num_data=num_data, prior=prior, log_prior=log_prior)
        log_density = target.log_prob
        if family is None:
            family = auto_family(target, init_scale=DEFAULT_INIT_SCALE)
    if not callable(log_density):
        raise ArgumentError(
            "log_density",
            f"log_density must be a function (z, batch) -> scalar, got {log_density!r}",
            value=log_density,
        )
    if family is None:
        raise ArgumentError(
            "family", "family: the initial q (a pytree of vijax.expfam families) is needed with a log-density"
        )
    expfam.check_invertible(family)
    if target is not None:  # q's draws must be the target's constrained sites
        draw = jax.eval_shape(lambda: expfam.reparam_sample(family, jax.random.PRNGKey(0)))
        check_shapes("family", draw, jax.eval_shape(target.constrain, target.init_params), "the target's sites")
    expfam.check_in_domain("family", family)
    fams = jax.tree_util.tree_leaves(family, is_leaf=expfam.is_family)
    gradient = check_choice("gradient", _default_gradient(fams) if gradient is None else gradient, GRADIENTS)
    if gradient == "hessian" and not any(_is_gaussian(f) for f in fams):
        raise ArgumentError(
            "gradient",
            "gradient='hessian' needs a Normal or an unbatched MultivariateNormal in q; "
            f"got {[type(f).__name__ for f in fams]}",
        )
    if gradient == "secant" and (
        not any(type(f) is expfam.Normal for f in fams) or any(isinstance(f, expfam.MultivariateNormal) for f in fams)
    ):
        raise ArgumentError(
            "gradient",
            "gradient='secant' estimates the Hessian's diagonal: it needs Normal factors in q and no "
            f"MultivariateNormal (use 'hessian'); got {[type(f).__name__ for f in fams]}",
        )
    num_samples = check_int("num_samples", num_samples)
    if num_data is not None:
        num_data = check_int("num_data", num_data)
    if prior is not None:
        if log_prior is not None:
            raise ArgumentError(
                "prior", "prior (whose natural parameters enter the update) and log_prior are exclusive"
            )
        check_structures("prior", prior, family, "family", is_leaf=expfam.is_family)
        for p, f in zip(jax.tree_util.tree_leaves(prior, is_leaf=expfam.is_family), fams):
            if type(p) is not type(f):
                raise ArgumentError(
                    "prior",
                    f"prior: a {type(p).__name__} where q has a {type(f).__name__}; the prior must be in q's family",
                )
        check_shapes("prior", prior, family, "family")  # its natural parameters enter q's update
    rho0 = 0.5  # the first step: half a (stochastic) Newton step
    tau = HESSIAN_TAU if gradient in ("hessian", "secant") else 1.0
    sched = schedules.as_schedule(schedule, default=schedules.robbins_monro(rho0 * tau**0.7, tau=tau, kappa=0.7))
    joint = log_joint(log_density, log_prior=log_prior, num_data=num_data)

    init_fn = bind_settings(
        init, family=family, joint=joint, log_density=log_density, has_prior=prior is not None or log_prior is not None
    )
    settings = dict(joint=joint, schedule=sched, num_samples=num_samples, gradient=gradient, prior=prior)
    model = target if target is not None else log_density
    step_fn = bind_settings(step, model=model, family=family, **settings)
    return reject_non_finite(VIAlgorithm(init_fn, step_fn, NGVIExtras(settings)), is_valid=moved)


def _log_prob(q: PyTree, z: PyTree) -> Array:
    lp = jax.tree_util.tree_map(lambda f, x: jnp.sum(f.log_prob(x)), q, z, is_leaf=expfam.is_family)
    return sum(jax.tree_util.tree_leaves(lp))


@filter_jit
def _log_weights(q_global: PyTree, batch: PyTree, key: PRNGKey, num_samples: int, joint, prior) -> Array:
    def w(z):
        log_p = joint(z, batch) + (0.0 if prior is None else _log_prob(prior, z))
        return log_p - _log_prob(q_global, z)

    return jax.vmap(w)(expfam.reparam_sample(q_global, key, check_int("num_samples", num_samples)))


class NGVIExtras:
    """What ``ngvi`` offers beyond ``init`` and ``step`` (``VIAlgorithm.extras``): draws of q, their
    log-weights, and the settings its step was built with (``settings["gradient"]``, ...)."""

    def __init__(self, settings: dict):
        self.settings = settings

    def sample(self, key: PRNGKey, state, num_samples: int) -> PyTree:
        """Draws structured like q, stacked on a leading axis."""
        return _sample(state.q_global, key, check_int("num_samples", num_samples))

    def log_weights(self, key: PRNGKey, state, batch: PyTree, num_samples: int) -> Array:
        """(S,) log p(x, z_s) - log q(z_s), z_s ~ q."""
        kw = dict(joint=self.settings["joint"], prior=self.settings["prior"])
        return _log_weights(state.q_global, batch, key, num_samples, **kw)


_sample = filter_jit(expfam.reparam_sample)

ngvi = as_top_level_api

__all__ = ["GRADIENTS", "NGVIExtras", "NGVIInfo", "NGVIState", "as_top_level_api", "init", "moved", "ngvi", "step"]
