"""Structured stochastic variational inference, SSVI and SSVI-A (Hoffman and Blei 2015, Structured
stochastic variational inference, Algorithm 1, eq. 7-11): q(z, beta) = q(beta) prod_n q(z_n | beta).
Each step draws beta = R(u; lambda) ~ q(beta) by inversion, runs the local step at t(beta) (lines 5-7;
the minibatch's sum of eta-hat_n), then::

    mode="full"   (SSVI,   eq. 7/11): lambda <- (1 - rho) lambda + rho (eta + V(beta, lambda) (N_t/S) sum_n eta-hat_n)
    mode="approx" (SSVI-A, eq. 10):   lambda <- (1 - rho) lambda + rho (eta + (N_t/S) sum_n eta-hat_n)

V s = F^-1 J^T s, J = d t(R(u; lambda)) / d lambda (eq. 8, 22), computed as ``inv_fisher_vp(vjp(s))``;
E[V] = I. N_t as in SVI (``ramp``). The update is the domain-guarded ``vijax.expfam.conjugate_update``.
``info.elbo`` is a one-draw unbiased estimate of the structured ELBO (eq. 4 / 14) at the pre-update
lambda: (N/S) (<sum_n eta-hat_n, t(beta)> + local_terms) - KL(q(beta) || p(beta)).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from vijax import expfam
from vijax._validate import check_choice
from vijax.inference._conjugate import check_factory_args, initial_globals, view_step
from vijax.inference.base import VIAlgorithm, guarded_algorithm, safe_increment, validated_step
from vijax.models import ConditionallyConjugateModel
from vijax.types import Array, PRNGKey, PyTree, Schedule

MODES = ("full", "approx")


class SSVIState(NamedTuple):
    q_global: PyTree  # pytree of families, natural parameters lambda
    count: Array  # int32 scalar; drives rho_t and the ramp
    hyper: PyTree = None  # the model's hyperparameters held in the state (inject_hyperparameters); None: fixed


class SSVIInfo(NamedTuple):
    elbo: Array  # one-draw estimate of the structured ELBO at the pre-update lambda (module docstring)
    step_size: Array  # rho_t (also as ``.rho``)
    num_damped: Array  # batch elements whose update was pulled back into the domain

    @property
    def rho(self) -> Array:
        """rho_t (``step_size``, named as in the paper)."""
        return self.step_size


def init(key: PRNGKey, batch: PyTree = None, *, model: ConditionallyConjugateModel) -> SSVIState:
    """q(beta) from ``model.init_globals`` (the random lambda^(0) of Algorithm 1, line 1)."""
    return SSVIState(initial_globals(key, batch, model), jnp.zeros((), jnp.int32))


@validated_step
def step(
    key: PRNGKey,
    state: SSVIState,
    batch: PyTree,
    *,
    model: ConditionallyConjugateModel,
    num_data: int,
    schedule: Schedule,
    local: str = "meanfield",
    mode: str = "full",
    ramp: bool = False,
):
    """One SSVI (``mode="full"``) or SSVI-A (``mode="approx"``) step (Algorithm 1, lines 3-9)."""
    # the globals view of one draw by inversion: t(beta) and, for SSVI, s -> V s (eq. 8)
    view = expfam.stats_and_v_product if mode == "full" else lambda q, k: (expfam.reparam_stats(q, k), lambda s: s)
    settings = dict(model=model, num_data=num_data, schedule=schedule, local=local, ramp=ramp)
    q_new, num_damped, rho, prior, _, data_term = view_step(state, batch, key, view=view, **settings)
    info = SSVIInfo(data_term - expfam.tree_kl(state.q_global, prior), jnp.asarray(rho), num_damped)
    return SSVIState(q_new, safe_increment(state.count), getattr(state, "hyper", None)), info


def as_top_level_api(
    model: ConditionallyConjugateModel,
    *,
    num_data: int,
    schedule=None,
    local: str = "meanfield",
    mode: str = "full",
    ramp: bool = False,
) -> VIAlgorithm:
    """SSVI (``mode="full"``) or SSVI-A (``mode="approx"``) for a conditionally conjugate model whose
    global families can be sampled by inversion (Hoffman and Blei 2015, Algorithm 1).

    Args:
      model: a ``ConditionallyConjugateModel``; its ``local_step`` receives t(beta) of a draw.
      num_data: N, the number of data points the minibatches are drawn from.
      schedule: rho_t in (0, 1] or ``count -> rho``; default ``robbins_monro(1.0, tau=1.0, kappa=0.7)``.
      local: the local-step method (``model.local_methods``).
      mode: ``"full"`` (SSVI, eq. 11 with V) or ``"approx"`` (SSVI-A, eq. 10).
      ramp: use N_t = min((t + 1) S, N) over the first sweep.

    Examples:
        >>> import jax
        >>> from vijax.data import sample_lda_corpus
        >>> from vijax.models import LDA
        >>> docs = sample_lda_corpus(0, num_docs=40, num_topics=3, vocab_size=30, alpha=0.1).corpus
        >>> alg = ssvi(LDA(3, 30), num_data=40, mode="full")
        >>> state = alg.init(jax.random.PRNGKey(0))
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(1), state, docs.batch(range(8)))
        >>> int(state.count), info.elbo.shape
        (1, ())

    Raises:
      ValueError: for a bad setting, a ``local`` the model lacks, or globals not sampled by inversion.
    """
    check_choice("mode", mode, MODES)
    schedule = check_factory_args(model, "ssvi", num_data=num_data, schedule=schedule, local=local, ramp=ramp)
    try:
        expfam.check_invertible(model.prior())
    except ValueError as e:
        raise ValueError(f"{type(model).__name__} cannot be used with SSVI: {e}") from None
    settings = dict(num_data=num_data, schedule=schedule, local=local, mode=mode, ramp=ramp)
    return guarded_algorithm(init, step, model=model, **settings)


ssvi = as_top_level_api


def ssvi_a(
    model: ConditionallyConjugateModel, *, num_data: int, schedule=None, local: str = "meanfield", ramp: bool = False
) -> VIAlgorithm:
    """SSVI-A: ``ssvi(..., mode="approx")`` (eq. 10, the update without V)."""
    return as_top_level_api(model, num_data=num_data, schedule=schedule, local=local, mode="approx", ramp=ramp)
