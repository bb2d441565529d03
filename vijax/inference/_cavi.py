"""Coordinate ascent variational inference for conditionally conjugate models.

Seed 002 Algorithm 1 and §4.2: each step sets every local factor to its coordinate optimum
given q(beta), then sets q(beta) to its coordinate optimum given the locals,
lambda = eta + sum_n E[s(x_n, z_n)] (eq. 36). That is the shared natural-parameter update with
rho = 1. The ELBO reported in ``info`` is that of the pair (new locals, new globals), so it never
decreases from one step to the next.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from vijax import expfam
from vijax.inference import _natgrad
from vijax.inference.base import VIAlgorithm, check_local, initial_globals, safe_increment
from vijax.models._base import conjugate_elbo
from vijax.types import Array, PRNGKey, PyTree


class CAVIState(NamedTuple):
    q_global: PyTree  # pytree of families: q(beta)
    count: Array  # int32 scalar


class CAVIInfo(NamedTuple):
    elbo: Array  # ELBO after this step (new locals, new globals)
    num_damped: Array  # batch elements whose update was pulled back into the domain


def init(key: PRNGKey, batch: PyTree = None, *, model) -> CAVIState:
    """q(beta) from ``model.init_globals`` (data-dependent when ``batch`` is given)."""
    return CAVIState(initial_globals(key, batch, model), jnp.zeros((), jnp.int32))


def init_from(q_global: PyTree) -> CAVIState:
    """A state holding a given q(beta) (e.g. from a previous fit)."""
    return CAVIState(q_global, jnp.zeros((), jnp.int32))


def step(state: CAVIState, batch: PyTree, key: PRNGKey, *, model, local: str = "meanfield"):
    """One full sweep: local step at E_q[t(beta)], then the global coordinate update."""
    prior = model.prior()
    view = expfam.tree_mean_params(state.q_global)
    loc = model.local_step(view, batch, key, method=local)
    target = jax.tree_util.tree_map(lambda e, s: e + s, expfam.tree_natural_params(prior), loc.suff_stats)
    q_new, num_damped = _natgrad.interpolate(state.q_global, target, 1.0)
    elbo = conjugate_elbo(prior, q_new, loc)
    return CAVIState(q_new, safe_increment(state.count)), CAVIInfo(elbo, num_damped)


def as_top_level_api(model, *, local: str = "meanfield") -> VIAlgorithm:
    """CAVI for ``model`` as a ``VIAlgorithm``: ``init(key, data)``, ``step(state, data, key)``.

    Args:
      model: a ``ConditionallyConjugateModel``.
      local: the local-step method (``"meanfield"`` for the GMMs).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.models import UnivariateGMM
        >>> x = jnp.concatenate([jnp.full(50, -5.0), jnp.full(50, 5.0)])
        >>> alg = cavi(UnivariateGMM(num_components=2))
        >>> state = alg.init(jax.random.PRNGKey(0), x)
        >>> state, info = jax.jit(alg.step)(state, x, jax.random.PRNGKey(1))
    """
    check_local(model, local)
    return VIAlgorithm(init=lambda key, batch=None: init(key, batch, model=model),
                       step=lambda state, batch, key: step(state, batch, key, model=model, local=local))


cavi = as_top_level_api
