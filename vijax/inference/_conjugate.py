"""What the algorithms for conditionally conjugate models (CAVI, SVI, SSVI, MAP-EM) share."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from vijax import expfam
from vijax._validate import ArgumentError, check_bool, check_int, check_shapes, implements
from vijax.inference._scale import check_num_data, data_scale, num_present, step_size
from vijax.inference.base import check_protocol, checked_start
from vijax.inference.schedules import as_schedule, default_schedule
from vijax.models import ConditionallyConjugateModel, HyperparameterModel
from vijax.types import PRNGKey, PyTree, Schedule


def check_factory_args(model, algorithm: str, *, num_data, schedule, local: str, ramp) -> Schedule:
    """The checks of every stochastic conjugate-model factory (SVI, SSVI, MAP-EM); returns the
    coerced schedule (default ``robbins_monro(1.0, tau=1.0, kappa=0.7)``)."""
    check_int("num_data", num_data)
    check_bool("ramp", ramp)
    schedule = as_schedule(schedule, default=default_schedule())
    check_protocol(model, ConditionallyConjugateModel, algorithm)
    check_local(model, local)
    return schedule


def float_leaf_dtype(q: PyTree):
    """The dtype of q's first floating-point leaf (that of the natural parameters), or None."""
    for leaf in jax.tree_util.tree_leaves(q):
        if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
            return jnp.result_type(leaf)
    return None


def initial_globals(key: PRNGKey, batch: PyTree, model: ConditionallyConjugateModel) -> PyTree:
    """``model.init_globals(key, batch)`` after ``checked_start``."""
    checked_start(key, batch, model)
    return model.init_globals(key, batch)


def check_local(model: ConditionallyConjugateModel, local: str) -> None:
    """Raises ValueError when ``model`` offers no local step ``local`` (its ``local_methods``)."""
    if local not in model.local_methods:
        raise ArgumentError(
            "local", f"local={local!r} is not offered by {type(model).__name__}; choose one of {model.local_methods}"
        )


def check_q_global(q_global: PyTree, prior: PyTree) -> None:
    """Raises ValueError naming ``state.q_global`` unless it has the structure and shapes of ``prior``."""
    check_shapes("state.q_global", q_global, prior, "the model's prior", is_leaf=expfam.is_family)


View = Callable[[PyTree, PRNGKey], tuple[PyTree, Callable[[PyTree], PyTree]]]  # q, key -> (stats, transform)


def view_step(state, batch, key: PRNGKey, *, model, num_data: int, schedule: Schedule, local: str, ramp, view: View):
    """The step of SSVI, SSVI-A and MAP-EM (Hoffman and Blei 2015, Algorithm 1, lines 3-9): the local step
    at ``stats, transform = view(q, key)`` (t(beta) of a draw, or of the mode; the state's ``hyper`` goes to
    it and ``prior``), then lambda <- (1 - rho_t) lambda + rho_t (eta + (N_t / S) transform(sum eta-hat_n)).

    Returns:
      (q_new, num_damped, rho, prior, stats, data_term), data_term = (N/S) (<sum eta-hat_n, stats> + local_terms).
    """
    q, count, hyper = state.q_global, state.count, getattr(state, "hyper", None)
    check_num_data(num_data, model, batch, count)
    present = num_present(model, batch)
    rho = step_size(schedule(count), present)
    key_beta, key_local = jax.random.split(key)
    kw = {} if hyper is None else {"hyper": hyper}
    prior = model.prior(**kw)
    check_q_global(q, prior)
    stats, transform = view(q, key_beta)
    loc = model.local_step(stats, batch, key_local, method=local, **kw)
    scale, full = data_scale(count, present, num_data, ramp, float_leaf_dtype(q))
    q_new, num_damped = expfam.conjugate_update(q, prior, transform(loc.suff_stats), rho, scale)
    data_term = full * (expfam.tree_inner(loc.suff_stats, stats) + loc.local_terms)
    return q_new, num_damped, rho, prior, stats, data_term


def model_hyperparameters(model, names) -> dict:
    """``model.hyperparameters()``; ValueError naming ``model`` without them, or the first of ``names`` not among them."""
    if not implements(model, HyperparameterModel):
        raise ArgumentError(
            "model", f"model must offer hyperparameters() (a HyperparameterModel), got {type(model).__name__}"
        )
    known = model.hyperparameters()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ArgumentError(
            unknown[0], f"{unknown[0]} is not a hyperparameter of {type(model).__name__}; choose from {sorted(known)}"
        )
    return known


def inject_hyperparameters(state: PyTree, model: HyperparameterModel, **values) -> PyTree:
    """``state`` with the model's hyperparameters held in it (optax's ``inject_hyperparams``), used by
    every later step instead of the model's fixed ones; a grid of settings is one ``vmap``ped program::

        states = jax.vmap(lambda a, e: inject_hyperparameters(s0, model, alpha=a, eta=e))(alphas, etas)
        states, infos = jax.vmap(alg.step, in_axes=(None, 0, None))(key, states, batch)

    Args:
      state: a state of ``svi``, ``ssvi``, ``ssvi_a`` or ``map`` (their ``hyper`` field).
      model: the ``HyperparameterModel`` the algorithm was built with.
      **values: hyperparameter name -> scalar (possibly traced); the others keep their values.

    Raises:
      ValueError: naming a value that is not one of ``model.hyperparameters()``, or a model without them.
    """
    if "hyper" not in getattr(state, "_fields", ()):
        raise ArgumentError(
            "state",
            f"state must be a state of svi, ssvi, ssvi_a or map (with a hyper field), got {type(state).__name__}",
        )
    fixed = model_hyperparameters(model, sorted(values))
    dt = float_leaf_dtype(state.q_global)
    base = dict(state.hyper) if state.hyper is not None else {n: jnp.asarray(v, dt) for n, v in fixed.items()}
    base.update({n: jnp.asarray(v, dt) for n, v in values.items()})
    return state._replace(hyper=base)
