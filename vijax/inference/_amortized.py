"""Amortized VI for a target's local latent sites (Kingma and Welling 2014, "Auto-Encoding Variational Bayes",
§2.3-2.4). A NumPyro model whose subsampled plate holds continuous latent sites z_i (``Target.locals``) has one z_i
per data point; instead of a q per point, an encoder maps the point's observed values x_i to

    q_phi(z_i | x_i) = N(mu_phi(x_i), diag(sigma_phi(x_i)^2))

on the local sites' unconstrained space, and the global sites beta have a Gaussian q_lambda(beta) on theirs (as
``bbvi``). With the target's log-density log p~ (its minibatch of M of N points scaled by N / M, Jacobians included),
S draws (beta_s, z_s) of q and a minibatch B, the estimate ascended is

    L(lambda, phi) = (1/S) sum_s log p~(x_B, beta_s, z_Bs) + H[q_lambda(beta)] + (N/M) sum_{i in B} H[q_phi(z_i | x_i)],

unbiased for the ELBO of q(beta) prod_i q_phi(z_i | x_i) (the entropies in closed form).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
import optax

from vijax._validate import ArgumentError, check_int, check_key, check_scalar, require
from vijax.interop import Target
from vijax.models import Network, check_network, filter_jit, from_equinox, mlp
from vijax.inference._guides import KINDS, GaussianGuide
from vijax.inference._optax_vi import ascend, resolve_optimizer
from vijax.inference.base import VIAlgorithm, check_no_options, guarded_algorithm, safe_increment, validated_step
from vijax.types import Array, PRNGKey, PyTree

_HALF_LOG_2PI_E = 0.5 * (math.log(2.0 * math.pi) + 1.0)


class AmortizedState(NamedTuple):
    """q_global: ``{"globals": q(beta)'s Gaussian parameters ({} without global sites), "encoders": {plate: phi}}``;
    opt_state; count."""

    q_global: PyTree
    opt_state: PyTree
    count: Array


class AmortizedInfo(NamedTuple):
    """elbo: the minibatch estimate L (module docstring, scaled to N) before the step."""

    elbo: Array


class _Plate(NamedTuple):
    """A subsampled plate's local sites: their names and per-point unconstrained shapes, its encoder's ``apply``
    and start (``key -> phi``), and its size N."""

    names: tuple
    shapes: tuple
    apply: Any
    start: Any
    size: int

    @property
    def dim(self) -> int:
        return sum(math.prod(s) for s in self.shapes)


def local_q(plates: dict, encoders: PyTree, inputs: dict) -> dict:
    """plate -> (loc, scale), each (M, d): q_phi(z_i | x_i) at each point's inputs (the encoder's (mean, log sd))."""
    out = {}
    for p, plate in plates.items():
        h = jax.vmap(lambda x, p=p, plate=plate: plate.apply(encoders[p], x))(inputs[p])
        out[p] = h[:, : plate.dim], jnp.exp(h[:, plate.dim :])
    return out


def _site_values(plates: dict, flat: dict) -> dict:
    """site -> (M, *shape): each plate's (M, d) values cut into its sites."""
    out = {}
    for p, plate in plates.items():
        start = 0
        for name, shape in zip(plate.names, plate.shapes):
            size = math.prod(shape)
            out[name] = flat[p][:, start : start + size].reshape((flat[p].shape[0],) + shape)
            start += size
    return out


def _objective(q: PyTree, batch: PyTree, key: PRNGKey, *, target, guide, plates, num_samples) -> Array:
    """L of the module docstring."""
    qz = local_q(plates, q["encoders"], target.local_inputs(batch))

    def one(k):
        k_beta, *k_z = jax.random.split(k, 1 + len(plates))
        u = guide.constrain(guide.sample(q["globals"], k_beta))[0] if guide is not None else {}
        z = {
            p: loc + scale * jax.random.normal(kp, loc.shape, loc.dtype)
            for kp, (p, (loc, scale)) in zip(k_z, qz.items())
        }
        return target.log_density({**u, **_site_values(plates, z)}, batch)

    log_p = jnp.mean(jax.vmap(one)(jax.random.split(key, num_samples)))
    h = guide.entropy(q["globals"]) if guide is not None else 0.0
    for p, (_, scale) in qz.items():  # N / M, M the batch's indices, as NumPyro scales the plate's sites
        h = h + plates[p].size / scale.shape[0] * (jnp.sum(jnp.log(scale)) + scale.size * _HALF_LOG_2PI_E)
    return log_p + h


def init(key: PRNGKey, batch: PyTree = None, *, model, guide, plates, optimizer) -> AmortizedState:
    """q(beta) at the target's start (sd ``init_scale``), each encoder's parameters and the optimizer's state."""
    check_key("key", key)
    if batch is not None:
        model.check_data(batch)
    keys = jax.random.split(key, len(plates))
    q = {
        "globals": guide.init() if guide is not None else {},
        "encoders": {p: plate.start(k) for k, (p, plate) in zip(keys, plates.items())},
    }
    return AmortizedState(q, optimizer.init(q), jnp.zeros((), jnp.int32))


