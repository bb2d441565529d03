"""Coordinate ascent variational inference for conditionally conjugate models (Blei, Kucukelbir and McAuliffe 2017,
Algorithm 1 and §4.2): every local factor to its optimum given q(beta), then q(beta) to its optimum
lambda = eta + sum_n E[s(x_n, z_n)] (eq. 36), ``vijax.expfam.conjugate_update`` with rho = 1, on the whole data set;
``info.elbo`` is that of (new locals, new globals). A model whose globals interact (x ~ N(mu, 1/tau); Bishop 2006,
§10.1.3) offers ``global_blocks(batch)``, updated in turn, each after a local step at the current q.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from vijax import expfam
from vijax._validate import check_int, implements
from vijax.inference._scale import check_whole_data
from vijax.inference._conjugate import check_local, check_q_global, initial_globals
from vijax.inference.base import VIAlgorithm, check_protocol, guarded_algorithm, safe_increment, validated_step
from vijax.models import BlockedGlobalsModel, ConditionallyConjugateModel, conjugate_elbo
from vijax.types import Array, PRNGKey, PyTree


class CAVIState(NamedTuple):
    q_global: PyTree  # pytree of families: q(beta)
    count: Array  # int32 scalar


class CAVIInfo(NamedTuple):
    elbo: Array  # ELBO after this step (new locals, new globals)
    num_damped: Array  # batch elements whose update was pulled back into the domain


def init(key: PRNGKey, batch: PyTree = None, *, model: ConditionallyConjugateModel) -> CAVIState:
    """q(beta) from ``model.init_globals`` (data-dependent when ``batch`` is given)."""
    return CAVIState(initial_globals(key, batch, model), jnp.zeros((), jnp.int32))


@validated_step
def step(key: PRNGKey, state: CAVIState, batch: PyTree, *, model, local: str = "meanfield", num_data=None):
    """One full sweep: local step at E_q[t(beta)], then the global coordinate update."""
    check_whole_data("CAVI", batch, num_data)
    prior = model.prior()
    check_q_global(state.q_global, prior)
    blocks = model.global_blocks(batch) if implements(model, BlockedGlobalsModel) else ()
    if len(blocks) > 1:
        q_new, num_damped, loc = _update_in_blocks(state.q_global, prior, batch, key, blocks, model, local)
    else:
        loc = model.local_step(expfam.tree_mean_params(state.q_global), batch, key, method=local)
        q_new, num_damped = expfam.conjugate_update(state.q_global, prior, loc.suff_stats, 1.0)
    elbo = conjugate_elbo(prior, q_new, loc)
    return CAVIState(q_new, safe_increment(state.count)), CAVIInfo(elbo, num_damped)


def _update_in_blocks(q, prior, batch, key, blocks, model, local):
    """Per block (bools structured like q, True in the block): the local step at the current q, then
    lambda = eta + s for the block's globals. Returns (q, num_damped, the last local step)."""
    masks = jax.tree_util.tree_map(lambda *m: jnp.asarray(m), *blocks)
    eta = expfam.tree_natural_params(prior)
    start = jax.eval_shape(lambda: model.local_step(expfam.tree_mean_params(q), batch, key, method=local))
    start = jax.tree_util.tree_map(lambda a: jnp.zeros(a.shape, a.dtype), start)

    def body(carry, block):
        q, _, damped = carry
        mask, k = block
        loc = model.local_step(expfam.tree_mean_params(q), batch, k, method=local)
        new = lambda m, s, lam, e: tuple(jnp.where(m, ei + si, li) for si, li, ei in zip(s, lam, e))
        target = jax.tree_util.tree_map(new, mask, loc.suff_stats, expfam.tree_natural_params(q), eta)
        q, nd = expfam.tree_interpolate(q, target, 1.0)
        return (q, loc, damped + nd), None

    keys = jax.random.split(key, len(blocks))
    (q, loc, damped), _ = jax.lax.scan(body, (q, start, jnp.zeros((), jnp.int32)), (masks, keys))
    return q, damped, loc


def as_top_level_api(
    model: ConditionallyConjugateModel, *, num_data: Optional[int] = None, local: str = "meanfield"
) -> VIAlgorithm:
    """CAVI for ``model`` as a ``VIAlgorithm`` (no schedule: rho = 1).

    Args:
      model: a ``ConditionallyConjugateModel``.
      num_data: N, optional; when given, every step checks that its batch holds N data points.
      local: the local-step method (``model.local_methods``).

    Raises:
      ValueError: for a model that is not conditionally conjugate, a ``local`` it lacks, ``num_data`` < 1.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.models import UnivariateGMM
        >>> x = jnp.concatenate([jnp.full(50, -5.0), jnp.full(50, 5.0)])
        >>> alg = cavi(UnivariateGMM(num_components=2))
        >>> state = alg.init(jax.random.PRNGKey(0), x)
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(1), state, x)
    """
    check_protocol(model, ConditionallyConjugateModel, "cavi")
    check_local(model, local)
    if num_data is not None:
        check_int("num_data", num_data)
    return guarded_algorithm(init, step, model=model, local=local, num_data=num_data)


cavi = as_top_level_api
