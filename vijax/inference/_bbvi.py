"""Black-box VI on any JAX log-density ``(params, batch) -> scalar``: a Monte Carlo ELBO ascended with optax.
With z_s ~ q_lambda(z), s = 1..S, and f(z) = log p(x, T(z)) + log |det dT/dz|, the estimators (Blei,
Kucukelbir and McAuliffe 2017, §5) are:

- ``"reparam"``: z_s = m + S eps_s; grad of (1/S) sum_s f(z_s) + H[q] (``entropy="analytic"``)
  or of (1/S) sum_s [f(z_s) - log q(z_s)] (``entropy="mc"``);
- ``"stl"``: "sticking the landing" (Roeder, Wu and Duvenaud 2017): the Monte Carlo entropy with
  log q at stopped parameters, so the gradient vanishes at an exact posterior;
- ``"score"``: (1/S) sum_s (f_s - b_s) grad log q_lambda(z_s) with stopped draws and the
  leave-one-out baseline b_s = (1/(S-1)) sum_{r != s} f_r (S >= 2);
- ``"iwae"``: log (1/S) sum_s exp(f(z_s) - log q(z_s)) (Burda, Grosse and Salakhutdinov 2016);
- ``"renyi"``: the variational Renyi bound of order alpha (Li and Turner 2016, §3-4),
  (1 / (1 - alpha)) log (1/S) sum_s w_s^(1 - alpha), log w_s = f(z_s) - log q(z_s): alpha = 0 is
  ``"iwae"``, alpha = 1 the ELBO (``vr_bound``).

With ``prior`` the KL is analytic: ELBO = E_q[log p(x | z)] - KL(q || prior). With ``num_data`` = N
the log-likelihood of a batch of M is scaled by N / M and ``log_prior`` is added once.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any, Callable, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vijax._compile import host_rng, setup_jit
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
from vijax.inference._guides import FlowGuide, draws, is_flow, make_guide
from vijax.inference._optax_vi import ascend, resolve_optimizer
from vijax.inference._scale import check_num_data
from vijax.inference.base import (
    VIAlgorithm,
    check_no_options,
    bind_settings,
    reject_non_finite,
    safe_increment,
    validated_step,
)
from vijax.types import Array, PRNGKey, PyTree

ESTIMATORS = ("reparam", "stl", "score", "iwae", "renyi")
DEFAULT_ALPHA = 0.5  # the Renyi bound's default order (Li and Turner's experiments)


class BBVIState(NamedTuple):
    """q_global: the variational parameters of ``vijax.inference.guide(alg)``; opt_state; count."""

    q_global: PyTree
    opt_state: PyTree
    count: Array


class BBVIInfo(NamedTuple):
    """elbo: the Monte Carlo estimate of the objective before the step; grad_norm: |g|."""

    elbo: Array
    grad_norm: Array


def log_joint(
    log_density: Callable, *, log_prior: Optional[Callable] = None, num_data: Optional[int] = None
) -> Callable:
    """``(params, batch) -> log p(batch, params)``: ``log_density`` (times N / M with ``num_data``) plus
    ``log_prior(params)``; ValueError at trace time for a non-scalar output or over N data points."""

    def joint(params, batch):
        out = log_density(params, batch)
        if not hasattr(out, "shape") or jnp.shape(out) != () or not jnp.issubdtype(jnp.result_type(out), jnp.floating):
            raise ArgumentError(
                "log_density",
                f"log_density must return a float scalar, got {getattr(out, 'shape', type(out))} "
                f"{getattr(out, 'dtype', '')}",
            )
        if num_data is not None:
            check_num_data(num_data, None, batch)
            out = out * (num_data / batch_size(batch))
        if log_prior is not None:
            lp = log_prior(params)
            if jnp.shape(lp) != ():
                raise ArgumentError("log_prior", f"log_prior must return a scalar, got shape {jnp.shape(lp)}")
            out = out + lp
        return out

    return joint


_TARGET_OWNS = {
    "init_params": "its starting point (target.init_params)",
    "bijectors": "the model's own transforms (target.transform)",
    "num_data": "the model's own minibatch scaling (a subsampled plate scales by N / M)",
    "prior": "the model's prior, inside its log-joint",
    "log_prior": "the model's prior, inside its log-joint",
}


def check_target_arguments(**given: Any) -> None:
    """Raises ValueError naming the first argument of ``given`` that is not None (a target carries it)."""
    for name, value in given.items():
        if value is not None:
            raise ValueError(
                f"{name}: a target (vijax.from_numpyro, from_tfp) carries {_TARGET_OWNS[name]}; give no {name}"
            )


def vr_bound(log_w: Array, alpha: float) -> Array:
    """The variational Renyi bound (1 / (1 - alpha)) log (1/S) sum_s exp((1 - alpha) log_w_s) of (S,)
    log-weights (Li and Turner 2016, §4), computed as mean(log_w) + (m + log1p(mean(expm1(x - m)))) / c
    with c = 1 - alpha, x = c (log_w - mean), m = max x (precise as alpha -> 1)."""
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
    """(surrogate whose gradient is the estimator, ELBO estimate)."""
    z, logq = draws(guide, vparams, key, num_samples, estimator)
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
        # the last two terms cancel in value and in vparams; they carry the gradient in ``batch``
        surrogate = jnp.mean((fs - baseline) * logq) + jnp.mean(logp) - jax.lax.stop_gradient(jnp.mean(logp))
        if analytic:
            return surrogate + h, jnp.mean(fs) + jax.lax.stop_gradient(h)
        return surrogate, jnp.mean(fs)
    elbo = jnp.mean(logp) + h if analytic else jnp.mean(logp - logq)
    return elbo, elbo


def init(
    key: PRNGKey, batch: PyTree = None, *, guide, optimizer, joint=None, log_density=None, has_prior=False
) -> BBVIState:
    """q at the guide's start and the optimizer's state, after ``check_start``."""
    check_key("key", key)
    vparams = guide.init()
    check_start(key, batch, _guide_draws, (guide, vparams), _guide_mean, joint, log_density, has_prior, guide.constrain)
    return BBVIState(vparams, optimizer.init(vparams), jnp.zeros((), jnp.int32))


def _guide_draws(q, key):
    """``NUM_START_DRAWS`` draws of q = (guide, its parameters)."""
    return draws(*q, key, NUM_START_DRAWS)[0]


def _guide_mean(q):
    return q[0].mean(q[1])


NUM_START_DRAWS = 4  # the draws of the initial q at which init evaluates the log-density


@functools.partial(filter_jit, jit=setup_jit)
def _probe(key, v, q, batch, sample, mean_of, joint, log_density, has_prior, constrain):
    """The start checks' values in one program: the joint at ``mean_of(q)`` (or None), at each draw of q
    (``sample(q, key)``, or ``sample`` itself: the draws), and whether its and (with a prior)
    ``log_density``'s forward derivatives along ``v`` are nonzero there."""
    z = sample(q, key) if callable(sample) else sample
    value = None if mean_of is None else joint(mean_of(q), batch)
    on_z = (lambda f: f) if constrain is None else (lambda f: lambda zs, b: f(constrain(zs)[0], b))
    if log_density is None:
        return value, (jax.vmap(lambda zs: on_z(joint)(zs, batch))(z), None, None)

    def probe(zs, vs):
        value, d_joint = jax.jvp(lambda p: on_z(joint)(p, batch), (zs,), (vs,))
        d_lik = jax.jvp(lambda p: on_z(log_density)(p, batch), (zs,), (vs,))[1] if has_prior else d_joint
        return value, d_joint != 0, d_lik != 0

    return value, jax.vmap(probe)(z, v)