@validated_step
def step(
    key: PRNGKey, state: AmortizedState, batch: PyTree, *, model, guide, plates, optimizer, num_samples: int
) -> tuple[AmortizedState, AmortizedInfo]:
    """One optimizer step on L (module docstring), its draws the value's and the gradient's."""
    settings = dict(target=model, guide=guide, plates=plates, num_samples=num_samples)
    elbo, grads = jax.value_and_grad(_objective)(state.q_global, batch, key, **settings)
    new, opt_state = ascend(optimizer, grads, state.opt_state, state.q_global)
    return AmortizedState(new, opt_state, safe_increment(state.count)), AmortizedInfo(elbo)


def _network(encoder: Any, name: str) -> Network:
    """``encoder`` as a :class:`~vijax.models.Network`: itself, or an Equinox module's."""
    if isinstance(encoder, Network):
        return encoder
    eqx = require("equinox", "nn", f"{name} (an Equinox module)")
    if not isinstance(encoder, eqx.Module):
        raise ArgumentError(
            name,
            f"{name} must be None, a vijax.models.Network (mlp, from_equinox), an Equinox module or a dict of "
            f"them by plate name, got {type(encoder).__name__}",
        )
    return from_equinox(encoder)


def _plates(target: Target, encoder: Any, width: int) -> dict:
    """plate -> :class:`_Plate` of the target's local sites, the encoders checked against their inputs."""
    by_plate: dict = {}
    for name, (site, plate) in target.locals.items():
        by_plate.setdefault(plate, []).append((name, tuple(site.unconstrained_shape[1:])))
    example = {p: jnp.zeros((m,), jnp.int32) for p, (_, m) in target.plates.items()}
    widths = {p: x.shape[1] for p, x in jax.eval_shape(target.local_inputs, example).items()}
    given = encoder if isinstance(encoder, dict) else {p: encoder for p in by_plate}
    for p in given:
        if p not in by_plate:
            raise ArgumentError(
                "encoder",
                f"encoder[{p!r}]: no subsampled plate {p!r} holds a local site; "
                f"the plates with local sites are {sorted(by_plate)}",
            )
    out = {}
    for p, sites in by_plate.items():
        d_in, d = widths[p], sum(math.prod(s) for _, s in sites)
        if d_in == 0:
            raise ArgumentError(
                "target",
                f"plate {p!r}: no observed site inside it for the encoder of its local site {sites[0][0]!r} to read",
            )
        name = "encoder" if not isinstance(encoder, dict) else f"encoder[{p!r}]"
        if given.get(p) is None:  # the key only shapes throwaway weights: init draws them from its own key
            net = mlp(jax.random.PRNGKey(0), (d_in, width, 2 * d))
            start = lambda k, sizes=(d_in, width, 2 * d): mlp(k, sizes).params  # noqa: E731
        else:
            net = _network(given[p], name)
            check_network(net, jnp.zeros((d_in,), jnp.result_type(float)), (2 * d,), name)
            start = lambda k, params=net.params: params  # noqa: E731
        names, shapes = zip(*sites)
        out[p] = _Plate(names, shapes, net.apply, start, target.plates[p][0])
    return out


