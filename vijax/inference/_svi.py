"""Stochastic variational inference with natural gradients (seed 002 §4.3, Algorithm 3;
Hoffman et al. 2013).

With a minibatch B of S of the N data points and the local step run at E_q[t(beta)]::

    lambda_hat = eta + (N_t / S) sum_{n in B} E[s(x_n, z_n)]
    lambda    <- (1 - rho_t) lambda + rho_t lambda_hat,        rho_t = schedule(t)

``lambda_hat - lambda`` is the natural gradient of the ELBO estimated from B; the update goes
through the shared domain-guarded interpolation. ``N_t = N``, or with ``ramp=True``
``N_t = min((t + 1) S, N)`` over the first sweep (seed 000 §2.6), which keeps early noisy
minibatches from being weighted as if they were the whole data set.

The batch size S is the leading dimension of the first leaf of ``batch`` (static under jit).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from vijax import expfam
from vijax.inference import _natgrad
from vijax.inference.base import VIAlgorithm, safe_increment
from vijax.inference.schedules import robbins_monro
from vijax.models._base import conjugate_elbo
from vijax.types import Array, PRNGKey, PyTree, Schedule


class SVIState(NamedTuple):
    q_global: PyTree  # pytree of families, natural parameters lambda
    count: Array  # int32 scalar; drives rho_t and the ramp


class SVIInfo(NamedTuple):
    elbo: Array  # minibatch estimate of the ELBO at the pre-update q, scaled to N
    step_size: Array  # rho_t
    num_damped: Array  # batch elements whose update was pulled back into the domain


def batch_size(batch: PyTree) -> int:
    """S: the leading dimension of the batch's first leaf."""
    leaves = jax.tree_util.tree_leaves(batch)
    if not leaves or jnp.ndim(leaves[0]) == 0:
        raise ValueError("batch must hold arrays with a leading minibatch dimension")
    return leaves[0].shape[0]


def init(key: PRNGKey, batch: PyTree = None, *, model) -> SVIState:
    if batch is not None:
        model.check_data(batch)
    return SVIState(model.init_globals(key, batch), jnp.zeros((), jnp.int32))


def step(state: SVIState, batch: PyTree, key: PRNGKey, *, model, num_data: int, schedule: Schedule,
         local: str = "meanfield", ramp: bool = False):
    """One natural-gradient step on a minibatch."""
    s = batch_size(batch)
    rho = schedule(state.count)
    prior = model.prior()
    loc = model.local_step(expfam.tree_mean_params(state.q_global), batch, key, method=local)
    full = num_data / s
    if ramp:
        n_t = jnp.minimum((state.count.astype(jnp.float32) + 1.0) * s, float(num_data))
        scale = n_t / s
    else:
        scale = full
    target = jax.tree_util.tree_map(lambda e, st: e + scale * st, expfam.tree_natural_params(prior), loc.suff_stats)
    q_new, num_damped = _natgrad.interpolate(state.q_global, target, rho)
    elbo = conjugate_elbo(prior, state.q_global, loc, scale=full)
    return SVIState(q_new, safe_increment(state.count)), SVIInfo(elbo, jnp.asarray(rho), num_damped)


def as_top_level_api(model, *, num_data: int, schedule: Schedule | None = None, local: str = "meanfield",
                     ramp: bool = False) -> VIAlgorithm:
    """Natural-gradient SVI for a conditionally conjugate ``model``.

    Args:
      model: a ``ConditionallyConjugateModel``.
      num_data: N, the number of data points the minibatches are drawn from.
      schedule: ``count -> rho``; default ``robbins_monro(1.0, tau=1.0, kappa=0.7)``.
      local: the local-step method (``model.local_methods``).
      ramp: use N_t = min((t + 1) S, N) over the first sweep.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.models import UnivariateGMM
        >>> x = jnp.concatenate([jnp.full(500, -5.0), jnp.full(500, 5.0)])
        >>> alg = svi(UnivariateGMM(num_components=2), num_data=1000)
        >>> state = alg.init(jax.random.PRNGKey(0), x)
        >>> state, info = jax.jit(alg.step)(state, x[::10], jax.random.PRNGKey(1))
    """
    if isinstance(num_data, bool) or not isinstance(num_data, int) or num_data < 1:
        raise ValueError(f"num_data must be an integer >= 1, got {num_data!r}")
    if local not in getattr(model, "local_methods", ()):
        raise ValueError(f"local={local!r} is not offered by {type(model).__name__}; "
                         f"choose one of {getattr(model, 'local_methods', ())}")
    schedule = schedule if schedule is not None else robbins_monro(1.0, tau=1.0, kappa=0.7)
    return VIAlgorithm(
        init=lambda key, batch=None: init(key, batch, model=model),
        step=lambda state, batch, key: step(state, batch, key, model=model, num_data=num_data,
                                            schedule=schedule, local=local, ramp=ramp))


svi = as_top_level_api
