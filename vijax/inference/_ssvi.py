"""Structured stochastic variational inference, SSVI and SSVI-A (seed 000, Algorithm 1, eq. 7-11).

q(z, beta) = q(beta) prod_n q(z_n | beta): the locals may depend on the globals. Each step

1. draws beta = R(u; lambda) ~ q(beta) by inversion (``vijax.expfam._inversion``);
2. runs the model's local step at the draw, with the globals view t(beta) in place of E_q[t(beta)]
   (Algorithm 1, lines 5-7): ``model.local_step(t(beta), batch, key, method=local)`` returns the
   minibatch's sum of eta-hat_n = E_q[eta_n(y_n, z_n) | beta];
3. updates lambda with step size rho_t and the data multiplier N_t / S (eq. 11)::

       mode="full"   (SSVI,   eq. 7/11): lambda <- (1 - rho) lambda + rho (eta + V(beta, lambda) (N_t/S) sum_n eta-hat_n)
       mode="approx" (SSVI-A, eq. 10):   lambda <- (1 - rho) lambda + rho (eta + (N_t/S) sum_n eta-hat_n)

   V(beta, lambda) s = F^-1 J^T s, J = d t(R(u; lambda)) / d lambda at the draw's u (seed 000
   eq. 8, 22; the paper's grad_lambda R (grad_beta t)^T is J^T), computed as
   ``inv_fisher_vp(vjp(s))`` without forming V. E[V] = I (tested), so SSVI-A drops only the
   covariance term of eq. 9.

N_t = N, or with ``ramp=True`` N_t = min((t + 1) S, N) over the first sweep (Algorithm 1 line 4,
§2.6; the same helper as SVI). The update goes through the shared domain-guarded interpolation
``_natgrad.interpolate``: an element of a family's batch that the full step would take out of
its domain (V s can be negative where SVI's statistics never are, e.g. a Dirichlet parameter
<= 0) gets rho halved, up to 10 times, or keeps its old value; ``info.num_damped`` counts them.

``info.elbo`` is a one-draw, unbiased estimate of the structured ELBO of eq. 4 / 14 at the
pre-update lambda, with the locals the step found and E_q[log p(beta) / q(beta)] in closed form::

    elbo = (N/S) (<sum_n eta-hat_n, t(beta)> + local_terms) - KL(q(beta) || p(beta)),

``local_terms`` being the model's sum of E_q[log h_n] + H[q(z_n | beta)] (for the mean-field
local step this is the local ELBO L_n(beta, gamma_n(beta)) of eq. 15; for "gibbs"/"cvb0" the
model's mean-field surrogate at those locals). It is noisier than SVI's estimate (one draw of
beta); the runner's stopping rule averages it over a chunk.

References:
  Hoffman and Blei (2015), Structured stochastic variational inference (seed 000).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from vijax import expfam
from vijax.expfam import _inversion
from vijax.inference import _natgrad
from vijax.inference._svi import batch_size, check_num_data, data_scale
from vijax.inference.base import VIAlgorithm, check_local, initial_globals, safe_increment
from vijax.inference.schedules import robbins_monro
from vijax.types import Array, PRNGKey, PyTree, Schedule

MODES = ("full", "approx")


class SSVIState(NamedTuple):
    q_global: PyTree  # pytree of families, natural parameters lambda
    count: Array  # int32 scalar; drives rho_t and the ramp


class SSVIInfo(NamedTuple):
    elbo: Array  # one-draw estimate of the structured ELBO at the pre-update lambda (module docstring)
    step_size: Array  # rho_t (also as ``.rho``)
    num_damped: Array  # batch elements whose update was pulled back into the domain

    @property
    def rho(self) -> Array:
        """rho_t, the step size (the same field as ``step_size``, named as in the paper)."""
        return self.step_size


def init(key: PRNGKey, batch: PyTree = None, *, model) -> SSVIState:
    """q(beta) from ``model.init_globals`` (the random lambda^(0) of Algorithm 1, line 1)."""
    return SSVIState(initial_globals(key, batch, model), jnp.zeros((), jnp.int32))


def _mode_stats(q: PyTree) -> PyTree:
    """t(beta-hat) at the mode beta-hat of q(beta), family by family (the point estimate of the
    "map" M-step). Where the density has no interior mode (a Dirichlet/Beta concentration or a
    Gamma shape below 1) the shifted concentrations are clipped at 0 (the boundary), and log 0 is
    floored at the log of the dtype's smallest normal number so that the statistics stay finite."""

    def one(f):
        floor = jnp.log(jnp.finfo(f.dtype).tiny)
        safe_log = lambda x: jnp.maximum(jnp.log(jnp.maximum(x, 0.0)), floor)  # noqa: E731
        if isinstance(f, expfam.Dirichlet):
            c = jnp.maximum(f.concentration - 1.0, 0.0)
            tot = jnp.sum(c, -1, keepdims=True)
            k = c.shape[-1]
            m = jnp.where(tot > 0, c / jnp.where(tot > 0, tot, 1.0), 1.0 / k)
            return (safe_log(m),)
        if isinstance(f, expfam.Beta):
            a, b = jnp.maximum(f.concentration1 - 1.0, 0.0), jnp.maximum(f.concentration0 - 1.0, 0.0)
            tot = a + b
            m = jnp.where(tot > 0, a / jnp.where(tot > 0, tot, 1.0), 0.5)
            return safe_log(m), safe_log(1.0 - m)
        if isinstance(f, expfam.Gamma):
            m = jnp.maximum(f.concentration - 1.0, 0.0) / f.rate
            return safe_log(m), m
        if isinstance(f, expfam.Normal):
            return f.mean, f.mean**2
        raise ValueError(f"the 'map' M-step needs a mode for {type(f).__name__}; implemented for "
                         "Dirichlet, Beta, Gamma, Normal")

    return jax.tree_util.tree_map(one, q, is_leaf=expfam.is_family)


