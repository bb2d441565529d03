"""Stochastic gradient Riemannian Langevin dynamics for LDA (Patterson and Teh 2013, §3-4), the sampler
Hoffman and Blei (2015, §4.1) compare SSVI with, in the expanded-mean parametrisation beta_kw = pi_kw =
theta_kw / theta_k., theta_kw ~ Gamma(eta, 1), so pi_k ~ Dirichlet(eta 1_V). Given topic counts n_kw,
the log posterior of theta is::

    log p(theta | w, z) = sum_kw [ (eta - 1) log theta_kw - theta_kw + n_kw log theta_kw ]
                          - sum_k n_k. log theta_k. + const,

and with the metric G(theta) = diag(theta)^-1 the Langevin drift is (eq. 11 and §4) drift_kw = eta - theta_kw +
n_kw - pi_kw n_k. . One step on a minibatch of S of N documents::

    theta_kw <- | theta_kw + (eps_t / 2) (eta - theta_kw + (N / S) sum_d E[n_dkw - pi_kw n_dk.])
                  + sqrt(eps_t theta_kw) xi_kw |,   xi_kw ~ N(0, 1),

the absolute value mirroring (§3); the expected counts come from LDA's ``"gibbs"`` local step at pi.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp

from vijax import expfam
from vijax._validate import ArgumentError, check_bool, check_int, check_key, check_scalar, implements
from vijax.inference._scale import check_num_data, data_scale, num_present, step_size
from vijax.inference.base import VIAlgorithm, guarded_algorithm, safe_increment, validated_step
from vijax.inference.schedules import as_schedule
from vijax.types import Array, PRNGKey, PyTree, Schedule


@runtime_checkable
class GibbsTopicModel(Protocol):
    """What SGRLD needs of a topic model (``vijax.models.LDA``): ``eta``, a Dirichlet ``init_globals``
    and a ``"gibbs"`` ``local_step`` giving expected topic-word counts (K, V)."""

    eta: Any
    local_methods: tuple

    def init_globals(self, key: PRNGKey, batch: PyTree = None) -> Any:
        """The Dirichlet q(beta) to start from."""

    def local_step(self, view: tuple, batch: PyTree, key: PRNGKey, *, method: str) -> Any:
        """The local step; with ``method="gibbs"``, expected topic-word counts (K, V)."""

    def batch_checks(self, batch: PyTree) -> list:
        """The value checks of a batch."""


class SGRLDState(NamedTuple):
    """q_global: theta (K, V), the current sample (topics ``sgrld_topics(q_global)``); count: int32."""

    q_global: Array
    count: Array


class SGRLDInfo(NamedTuple):
    """elbo: the Gibbs E-step's bound on log p(w_batch | beta = pi) scaled by N / S; step_size: eps_t."""

    elbo: Array
    step_size: Array


def sgrld_schedule(a: float = 0.5, b: float = 10.0, c: float = 0.6) -> Schedule:
    """eps_t = a (1 + t / b)^(-c), t = 0, 1, ... (Patterson and Teh 2013, §4; Welling and Teh 2011).

    Examples:
        >>> round(float(sgrld_schedule(0.5, 10.0, 1.0)(10)), 6)
        0.25
    """
    a = check_scalar("a", a, low=0.0)
    b = check_scalar("b", b, low=0.0)
    c = check_scalar("c", c, low=0.0, include_low=True)
    return lambda count: a * (1.0 + jnp.asarray(count, jnp.float32) / b) ** (-c)


def sgrld_topics(theta: Array) -> Array:
    """pi_kw = theta_kw / sum_w theta_kw, (K, V): the topics of an expanded-mean sample."""
    return theta / jnp.sum(theta, axis=-1, keepdims=True)


def topics_dirichlet(theta: Array) -> expfam.Dirichlet:
    """A Dirichlet whose mean is the topics pi of ``theta`` (concentration pi_k / min_w pi_kw, >= 1)."""
    pi = sgrld_topics(theta)
    pi = jnp.maximum(pi, 1e-30 * jnp.max(pi, axis=-1, keepdims=True))
    return expfam.Dirichlet.from_concentration(pi / jnp.min(pi, axis=-1, keepdims=True))


