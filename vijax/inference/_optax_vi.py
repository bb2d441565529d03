"""Gradient-based VI through optax, the baselines of Khan et al. (2016, appendix G): each step ascends a
``ParamsModel``'s stochastic ELBO ``model.elbo_params(params, batch, key, num_samples, num_data)`` in its variational
parameters (GP classification: {m, L}, L the Cholesky factor of V) with an optax transformation of its gradient g_k:

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

from vijax._validate import ArgumentError, check_int, check_key, check_scalar
from vijax.inference._scale import check_num_data
from vijax.inference.base import VIAlgorithm, check_protocol, guarded_algorithm, safe_increment, validated_step
from vijax.models import ParamsModel
from vijax.types import Array, PRNGKey, PyTree

OPTIMIZERS = ("gd", "sgd", "adagrad", "rmsprop", "adadelta", "adam")


class OptaxVIState(NamedTuple):
    """q_global: the variational parameters; opt_state: optax's state; count: int32."""

    q_global: PyTree
    opt_state: PyTree
    count: Array


class OptaxVIInfo(NamedTuple):
    """elbo: the stochastic ELBO estimate at the parameters before the step; grad_norm: |g_k|."""

    elbo: Array
    grad_norm: Array


OPTIMIZER_SETTINGS = ("kappa", "eps", "decay", "rho", "b1", "b2")
_HYPER = dict(
    gd=(), sgd=("kappa",), adagrad=("eps",), rmsprop=("decay", "eps"), adadelta=("rho", "eps"), adam=("b1", "b2", "eps")
)

# the default rate of each named optimizer (Kingma & Ba 2014 for Adam; Zeiler 2012 for Adadelta)
DEFAULT_LEARNING_RATES = {"gd": 0.01, "sgd": 0.01, "adagrad": 0.01, "rmsprop": 1e-3, "adadelta": 1.0, "adam": 1e-3}


