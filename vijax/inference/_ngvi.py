"""Natural-gradient VI on any JAX log-density: the conjugate-computation / KL-proximal step.

For q in an exponential family (natural parameters lambda, mean parameters mu, base measure h),
grad_mu L = g_hat - lambda with g_hat = grad_mu E_q[log p(x, z) - log h(z)], so a natural-gradient step is
lambda <- (1 - rho) lambda + rho g_hat; with a prior in q's family (natural parameters eta), lambda <- (1 - rho) lambda
+ rho (eta + grad_mu E_q[log p(x | z)]): Khan et al. (2016, iteration 9) in the conjugate-computation form of Khan
and Lin (2017), through ``expfam.tree_interpolate``'s domain guard. Estimating g_hat (``gradient``):

- ``"reparam"``: g_hat = F(lambda)^-1 (1/S) sum_s grad_lambda f(z_s(lambda)), z_s drawn by
  inversion (Hoffman and Blei 2015, appendix B), F = hess A.
- ``"hessian"`` (Normals and unbatched MultivariateNormals): Bonnet's and Price's theorems,
  g_mu2 = 1/2 E[hess f], g_mu1 = E[grad f] - E[hess f] m, with antithetic pairs m +- L eps (a
  stochastic Newton step); other factors take ``"reparam"`` over the same draws.
- ``"secant"`` (Normal factors only): ``"hessian"``'s update with the Hessian's diagonal
  h_i = sum_s (grad_i f(z_s) - grad_i f(m - d_s)) d_si / (2 sum_s d_si^2) (``secant_diagonal``).

A step that is not finite, or that the domain guard left wholly unchanged (``moved``), is rejected.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from vijax import expfam
from vijax._compile import draws_on_host
from vijax._validate import ArgumentError, check_choice, check_int, check_key, check_shapes, check_structures, is_tracer
from vijax.inference import schedules
from vijax.interop import Target
from vijax.models import filter_jit
from vijax.inference._bbvi import NUM_START_DRAWS, check_start, check_target_arguments, log_joint
from vijax.inference._guides import DEFAULT_INIT_SCALE, auto_family, family_sum
from vijax.inference.base import VIAlgorithm, bind_settings, reject_non_finite, safe_increment, validated_step
from vijax.types import Array, PRNGKey, PyTree

GRADIENTS = ("reparam", "hessian", "secant")
HESSIAN_TAU = 10.0  # the default schedule's tau with the Hessian and secant estimates
HESSIAN_MAX_SIZE = 64  # the largest total size of Normal factors whose default estimate is "hessian"


class NGVIState(NamedTuple):
    """q_global: the pytree of families; count: int32 steps taken."""

    q_global: PyTree
    count: Array


class NGVIInfo(NamedTuple):
    """elbo: the Monte Carlo ELBO before the step; step_size: rho; num_damped: elements damped."""

    elbo: Array
    step_size: Array
    num_damped: Array


def _log_h(q: PyTree, z: PyTree) -> Array:
    return family_sum(lambda f, x: f.log_base_measure(x), q, z)


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


def _is_gaussian(f_) -> bool:
    """Whether Price's theorem gives this family's update (a Normal, or one unbatched MultivariateNormal)."""
    return type(f_) is expfam.Normal or (type(f_) is expfam.MultivariateNormal and f_.batch_shape == ())


def _price_updates(gauss: list, g: Array, h: Array) -> list:
    """Each Gaussian factor's (g_mu1, g_mu2) = (E[grad f] - E[hess f] m, E[hess f] / 2) from ``g`` =
    E[grad f] and ``h`` = E[hess f] (or its diagonal) over the factors' flat coordinates."""
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
    """``"secant"``'s Hessian diagonal (module docstring) from ``grads`` (2 S, D) at the draws then
    their mirrors and ``d`` (2 S, D) the draws less the mean; 0 where no draw moved."""
    d = d[:num_pairs]
    num = jnp.sum((grads[:num_pairs] - grads[num_pairs:]) * d, axis=0)
    den = 2.0 * jnp.sum(d * d, axis=0)
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), 0.0)


