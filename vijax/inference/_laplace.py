"""A point estimate and the Laplace approximation of a target's posterior (NumPyro's ``AutoDelta`` and
``AutoLaplaceApproximation``), as ``VIAlgorithm``s whose step is one optax step towards the mode.

- ``map_estimate``: theta_hat = argmax_theta log p(x, theta), the log-joint at constrained values with no Jacobian
  (``AutoDelta``'s MAP "in constrained space"), found on u with theta = T(u).
- ``laplace``: u_hat = argmax_u log p(x, T(u)) + log |det dT/du|, the mode on the unconstrained space (the Delta
  guide of ``AutoLaplaceApproximation``), and q(u) = N(u_hat, H^-1) with H = -grad^2_u of that log-density at
  u_hat (Bishop 2006, *Pattern Recognition and Machine Learning*, §4.4, eq. 4.133-4.134), read from the state
  when drawn.

A target's ``numpyro.param`` sites (``target.params``) are maximized with the point, as NumPyro's SVI maximizes them
with these guides, and are not part of the Hessian. ``map_estimate`` is not ``map_em`` (registered as ``"map"``):
that is MAP-EM of a conditionally conjugate model's globals.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Union

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from vijax import expfam
from vijax._validate import ArgumentError, check_int, check_key, is_tracer
from vijax.interop import Target
from vijax.inference._optax_vi import OPTIMIZERS, resolve_optimizer
from vijax.inference.base import VIAlgorithm, bind_settings, reject_non_finite, safe_increment, validated_step
from vijax.types import Array, PRNGKey, PyTree


class PointState(NamedTuple):
    """q_global: the point, unconstrained values by site (and by param); opt_state: optax's; count: int32."""

    q_global: dict
    opt_state: PyTree
    count: Array


class PointInfo(NamedTuple):
    """elbo: the objective at the point before the step (the ELBO of NumPyro's Delta guide there); grad_norm."""

    elbo: Array
    grad_norm: Array


def _with_params(target: Target, values: dict, batch: PyTree) -> tuple[dict, PyTree]:
    """(the latent sites' values, ``batch`` with the params' values added) from one dict of both."""
    latent = {n: values[n] for n in target.sites}
    given = {n: values[n] for n in target.params}
    return latent, batch if not given else {**(batch or {}), **given}


def map_objective(point: dict, batch: PyTree, *, target: Target) -> Array:
    """log p(x, T(u)) at the constrained values, no Jacobian (``AutoDelta``)."""
    return target.log_prob(*_with_params(target, target.constrain(point), batch))


def laplace_objective(point: dict, batch: PyTree, *, target: Target) -> Array:
    """log p(x, T(u)) + log |det dT/du| on the unconstrained space (``AutoLaplaceApproximation``)."""
    _, batch = _with_params(target, target.constrain(point), batch)  # the params' values; T(u) is log_density's
    return target.log_density({n: point[n] for n in target.sites}, batch)


def init(key: PRNGKey, batch: PyTree = None, *, target: Target, optimizer) -> PointState:
    """The target's start (its params at their ``init_value``) and the optimizer's state."""
    check_key("key", key)
    if batch is not None:
        target.check_data(batch)
    point = {**target.init_params, **target.param_init}
    return PointState(point, optimizer.init(point), jnp.zeros((), jnp.int32))


@validated_step
def step(
    key: PRNGKey, state: PointState, batch: PyTree, *, model, objective, optimizer
) -> tuple[PointState, PointInfo]:
    """One optimizer step on -objective (``key`` unused: the step is deterministic)."""

    def loss(point):
        return -objective(point, batch)

    value, grads = jax.value_and_grad(loss)(state.q_global)
    extra = dict(value=value, grad=grads, value_fn=loss)
    if isinstance(optimizer, optax.GradientTransformationExtraArgs):
        updates, opt_state = optimizer.update(grads, state.opt_state, state.q_global, **extra)
    else:
        updates, opt_state = optimizer.update(grads, state.opt_state, state.q_global)
    point = optax.apply_updates(state.q_global, updates)
    return PointState(point, opt_state, safe_increment(state.count)), PointInfo(-value, optax.tree.norm(grads))