def make_optimizer(
    name: str, learning_rate=None, *, rate_name: str = "learning_rate", **hyper: Any
) -> optax.GradientTransformation:
    """An optax transformation of appendix G by name (a descent direction on -ELBO).

    Args:
      name: one of ``OPTIMIZERS``.
      learning_rate: alpha_0 > 0, or an optax schedule (not sgd, adadelta); None: ``DEFAULT_LEARNING_RATES[name]``.
      rate_name: the name a refused ``learning_rate`` is reported under.
      **hyper: ``kappa`` (0.6), ``eps`` (1e-8), ``decay`` (0.9), ``rho`` (0.9), ``b1``, ``b2`` (0.9, 0.999).

    Raises:
      ValueError: an unknown ``name`` or hyperparameter, or a bad value.

    Examples:
        >>> opt = make_optimizer("adam", 0.1)
        >>> make_optimizer("adamw")
        Traceback (most recent call last):
        ...
        ValueError: unknown optimizer 'adamw'; choose one of ('gd', 'sgd', 'adagrad', 'rmsprop', 'adadelta', 'adam')
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")
    allowed = _HYPER[name]
    extra = sorted(set(hyper) - set(allowed))
    if extra:
        raise ValueError(f"optimizer {name!r} takes no hyperparameter(s) {extra}; it takes {allowed}")
    if learning_rate is None:
        learning_rate = DEFAULT_LEARNING_RATES[name]
    if callable(learning_rate):
        if name in ("sgd", "adadelta"):
            raise ArgumentError(
                rate_name,
                f"{rate_name}: optimizer {name!r} takes a number (its own decay is built in), got {learning_rate!r}",
            )
    else:
        check_scalar(rate_name, learning_rate, low=0.0, high=None)
    eps = hyper.get("eps", 1e-8)
    unit = lambda n, default, **kw: check_scalar(n, hyper.get(n, default), low=0.0, high=1.0, **kw)
    if name == "gd":
        return optax.sgd(learning_rate)
    if name == "sgd":
        kappa = unit("kappa", 0.6, include_low=True)
        return optax.sgd(lambda k: learning_rate * (jnp.asarray(k, jnp.result_type(float)) + 1.0) ** (-kappa))
    check_scalar("eps", eps, low=0.0, high=None)
    if name == "adagrad":
        return optax.adagrad(learning_rate, initial_accumulator_value=0.0, eps=eps)
    if name == "rmsprop":
        return optax.rmsprop(learning_rate, decay=unit("decay", 0.9, include_high=False), eps=eps)
    if name == "adadelta":
        return _adadelta(learning_rate, unit("rho", 0.9, include_high=False), eps)
    b1, b2 = (
        unit("b1", 0.9, include_low=True, include_high=False),
        unit("b2", 0.999, include_low=True, include_high=False),
    )
    return optax.adam(learning_rate, b1=b1, b2=b2, eps=eps)


def resolve_optimizer(
    optimizer: Union[str, optax.GradientTransformation], schedule=None, **hyper: Any
) -> optax.GradientTransformation:
    """An algorithm's optimizer: a name in ``OPTIMIZERS`` with its rate ``schedule`` and
    hyperparameters (``make_optimizer``), or an ``optax.GradientTransformation``.

    Raises:
      ValueError: naming ``optimizer``, ``schedule`` or the hyperparameter.
    """
    if "learning_rate" in hyper:
        raise ArgumentError(
            "learning_rate",
            "learning_rate: this algorithm takes its learning rate as schedule= (a number or an optax schedule "
            f"count -> rate), got learning_rate={hyper['learning_rate']!r}",
            value=hyper["learning_rate"],
        )
    if isinstance(optimizer, str):
        return make_optimizer(optimizer, schedule, rate_name="schedule", **hyper)
    if not isinstance(optimizer, optax.GradientTransformation):
        raise ArgumentError(
            "optimizer",
            f"optimizer must be a name in {OPTIMIZERS} or an optax.GradientTransformation, got {optimizer!r}",
            value=optimizer,
        )
    if hyper or schedule is not None:
        given = sorted(hyper) + (["schedule"] if schedule is not None else [])
        raise ValueError(
            f"{', '.join(given)}: a learning rate and optimizer hyperparameters are only taken with an "
            "optimizer name; an optax.GradientTransformation has its own"
        )
    return optimizer


class _AdadeltaState(NamedTuple):
    sq_grad: PyTree
    sq_update: PyTree


def _adadelta(learning_rate: float, rho: float, eps: float) -> optax.GradientTransformation:
    """Adadelta with ``learning_rate`` inside the accumulated squared updates (module docstring)."""

    def init_fn(params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        return _AdadeltaState(zeros, zeros)

    def update_fn(grads, state, params=None):
        sq_grad = jax.tree.map(lambda s, g: rho * s + (1 - rho) * g * g, state.sq_grad, grads)
        upd = jax.tree.map(
            lambda g, s, d: learning_rate * g * jnp.sqrt(d + eps) / jnp.sqrt(s + eps), grads, sq_grad, state.sq_update
        )
        sq_update = jax.tree.map(lambda d, u: rho * d + (1 - rho) * u * u, state.sq_update, upd)
        return jax.tree.map(jnp.negative, upd), _AdadeltaState(sq_grad, sq_update)

    return optax.GradientTransformation(init_fn, update_fn)


def ascend(optimizer: optax.GradientTransformation, grads: PyTree, opt_state: PyTree, params: PyTree):
    """(params, opt_state) after one ``optimizer`` step along the ELBO's gradient ``grads``."""
    updates, opt_state = optimizer.update(jax.tree.map(jnp.negative, grads), opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def init(
    key: PRNGKey, batch: PyTree = None, *, model: ParamsModel, optimizer: optax.GradientTransformation
) -> OptaxVIState:
    """The model's starting parameters and the optimizer's state."""
    check_key("key", key)
    params = model.init_params(key, batch)
    return OptaxVIState(params, optimizer.init(params), jnp.zeros((), jnp.int32))


@validated_step
def step(
    key: PRNGKey, state: OptaxVIState, batch: PyTree, *, model, optimizer, num_samples, num_data
) -> tuple[OptaxVIState, OptaxVIInfo]:
    """One ascent step on ``model.elbo_params`` (the same draws give the value and the gradient)."""
    if num_data is not None:
        check_num_data(num_data, model, batch, state.count)
    elbo, grads = jax.value_and_grad(model.elbo_params)(state.q_global, batch, key, num_samples, num_data)
    params, opt_state = ascend(optimizer, grads, state.opt_state, state.q_global)
    return OptaxVIState(params, opt_state, safe_increment(state.count)), OptaxVIInfo(elbo, optax.tree.norm(grads))


def as_top_level_api(
    model: ParamsModel,
    *,
    optimizer: Union[str, optax.GradientTransformation],
    num_data: Optional[int] = None,
    schedule=None,
    num_samples: Optional[int] = None,
    **hyper: Any,
) -> VIAlgorithm:
    """Gradient VI with an optax optimizer, as a ``VIAlgorithm``.

    Args:
      model: a ``ParamsModel`` (``init_params``, ``elbo_params(params, batch, key, num_samples, num_data)``).
      optimizer: a name in ``OPTIMIZERS`` (hyperparameters in ``hyper``) or an ``optax.GradientTransformation``.
      num_data: N for the N/M minibatch scaling (None: the model's own N).
      schedule: the learning rate of a named optimizer (default ``DEFAULT_LEARNING_RATES``).
      num_samples: Monte Carlo samples per example, or None for the model's exact expectation.

    Examples:
        >>> import jax, numpy as np
        >>> from vijax.models import GPClassification
        >>> x = np.linspace(-2, 2, 6)[:, None]
        >>> model = GPClassification(x, (x[:, 0] > 0).astype(int), 0.0, 0.0, jitter=1e-6)
        >>> alg = optax_vi(model, optimizer="adam", schedule=0.1)
        >>> state = alg.init(jax.random.PRNGKey(0))
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(1), state, np.arange(6))
    """
    optimizer = resolve_optimizer(optimizer, schedule, **hyper)
    if num_samples is not None:
        check_int("num_samples", num_samples)
    if num_data is not None:
        check_int("num_data", num_data)
    check_protocol(model, ParamsModel, "optax_vi")
    return guarded_algorithm(
        init, step, ("model", "optimizer"), model=model, optimizer=optimizer, num_samples=num_samples, num_data=num_data
    )


optax_vi = as_top_level_api