def _hessian_gradient(q, f, key, num_samples, secant=False):
    """``"hessian"`` and ``"secant"``: Price's theorem for q's Gaussian factors (antithetic pairs),
    the reparameterization gradient for the others over the same draws."""
    fams, treedef = jax.tree_util.tree_flatten(q, is_leaf=expfam.is_family)
    gi = [i for i, f_ in enumerate(fams) if _is_gaussian(f_)]
    ri = [i for i in range(len(fams)) if i not in gi]
    gauss, rest = [fams[i] for i in gi], [fams[i] for i in ri]
    flat_mean, unravel = ravel_pytree([f_.mean for f_ in gauss])
    key_g, key_r = jax.random.split(key) if rest else (key, None)
    zg = jax.vmap(lambda d: ravel_pytree(d)[0])(expfam.reparam_sample(gauss, key_g, num_samples))
    zg = jnp.concatenate([zg, 2.0 * flat_mean[None, :] - zg])  # (2 S, D): the draws and their mirrors

    def fz(flat, others):
        leaves = dict(zip(gi, unravel(flat))) | dict(zip(ri, others))
        return f(jax.tree_util.tree_unflatten(treedef, [leaves[i] for i in range(len(fams))]))

    def twice(tree):
        return jax.tree.map(lambda a: jnp.concatenate([a, a]), tree)

    def rest_objective(nat):
        qq = [f_.replace_natural(n) for f_, n in zip(rest, nat)]
        zr = expfam.reparam_sample(qq, key_r, num_samples)
        log_h = jnp.mean(jax.vmap(lambda zz: _log_h(qq, zz))(zr))
        return jnp.mean(jax.vmap(fz)(jax.lax.stop_gradient(zg), twice(zr))) - log_h, zr

    if rest:
        g_lam, zr = jax.grad(rest_objective, has_aux=True)([f_.natural_params for f_ in rest])
    else:
        g_lam, zr = [], []

    mean_field = all(type(f_) is expfam.Normal for f_ in gauss)
    others = jax.lax.stop_gradient(twice(zr))
    if secant:
        vals, grads = jax.vmap(jax.value_and_grad(fz))(zg, others)
        h = secant_diagonal(grads, zg - flat_mean[None, :], num_samples)
    else:

        def at(x, o):  # value, gradient and Hessian in one forward-over-reverse pass
            def value_and_grad(y):
                val, grad = jax.value_and_grad(fz)(y, o)
                return grad, (val, grad)

            hess, (val, grad) = jax.jacfwd(value_and_grad, has_aux=True)(x)
            return val, grad, (jnp.diag(hess) if mean_field else hess)

        vals, grads, hess = jax.vmap(at)(zg, others)
        h = jnp.mean(hess, 0)
    out = dict(zip(gi, _price_updates(gauss, jnp.mean(grads, 0), h)))
    out.update((i, f_.inv_fisher_vp(tuple(gl))) for i, f_, gl in zip(ri, rest, g_lam))
    return jax.tree_util.tree_unflatten(treedef, [out[i] for i in range(len(fams))]), jnp.mean(vals)


def init(key: PRNGKey, batch: PyTree = None, *, family, joint=None, log_density=None, has_prior=False) -> NGVIState:
    """The initial q (``family``, its leaves strongly typed, as a step returns them), after ``bbvi``'s ``check_start``."""
    check_key("key", key)
    traced = any(is_tracer(x) for x in jax.tree_util.tree_leaves((key, family)))
    z = None if traced else draws_on_host(family, key, NUM_START_DRAWS)  # None: a family NumPy cannot draw
    check_start(key, batch, _start_draws if z is None else z, family, _family_means, joint, log_density, has_prior)
    # a family made from Python numbers has weakly typed leaves: a jitted step would trace again at its second call
    return NGVIState(jax.tree_util.tree_map(lambda a: jnp.asarray(a, a.dtype), family), jax.device_put(np.int32(0)))


def _start_draws(family, key):
    return expfam.reparam_sample(family, key, NUM_START_DRAWS)


def _family_means(family):
    return jax.tree_util.tree_map(_family_mean, family, is_leaf=expfam.is_family)


def _family_mean(f):
    """E_q[x] of a family."""
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
    """One natural-gradient step (module docstring); ``state.q_global`` must be shaped like ``family``."""
    if family is not None:
        check_shapes("state.q_global", state.q_global, family, "this ngvi's family")
    q = state.q_global
    rho = schedule(state.count)
    f = lambda z: joint(z, batch)
    if gradient == "reparam":
        g_hat, mean_f = _reparam_gradient(q, f, key, num_samples)
    else:
        g_hat, mean_f = _hessian_gradient(q, f, key, num_samples, secant=gradient == "secant")
    if prior is None:
        target = g_hat
        elbo = mean_f + family_sum(lambda f_: f_.entropy(), q)
    else:
        target = jax.tree.map(jnp.add, expfam.tree_natural_params(prior), g_hat)
        elbo = mean_f - expfam.tree_kl(q, prior)
    new_q, num_damped = expfam.tree_interpolate(q, target, rho)
    info = NGVIInfo(elbo, jnp.asarray(rho, elbo.dtype), num_damped)
    return NGVIState(new_q, safe_increment(state.count)), info