def _optimizer(target: Target, optimizer, schedule, hyper: dict) -> optax.GradientTransformation:
    """L-BFGS (optax's, with its zoom line search) by default on the whole data; Adam with a subsampled plate."""
    if optimizer is None:
        optimizer = "adam" if target.plates else "lbfgs"
    if optimizer == "lbfgs":
        if hyper:
            name = sorted(hyper)[0]
            raise ArgumentError(name, f"{name}: optimizer='lbfgs' takes only schedule (its learning rate)")
        return optax.lbfgs(learning_rate=schedule)
    if isinstance(optimizer, str) and optimizer not in OPTIMIZERS:
        raise ArgumentError(
            "optimizer", f"optimizer must be 'lbfgs', one of {OPTIMIZERS} or an optax transformation, got {optimizer!r}"
        )
    return resolve_optimizer(optimizer, schedule, **hyper)


def _check_target(target: Any, name: str) -> Target:
    if not isinstance(target, Target):
        raise ArgumentError(
            "target", f"target: {name} takes a target (vijax.from_numpyro, vijax.from_tfp), got {type(target).__name__}"
        )
    target.check_global(name)
    return target


def _factory(target: Target, objective, extras, optimizer, schedule, hyper) -> VIAlgorithm:
    optimizer = _optimizer(target, optimizer, schedule, hyper)
    init_fn = bind_settings(init, target=target, optimizer=optimizer)
    step_fn = bind_settings(step, model=target, objective=bind_settings(objective, target=target), optimizer=optimizer)
    return reject_non_finite(VIAlgorithm(init_fn, step_fn, extras))


def map_estimate(
    target: Target, *, optimizer: Union[str, optax.GradientTransformation, None] = None, schedule=None, **hyper: Any
) -> VIAlgorithm:
    """The MAP point of a target's sites at their constrained values, as NumPyro's ``AutoDelta`` (module docstring).

    Args:
      target: ``vijax.from_numpyro(...)`` or ``vijax.from_tfp(...)``.
      optimizer: ``"lbfgs"`` (optax's L-BFGS with its line search; the default on the whole data), a name in
        ``OPTIMIZERS`` (``"adam"``: the default with a subsampled plate) or an optax transformation.
      schedule: the learning rate (a number or an optax schedule; ``"lbfgs"``: a factor on its line search's step).
      **hyper: a named optimizer's hyperparameters (``make_optimizer``).

    Returns:
      The ``VIAlgorithm`` (:class:`PointState`, :class:`PointInfo`); ``vijax.inference.sample`` repeats the point's
      constrained values ``num_samples`` times; ``fitted_params(alg, state)`` gives the params' values.

    Raises:
      ArgumentError: naming ``target``, ``optimizer`` or a hyperparameter.

    Examples:
        >>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> import vijax
        >>> def model(y):
        ...     mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        ...     numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)
        >>> alg = map_estimate(vijax.from_numpyro(model, jnp.array(2.0)))
        >>> state, step = alg.init(jax.random.PRNGKey(0)), jax.jit(alg.step)
        >>> for t in range(5):
        ...     state, info = step(jax.random.PRNGKey(t), state, None)
        >>> round(float(state.q_global["mu"]), 4)  # the posterior mode y / 2
        1.0
    """
    target = _check_target(target, "map_estimate")
    return _factory(target, map_objective, _PointExtras(target, laplace=False), optimizer, schedule, hyper)


def laplace(
    target: Target, *, optimizer: Union[str, optax.GradientTransformation, None] = None, schedule=None, **hyper: Any
) -> VIAlgorithm:
    """The Laplace approximation of a target's posterior on its unconstrained space, as NumPyro's
    ``AutoLaplaceApproximation`` (module docstring): a Gaussian at the mode, its precision the negative Hessian.

    Args:
      target: a target without a subsampled plate (the Hessian is the whole data's).
      optimizer: as ``map_estimate``'s (default ``"lbfgs"``).
      schedule: as ``map_estimate``'s.
      **hyper: a named optimizer's hyperparameters.

    Returns:
      The ``VIAlgorithm``; ``vijax.inference.sample`` draws q's constrained values (``fitted_params``: the params'),
      ``laplace_gaussian(alg, state)`` gives q as a ``vijax.expfam.MultivariateNormal`` over the flat vector.

    Raises:
      ArgumentError: naming ``target`` (not a target, or one with a subsampled plate), ``optimizer`` or a
        hyperparameter.
    """
    target = _check_target(target, "laplace")
    if target.plates:
        raise ArgumentError(
            "target",
            f"target: laplace takes the Hessian of the whole data's log-density; this target subsamples the plates "
            f"{sorted(target.plates)} (build it without subsample_size, or use map_estimate)",
        )
    return _factory(target, laplace_objective, _LaplaceExtras(target, laplace=True), optimizer, schedule, hyper)


