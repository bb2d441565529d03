"""Empirical Bayes for a target's ``numpyro.param`` sites: the params theta maximize the ELBO with q.

    L(q, theta) = E_q[log p(x, z; theta)] + H[q],    grad_theta L = E_q[grad_theta log p(x, z; theta)]

(the entropy does not depend on theta). One step is one step of the algorithm on q at the current theta
(given to the target through the batch, under the params' names), then one optax step on theta's unconstrained
values along the gradient at S draws of the new q: variational EM with a partial M-step (Blei, Kucukelbir and
McAuliffe 2017, §4.3's empirical Bayes; NumPyro's SVI maximizes params and guide together the same way).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, Union

import jax
import jax.numpy as jnp
import optax

from vijax._validate import ArgumentError, check_int, implements
from vijax.interop import Target
from vijax.inference._extras import SamplesQ, log_weights
from vijax.inference._optax_vi import ascend, resolve_optimizer
from vijax.inference.base import GuardedState, VIAlgorithm, bind_settings, reject_non_finite, safe_increment
from vijax.types import Array, PRNGKey, PyTree


class EmpiricalBayesState(NamedTuple):
    """inner: the algorithm's state; params: theta's unconstrained values by name; opt_state: optax's; count."""

    inner: PyTree
    params: dict
    opt_state: PyTree
    count: Array

    @property
    def q_global(self) -> PyTree:
        """The algorithm's q."""
        return self.inner.q_global


class EmpiricalBayesInfo(NamedTuple):
    """elbo: the algorithm's estimate at theta before the step; inner: its info; grad_norm: |grad_theta L|."""

    elbo: Array
    inner: Any
    grad_norm: Array


def _given(target: Target, params_u: dict, batch: PyTree) -> PyTree:
    """``batch`` with the params' constrained values under their names."""
    return {**(batch or {}), **target.constrain(params_u)}


def init(key: PRNGKey, batch: PyTree = None, *, target: Target, alg: VIAlgorithm, optimizer) -> EmpiricalBayesState:
    """The algorithm's start at the params' starts (their ``init_value``)."""
    params = dict(target.param_init)
    inner = alg.init(key, _given(target, params, batch))
    return EmpiricalBayesState(inner, params, optimizer.init(params), jnp.zeros((), jnp.int32))


def step(
    key: PRNGKey, state: EmpiricalBayesState, batch: PyTree, *, target: Target, alg, optimizer, num_draws: int
) -> tuple[EmpiricalBayesState, EmpiricalBayesInfo]:
    """One step of the algorithm at theta, then one of theta at S draws of the new q (module docstring)."""
    k_inner, k_draws = jax.random.split(key)
    inner, inner_info = alg.step(k_inner, state.inner, _given(target, state.params, batch))
    z = alg.extras.sample(k_draws, inner, num_draws)

    def expected_log_joint(params_u):
        given = _given(target, params_u, batch)
        return jnp.mean(jax.vmap(lambda zs: target.log_prob(zs, given))(z))

    grads = jax.grad(expected_log_joint)(state.params)
    params, opt_state = ascend(optimizer, grads, state.opt_state, state.params)
    info = EmpiricalBayesInfo(inner_info.elbo, inner_info, optax.tree.norm(grads))
    return EmpiricalBayesState(inner, params, opt_state, safe_increment(state.count)), info