def _log_density_at(prior: PyTree, stats: PyTree) -> Array:
    """sum over families of <eta, t(beta)> - A(eta) at the statistics t(beta) (log p(beta) up to
    the base measure, which is 1 for the families used here)."""
    nat = expfam.tree_natural_params(prior)
    logz = sum(jnp.sum(f.log_normalizer()) for f in jax.tree_util.tree_leaves(prior, is_leaf=expfam.is_family))
    return expfam.tree_inner(nat, stats) - logz


def global_step(state: SSVIState, batch: PyTree, key: PRNGKey, *, model, num_data: int, schedule: Schedule,
                local: str, update: str, ramp: bool):
    """The step shared by the structured and point-estimate M-steps; ``update`` is ``"full"``
    (SSVI), ``"approx"`` (SSVI-A) or ``"map"`` (stochastic MAP-EM: the local step at the mode of
    q(beta), the SVI-form update lambda <- (1 - rho) lambda + rho (eta + (N_t/S) sum eta-hat), so
    that lambda - 1 holds the running pseudo-counts whose mode is the MAP estimate)."""
    s = batch_size(batch)
    rho = schedule(state.count)
    key_beta, key_local = jax.random.split(key)
    q = state.q_global
    prior = model.prior()
    if update == "full":
        stats, v_product = _inversion.stats_and_v_product(q, key_beta)
    elif update == "approx":
        stats = _inversion.reparam_stats(q, key_beta)
    else:
        stats = _mode_stats(q)
    loc = model.local_step(stats, batch, key_local, method=local)
    shat = v_product(loc.suff_stats) if update == "full" else loc.suff_stats
    scale, full = data_scale(state.count, s, num_data, ramp)
    target = jax.tree_util.tree_map(lambda e, x: e + scale * x, expfam.tree_natural_params(prior), shat)
    q_new, num_damped = _natgrad.interpolate(q, target, rho)
    data_term = full * (expfam.tree_inner(loc.suff_stats, stats) + loc.local_terms)
    if update == "map":
        elbo = data_term + _log_density_at(prior, stats)  # log p(y, beta-hat) lower bound (MAP-EM objective)
    else:
        elbo = data_term - expfam.tree_kl(q, prior)
    return SSVIState(q_new, safe_increment(state.count)), SSVIInfo(elbo, jnp.asarray(rho), num_damped)


