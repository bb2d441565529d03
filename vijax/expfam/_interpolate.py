"""The natural-parameter interpolation every update of vijax goes through, with a domain guard.

    lambda_new = (1 - rho) lambda + rho lambda_hat

CAVI (rho = 1), SVI and SSVI (Blei, Kucukelbir and McAuliffe 2017, §4.3, eq. 40), MAP-EM and the KL-proximal step
of PG-SVI (Khan et al. 2016, iteration (9)) all take it. A batch element whose update would leave the domain is
damped: rho is halved for it alone, up to ``max_halvings`` times, else it keeps its old value.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import check_scalar, is_tracer
from vijax.expfam._base import AbstractExpFamily, is_family, tree_from_natural, tree_inner, tree_kl
from vijax.expfam._base import tree_mean_params, tree_natural_params
from vijax.types import Array, PyTree


def _interpolate_family(q: AbstractExpFamily, target: tuple, rho: Array, max_halvings: int):
    old = q.natural_params

    def step(r):
        return tuple((1.0 - r) * o + r * t for o, t in zip(old, target))

    full = step(rho)

    def damped(_):
        # rho * 2^-j for j = 0..J; each element takes its first valid j, or keeps its old value
        factors = 0.5 ** jnp.arange(max_halvings + 1, dtype=old[0].dtype)
        cands = jax.vmap(lambda f: q.replace_natural(step(rho * f)))(factors)  # leading axis J
        valid = cands.is_valid()  # (J,) + batch
        first = jnp.argmax(valid, axis=0)
        any_valid = jnp.any(valid, axis=0)

        def pick(c, o, nd):
            chosen = jnp.take_along_axis(c, first.reshape((1,) + first.shape + (1,) * nd), axis=0)[0]
            return jnp.where(any_valid.reshape(any_valid.shape + (1,) * nd), chosen, o)

        new = tuple(pick(c, o, nd) for c, o, nd in zip(cands.natural_params, old, q._event_ndims))
        return new, jnp.sum((first > 0) | ~any_valid).astype(jnp.int32)

    all_valid = jnp.all(q.replace_natural(full).is_valid())
    new, num_damped = jax.lax.cond(all_valid, lambda _: (full, jnp.zeros((), jnp.int32)), damped, None)
    return q.replace_natural(new), num_damped


def tree_interpolate(q: PyTree, target: PyTree, rho, max_halvings: int = 10) -> tuple[PyTree, Array]:
    """(1 - rho) q + rho target in natural parameters, for a pytree of families.

    Args:
      q: pytree of ``AbstractExpFamily``.
      target: natural parameters, structured like ``expfam.tree_natural_params(q)``.
      rho: step size in [0, 1].
      max_halvings: how many times rho may be halved for an element that would leave the domain.

    Returns:
      (new q, number of damped batch elements as an int32 scalar).
    """
    if not is_tracer(rho) and np.ndim(rho) == 0:
        check_scalar("rho", rho, low=0.0, high=1.0, include_low=True)
    fams, treedef = jax.tree_util.tree_flatten(q, is_leaf=is_family)
    targets = treedef.flatten_up_to(target)
    out = [_interpolate_family(f, tuple(t), jnp.asarray(rho, f.dtype), max_halvings) for f, t in zip(fams, targets)]
    new = jax.tree_util.tree_unflatten(treedef, [o[0] for o in out])
    return new, sum((o[1] for o in out), jnp.zeros((), jnp.int32))


def conjugate_update(q: PyTree, prior: PyTree, stats: PyTree, rho, scale=1.0) -> tuple[PyTree, Array]:
    """lambda <- (1 - rho) lambda + rho (eta + scale * s), through :func:`tree_interpolate`.

    CAVI takes it with rho = 1 and scale = 1 (Blei et al. 2017, eq. 36), SVI and MAP-EM with rho_t and
    scale = N / S (§4.3), SSVI with s replaced by V s (Hoffman and Blei 2015, eq. 11), PG-SVI's
    KL-proximal step with rho = beta / (1 + beta) (Khan et al. 2016, iteration 9).

    ``prior``: the prior's pytree of families (eta), ``stats`` structured like ``tree_natural_params(q)``.
    """
    target = jax.tree_util.tree_map(lambda e, s: e + scale * s, tree_natural_params(prior), stats)
    return tree_interpolate(q, target, rho)


def mean_param_grad(fn: Callable[[PyTree], Array], q: PyTree) -> PyTree:
    """grad_mu fn = F^-1 grad_lambda fn (F = hess A) for a function of a pytree of families, per family with
    ``inv_fisher_vp``; a pytree like ``tree_natural_params(q)``."""
    grad_nat = jax.grad(fn)(q)  # a pytree of families whose fields are d fn / d lambda
    return jax.tree_util.tree_map(lambda f, g: tuple(f.inv_fisher_vp(g.natural_params)), q, grad_nat, is_leaf=is_family)


def kl_prox_target(prior: PyTree, g_hat: PyTree, scale=1.0) -> PyTree:
    """eta + scale * g_hat, the point the KL-proximal step interpolates towards."""
    return jax.tree_util.tree_map(lambda e, g: e + scale * g, tree_natural_params(prior), g_hat)


def kl_prox_closed_form(q: PyTree, prior: PyTree, g: PyTree, beta) -> PyTree:
    """The undamped closed-form KL-proximal step r lambda_k + (1 - r)(eta + g), r = 1/(1 + beta)."""
    r = 1.0 / (1.0 + beta)
    step = lambda lam, t: r * lam + (1.0 - r) * t
    return tree_from_natural(q, jax.tree_util.tree_map(step, tree_natural_params(q), kl_prox_target(prior, g)))


def prox_objective(q_new: PyTree, q_k: PyTree, prior: PyTree, g: PyTree, beta) -> Array:
    """The KL-proximal objective of iteration (9) with f linearised in the mean parameters:

        -<g, mu(q_new)> + KL(q_new || p) + (1/beta) KL(q_new || q_k).

    (less the constant f(q_k) - <g, mu(q_k)>), minimised by ``kl_prox_closed_form``.
    """
    lin = tree_inner(g, tree_mean_params(q_new))
    return -lin + tree_kl(q_new, prior) + tree_kl(q_new, q_k) / beta


def euclidean_natural_grad_step(q: PyTree, prior: PyTree, g: PyTree, beta) -> PyTree:
    """lambda + beta * grad_lambda L, with grad_lambda L = F(lambda) (eta + g - lambda).

    The split h = 0 of Khan et al. 2016, §3.1 (the whole negative ELBO linearised).
    """

    def fam_step(f, e, gg):
        direction = tuple(ei + gi - li for ei, gi, li in zip(e, gg, f.natural_params))
        grad = f.fisher_vp(direction)
        return tuple(li + beta * di for li, di in zip(f.natural_params, grad))

    return jax.tree_util.tree_map(fam_step, q, tree_natural_params(prior), g, is_leaf=is_family)
