"""Expectation-maximization: maximum-likelihood (or MAP) point estimates for any ``EMModel`` (Dempster,
Laird and Rubin 1977; *Raise your ELBO*, §EM). log p(x | theta) >= E_q[log p(x, z | theta)] + H[q]; the
E-step sets q(z) = p(z | x, theta), the M-step maximizes the bound over theta, so log p(x | theta)
(+ log p(theta)) never decreases. ``info.log_likelihood`` is at the step's starting theta; ``info.elbo``
adds ``model.log_prior(theta)``. EM sees the whole data set at every step.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax.numpy as jnp

from vijax._validate import check_int
from vijax.inference._scale import check_whole_data
from vijax.inference.base import VIAlgorithm, check_protocol, guarded_algorithm, safe_increment, validated_step
from vijax.inference.base import checked_start
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
    checked_start(key, batch, model)
    return EMState(model.init_params(key, batch), jnp.zeros((), jnp.int32))


@validated_step
def step(key: PRNGKey, state: EMState, batch: PyTree, *, model: EMModel, num_data: Optional[int] = None):
    """One EM iteration: the E-step at theta, then the M-step (``key`` unused)."""
    check_whole_data("EM", batch, num_data)
    stats, log_lik = model.e_step(state.q_global, batch)
    elbo = log_lik + model.log_prior(state.q_global)  # the EM objective log p(x | theta) + log p(theta)
    return EMState(model.m_step(stats), safe_increment(state.count)), EMInfo(elbo, log_lik)


def as_top_level_api(model: EMModel, *, num_data: Optional[int] = None) -> VIAlgorithm:
    """EM for ``model`` as a ``VIAlgorithm`` (no schedule: each M-step is exact).

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
    """
    check_protocol(model, EMModel, "em")
    if num_data is not None:
        check_int("num_data", num_data)
    return guarded_algorithm(init, step, model=model, num_data=num_data)


em = as_top_level_api