def drift(theta: Array, counts: Array, eta) -> Array:
    """The Riemannian Langevin drift eta - theta_kw + n_kw - pi_kw n_k. given ``counts`` = n_kw (K, V)."""
    pi = sgrld_topics(theta)
    return eta - theta + counts - pi * jnp.sum(counts, axis=-1, keepdims=True)


def init(key: PRNGKey, batch: PyTree = None, *, model) -> SGRLDState:
    """theta = the concentration of ``model.init_globals(key)`` (SVI's start from the same key)."""
    check_key("key", key)
    theta = model.init_globals(key, batch).concentration
    return SGRLDState(theta, jnp.zeros((), jnp.int32))


@validated_step
def step(key: PRNGKey, state: SGRLDState, batch: PyTree, *, model, num_data: int, schedule: Schedule, ramp: bool):
    """One SGRLD step on a minibatch (module docstring)."""
    check_num_data(num_data, model, batch, state.count)
    present = num_present(model, batch)
    theta = state.q_global
    dt = theta.dtype
    eps = jnp.asarray(step_size(schedule(state.count), present), dt)  # 0 for a batch without documents
    k_gibbs, k_noise = jax.random.split(key)
    pi = sgrld_topics(theta)
    log_pi = jnp.log(pi)
    loc = model.local_step((log_pi,), batch, k_gibbs, method="gibbs")
    (counts,) = loc.suff_stats  # sum_d E[n_dkw], (K, V)
    scale, full = data_scale(state.count, present, num_data, ramp, dt)
    eta = jnp.asarray(model.eta, dt)
    xi = jax.random.normal(k_noise, theta.shape, dt)
    proposal = theta + 0.5 * eps * drift(theta, scale * counts, eta) + jnp.sqrt(eps * theta) * xi
    new = jnp.maximum(jnp.abs(proposal), jnp.finfo(dt).tiny)  # mirrored into (0, inf)
    fit = full * (jnp.sum(counts * log_pi) + loc.local_terms)
    return SGRLDState(new, safe_increment(state.count)), SGRLDInfo(fit, eps)


def sgrld_lda(model, *, num_data: int, schedule=None, ramp: bool = False) -> VIAlgorithm:
    """SGRLD for LDA (Patterson and Teh 2013) with the Gibbs E-step (module docstring).

    Args:
      model: a :class:`GibbsTopicModel` (``vijax.models.LDA``).
      num_data: N, the number of documents the minibatches are drawn from.
      schedule: eps_t: a number > 0 or ``count -> eps``; default ``sgrld_schedule()``.
      ramp: use N_t = min((t + 1) S, N) over the first sweep (as SVI's ``ramp``).

    Raises:
      ValueError: naming ``model`` when it is not a ``GibbsTopicModel``, or a bad setting.

    Examples:
        >>> import jax
        >>> from vijax.data import sample_lda_corpus
        >>> from vijax.models import LDA
        >>> docs = sample_lda_corpus(0, num_docs=40, num_topics=3, vocab_size=30, alpha=0.1).corpus
        >>> alg = sgrld_lda(LDA(3, 30, gibbs_sweeps=2, gibbs_burn_in=1), num_data=40)
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0)), docs.batch(range(10)))
        >>> state.q_global.shape, bool(info.accepted)
        ((3, 30), True)
    """
    if not implements(model, GibbsTopicModel) or "gibbs" not in model.local_methods:
        raise ArgumentError(
            "model",
            f"model must be a topic model with a Gibbs local step (a GibbsTopicModel: vijax.models.LDA), "
            f"got {type(model).__name__}",
        )
    num_data = check_int("num_data", num_data)
    check_bool("ramp", ramp)
    schedule = as_schedule(schedule, default=sgrld_schedule(), upper=None)
    return guarded_algorithm(init, step, model=model, num_data=num_data, schedule=schedule, ramp=ramp)


__all__ = [
    "GibbsTopicModel",
    "SGRLDInfo",
    "SGRLDState",
    "drift",
    "init",
    "sgrld_lda",
    "sgrld_schedule",
    "sgrld_topics",
    "step",
    "topics_dirichlet",
]
