"""The natural-parameter interpolation every update of vijax goes through, with a domain guard.

    lambda_new = (1 - rho) lambda + rho lambda_hat

CAVI (rho = 1), SVI and SSVI (Blei, Kucukelbir and McAuliffe 2017, Variational inference: a
review for statisticians, §4.3, eq. 40), MAP-EM and the KL-proximal step of PG-SVI (Khan et al.
2016, with rho = 1 - r_k) all take this step. An element of a family's batch whose update would
leave the natural-parameter domain (``is_valid``; a Dirichlet parameter <= 0 after an SSVI
V-product, say) is damped: rho is halved up to ``max_halvings`` times for that element alone,
and if no halving is valid the element keeps its old value. The number of damped elements is
returned, so that algorithms report it in ``info.num_damped``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import check_scalar, is_tracer
from vijax.expfam._base import AbstractExpFamily, is_family, tree_natural_params
from vijax.types import Array, PyTree


def _interpolate_family(q: AbstractExpFamily, target: tuple, rho: Array, max_halvings: int):
    old = q.natural_params

    def step(r):
        return tuple((1.0 - r) * o + r * t for o, t in zip(old, target))

    full = step(rho)

    def damped(_):
        # rho * 2^-j for j = 0..J; each element takes its first valid j, or keeps its old value.
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

    # The common case (every element valid at the full step) skips the halving search.
    all_valid = jnp.all(q.replace_natural(full).is_valid())
    new, num_damped = jax.lax.cond(all_valid, lambda _: (full, jnp.zeros((), jnp.int32)), damped, None)
    return q.replace_natural(new), num_damped


def tree_interpolate(q: PyTree, target: PyTree, rho, max_halvings: int = 10) -> tuple[PyTree, Array]:
    """(1 - rho) q + rho target in natural parameters, for a pytree of families.

    Args:
      q: pytree of ``AbstractExpFamily``.
      target: natural parameters, structured like ``expfam.tree_natural_params(q)``.
      rho: step size in (0, 1] (0: no move); a concrete scalar outside [0, 1] or not finite is
        refused naming ``rho`` (a traced one is damped where the step would leave the domain).
      max_halvings: how many times rho may be halved for an element that would leave the domain.

    Returns:
      (new q, number of damped batch elements as an int32 scalar).
    """
    if not is_tracer(rho) and np.ndim(rho) == 0:  # a step size given by hand; a traced one is the guard's
        check_scalar("rho", rho, low=0.0, high=1.0, include_low=True)
    fams, treedef = jax.tree_util.tree_flatten(q, is_leaf=is_family)
    targets = treedef.flatten_up_to(target)
    out = [_interpolate_family(f, tuple(t), jnp.asarray(rho, f.dtype), max_halvings) for f, t in zip(fams, targets)]
    new = jax.tree_util.tree_unflatten(treedef, [o[0] for o in out])
    return new, sum((o[1] for o in out), jnp.zeros((), jnp.int32))


def conjugate_update(q: PyTree, prior: PyTree, stats: PyTree, rho, scale=1.0) -> tuple[PyTree, Array]:
    """lambda <- (1 - rho) lambda + rho (eta + scale * s): the step towards the conjugate
    coordinate optimum eta + scale * s, through :func:`tree_interpolate`.

    CAVI takes it with rho = 1 and scale = 1 (Blei et al. 2017, eq. 36), SVI and MAP-EM with
    rho_t and scale = N_t / S (§4.3), SSVI with s replaced by V s (Hoffman and Blei 2015, eq. 11),
    and the KL-proximal step of PG-SVI with rho = beta / (1 + beta) and s the mean-parameter
    gradient (Khan et al. 2016, iteration 9).

    Args:
      q: pytree of families, natural parameters lambda.
      prior: the prior's pytree of families (natural parameters eta), structured like ``q``.
      stats: statistics s structured like ``tree_natural_params(q)``.
      rho: step size in (0, 1].
      scale: multiplier of ``stats`` (N / S for a minibatch).

    Returns:
      (new q, number of damped batch elements), as :func:`tree_interpolate`.
    """
    target = jax.tree_util.tree_map(lambda e, s: e + scale * s, tree_natural_params(prior), stats)
    return tree_interpolate(q, target, rho)


__all__ = ["conjugate_update", "tree_interpolate"]
