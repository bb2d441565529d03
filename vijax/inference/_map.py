"""Stochastic MAP-EM, a point estimate of the globals of a conditionally conjugate model: the local step runs at
t(beta-hat), beta-hat the mode of q(beta), and q(beta) takes SVI's update
lambda <- (1 - rho_t) lambda + rho_t (eta + (N_t/S) sum eta-hat): with rho = 1 and all the data one EM step for the
MAP estimate, with minibatches online EM (Cappe and Moulines 2009); the "MAP" M-step of Hoffman and Blei (2015, §2.5,
appendix D). ``info.elbo`` is the MAP-EM objective (N/S)(<sum eta-hat, t(beta-hat)> + local_terms) + log p(beta-hat).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from vijax import expfam
from vijax.inference._conjugate import check_factory_args, initial_globals, view_step
from vijax.inference.base import VIAlgorithm, guarded_algorithm, safe_increment, validated_step
from vijax.models import ConditionallyConjugateModel
from vijax.types import Array, PRNGKey, PyTree, Schedule


class MAPState(NamedTuple):
    q_global: PyTree  # pytree of families; beta-hat is the mode of each
    count: Array  # int32 scalar; drives rho_t and the ramp
    hyper: PyTree = None  # the model's hyperparameters held in the state (inject_hyperparameters); None: fixed


class MAPInfo(NamedTuple):
    elbo: Array  # the MAP-EM objective at the pre-update beta-hat (module docstring)
    step_size: Array  # rho_t
    num_damped: Array  # batch elements whose update was pulled back into the domain


def init(key: PRNGKey, batch: PyTree = None, *, model: ConditionallyConjugateModel) -> MAPState:
    """q(beta) from ``model.init_globals``."""
    return MAPState(initial_globals(key, batch, model), jnp.zeros((), jnp.int32))


@validated_step
def step(key, state: MAPState, batch, *, model, num_data: int, schedule: Schedule, local="meanfield", ramp=False):
    """One MAP-EM step: the local step at the mode of q(beta), then SVI's update."""
    # t(beta-hat) at the mode of every family of q (the view is not random)
    view = lambda q, _: (jax.tree_util.tree_map(lambda f: f.mode_stats(), q, is_leaf=expfam.is_family), lambda s: s)
    settings = dict(model=model, num_data=num_data, schedule=schedule, local=local, ramp=ramp)
    q_new, num_damped, rho, prior, stats, data_term = view_step(state, batch, key, view=view, **settings)
    # log p(beta-hat) up to the base measure: sum over families of <eta, t(beta-hat)> - A(eta)
    logz = sum(jnp.sum(f.log_normalizer()) for f in jax.tree_util.tree_leaves(prior, is_leaf=expfam.is_family))
    log_prior = expfam.tree_inner(expfam.tree_natural_params(prior), stats) - logz
    info = MAPInfo(data_term + log_prior, jnp.asarray(rho), num_damped)
    return MAPState(q_new, safe_increment(state.count), getattr(state, "hyper", None)), info


def as_top_level_api(
    model: ConditionallyConjugateModel, *, num_data: int, schedule=None, local: str = "meanfield", ramp: bool = False
) -> VIAlgorithm:
    """Stochastic MAP-EM (module docstring) as a ``VIAlgorithm``.

    Args:
      model: a ``ConditionallyConjugateModel`` whose global families implement ``mode``.
      num_data: N, the number of data points the minibatches are drawn from.
      schedule: rho_t in (0, 1] or ``count -> rho``; default ``robbins_monro(1.0, tau=1.0, kappa=0.7)``.
      local: the local-step method (``model.local_methods``).
      ramp: use N_t = min((t + 1) S, N) over the first sweep.

    Raises:
      ValueError: for a bad setting, a ``local`` the model lacks, or global families without a mode.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.models import UnivariateGMM
        >>> x = jnp.concatenate([jnp.full(50, -5.0), jnp.full(50, 5.0)])
        >>> alg = map_em(UnivariateGMM(num_components=2), num_data=100, schedule=1.0)
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0), x), x)
    """
    schedule = check_factory_args(model, "map_em", num_data=num_data, schedule=schedule, local=local, ramp=ramp)
    for f in jax.tree_util.tree_leaves(model.prior(), is_leaf=expfam.is_family):
        if not expfam.implements(f, "mode_stats"):
            raise ValueError(
                f"map_em needs the mode of every global family; {type(model).__name__} has a "
                f"{type(f).__name__}, which does not implement mode() (Dirichlet, Beta, Gamma and Normal do)"
            )
    return guarded_algorithm(init, step, model=model, num_data=num_data, schedule=schedule, local=local, ramp=ramp)


map_em = as_top_level_api