def check_start(key, batch, sample, q, mean_of, joint, log_density, has_prior: bool, constrain=None) -> None:
    """The start checks of ``bbvi`` and ``ngvi`` (for a concrete key and batch, a joint, and a batch or
    ``log_density``): ValueError where the joint is not finite at q's mean (``mean_of(q)``), at some draw
    with a batch, or at every draw, or where its gradient along a random direction is zero at every draw
    (the mean would never move); a warning where only a prior's is not."""
    traced = any(is_tracer(x) for x in jax.tree_util.tree_leaves((key, batch)))
    if traced or joint is None or (batch is None and log_density is None):
        return
    mean_of, v = None if batch is None else mean_of, None
    if log_density is not None:
        rng = host_rng(key)
        z = jax.eval_shape(lambda k: sample(q, k), key) if callable(sample) else sample
        v = jax.tree_util.tree_map(lambda x: rng.standard_normal(x.shape).astype(x.dtype), z)
    try:
        at_mean, (values, joint_moves, lik_moves) = _probe(
            key, v, q, batch, sample, mean_of, joint, log_density, has_prior, constrain
        )
    except Exception:  # noqa: BLE001 - log_density does not accept batch=None
        if batch is not None:
            raise
        return
    if at_mean is not None and not np.isfinite(float(at_mean)):
        raise ArgumentError("log_density", f"log_density is not finite ({float(at_mean)}) at the mean of the initial q")
    where = f"{NUM_START_DRAWS} draws of the initial q"
    values = np.asarray(values)
    if values.size and not np.any(np.isfinite(values)):
        raise ArgumentError(
            "log_density",
            f"log_density is not finite at any of the {where} ({values}): a NaN or an infinite value in the "
            "data, or a start outside the parameters' support?",
        )
    if batch is not None and constrain is not None and not np.all(np.isfinite(values)):
        raise ArgumentError(
            "log_density",
            f"log_density is not finite ({values}) at draws of the initial q: does every constrained "
            "parameter have a bijector onto its support (bijectors=...)?",
        )
    if log_density is None:
        return
    if not np.any(np.asarray(joint_moves)):
        raise ValueError(
            f"log_density: its gradient with respect to the parameters is exactly zero at {where}: it is "
            "not differentiable (jnp.round, jnp.floor, lax.stop_gradient, a comparison...) or does not "
            "depend on the parameters, so the ELBO's only gradient would be q's entropy (the mean never "
            "moves, the scale grows without bound)"
        )
    if has_prior and not np.any(np.asarray(lik_moves)):
        warnings.warn(
            f"log_density: its gradient with respect to the parameters is exactly zero at {where}; only "
            "the prior moves q, and the fit will return the prior. A log-density that is not "
            "differentiable (jnp.round, jnp.floor, lax.stop_gradient...) is ignored this way.",
            UserWarning,
            stacklevel=3,
        )


