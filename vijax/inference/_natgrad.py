"""The one natural-parameter update shared by CAVI (rho = 1), SVI and SSVI, with a domain guard.

    lambda_new = (1 - rho) lambda + rho lambda_hat          (seed 002 §4.3, eq. 40)

An element of a family's batch whose update would leave the natural-parameter domain (a
Dirichlet parameter <= 0 after an SSVI V-product, say) is damped: rho is halved up to
``max_halvings`` times for that element alone, and if no halving is valid the element keeps its
old value. The number of damped elements is returned, so it can be reported in ``info``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from vijax import expfam
from vijax.types import Array, PyTree


def _interpolate_family(q: expfam.AbstractExpFamily, target: tuple, rho: Array, max_halvings: int):
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


def interpolate(q: PyTree, target: PyTree, rho, max_halvings: int = 10) -> tuple[PyTree, Array]:
    """(1 - rho) q + rho target in natural parameters, for a pytree of families.

    Args:
      q: pytree of ``AbstractExpFamily``.
      target: natural parameters, structured like ``expfam.tree_natural_params(q)``.
      rho: step size in (0, 1].
      max_halvings: how many times rho may be halved for an element that would leave the domain.

    Returns:
      (new q, number of damped batch elements as an int32 scalar).
    """
    fams, treedef = jax.tree_util.tree_flatten(q, is_leaf=expfam.is_family)
    targets = treedef.flatten_up_to(target)
    out = [_interpolate_family(f, tuple(t), jnp.asarray(rho, f.dtype), max_halvings) for f, t in zip(fams, targets)]
    new = jax.tree_util.tree_unflatten(treedef, [o[0] for o in out])
    return new, sum((o[1] for o in out), jnp.zeros((), jnp.int32))