def empirical_bayes(
    alg: VIAlgorithm,
    target: Target,
    *,
    optimizer: Union[str, optax.GradientTransformation] = "adam",
    schedule=None,
    num_draws: int = 8,
    **hyper: Any,
) -> VIAlgorithm:
    """``alg`` on ``target`` with the target's ``numpyro.param`` sites fitted by maximizing the ELBO (module
    docstring).

    Args:
      alg: an algorithm on ``target`` that draws from its q (``bbvi``, ``ngvi``, ``conjugate_split``).
      target: the target ``alg`` was built on, with ``target.params``.
      optimizer: theta's optimizer: a name in ``OPTIMIZERS`` or an optax transformation (ascending L).
      schedule: its learning rate (a number or an optax schedule).
      num_draws: S, draws of q per step for theta's gradient (>= 1).
      **hyper: a named optimizer's hyperparameters.

    Returns:
      The ``VIAlgorithm`` (:class:`EmpiricalBayesState`, :class:`EmpiricalBayesInfo`); ``vijax.inference.sample``
      gives ``alg``'s draws, ``fitted_params(alg, state)`` the params' constrained values.

    Raises:
      ArgumentError: naming ``alg`` (it does not draw from q), ``target`` (not a target, or without params),
        ``num_draws``, ``optimizer`` or a hyperparameter.

    Examples:
        >>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> from numpyro.distributions import constraints
        >>> import vijax
        >>> from vijax.inference import bbvi
        >>> def model(y):
        ...     s = numpyro.param("s", 1.0, constraint=constraints.positive)  # the prior's scale
        ...     mu = numpyro.sample("mu", dist.Normal(jnp.zeros(4), s).to_event(1))
        ...     numpyro.sample("y", dist.Normal(mu, 1.0).to_event(1), obs=y)
        >>> target = vijax.from_numpyro(model, jnp.array([2.0, -1.5, 3.0, 0.5]))
        >>> alg = empirical_bayes(bbvi(target, schedule=0.05), target, schedule=0.05)
        >>> state = alg.init(jax.random.PRNGKey(0))
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(1), state, None)
        >>> sorted(fitted_params(alg, state))
        ['s']
    """
    if not isinstance(target, Target):
        raise ArgumentError("target", f"target must be a target (vijax.from_numpyro), got {type(target).__name__}")
    target.check_global("empirical_bayes")
    if not target.params:
        raise ArgumentError(
            "target", "target: the model has no numpyro.param to fit; run the algorithm itself (no empirical_bayes)"
        )
    if not isinstance(alg, VIAlgorithm) or not implements(alg.extras, SamplesQ):
        raise ArgumentError(
            "alg",
            f"alg: empirical_bayes needs an algorithm that draws from q (bbvi, ngvi...), got {type(alg).__name__}",
        )
    num_draws = check_int("num_draws", num_draws)
    optimizer = resolve_optimizer(optimizer, schedule, **hyper)
    settings = dict(target=target, alg=alg, optimizer=optimizer)
    init_fn = bind_settings(init, **settings)
    step_fn = bind_settings(step, **settings, num_draws=num_draws)
    return reject_non_finite(VIAlgorithm(init_fn, step_fn, _EmpiricalBayesExtras(target, alg)))


class FitsParams(Protocol):
    def fitted_params(self, state: PyTree) -> dict: ...


def fitted_params(alg: VIAlgorithm, state: PyTree) -> dict:
    """The constrained values of the target's params at ``state`` of ``empirical_bayes``, ``map_estimate`` or
    ``laplace``, by name: the ``batch`` that runs the model at them (``vijax.predictive(target, draws, key,
    batch=fitted_params(alg, state))``)."""
    extras = alg.extras if isinstance(alg, VIAlgorithm) else None
    if not implements(extras, FitsParams):
        raise ArgumentError(
            "alg", f"alg: fitted_params takes empirical_bayes, map_estimate or laplace, got {type(alg).__name__}"
        )
    return extras.fitted_params(state)


def _own(state: PyTree) -> EmpiricalBayesState:
    """The state without ``reject_non_finite``'s wrapper (whose ``inner`` is this state)."""
    return state.inner if isinstance(state, GuardedState) else state


class _EmpiricalBayesExtras:
    """``empirical_bayes``'s ``VIAlgorithm.extras``: ``alg``'s draws, the params' values."""

    def __init__(self, target: Target, alg: VIAlgorithm):
        self.target, self.alg = target, alg

    def sample(self, key: PRNGKey, state, num_samples: int) -> dict:
        return self.alg.extras.sample(key, _own(state).inner, num_samples)

    def log_weights(self, key: PRNGKey, state, batch: PyTree, num_samples: int) -> Array:
        """``alg``'s log-weights at the params' fitted values."""
        own = _own(state)
        return log_weights(self.alg, key, own.inner, _given(self.target, own.params, batch), num_samples)

    def inner_state(self, state) -> PyTree:
        """``alg``'s state within ``state``."""
        return _own(state).inner

    def fitted_params(self, state) -> dict:
        return self.target.constrain(_own(state).params)
