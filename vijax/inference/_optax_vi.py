"""Gradient-based VI through optax: the baselines of seed 001 (appendix G).

The variational parameters are a pytree ``params`` (for GP classification {m, L}, L the Cholesky
factor of V) and the objective is a model's stochastic ELBO estimate
``model.elbo_params(params, batch, key, num_samples, num_data)`` (minibatch terms scaled by N/M).
Each step ascends it with an optax transformation of its gradient g_k = grad ELBO:

- ``gd``: lambda_{k+1} = lambda_k + alpha g_k (batch gradient descent with exact gradients when the
  batch is all the data and ``num_samples=None``);
- ``sgd``: alpha_k = alpha_0 (k + 1)^(-kappa);
- ``adagrad``: s_k = s_{k-1} + g_k^2, step alpha_0 g_k / (sqrt(s_k) + eps);
- ``rmsprop``: s_k = rho s_{k-1} + (1 - rho) g_k^2, step alpha_0 g_k / sqrt(s_k + eps);
- ``adadelta``: Zeiler (2012) with rho and eps and the step size inside the accumulated updates, as
  in the paper's reference code: s_k = rho s_{k-1} + (1 - rho) g_k^2,
  u_k = alpha_0 g_k sqrt(d_{k-1} + eps) / sqrt(s_k + eps), d_k = rho d_{k-1} + (1 - rho) u_k^2
  (optax's ``adadelta`` accumulates the unscaled update; the two agree at alpha_0 = 1);
- ``adam``: Kingma & Ba (2014) with (b1, b2, eps).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
import optax

from vijax.inference.base import VIAlgorithm, safe_increment
from vijax.types import Array, PRNGKey, PyTree

OPTIMIZERS = ("gd", "sgd", "adagrad", "rmsprop", "adadelta", "adam")


class OptaxVIState(NamedTuple):
    """params: the variational parameters; opt_state: optax's state; count: int32 steps done."""

    params: PyTree
    opt_state: PyTree
    count: Array


class OptaxVIInfo(NamedTuple):
    """elbo: the stochastic ELBO estimate at the parameters before the step; grad_norm: |g_k|."""

    elbo: Array
    grad_norm: Array


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value != value:
        raise ValueError(f"{name} must be a number > 0, got {value!r}")