def step(state: SSVIState, batch: PyTree, key: PRNGKey, *, model, num_data: int, schedule: Schedule,
         local: str = "meanfield", mode: str = "full", ramp: bool = False):
    """One SSVI (``mode="full"``) or SSVI-A (``mode="approx"``) step (Algorithm 1, lines 3-9)."""
    return global_step(state, batch, key, model=model, num_data=num_data, schedule=schedule, local=local,
                       update=mode, ramp=ramp)


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES} ('full' = SSVI, 'approx' = SSVI-A), got {mode!r}")


def check_schedule_ramp(schedule, ramp) -> None:
    """Raises ValueError unless ``schedule`` is None or callable and ``ramp`` is a bool."""
    if schedule is not None and not callable(schedule):
        raise ValueError(f"schedule must be a callable count -> rho (or None), got {schedule!r}")
    if not isinstance(ramp, bool):
        raise ValueError(f"ramp must be True or False, got {ramp!r}")


def check_model_invertible(model) -> None:
    """Raises ValueError, before compilation, unless ``model.prior()``'s families can be sampled
    by inversion (Gamma, Beta, Dirichlet, Normal)."""
    try:
        _inversion.check_invertible(model.prior())
    except ValueError as e:
        raise ValueError(f"{type(model).__name__} cannot be used with SSVI: {e}") from None


def as_top_level_api(model, num_data: int, *, schedule: Schedule | None = None, local: str = "meanfield",
                     mode: str = "full", ramp: bool = False) -> VIAlgorithm:
    """SSVI (``mode="full"``) or SSVI-A (``mode="approx"``) for a conditionally conjugate model
    whose globals are Gamma, Beta, Dirichlet or Normal families (seed 000, Algorithm 1).

    Args:
      model: a ``ConditionallyConjugateModel``; its ``local_step`` receives t(beta) of a draw.
      num_data: N, the number of data points the minibatches are drawn from.
      schedule: ``count -> rho``; default ``robbins_monro(1.0, tau=1.0, kappa=0.7)``.
      local: the local-step method (``model.local_methods``: "meanfield", "gibbs", "cvb0", ...).
      mode: ``"full"`` (SSVI, eq. 11 with V) or ``"approx"`` (SSVI-A, eq. 10).
      ramp: use N_t = min((t + 1) S, N) over the first sweep.

    Returns:
      ``VIAlgorithm(init, step)``; ``step(state, batch, key) -> (SSVIState, SSVIInfo)`` jits and
      vmaps; ``SSVIInfo`` has ``elbo`` (module docstring), ``step_size`` (= ``.rho``) and
      ``num_damped``.

    Examples:
        >>> import jax
        >>> from vijax.data import sample_lda_corpus
        >>> from vijax.models import LDA
        >>> docs = sample_lda_corpus(0, num_docs=40, num_topics=3, vocab_size=30, alpha=0.1).corpus
        >>> alg = ssvi(LDA(3, 30), num_data=40, mode="full")
        >>> state = alg.init(jax.random.PRNGKey(0))
        >>> state, info = jax.jit(alg.step)(state, docs.batch(range(8)), jax.random.PRNGKey(1))
        >>> int(state.count), info.elbo.shape
        (1, ())

    Raises:
      ValueError: for ``num_data`` < 1, an unknown ``mode``, a ``local`` method the model lacks,
        or globals that cannot be sampled by inversion.
    """
    check_num_data(num_data)
    check_mode(mode)
    check_schedule_ramp(schedule, ramp)
    check_local(model, local)
    check_model_invertible(model)
    schedule = schedule if schedule is not None else robbins_monro(1.0, tau=1.0, kappa=0.7)
    return VIAlgorithm(
        init=lambda key, batch=None: init(key, batch, model=model),
        step=lambda state, batch, key: step(state, batch, key, model=model, num_data=num_data, schedule=schedule,
                                            local=local, mode=mode, ramp=ramp))


ssvi = as_top_level_api

__all__ = ["MODES", "SSVIInfo", "SSVIState", "as_top_level_api", "global_step", "init", "ssvi", "step"]
