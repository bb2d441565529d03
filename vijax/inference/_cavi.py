"""Coordinate ascent variational inference for conditionally conjugate models.

Blei, Kucukelbir and McAuliffe (2017), Variational inference: a review for statisticians,
Algorithm 1 and §4.2: each step sets every local factor to its coordinate optimum given q(beta),
then sets q(beta) to its coordinate optimum given the locals, lambda = eta + sum_n E[s(x_n, z_n)]
(eq. 36). That is the shared natural-parameter update ``vijax.expfam.conjugate_update`` with
rho = 1. The ELBO reported in ``info`` is that of the pair (new locals, new globals), so it never
decreases from one step to the next. CAVI sees all the data at every step: the batch is the data
set (``num_data``, when given, is checked against it).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax.numpy as jnp

from vijax import expfam
from vijax._validate import batch_size, check_int, check_key
from vijax.inference._conjugate import check_conjugate_model, check_local, initial_globals
from vijax.inference.base import VIAlgorithm, check_step_batch, reject_nonfinite, safe_increment
from vijax.models import ConditionallyConjugateModel, conjugate_elbo
from vijax.types import Array, PRNGKey, PyTree


class CAVIState(NamedTuple):
    q_global: PyTree  # pytree of families: q(beta)
    count: Array  # int32 scalar
    num_rejected: Array = None  # int32 scalar: steps rejected as non-finite (None: not counted)


class CAVIInfo(NamedTuple):
    elbo: Array  # ELBO after this step (new locals, new globals)
    num_damped: Array  # batch elements whose update was pulled back into the domain
    accepted: Array = None  # whether the update was applied (False: non-finite, the state kept)


def init(key: PRNGKey, batch: PyTree = None, *, model: ConditionallyConjugateModel) -> CAVIState:
    """q(beta) from ``model.init_globals`` (data-dependent when ``batch`` is given)."""
    check_key("key", key)
    return CAVIState(initial_globals(key, batch, model), jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))


def init_from(q_global: PyTree) -> CAVIState:
    """A state holding a given q(beta) (e.g. from a previous fit)."""
    return CAVIState(q_global, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))


def step(
    state: CAVIState,
    batch: PyTree,
    key: PRNGKey,
    *,
    model: ConditionallyConjugateModel,
    local: str = "meanfield",
    num_data: Optional[int] = None,
):
    """One full sweep: local step at E_q[t(beta)], then the global coordinate update."""
    check_key("key", key)
    if num_data is not None and batch_size(batch) != num_data:
        raise ValueError(
            f"CAVI takes the whole data set at every step: the batch has {batch_size(batch)} "
            f"data points but num_data={num_data}"
        )
    check_step_batch(model, batch, state.count)
    prior = model.prior()
    loc = model.local_step(expfam.tree_mean_params(state.q_global), batch, key, method=local)
    q_new, num_damped = expfam.conjugate_update(state.q_global, prior, loc.suff_stats, 1.0)
    elbo = conjugate_elbo(prior, q_new, loc)
    new, ok = reject_nonfinite(CAVIState(q_new, safe_increment(state.count), state.num_rejected), state, elbo)
    return new, CAVIInfo(elbo, num_damped, ok)


def as_top_level_api(
    model: ConditionallyConjugateModel, *, num_data: Optional[int] = None, local: str = "meanfield"
) -> VIAlgorithm:
    """CAVI for ``model`` as a ``VIAlgorithm``: ``init(key, data)``, ``step(state, data, key)``.

    CAVI has no schedule (its step is the coordinate optimum, rho = 1).

    Args:
      model: a ``ConditionallyConjugateModel``.
      num_data: N, optional; when given, every step checks that its batch holds N data points.
      local: the local-step method (``model.local_methods``).

    Raises:
      ValueError: for a model that is not conditionally conjugate, a ``local`` method it lacks, or
        ``num_data`` < 1.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.models import UnivariateGMM
        >>> x = jnp.concatenate([jnp.full(50, -5.0), jnp.full(50, 5.0)])
        >>> alg = cavi(UnivariateGMM(num_components=2))
        >>> state = alg.init(jax.random.PRNGKey(0), x)
        >>> state, info = jax.jit(alg.step)(state, x, jax.random.PRNGKey(1))
    """
    check_conjugate_model(model, "cavi")
    check_local(model, local)
    if num_data is not None:
        check_int("num_data", num_data)
    return VIAlgorithm(
        init=lambda key, batch=None: init(key, batch, model=model),
        step=lambda state, batch, key: step(state, batch, key, model=model, local=local, num_data=num_data),
    )


cavi = as_top_level_api

__all__ = ["CAVIInfo", "CAVIState", "as_top_level_api", "cavi", "init", "init_from", "step"]