def _flat_objective(point: dict, target: Target, batch: PyTree = None) -> tuple:
    """(the latent sites' flat unconstrained vector at ``point``, the unravel function, ``laplace_objective`` of a
    flat vector at ``batch`` with the params at the point's values)."""
    params = {n: point[n] for n in target.params}
    flat, unravel = ravel_pytree({n: point[n] for n in target.sites})
    return flat, unravel, lambda x: laplace_objective({**unravel(x), **params}, batch, target=target)


def _gaussian(point: dict, target: Target) -> tuple:
    """(q = N(u_hat, H^-1) over the flat latent vector as a MultivariateNormal, the unravel function)."""
    flat, unravel, log_density = _flat_objective(point, target)
    precision = -jax.hessian(log_density)(flat)
    q = expfam.MultivariateNormal(precision @ flat, -0.5 * precision)
    return q, unravel


def laplace_gaussian(alg: VIAlgorithm, state: PyTree) -> tuple:
    """``laplace``'s q at ``state``: (a ``vijax.expfam.MultivariateNormal`` over the flat unconstrained vector of the
    latent sites, ``unravel``: flat vector -> site dict), the vector in ``jax.flatten_util.ravel_pytree``'s order (the
    sites' names sorted, as NumPyro's ``AutoContinuous`` orders them)."""
    extras = alg.extras if isinstance(alg, VIAlgorithm) else None
    if not isinstance(extras, _PointExtras) or not extras.laplace:
        raise ArgumentError(
            "alg", f"alg: laplace_gaussian takes an algorithm made by laplace, got {type(alg).__name__}"
        )
    return _checked_gaussian(_inner(state).q_global, extras.target)


def _checked_gaussian(point: dict, target: Target) -> tuple:
    """``_gaussian``, refused with an ArgumentError naming ``state`` where the Hessian is not negative definite."""
    q, unravel = _gaussian(point, target)
    if not is_tracer(q.eta2) and not bool(jnp.all(jnp.isfinite(q.covariance))):
        raise ArgumentError(
            "state",
            "state: the Hessian of the log-density at its point is not negative definite (not a mode: run more "
            "steps; or a flat direction the model leaves unidentified)",
        )
    return q, unravel


def _inner(state: PyTree) -> PointState:
    return state.inner if not isinstance(state, PointState) else state


class _PointExtras:
    """``map_estimate``'s and ``laplace``'s ``VIAlgorithm.extras``: draws of q (the point repeated, or Laplace's)."""

    def __init__(self, target: Target, laplace: bool):
        self.target, self.laplace = target, laplace

    def sample(self, key: PRNGKey, state, num_samples: int) -> dict:
        num = check_int("num_samples", num_samples)
        return _sample(_inner(state).q_global, key, num, self.target, self.laplace)

    def fitted_params(self, state) -> dict:
        point = _inner(state).q_global
        return self.target.constrain({n: point[n] for n in self.target.params}) if self.target.params else {}


class _LaplaceExtras(_PointExtras):
    """``laplace``'s extras: also the log-weights of its Gaussian q, for PSIS."""

    def log_weights(self, key: PRNGKey, state, batch: PyTree, num_samples: int) -> Array:
        """(S,) log p(x, T(u_s)) + log |det dT/du| - log q(u_s), u_s ~ q on the unconstrained space, the params at
        their fitted values."""
        point = _inner(state).q_global
        q, _ = _checked_gaussian(point, self.target)
        _, _, log_p = _flat_objective(point, self.target, batch)
        u = expfam.reparam_sample(q, key, check_int("num_samples", num_samples))
        return jax.vmap(lambda x: log_p(x) - q.log_prob(x))(u)


def _sample(point: dict, key: PRNGKey, num: int, target: Target, is_laplace: bool) -> dict:
    """``num`` draws of the latent sites, constrained (the params' values: ``fitted_params``)."""
    if not is_laplace:
        values = target.constrain({n: point[n] for n in target.sites})
        return {n: jnp.broadcast_to(v, (num, *jnp.shape(v))) for n, v in values.items()}
    q, unravel = _gaussian(point, target)
    return jax.vmap(lambda x: target.constrain(unravel(x)))(q.sample(key, (num,)))
