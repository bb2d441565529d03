"""Black-box VI on any JAX log-density: a Monte Carlo ELBO ascended with an optax optimizer.

The user gives ``log_density(params, batch) -> scalar`` for a pytree ``params`` of any structure
(a hand-written log-joint, or one built on the apply function of a Flax / Equinox network) and a
variational family (``vijax.inference._guides``: Gaussian mean-field, full-rank or low-rank plus
diagonal on the unconstrained parameters with TFP bijectors, or a pytree of ``vijax.expfam``
families drawn by inversion). With z_s ~ q_lambda(z), s = 1..S, and
f(z) = log p(x, T(z)) + log |det dT/dz| (``_guides``), the estimators of the *Raise your ELBO*
tutorial and Blei, Kucukelbir and McAuliffe (2017, §5) are:

- ``"reparam"``: z_s = m + S eps_s; grad of (1/S) sum_s f(z_s) + H[q] (``entropy="analytic"``,
  the default) or of (1/S) sum_s [f(z_s) - log q(z_s)] (``entropy="mc"``);
- ``"stl"``: "sticking the landing" (Roeder, Wu and Duvenaud 2017): the Monte Carlo entropy with
  log q evaluated at stopped parameters, log q_{stop(lambda)}(z_s(lambda)), so that the score term
  whose expectation is zero is dropped and the gradient vanishes at an exact posterior;
- ``"score"``: the score-function (REINFORCE) gradient
  (1/S) sum_s (f_s - b_s) grad log q_lambda(z_s) with stopped draws and the leave-one-out control
  variate b_s = (1/(S-1)) sum_{r != s} f_r (unbiased; needs S >= 2), for a q without a
  reparameterized sampler; with ``entropy="analytic"`` f_s = f(z_s) and grad H[q] is added exactly,
  with ``entropy="mc"`` f_s = f(z_s) - log q(z_s);
- ``"iwae"``: the importance-weighted bound (Burda, Grosse and Salakhutdinov 2016)
  log (1/S) sum_s exp(f(z_s) - log q(z_s)) with reparameterized draws (S = K samples);
- ``"renyi"``: the variational Renyi bound of order ``alpha`` (Li and Turner 2016, *Renyi
  Divergence Variational Inference*, §3-4), L_alpha = log p(x) - D_alpha(q || p(. | x)), estimated
  with reparameterized draws as (1 / (1 - alpha)) log (1/S) sum_s w_s^(1 - alpha),
  log w_s = f(z_s) - log q(z_s): alpha = 0 is the ``"iwae"`` bound, alpha -> 1 the ELBO (taken
  exactly at alpha = 1 as (1/S) sum_s log w_s, the ``"reparam"`` estimator with
  ``entropy="mc"``), and alpha > 0 interpolates (``vr_bound``).

Given ``prior`` (a TFP distribution on the flat unconstrained vector for the Gaussian families with
identity bijectors, or a pytree of families of q's types for ``vijax.expfam`` q), ``log_density``
is the log-likelihood and the KL is analytic: ELBO = E_q[log p(x | z)] - KL(q || prior).

Minibatches: with ``num_data`` = N, ``log_density(params, batch)`` is the log-likelihood of the M
data points of ``batch`` (their sum), scaled by N / M, and ``log_prior(params)`` (or ``prior``) is
added once. Draws are made with ``vmap`` over S keys; ``step`` is pure, so it ``vmap``s over seeds.
A step whose ELBO estimate, gradient or new parameters are not finite is not applied: the state
keeps its parameters, ``info.accepted`` is False and ``state.num_rejected`` counts it.

``vijax.inference.elbo(alg, key, vparams, batch)`` is the objective ``step`` ascends as a plain
differentiable function, so that q can be one part of a larger model trained by the user's own ``jax.grad`` and
optax (a Bayesian last layer whose ``batch`` holds a network's features; docs/composition.md).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vijax._validate import (
    ArgumentError,
    batch_size,
    check_choice,
    check_int,
    check_key,
    check_scalar,
    check_shapes,
    is_tracer,
)
from vijax.interop import Target
from vijax.models import filter_jit
from vijax.inference._guides import make_guide
from vijax.inference._flows import draws, flow_guide, is_flow
from vijax.inference._optax_vi import resolve_optimizer
from vijax.inference._scale import check_num_data
from vijax.inference.base import Proposal, VIAlgorithm, bind_settings, checked_step
from vijax.inference._start_checks import (
    NUM_START_DRAWS,
    check_gradient_flows,
    check_some_finite,
    directional_probe,
    directions,
    host_rng,
)
from vijax.types import Array, PRNGKey, PyTree

ESTIMATORS = ("reparam", "stl", "score", "iwae", "renyi")
DEFAULT_ALPHA = 0.5  # the order of the Renyi bound when none is given (Li and Turner's experiments)


class BBVIState(NamedTuple):
    """q_global: the variational parameters (``vijax.inference.guide(alg)`` reads them); opt_state: optax's
    state; count: int32 steps taken; num_rejected: int32 steps not applied (non-finite)."""

    q_global: PyTree
    opt_state: PyTree
    count: Array
    num_rejected: Array


class BBVIInfo(NamedTuple):
    """elbo: the Monte Carlo ELBO estimate at the parameters before the step (the bound for
    ``"iwae"``); grad_norm: |g|; accepted: whether the step was applied."""

    elbo: Array
    grad_norm: Array
    accepted: Array


def log_joint(
    log_density: Callable, *, log_prior: Optional[Callable] = None, num_data: Optional[int] = None
) -> Callable:
    """``(params, batch) -> log p(batch, params)``: ``log_density`` (scaled by N / M when
    ``num_data`` = N is given, M the batch's leading size) plus ``log_prior(params)``.

    The result is checked at trace time: a non-scalar or non-float output raises ValueError, and
    so does a batch of more than ``num_data`` data points (M > N would weight each by N / M < 1).
    """

    def joint(params, batch):
        out = log_density(params, batch)
        if not hasattr(out, "shape") or jnp.shape(out) != () or not jnp.issubdtype(jnp.result_type(out), jnp.floating):
            raise ArgumentError(
                "log_density",
                f"log_density must return a float scalar, got {getattr(out, 'shape', type(out))} "
                f"{getattr(out, 'dtype', '')}",
            )
        if num_data is not None:
            check_num_data(num_data, None, batch)  # M > N would down-weight the likelihood (trace time)
            out = out * (num_data / batch_size(batch))
        if log_prior is not None:
            lp = log_prior(params)
            if jnp.shape(lp) != ():
                raise ArgumentError("log_prior", f"log_prior must return a scalar, got shape {jnp.shape(lp)}")
            out = out + lp
        return out

    return joint


# what a target carries itself, and why an algorithm given a target refuses the argument
_TARGET_OWNS = {
    "init_params": "its starting point (target.init_params)",
    "bijectors": "the model's own transforms (target.transform)",
    "num_data": "the model's own minibatch scaling (a subsampled plate scales by N / M)",
    "prior": "the model's prior, inside its log-joint",
    "log_prior": "the model's prior, inside its log-joint",
}


def check_target_arguments(**given: Any) -> None:
    """Raises ValueError naming the first argument of ``given`` that is not None: with a
    ``vijax.interop.Target`` in place of the log-density, the target carries it (``_TARGET_OWNS``)."""
    for name, value in given.items():
        if value is not None:
            raise ValueError(
                f"{name}: a target (vijax.from_numpyro, from_tfp) carries {_TARGET_OWNS[name]}; give no {name}"
            )


def _draws(guide, vparams, key, num_samples):
    return jax.vmap(guide.sample, (None, 0))(vparams, jax.random.split(key, num_samples))


def vr_bound(log_w: Array, alpha: float) -> Array:
    """The Monte Carlo variational Renyi bound (1 / (1 - alpha)) log (1/S) sum_s exp((1 - alpha)
    log_w_s) of (S,) log-weights (Li and Turner 2016, §4): the IWAE bound at alpha = 0, the mean of
    ``log_w`` at alpha = 1 (the limit). With c = 1 - alpha, x = c (log_w - mean) and m = max x, it
    is computed as mean(log_w) + (m + log1p(mean(expm1(x - m)))) / c, which keeps its precision
    as alpha -> 1 (a logsumexp loses the O(c) term to rounding) and never overflows."""
    if alpha == 0.0:
        return jax.scipy.special.logsumexp(log_w) - math.log(log_w.shape[0])
    mean = jnp.mean(log_w)
    if alpha == 1.0:
        return mean
    c = 1.0 - alpha
    x = c * (log_w - mean)
    m = jnp.max(x)
    return mean + (m + jnp.log1p(jnp.mean(jnp.expm1(x - m)))) / c


def _objective(vparams, batch, key, guide, joint, estimator, entropy, num_samples, prior, alpha=None):
    """(surrogate whose gradient is the estimator, ELBO estimate); the arguments after ``key`` are
    the keywords of ``elbo`` and ``step``, in their order."""
    z, logq = draws(guide, vparams, key, num_samples, estimator)  # with log q where a flow draws it in one pass
    if estimator == "score":
        z = jax.lax.stop_gradient(z)

    def f(zs):
        params, log_det = guide.constrain(zs)
        return joint(params, batch) + log_det

    logp = jax.vmap(f)(z)
    regular = prior is not None
    analytic = regular or (entropy == "analytic" and estimator in ("reparam", "score"))
    if regular:
        h = -guide.kl(vparams, prior)
    elif analytic:
        h = guide.entropy(vparams)
    if estimator == "stl":
        logq = jax.vmap(guide.log_prob, (None, 0))(jax.lax.stop_gradient(vparams), z)
    elif logq is None and (not analytic or estimator in ("score", "iwae", "renyi")):
        logq = jax.vmap(guide.log_prob, (None, 0))(vparams, z)
    if estimator in ("iwae", "renyi"):
        bound = vr_bound(logp - logq, 0.0 if estimator == "iwae" else alpha)
        return bound, bound
    if estimator == "score":
        fs = jax.lax.stop_gradient(logp if analytic else logp - logq)
        baseline = (jnp.sum(fs) - fs) / (num_samples - 1)
        # the last two terms cancel in value and (draws stopped) in vparams; they carry the
        # gradient in whatever ``batch`` depends on, which the stopped f_s would drop
        surrogate = jnp.mean((fs - baseline) * logq) + jnp.mean(logp) - jax.lax.stop_gradient(jnp.mean(logp))
        if analytic:
            return surrogate + h, jnp.mean(fs) + jax.lax.stop_gradient(h)
        return surrogate, jnp.mean(fs)
    elbo = jnp.mean(logp) + h if analytic else jnp.mean(logp - logq)
    return elbo, elbo


def elbo(
    vparams: PyTree,
    batch: PyTree,
    key: PRNGKey,
    *,
    guide,
    joint: Callable,
    estimator: str,
    entropy: str,
    num_samples: int,
    prior: Any = None,
    alpha: Optional[float] = None,
) -> Array:
    """The ELBO estimate of ``step`` as a differentiable scalar: its value is the Monte Carlo ELBO
    (the importance-weighted bound for ``"iwae"``, the Renyi bound for ``"renyi"``), its gradient in ``vparams`` the estimator,
    and its gradient in anything ``batch`` depends on the Monte Carlo estimate of that gradient
    at the same draws (the draws z_s = m + S eps_s depend on vparams and the key only).

    For the score-function estimator the value is stop(ELBO) + (surrogate - stop(surrogate)).
    """
    check_key("key", key)
    surrogate, value = _objective(vparams, batch, key, guide, joint, estimator, entropy, num_samples, prior, alpha)
    if estimator != "score":
        return surrogate
    return jax.lax.stop_gradient(value) + surrogate - jax.lax.stop_gradient(surrogate)


def _all_finite(tree) -> Array:
    leaves = jax.tree_util.tree_leaves(tree)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def init(
    key: PRNGKey,
    batch: PyTree = None,
    *,
    guide,
    optimizer: optax.GradientTransformation,
    joint: Optional[Callable] = None,
    log_density: Optional[Callable] = None,
    has_prior: bool = False,
) -> BBVIState:
    """q at the guide's start and the optimizer's state.

    With a ``batch`` (and ``joint``), the log-density is evaluated at q's centre and at a few draws
    of q; a non-finite value raises ValueError (a NaN-returning log-density, or a parameter whose
    bijector does not map to its support). With ``log_density`` (the estimators that differentiate
    it: all but ``"score"``), its gradient at those draws is checked too, by the derivative along a
    random direction (``directional_probe``, ``check_gradient_flows``; with ``batch`` None, where
    ``log_density`` accepts None, and there a log-density not finite at any of the draws raises
    ValueError: ``check_some_finite``).
    """
    check_key("key", key)
    vparams = guide.init()
    # checked on concrete values only: not under a caller's vmap (restarts) or jit
    concrete = not any(is_tracer(x) for x in jax.tree_util.tree_leaves((key, batch)))
    if concrete and joint is not None and (batch is not None or log_density is not None):
        _check_start(key, batch, guide, vparams, joint, log_density, has_prior)
    zero = jax.device_put(np.int32(0))  # no program to compile for a constant (jnp.asarray compiles one)
    return BBVIState(vparams, optimizer.init(vparams), zero, zero)


# compiled once per (guide, joint, log_density, shapes): a second init reuses it; it runs once
@functools.partial(filter_jit, setup=True)
def _probe(key, v, vparams, batch, guide, joint, log_density, at_mean: bool):
    """(the joint at q's centre where ``at_mean``, else None; at ``NUM_START_DRAWS`` draws of q
    (``_draws`` at ``key``, unconstrained) the joint's value and, where ``log_density`` is given,
    ``directional_probe``'s flags along the directions ``v``), in one program (op by op, each
    operation of the guide's sampler and map is a compilation of its own)."""
    z = _draws(guide, vparams, key, NUM_START_DRAWS)
    value = joint(guide.mean(vparams), batch) if at_mean else None
    if log_density is None:  # nothing is differentiated: the values only
        vals = jax.vmap(lambda zs: joint(guide.constrain(zs)[0], batch))(z)
        return value, (vals, None, None)
    on_z = lambda f: lambda zs, b: f(guide.constrain(zs)[0], b)  # noqa: E731
    return value, jax.vmap(directional_probe(on_z(joint), on_z(log_density), batch))(z, v)


def _check_start(key, batch, guide, vparams, joint, log_density, has_prior) -> None:
    if batch is None and log_density is None:
        return
    v = None
    if log_density is not None:  # a direction per draw, from the draws' shapes (no program)
        v = directions(host_rng(key), jax.eval_shape(lambda: _draws(guide, vparams, key, NUM_START_DRAWS)))
    if batch is None:  # a log-density that takes no data (one that needs a batch is not checked)
        try:
            _, (vals, joint_moves, lik_moves) = _probe(key, v, vparams, batch, guide, joint, log_density, False)
        except Exception:  # noqa: BLE001 - log_density does not accept batch=None
            return
        check_some_finite(vals, f"{NUM_START_DRAWS} draws of the initial q")
    else:
        at_mean, (vals, joint_moves, lik_moves) = _probe(key, v, vparams, batch, guide, joint, log_density, True)
        at_mean = float(at_mean)
        if not np.isfinite(at_mean):
            raise ArgumentError(
                "log_density", f"log_density is not finite ({at_mean}) at the initial parameters (q's centre)"
            )
        vals = np.asarray(vals)
        if not np.all(np.isfinite(vals)):
            raise ArgumentError(
                "log_density",
                f"log_density is not finite ({vals}) at draws of the initial q: does every constrained "
                "parameter have a bijector onto its support (bijectors=...)?",
            )
    if log_density is not None:
        check_gradient_flows(joint_moves, lik_moves, has_prior, f"{NUM_START_DRAWS} draws of the initial q")


@checked_step
def step(
    key: PRNGKey,
    state: BBVIState,
    batch: PyTree,
    *,
    guide,
    joint: Callable,
    optimizer: optax.GradientTransformation,
    estimator: str,
    entropy: str,
    num_samples: int,
    prior: Any = None,
    alpha: Optional[float] = None,
    model: Any = None,
    template: PyTree = None,
) -> tuple[BBVIState, BBVIInfo]:
    """One optimizer step on the Monte Carlo ELBO (see the module docstring). The batch is checked
    by ``model`` (``check_data`` / ``batch_checks``, as ``check_step_batch`` does) when it has them:
    the factory passes the model whose bound method ``log_density`` is, or ``log_density`` itself.
    ``state.q_global`` must have the structure and shapes of ``template`` (the guide's
    ``init()``, as ``jax.eval_shape`` gives it), else ValueError naming ``state.q_global``."""
    if template is not None:  # another bbvi's state (another family or parameters) fails here, not deep inside
        check_shapes("state.q_global", state.q_global, template, "this bbvi's variational parameters")
    (_, elbo), grads = jax.value_and_grad(_objective, has_aux=True)(
        state.q_global, batch, key, guide, joint, estimator, entropy, num_samples, prior, alpha
    )
    neg = jax.tree.map(jnp.negative, grads)
    updates, opt_state = optimizer.update(neg, state.opt_state, state.q_global)
    new = optax.apply_updates(state.q_global, updates)
    info = BBVIInfo(elbo, optax.tree.norm(grads), None)
    return Proposal(BBVIState(new, opt_state, state.count, state.num_rejected), info, (elbo, grads))


def as_top_level_api(
    log_density: Callable,
    *,
    family: Any = "meanfield",
    init_params: PyTree = None,
    bijectors: PyTree = None,
    optimizer: Union[str, optax.GradientTransformation] = "adam",
    schedule=None,
    num_data: Optional[int] = None,
    estimator: str = "reparam",
    entropy: str = "analytic",
    num_samples: int = 1,
    log_prior: Optional[Callable] = None,
    prior: Any = None,
    init_scale: float = 0.1,
    rank: int = 1,
    alpha: Optional[float] = None,
    **hyper: Any,
) -> VIAlgorithm:
    """Black-box VI on ``log_density`` (see the module docstring).

    Args:
      log_density: ``(params, batch) -> scalar``, jit-able; the log-joint (or, with ``num_data``
        or ``prior``, the log-likelihood of the batch). Or a ``vijax.interop.Target``
        (``vijax.from_numpyro``, ``vijax.from_tfp``): its ``log_prob``, with the Gaussian families
        on the target's unconstrained space through the model's own transforms (NumPyro's
        AutoNormal, AutoMultivariateNormal, AutoLowRankMultivariateNormal), started at
        ``target.init_params``; the parameters are then a dict keyed by site name, the batch the
        target's (None or a dict, see ``vijax.from_numpyro``), and ``init_params``, ``bijectors``,
        ``num_data``, ``prior`` and ``log_prior`` are refused (the target carries them).
      family: ``"meanfield"``, ``"fullrank"``, ``"lowrank"`` (Gaussians on the unconstrained
        parameters; need ``init_params``) or a pytree of ``vijax.expfam`` families (the initial q,
        one family per parameter leaf: Gamma, Beta, Dirichlet, Normal; for a target,
        ``vijax.inference.auto_family(target)``), or a flowjax distribution of shape (d,) over the
        flat unconstrained vector (a normalizing flow, ``vijax.inference._flows``: its trainable
        arrays are q's parameters; Monte Carlo entropy only, no ``prior``).
      init_params: the parameter pytree: its structure, shapes and q's initial centre.
      bijectors: None or a pytree like ``init_params`` of ``tfp.bijectors`` (unconstrained ->
        constrained) or None leaves (identity).
      optimizer: a name in ``OPTIMIZERS`` (hyperparameters in ``hyper``) or an
        ``optax.GradientTransformation``.
      schedule: the learning rate of a named optimizer (default: the optimizer's,
        ``DEFAULT_LEARNING_RATES``, 1e-3 for Adam).
      num_data: N for the N / M minibatch scaling of ``log_density`` (None: no scaling).
      estimator: one of ``ESTIMATORS``.
      entropy: ``"analytic"`` (closed-form H[q], default) or ``"mc"``; ``"stl"``, ``"iwae"`` and
        ``"renyi"`` are Monte Carlo by definition.
      num_samples: S >= 1 draws per step (K of the IWAE bound; S >= 2 for ``"score"``).
      log_prior: ``params -> scalar`` added once per step (with minibatches).
      prior: for an analytic KL (see the module docstring); excludes ``log_prior``.
      init_scale: q's initial standard deviation (Gaussian families).
      rank: the number of columns of the low-rank factor (``"lowrank"``).
      alpha: the order of the ``"renyi"`` bound, a finite alpha >= 0 (default ``DEFAULT_ALPHA``,
        0.5): 0 is the IWAE bound, 1 the ELBO; taken by ``estimator="renyi"`` only.

    Returns:
      ``VIAlgorithm(init, step)``: ``init(key, batch=None)``, ``step(key, state, batch)``. Its
      guide, draws, log-weights and differentiable ELBO are read by the module functions
      ``vijax.inference.guide(alg)``, ``sample(alg, key, state, num_samples)``,
      ``log_weights(alg, key, state, batch, num_samples)`` and
      ``elbo(alg, key, q_global, batch)``.

    Raises:
      ValueError: naming the argument: an unknown estimator or family, zero samples, mismatched
        pytrees, a template outside its bijector's support, ``prior`` with ``log_prior``, an
        argument a target carries itself.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> def log_density(params, batch):  # N(z | 1, 1) in two coordinates
        ...     return -0.5 * jnp.sum((params["z"] - 1.0) ** 2)
        >>> alg = bbvi(log_density, init_params={"z": jnp.zeros(2)}, schedule=0.05)
        >>> state = alg.init(jax.random.PRNGKey(0))
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(1), state, None)
        >>> bool(info.accepted)
        True
    """
    target = log_density if isinstance(log_density, Target) else None
    if target is not None:
        check_target_arguments(
            init_params=init_params, bijectors=bijectors, num_data=num_data, prior=prior, log_prior=log_prior
        )
        log_density = target.log_prob
    if not callable(log_density):
        raise ArgumentError(
            "log_density",
            f"log_density must be a function (params, batch) -> scalar, got {log_density!r}",
            value=log_density,
        )
    check_choice("estimator", estimator, ESTIMATORS)
    check_choice("entropy", entropy, ("analytic", "mc"))
    if estimator == "renyi":
        alpha = check_scalar("alpha", DEFAULT_ALPHA if alpha is None else alpha, low=0.0, include_low=True)
    elif alpha is not None:
        raise ArgumentError(
            "alpha", f"alpha: the order of the Renyi bound is taken by estimator='renyi' only, not {estimator!r}"
        )
    num_samples = check_int("num_samples", num_samples)
    if estimator == "score" and num_samples < 2:
        raise ArgumentError(
            "num_samples",
            "num_samples: the score-function estimator's leave-one-out control variate needs "
            f"num_samples >= 2, got {num_samples}",
            value=num_samples,
        )
    if num_data is not None:
        num_data = check_int("num_data", num_data)
    if prior is not None and log_prior is not None:
        raise ArgumentError("prior", "prior (an analytic KL) and log_prior are exclusive: give one")
    if prior is not None and estimator not in ("reparam", "score"):
        raise ArgumentError(
            "prior",
            f"prior: an analytic KL is taken by the 'reparam' and 'score' estimators; {estimator!r} "
            "needs the whole log-joint (give log_prior instead)",
        )
    optimizer = resolve_optimizer(optimizer, schedule, **hyper)
    if is_flow(family):  # a flowjax distribution on the flat unconstrained vector (``_flows``)
        guide = flow_guide(family, init_params, bijectors, target, estimator=estimator, entropy=entropy, prior=prior)
    elif target is None:
        guide = make_guide(family, init_params, bijectors=bijectors, init_scale=init_scale, rank=rank)
    elif isinstance(family, str):  # Gaussian on the unconstrained space, through the model's own map
        guide = make_guide(family, target.init_params, init_scale=init_scale, rank=rank, transform=target.transform)
    else:
        shapes = jax.eval_shape(target.constrain, target.init_params)  # shapes only: nothing to compile
        guide = make_guide(family, shapes, init_scale=init_scale, rank=rank)
    if prior is not None:
        jax.eval_shape(lambda: guide.kl(guide.init(), prior))  # structure / bijector checks now
    joint = log_joint(log_density, log_prior=log_prior, num_data=num_data)
    template = jax.eval_shape(guide.init)
    settings = dict(
        guide=guide,
        joint=joint,
        estimator=estimator,
        entropy=entropy,
        num_samples=num_samples,
        prior=prior,
        alpha=alpha,
        optimizer=optimizer,
    )
    has_prior = prior is not None or log_prior is not None
    return VIAlgorithm(
        init=bind_settings(
            init,
            guide=guide,
            optimizer=optimizer,
            joint=joint,
            log_density=None if estimator == "score" else log_density,  # score needs no gradient of it
            has_prior=has_prior,
        ),
        step=bind_settings(
            step,
            **settings,
            model=target if target is not None else getattr(log_density, "__self__", log_density),
            template=template,
        ),
    )


def sample(q_global: PyTree, key: PRNGKey, num_samples: int, *, guide) -> PyTree:
    """A pytree of parameter draws from q (constrained), with a leading axis of ``num_samples``."""
    z = _draws(guide, q_global, key, check_int("num_samples", num_samples))
    return jax.vmap(lambda zs: guide.constrain(zs)[0])(z)


def log_weights(q_global: PyTree, batch: PyTree, key: PRNGKey, num_samples: int, *, guide, joint) -> Array:
    """(S,) log p(x, z_s) - log q(z_s) for draws z_s ~ q in the unconstrained space (Jacobian
    included), for PSIS (``vijax.metrics.psis``)."""
    z = _draws(guide, q_global, key, check_int("num_samples", num_samples))

    def w(zs):
        params, log_det = guide.constrain(zs)
        return joint(params, batch) + log_det - guide.log_prob(q_global, zs)

    return jax.vmap(w)(z)


bbvi = as_top_level_api

__all__ = [
    "BBVIInfo",
    "BBVIState",
    "DEFAULT_ALPHA",
    "ESTIMATORS",
    "as_top_level_api",
    "bbvi",
    "elbo",
    "check_target_arguments",
    "init",
    "log_joint",
    "log_weights",
    "sample",
    "step",
    "vr_bound",
]