def moved(old: NGVIState, new: NGVIState, info: NGVIInfo) -> Array:
    """Whether a step made progress: q changed, nothing was damped (a fixed point), or rho = 0."""
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
      log_density: the log-joint ``(z, batch) -> scalar``, ``z`` shaped as ``family``'s draws (with ``prior`` or
        ``num_data``, the log-likelihood), or a ``vijax.interop.Target`` (``z`` a dict by site).
      family: the initial q, a pytree of ``vijax.expfam`` families (with a target, None: ``auto_family``'s).
      schedule: rho in (0, 1] or ``count -> rho``; default 0.5 ((t + tau) / tau)^-0.7, tau ``HESSIAN_TAU`` or 1.
      num_data: N for the N / M scaling of ``log_density`` over a minibatch of M.
      num_samples: S >= 1 Monte Carlo draws per step.
      gradient: ``"reparam"``, ``"hessian"`` or ``"secant"``; None: ``"hessian"`` with Gaussian factors (``"secant"``
        for Normals of over ``HESSIAN_MAX_SIZE`` coordinates), else ``"reparam"``.
      prior: a pytree of families of q's types (its natural parameters enter the update).
      log_prior: ``z -> scalar`` added once per step.

    Returns:
      ``reject_non_finite(VIAlgorithm(init, step), is_valid=moved)``, read by ``sample`` and ``log_weights``.

    Raises:
      ValueError: naming the argument: a bad setting, ``family`` or ``prior``, one a target carries.

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
        target.check_global("ngvi")
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
    expfam.check_invertible(family, "family")
    if target is not None:
        draw = jax.eval_shape(lambda: expfam.reparam_sample(family, jax.random.PRNGKey(0)))
        check_shapes("family", draw, jax.eval_shape(target.constrain, target.init_params), "the target's sites")
    expfam.check_in_domain("family", family)
    fams = jax.tree_util.tree_leaves(family, is_leaf=expfam.is_family)
    if gradient is None:  # "hessian" with Gaussian factors ("secant" for Normals over HESSIAN_MAX_SIZE), else "reparam"
        gauss = [f for f in fams if _is_gaussian(f)]
        normals = all(type(f) is expfam.Normal for f in gauss)
        many = normals and sum(math.prod(f.batch_shape) for f in gauss) > HESSIAN_MAX_SIZE
        gradient = "reparam" if not gauss else "secant" if many else "hessian"
    gradient = check_choice("gradient", gradient, GRADIENTS)
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
        check_shapes("prior", prior, family, "family")
    tau = HESSIAN_TAU if gradient in ("hessian", "secant") else 1.0
    sched = schedules.as_schedule(schedule, default=schedules.robbins_monro(0.5 * tau**0.7, tau=tau, kappa=0.7))
    joint = log_joint(log_density, log_prior=log_prior, num_data=num_data)

    has_prior = prior is not None or log_prior is not None
    init_fn = bind_settings(init, family=family, joint=joint, log_density=log_density, has_prior=has_prior)
    settings = dict(joint=joint, schedule=sched, num_samples=num_samples, gradient=gradient, prior=prior)
    model = target if target is not None else log_density
    step_fn = bind_settings(step, model=model, family=family, **settings)
    return reject_non_finite(VIAlgorithm(init_fn, step_fn, NGVIExtras(settings)), is_valid=moved)


def _log_prob(q: PyTree, z: PyTree) -> Array:
    return family_sum(lambda f, x: f.log_prob(x), q, z)


@filter_jit
def _log_weights(q_global: PyTree, batch: PyTree, key: PRNGKey, num_samples: int, joint, prior) -> Array:
    def w(z):
        log_p = joint(z, batch) + (0.0 if prior is None else _log_prob(prior, z))
        return log_p - _log_prob(q_global, z)

    return jax.vmap(w)(expfam.reparam_sample(q_global, key, check_int("num_samples", num_samples)))


class NGVIExtras:
    """``ngvi``'s ``VIAlgorithm.extras``: draws of q, their log-weights, and its ``settings``."""

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
