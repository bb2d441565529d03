"""Expectation-maximization: maximum-likelihood (or MAP) point estimates for any model with an E-step
and an M-step.

Dempster, Laird and Rubin (1977), Maximum likelihood from incomplete data via the EM algorithm; the
tutorial *Raise your ELBO*, §EM. For any q(z), log p(x | theta) >= E_q[log p(x, z | theta)] + H[q]
(the ELBO). The E-step sets q(z) = p(z | x, theta), where the bound is tight; the M-step maximizes
the bound over theta with q fixed, which needs only the expected complete-data sufficient statistics.
The log-likelihood (plus log p(theta) for MAP-EM) therefore never decreases from one step to the next.

The model meets the algorithm through ``vijax.models.EMModel``: ``init_params``, ``e_step(params,
batch) -> (stats, log_likelihood)``, ``m_step(stats) -> params``, ``log_prior`` and ``check_data``
(the shape of dynamax's ``fit_em``). ``info.log_likelihood`` is log p(x | theta) at the parameters the step
*starts from* (the E-step computes it for free), so the trace is the objective of EM's iterates;
``info.elbo`` adds ``model.log_prior(theta)`` (0 for maximum likelihood; log p(theta) up to a
constant for MAP-EM). The state holds theta as ``q_global``, the name every state gives its globals.
EM sees the whole data set at every step (``num_data``, when given, is checked against the batch).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax.numpy as jnp

from vijax._validate import batch_size, check_int, check_key
from vijax.inference.base import (
    VIAlgorithm,
    bind_settings,
    check_protocol,
    reject_non_finite,
    safe_increment,
    validated_step,
)
from vijax.models import EMModel
from vijax.types import Array, PRNGKey, PyTree


class EMState(NamedTuple):
    q_global: PyTree  # the point estimate theta (named as every state's globals are)
    count: Array  # int32 scalar


class EMInfo(NamedTuple):
    elbo: Array  # log p(x | theta) (+ log p(theta)) at the step's starting theta: the EM objective
    log_likelihood: Array  # log p(x | theta) at the step's starting theta


def init(key: PRNGKey, batch: PyTree = None, *, model: EMModel) -> EMState:
    """theta from ``model.init_params`` (data-dependent when ``batch`` is given)."""
    check_key("key", key)
    if batch is not None:
        model.check_data(batch)
    return init_from(model.init_params(key, batch))


def init_from(params: PyTree) -> EMState:
    """A state holding given parameters (e.g. the same start as a reference library)."""
    return EMState(params, jnp.zeros((), jnp.int32))


def objective(model: EMModel, params: PyTree, log_likelihood: Array) -> Array:
    """The EM objective log p(x | theta) + ``model.log_prior(theta)``."""
    return log_likelihood + model.log_prior(params)


@validated_step
def step(key: PRNGKey, state: EMState, batch: PyTree, *, model: EMModel, num_data: Optional[int] = None):
    """One EM iteration: the E-step at theta, then the M-step. ``key`` is checked and unused (EM is
    deterministic), kept for the one ``step(key, state, batch)`` signature."""
    if num_data is not None and batch_size(batch) != num_data:
        raise ValueError(
            f"EM takes the whole data set at every step: the batch has {batch_size(batch)} "
            f"data points but num_data={num_data}"
        )
    stats, log_lik = model.e_step(state.q_global, batch)
    new = model.m_step(stats)
    elbo = objective(model, state.q_global, log_lik)
    return EMState(new, safe_increment(state.count)), EMInfo(elbo, log_lik)


def as_top_level_api(model: EMModel, *, num_data: Optional[int] = None) -> VIAlgorithm:
    """EM for ``model`` as a ``VIAlgorithm``: ``init(key, data)``, ``step(key, state, data)``.

    EM has no schedule (each M-step is an exact maximization).

    Args:
      model: an ``EMModel`` (``init_params``, ``e_step``, ``m_step``, ``log_prior``, ``check_data``).
      num_data: N, optional; when given, every step checks that its batch holds N data points.

    Raises:
      ValueError: for a model lacking what EM needs (naming the members), or ``num_data`` < 1.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.models import CategoricalHMM
        >>> obs = jnp.array([[0, 1, 1, 0], [1, 1, 0, 0]])
        >>> alg = em(CategoricalHMM(num_states=2, num_symbols=2))
        >>> state = alg.init(jax.random.PRNGKey(0), obs)
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(1), state, obs)

    References:
      Dempster, Laird and Rubin (1977), Maximum likelihood from incomplete data via the EM algorithm.
    """
    check_protocol(model, EMModel, "em")
    if num_data is not None:
        check_int("num_data", num_data)
    return reject_non_finite(
        VIAlgorithm(init=bind_settings(init, model=model), step=bind_settings(step, model=model, num_data=num_data))
    )


em = as_top_level_api

__all__ = ["EMInfo", "EMState", "as_top_level_api", "em", "init", "init_from", "objective", "step"]
