"""Stochastic variational inference with natural gradients (Blei, Kucukelbir and McAuliffe 2017,
§4.3, Algorithm 3; Hoffman et al. 2013). With a minibatch B of S of the N data points and the local
step at E_q[t(beta)]::

    lambda_hat = eta + (N_t / S) sum_{n in B} E[s(x_n, z_n)]
    lambda    <- (1 - rho_t) lambda + rho_t lambda_hat,        rho_t = schedule(t)

through ``vijax.expfam.conjugate_update``'s domain guard; N_t = N, or with ``ramp=True``
min((t + 1) S, N) over the first sweep (Hoffman and Blei 2015, §2.6). S counts the batch's data
points (for a model with ``present_rows``, its rows with data); a batch without any is not stepped on.

With ``hyper_step`` the model's scalar hyperparameters h live in the state and take per minibatch
online LDA's damped Newton step in log h (Hoffman and Blei 2015, §2.6; Hoffman et al. 2010) on
L(h) = ``model.hyper_objective(h, q, locals, N_t / S)``, h kept where c <= 0 or a derivative is not finite::

    g = dL/dh,   c = -d2L/dh2,   log h <- log h + clip(rho_t * hyper_step * g / (c h), -1, 1).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from vijax import expfam
from vijax._validate import ArgumentError, check_scalar, implements
from vijax.inference._conjugate import check_factory_args, check_q_global, float_leaf_dtype, initial_globals
from vijax.inference._scale import check_num_data, data_scale, num_present, present_rows, step_size
from vijax.inference.base import VIAlgorithm, bind_settings, reject_non_finite, safe_increment, validated_step
from vijax.models import ConditionallyConjugateModel, HyperparameterModel, conjugate_elbo_terms
from vijax.types import Array, PRNGKey, PyTree, Schedule


class SVIState(NamedTuple):
    q_global: PyTree  # pytree of families, natural parameters lambda
    count: Array  # int32 scalar; drives rho_t and the ramp
    hyper: PyTree = None  # with hyper_step: dict name -> scalar array; None (no leaves) otherwise


class SVIInfo(NamedTuple):
    elbo: Array  # minibatch estimate of the ELBO at the pre-update q (and hyper), scaled to N
    step_size: Array  # rho_t
    num_damped: Array  # batch elements whose update was pulled back into the domain
    hyper: PyTree = None  # with hyper_step: the hyperparameters after this step; None otherwise


def init(
    key: PRNGKey, batch: PyTree = None, *, model: ConditionallyConjugateModel, learn_hyper: bool = False
) -> SVIState:
    """q(beta) from ``model.init_globals``; with ``learn_hyper``, ``hyper`` holds ``model.hyperparameters()``."""
    q0 = initial_globals(key, batch, model)
    hyper = model.hyperparameters() if learn_hyper else None  # held in q's dtype
    hyper = jax.tree.map(lambda v: jnp.asarray(v, float_leaf_dtype(q0)), hyper)
    return SVIState(q0, jnp.zeros((), jnp.int32), hyper)


def hyper_newton_step(objective, hyper: dict, rho, hyper_step: float, max_log_step: float = 1.0) -> dict:
    """``hyper`` after one damped Newton step per scalar hyperparameter in log space (module docstring).

    Args:
      objective: ``hyper -> scalar``, differentiable.
      hyper: dict name -> positive scalar array.
      rho: the step size rho_t.
      hyper_step: multiplier of the Newton step (1 = online LDA's).
      max_log_step: the largest change of log h in one step.
    """
    grad = jax.grad(objective)(hyper)
    hess = jax.hessian(objective)(hyper)
    new = {}
    for name, h in hyper.items():
        g, c = grad[name], -hess[name][name]
        ok = (c > 0) & jnp.isfinite(g) & jnp.isfinite(c)
        delta = rho * hyper_step * g / jnp.where(ok, c * h, 1.0)
        delta = jnp.where(ok, jnp.clip(delta, -max_log_step, max_log_step), 0.0)
        new[name] = (h * jnp.exp(delta)).astype(h.dtype)
    return new


@validated_step
def step(
    key: PRNGKey,
    state: SVIState,
    batch: PyTree,
    *,
    model: ConditionallyConjugateModel,
    num_data: int,
    schedule: Schedule,
    local: str = "meanfield",
    ramp: bool = False,
    hyper_step: Optional[float] = None,
):
    """One natural-gradient step on a minibatch; with ``hyper_step``, then one hyperparameter step."""
    check_num_data(num_data, model, batch, state.count)
    present = num_present(model, batch)
    rho = step_size(schedule(state.count), present)
    hyper = state.hyper
    kw = {} if hyper is None else {"hyper": hyper}
    prior = model.prior(**kw)
    check_q_global(state.q_global, prior)
    loc = model.local_step(expfam.tree_mean_params(state.q_global), batch, key, method=local, **kw)
    scale, full = data_scale(state.count, present, num_data, ramp, float_leaf_dtype(state.q_global))
    q_new, num_damped = expfam.conjugate_update(state.q_global, prior, loc.suff_stats, rho, scale)
    data_term, kl = conjugate_elbo_terms(prior, state.q_global, loc, scale=full)
    elbo = data_term - kl
    if hyper is not None and hyper_step is not None:
        rows = present_rows(model, batch)  # padding rows get weight 0 (their documents' alpha terms)
        weight = scale if rows is None else jnp.where(rows, scale, jnp.zeros_like(scale))
        hyper = hyper_newton_step(lambda h: model.hyper_objective(h, q_new, loc, weight), hyper, rho, hyper_step)
    info = SVIInfo(elbo, jnp.asarray(rho), num_damped, hyper if hyper_step is not None else None)
    return SVIState(q_new, safe_increment(state.count), hyper), info


def as_top_level_api(
    model: ConditionallyConjugateModel,
    *,
    num_data: int,
    schedule=None,
    local: str = "meanfield",
    ramp: bool = False,
    hyper_step: Optional[float] = None,
) -> VIAlgorithm:
    """Natural-gradient SVI for a conditionally conjugate ``model``.

    Args:
      model: a ``ConditionallyConjugateModel`` (a ``HyperparameterModel`` with ``hyper_step``).
      num_data: N, the number of data points the minibatches are drawn from.
      schedule: rho_t in (0, 1] or ``count -> rho``; default ``robbins_monro(1.0, tau=1.0, kappa=0.7)``.
      local: the local-step method (``model.local_methods``).
      ramp: use N_t = min((t + 1) S, N) over the first sweep.
      hyper_step: > 0: also learn the model's hyperparameters (module docstring; ``SVIInfo.hyper``).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.models import UnivariateGMM
        >>> x = jnp.concatenate([jnp.full(500, -5.0), jnp.full(500, 5.0)])
        >>> alg = svi(UnivariateGMM(num_components=2), num_data=1000)
        >>> state = alg.init(jax.random.PRNGKey(0), x)
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(1), state, x[::10])

    Raises:
      ValueError: for a bad setting, or a ``local`` method the model lacks.
    """
    schedule = check_factory_args(model, "svi", num_data=num_data, schedule=schedule, local=local, ramp=ramp)
    if hyper_step is not None:
        hyper_step = check_scalar("hyper_step", hyper_step, low=0.0, high=None)
        if not implements(model, HyperparameterModel):
            raise ArgumentError(
                "hyper_step",
                f"hyper_step needs a model with hyperparameters (a HyperparameterModel); "
                f"{type(model).__name__} does not offer hyperparameters() and hyper_objective()",
            )
    settings = dict(model=model, num_data=num_data, schedule=schedule, local=local, ramp=ramp, hyper_step=hyper_step)
    init_fn = bind_settings(init, model=model, learn_hyper=hyper_step is not None)
    return reject_non_finite(VIAlgorithm(init_fn, bind_settings(step, **settings)))


svi = as_top_level_api