def make_optimizer(name: str, learning_rate: float = 1.0, **hyper: Any) -> optax.GradientTransformation:
    """An optax transformation of appendix G by name (a descent direction on -ELBO).

    Args:
      name: one of ``OPTIMIZERS``.
      learning_rate: alpha (gd) or alpha_0 (the others), > 0.
      **hyper: ``kappa`` (sgd, default 0.6); ``eps`` (adagrad, rmsprop, adadelta, adam; default
        1e-8); ``decay`` (rmsprop rho, default 0.9); ``rho`` (adadelta, default 0.9); ``b1``,
        ``b2`` (adam, default 0.9, 0.999).

    Raises:
      ValueError: an unknown ``name`` (the message names it) or hyperparameter, or a bad value.

    Examples:
        >>> opt = make_optimizer("adam", 0.1)
        >>> make_optimizer("adamw")
        Traceback (most recent call last):
        ...
        ValueError: unknown optimizer 'adamw'; choose one of ('gd', 'sgd', 'adagrad', 'rmsprop', 'adadelta', 'adam')
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")
    allowed = {"gd": (), "sgd": ("kappa",), "adagrad": ("eps",), "rmsprop": ("decay", "eps"),
               "adadelta": ("rho", "eps"), "adam": ("b1", "b2", "eps")}[name]
    extra = sorted(set(hyper) - set(allowed))
    if extra:
        raise ValueError(f"optimizer {name!r} takes no hyperparameter(s) {extra}; it takes {allowed}")
    _positive("learning_rate", learning_rate)
    eps = hyper.get("eps", 1e-8)
    if name == "gd":
        return optax.sgd(learning_rate)
    if name == "sgd":
        kappa = hyper.get("kappa", 0.6)
        if not 0 <= kappa <= 1:
            raise ValueError(f"kappa must lie in [0, 1], got {kappa!r}")
        return optax.sgd(lambda k: learning_rate * (jnp.asarray(k, jnp.result_type(float)) + 1.0) ** (-kappa))
    _positive("eps", eps)
    if name == "adagrad":
        return optax.adagrad(learning_rate, initial_accumulator_value=0.0, eps=eps)
    if name == "rmsprop":
        decay = hyper.get("decay", 0.9)
        if not 0 < decay < 1:
            raise ValueError(f"decay must lie in (0, 1), got {decay!r}")
        return optax.rmsprop(learning_rate, decay=decay, eps=eps)
    if name == "adadelta":
        rho = hyper.get("rho", 0.9)
        if not 0 < rho < 1:
            raise ValueError(f"rho must lie in (0, 1), got {rho!r}")
        return _adadelta(learning_rate, rho, eps)
    b1, b2 = hyper.get("b1", 0.9), hyper.get("b2", 0.999)
    if not (0 <= b1 < 1 and 0 <= b2 < 1):
        raise ValueError(f"b1 and b2 must lie in [0, 1), got {b1!r}, {b2!r}")
    return optax.adam(learning_rate, b1=b1, b2=b2, eps=eps)


class _AdadeltaState(NamedTuple):
    sq_grad: PyTree
    sq_update: PyTree


def _adadelta(learning_rate: float, rho: float, eps: float) -> optax.GradientTransformation:
    """Adadelta with ``learning_rate`` inside the accumulated squared updates (see the module doc)."""

    def init_fn(params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        return _AdadeltaState(zeros, zeros)

    def update_fn(grads, state, params=None):
        sq_grad = jax.tree.map(lambda s, g: rho * s + (1 - rho) * g * g, state.sq_grad, grads)
        upd = jax.tree.map(lambda g, s, d: learning_rate * g * jnp.sqrt(d + eps) / jnp.sqrt(s + eps),
                           grads, sq_grad, state.sq_update)
        sq_update = jax.tree.map(lambda d, u: rho * d + (1 - rho) * u * u, state.sq_update, upd)
        return jax.tree.map(jnp.negative, upd), _AdadeltaState(sq_grad, sq_update)

    return optax.GradientTransformation(init_fn, update_fn)


def init(key: PRNGKey, model, optimizer: optax.GradientTransformation, batch: PyTree = None) -> OptaxVIState:
    params = model.init_params(key, batch)
    return OptaxVIState(params, optimizer.init(params), jnp.zeros((), jnp.int32))


def step(state: OptaxVIState, batch: PyTree, key: PRNGKey, *, model, optimizer: optax.GradientTransformation,
         num_samples: Optional[int], num_data: Optional[int]) -> tuple[OptaxVIState, OptaxVIInfo]:
    """One ascent step on ``model.elbo_params`` (the same draws give the value and the gradient)."""
    elbo, grads = jax.value_and_grad(model.elbo_params)(state.params, batch, key, num_samples, num_data)
    neg = jax.tree.map(jnp.negative, grads)
    updates, opt_state = optimizer.update(neg, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return OptaxVIState(params, opt_state, safe_increment(state.count)), OptaxVIInfo(elbo, optax.tree.norm(grads))


def optax_vi(model, optimizer: Union[str, optax.GradientTransformation], *, num_samples: Optional[int] = None,
             num_data: Optional[int] = None, **hyper: Any) -> VIAlgorithm:
    """Gradient VI with an optax optimizer, as a ``VIAlgorithm``.

    Args:
      model: offers ``init_params(key, batch=None)`` and
        ``elbo_params(params, batch, key, num_samples, num_data)``.
      optimizer: a name in ``OPTIMIZERS`` (with ``learning_rate`` and its hyperparameters in
        ``hyper``; see ``make_optimizer``) or any ``optax.GradientTransformation``.
      num_samples: Monte Carlo samples per example, or None for the model's exact expectation.
      num_data: N for the N/M minibatch scaling (None: the model's own N).

    Returns:
      ``VIAlgorithm(init, step)``; ``state.params`` are the variational parameters.

    Examples:
        >>> import numpy as np
        >>> from vijax.models.gp_classification import GPClassification
        >>> x = np.linspace(-2, 2, 6)[:, None]
        >>> model = GPClassification(x, x[:, 0] > 0, 0.0, 0.0, jitter=1e-6)
        >>> alg = optax_vi(model, "adam", learning_rate=0.1)
        >>> state = alg.init(None)
        >>> state, info = alg.step(state, np.arange(6), None)
    """
    if isinstance(optimizer, str):
        optimizer = make_optimizer(optimizer, **hyper)
    elif hyper:
        raise ValueError(f"hyperparameters {sorted(hyper)} are only taken with an optimizer name")
    if not hasattr(optimizer, "update"):
        raise ValueError(f"optimizer must be a name or an optax.GradientTransformation, got {optimizer!r}")
    if num_samples is not None and (isinstance(num_samples, bool) or not isinstance(num_samples, int)
                                    or num_samples < 1):
        raise ValueError(f"num_samples must be None or an integer >= 1, got {num_samples!r}")
    for needed in ("init_params", "elbo_params"):
        if not hasattr(model, needed):
            raise ValueError(f"model {type(model).__name__} offers no {needed}(), which optax_vi needs")
    return VIAlgorithm(
        init=lambda key, batch=None: init(key, model, optimizer, batch),
        step=lambda state, batch, key: step(state, batch, key, model=model, optimizer=optimizer,
                                            num_samples=num_samples, num_data=num_data))


__all__ = ["OPTIMIZERS", "OptaxVIInfo", "OptaxVIState", "make_optimizer", "optax_vi"]