def as_top_level_api(
    target: Target,
    *,
    num_data: Optional[int] = None,
    schedule=None,
    encoder: Any = None,
    family: str = "meanfield",
    optimizer: Union[str, optax.GradientTransformation] = "adam",
    num_samples: int = 1,
    init_scale: float = 0.1,
    width: int = 32,
    **hyper: Any,
) -> VIAlgorithm:
    """Amortized VI for a target with local latent sites (module docstring).

    The encoder of a plate reads one data point's row of ``target.local_inputs(batch)``: the observed sites inside
    the plate at the point's index, each flattened, side by side in model order (covariates passed as model arguments
    are not read). It returns (mean, log sd), 2d numbers for the plate's d unconstrained local coordinates.

    Args:
      target: a ``vijax.from_numpyro`` target with local sites (``target.locals``).
      num_data: None (the target scales its minibatches by its plates' N / M itself).
      schedule: the learning rate of a named optimizer (default ``DEFAULT_LEARNING_RATES``).
      encoder: None (an MLP D -> ``width`` -> 2d, tanh, its weights drawn by ``init``), a ``vijax.models.Network``
        (``mlp``, ``from_equinox``) or an Equinox module mapping a (D,) row to (2d,), or a dict of them by plate.
      family: q(beta)'s Gaussian: ``"meanfield"``, ``"fullrank"`` or ``"lowrank"`` (``bbvi``'s).
      optimizer: a name in ``OPTIMIZERS`` (hyperparameters in ``hyper``) or an ``optax.GradientTransformation``.
      num_samples: S >= 1 draws of (beta, z) per step.
      init_scale: q(beta)'s initial sd.
      width: the default encoder's hidden width.

    Returns:
      The ``VIAlgorithm``; ``vijax.inference.sample`` draws the global sites (constrained), ``vijax.inference.elbo``
      gives L at any ``q_global``, and ``alg.extras.local_q(state, batch)`` each local site's q(z_i | x_i).

    Raises:
      ValueError: naming the argument: a target without local sites, a plate with no observed site, a bad
        ``encoder`` (its output shape), ``family`` or setting.

    Examples:
        >>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> import vijax
        >>> from vijax.inference import amortized
        >>> def model(x):
        ...     mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        ...     with numpyro.plate("data", 6, subsample_size=3) as idx:
        ...         z = numpyro.sample("z", dist.Normal(0.0, 1.0))
        ...         numpyro.sample("x", dist.Normal(mu + z, 1.0), obs=x[idx])
        >>> target = vijax.from_numpyro(model, jnp.arange(6.0))
        >>> list(target.sites), list(target.locals)
        (['mu'], ['z'])
        >>> alg = amortized(target, schedule=0.01)  # step: alg.step(key, state, {"data": three indices})
        >>> [layer["w"].shape for layer in alg.init(jax.random.PRNGKey(0)).q_global["encoders"]["data"]]
        [(1, 32), (32, 2)]
    """
    if not isinstance(target, Target) or not target.locals:
        raise ArgumentError(
            "target",
            "target: amortized fits a target with local latent sites (vijax.from_numpyro of a model with a "
            f"latent site inside a subsampled plate); got {type(target).__name__}"
            + (" without local sites (use bbvi or ngvi)" if isinstance(target, Target) else ""),
        )
    if num_data is not None:
        raise ArgumentError("num_data", "num_data: a target scales by its own plates' N / M; give no num_data")
    if family not in KINDS:
        raise ArgumentError("family", f"family must be one of {KINDS} (q of the global sites), got {family!r}")
    num_samples = check_int("num_samples", num_samples)
    init_scale = check_scalar("init_scale", init_scale, low=0.0)
    width = check_int("width", width)
    optimizer = resolve_optimizer(optimizer, schedule, **hyper)
    guide = GaussianGuide(target.init_params, family, init_scale=init_scale) if target.sites else None
    plates = _plates(target, encoder, width)
    settings = dict(model=target, guide=guide, plates=plates, optimizer=optimizer, num_samples=num_samples)
    return guarded_algorithm(
        init, step, ("model", "guide", "plates", "optimizer"), AmortizedExtras(settings), **settings
    )


@filter_jit
def _sample(q_global: PyTree, key: PRNGKey, num_samples: int, guide, target) -> dict:
    if guide is None:
        return {}
    u = jax.vmap(lambda k: guide.constrain(guide.sample(q_global["globals"], k))[0])(jax.random.split(key, num_samples))
    return jax.vmap(target.constrain)(u)


@filter_jit
def _local_q(q_global: PyTree, batch: PyTree, plates, target) -> dict:
    qz = local_q(plates, q_global["encoders"], target.local_inputs(batch))
    locs = _site_values(plates, {p: loc for p, (loc, _) in qz.items()})
    scales = _site_values(plates, {p: scale for p, (_, scale) in qz.items()})
    return {n: (locs[n], scales[n]) for n in locs}


class AmortizedExtras:
    """``amortized``'s ``VIAlgorithm.extras``: draws of q(beta), L and the encoders' q(z_i | x_i)."""

    def __init__(self, settings: dict):
        self.settings = settings

    def sample(self, key: PRNGKey, state, num_samples: int) -> dict:
        """Draws of the global sites from q(beta), constrained, by site name on a leading axis (no local site)."""
        check_key("key", key)
        s = self.settings
        return _sample(state.q_global, key, check_int("num_samples", num_samples), s["guide"], s["model"])

    def elbo(self, key: PRNGKey, q_global: PyTree, batch: PyTree, **options: Any) -> Array:
        """L at ``q_global`` on ``batch`` (differentiable; the step's objective); no options."""
        check_no_options(options, "amortized")
        check_key("key", key)
        s = self.settings
        keys = ("guide", "plates", "num_samples")
        return _objective(q_global, batch, key, target=s["model"], **{k: s[k] for k in keys})

    def local_q(self, state, batch: PyTree) -> dict:
        """site -> (loc, scale), each of the site's minibatch shape (M, ...): q(z_i | x_i) on its unconstrained
        space at each point of ``batch``."""
        s = self.settings
        s["model"].check_data(batch)
        return _local_q(state.q_global, batch, s["plates"], s["model"])


amortized = as_top_level_api