@validated_step
def step(
    key: PRNGKey,
    state: BBVIState,
    batch: PyTree,
    *,
    model: Any,
    guide,
    joint: Callable,
    optimizer: optax.GradientTransformation,
    estimator: str,
    entropy: str,
    num_samples: int,
    prior: Any = None,
    alpha: Optional[float] = None,
    template: PyTree = None,
) -> tuple[BBVIState, BBVIInfo]:
    """One optimizer step on the Monte Carlo ELBO; ``state.q_global`` must be shaped as ``template``."""
    if template is not None:
        check_shapes("state.q_global", state.q_global, template, "this bbvi's variational parameters")
    (_, elbo), grads = jax.value_and_grad(_objective, has_aux=True)(
        state.q_global, batch, key, guide, joint, estimator, entropy, num_samples, prior, alpha
    )
    new, opt_state = ascend(optimizer, grads, state.opt_state, state.q_global)
    return BBVIState(new, opt_state, safe_increment(state.count)), BBVIInfo(elbo, optax.tree.norm(grads))


def as_top_level_api(
    log_density: Union[Callable, Target],
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
      log_density: the log-joint ``(params, batch) -> scalar`` (with ``num_data`` or ``prior``, the
        log-likelihood), or a ``vijax.interop.Target`` (carrying its transforms, start, scaling and prior).
      family: ``"meanfield"``, ``"fullrank"``, ``"lowrank"`` (Gaussians on the unconstrained parameters), a
        pytree of ``vijax.expfam`` families, or a flowjax distribution of shape (d,) (Monte Carlo entropy).
      init_params: the parameter pytree: its structure, shapes and q's initial centre.
      bijectors: a pytree like ``init_params`` of ``tfp.bijectors`` (unconstrained -> constrained) or None.
      optimizer: a name in ``OPTIMIZERS`` (hyperparameters in ``hyper``) or an ``optax.GradientTransformation``.
      schedule: the learning rate of a named optimizer (default ``DEFAULT_LEARNING_RATES``).
      num_data: N for the N / M minibatch scaling of ``log_density`` (None: no scaling).
      estimator: one of ``ESTIMATORS``.
      entropy: ``"analytic"`` (default) or ``"mc"``; ``"stl"``, ``"iwae"``, ``"renyi"`` are Monte Carlo.
      num_samples: S >= 1 draws per step (S >= 2 for ``"score"``).
      log_prior: ``params -> scalar`` added once per step.
      prior: for an analytic KL (``"reparam"``, ``"score"``); excludes ``log_prior``.
      init_scale: q's initial standard deviation (Gaussian families).
      rank: the number of columns of the low-rank factor (``"lowrank"``).
      alpha: the order of the ``"renyi"`` bound, alpha >= 0 (default ``DEFAULT_ALPHA``).

    Returns:
      The ``VIAlgorithm``, read by ``vijax.inference.guide``, ``sample``, ``log_weights`` and ``elbo``.

    Raises:
      ValueError: naming the argument: a bad setting or pytree, ``prior`` with ``log_prior``, one a target carries.

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
        target.check_global("bbvi")
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
    if is_flow(family):  # its prior is refused by guide.kl below
        if entropy == "analytic" and estimator in ("reparam", "score"):
            raise ArgumentError(
                "entropy",
                f"entropy: a flow has no closed-form entropy; give entropy='mc' (estimator={estimator!r}), "
                "or estimator='stl', 'iwae' or 'renyi'",
            )
        if target is not None:
            guide = FlowGuide(family, target.init_params, transform=target.transform)
        elif init_params is None:
            raise ArgumentError(
                "init_params", "init_params: a flow family needs the parameter pytree (its structure and shapes)"
            )
        else:
            guide = FlowGuide(family, init_params, bijectors=bijectors)
    elif target is None:
        guide = make_guide(family, init_params, bijectors=bijectors, init_scale=init_scale, rank=rank)
    elif isinstance(family, str):
        guide = make_guide(family, target.init_params, init_scale=init_scale, rank=rank, transform=target.transform)
    else:
        shapes = jax.eval_shape(target.constrain, target.init_params)
        guide = make_guide(family, shapes, init_scale=init_scale, rank=rank)
    if prior is not None:
        jax.eval_shape(lambda: guide.kl(guide.init(), prior))
    joint = log_joint(log_density, log_prior=log_prior, num_data=num_data)
    settings = dict(guide=guide, joint=joint, estimator=estimator, entropy=entropy, num_samples=num_samples)
    settings.update(prior=prior, alpha=alpha)
    probed = None if estimator == "score" else log_density  # score needs no gradient of it
    has_prior = prior is not None or log_prior is not None
    init_fn = bind_settings(
        init, guide=guide, optimizer=optimizer, joint=joint, log_density=probed, has_prior=has_prior
    )
    model = target if target is not None else log_density
    step_fn = bind_settings(step, **settings, optimizer=optimizer, model=model, template=jax.eval_shape(guide.init))
    return reject_non_finite(VIAlgorithm(init_fn, step_fn, BBVIExtras(settings)))


@filter_jit
def _sample(q_global: PyTree, key: PRNGKey, num_samples: int, guide) -> PyTree:
    z = draws(guide, q_global, key, check_int("num_samples", num_samples))[0]
    return jax.vmap(lambda zs: guide.constrain(zs)[0])(z)


@filter_jit
def _log_weights(q_global: PyTree, batch: PyTree, key: PRNGKey, num_samples: int, guide, joint) -> Array:
    def w(zs):
        params, log_det = guide.constrain(zs)
        return joint(params, batch) + log_det - guide.log_prob(q_global, zs)

    return jax.vmap(w)(draws(guide, q_global, key, check_int("num_samples", num_samples))[0])


class BBVIExtras:
    """``bbvi``'s ``VIAlgorithm.extras``: its guide, draws of q, their log-weights and the objective."""

    def __init__(self, settings: dict):
        self.settings = settings
        self.guide = settings["guide"]

    def sample(self, key: PRNGKey, state, num_samples: int) -> PyTree:
        """Constrained parameter draws from q, stacked on a leading axis."""
        return _sample(state.q_global, key, num_samples, self.guide)

    def log_weights(self, key: PRNGKey, state, batch: PyTree, num_samples: int) -> Array:
        """(S,) log p(x, z_s) - log q(z_s), z_s ~ q unconstrained (the Jacobian included)."""
        return _log_weights(state.q_global, batch, key, num_samples, self.guide, self.settings["joint"])

    def elbo(self, key: PRNGKey, q_global: PyTree, batch: PyTree, **options: Any) -> Array:
        """``step``'s objective as a differentiable scalar: the Monte Carlo estimate, its gradient in
        ``q_global`` the estimator (for ``"score"``: stop(ELBO) + surrogate - stop(surrogate))."""
        check_no_options(options, "bbvi")
        check_key("key", key)
        s = self.settings
        surrogate, value = _objective(q_global, batch, key, **s)
        if s["estimator"] != "score":
            return surrogate
        return jax.lax.stop_gradient(value) + surrogate - jax.lax.stop_gradient(surrogate)


bbvi = as_top_level_api
