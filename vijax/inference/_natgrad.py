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
    factors = 0.5 ** jnp.arange(max_halvings + 1, dtype=old[0].dtype)  # (J,)

    def candidate(f):
        r = rho * f
        return q.replace_natural(tuple((1.0 - r) * o + r * t for o, t in zip(old, target)))

    cands = jax.vmap(candidate)(factors)  # leading axis J
    valid = cands.is_valid()  # (J,) + batch
    first = jnp.argmax(valid, axis=0)  # first valid halving per element (0 if none valid)
    any_valid = jnp.any(valid, axis=0)
    num_damped = jnp.sum((first > 0) | ~any_valid)

    def pick(c, o, nd):
        chosen = jnp.take_along_axis(c, first.reshape((1,) + first.shape + (1,) * nd), axis=0)[0]
        return jnp.where(any_valid.reshape(any_valid.shape + (1,) * nd), chosen, o)

    new = tuple(pick(c, o, nd) for c, o, nd in zip(cands.natural_params, old, q._event_ndims))
    return q.replace_natural(new), num_damped.astype(jnp.int32)


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
