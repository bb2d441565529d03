"""``from_tfp``: a TFP ``JointDistribution`` (JAX substrate) with pinned observations as a
:class:`~vijax.interop.Target`, through TFP's own machinery (``experimental_pin``,
``experimental_default_event_space_bijector``, the joint's ``log_prob``)."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vijax.types import tfp_jax

from vijax._compile import jit_or_eager, setup_jit
from vijax.interop._target import Site, Target, check_batch, traced_once
from vijax._validate import ArgumentError, check_finite

NUM_INIT_DRAWS = 15  # the prior draws whose unconstrained median is the starting point (as init_to_median)


def _as_dict(struct) -> dict:
    return dict(struct._asdict()) if hasattr(struct, "_asdict") else dict(struct)


def part_names(joint_dist) -> tuple[str, ...]:
    """The names of a joint's parts, in its order (a ``JointDistributionSequential``'s as ``resolve_graph`` names them)."""
    dtype = joint_dist.dtype
    if isinstance(dtype, Mapping) or hasattr(dtype, "_asdict"):
        return tuple(_as_dict(dtype))
    return tuple(name for name, _ in joint_dist.resolve_graph())


def as_parts(struct, names: Sequence[str]) -> dict:
    """A structure of a joint's parts as a dict by part name (a list's by ``names``, in order)."""
    if isinstance(struct, Mapping) or hasattr(struct, "_asdict"):
        return _as_dict(struct)
    return dict(zip(names, struct, strict=True))


def unwrap(dist):
    """The distribution inside ``Sample`` and ``Independent`` wrappers."""
    while hasattr(dist, "distribution") and type(dist).__name__ in ("Sample", "Independent"):
        dist = dist.distribution
    return dist


def support_kind(dist) -> str:
    """The ``SUPPORTS`` name of a TFP distribution's support, read from its default event-space bijector."""
    tfb = tfp_jax().bijectors
    bij = unwrap(dist).experimental_default_event_space_bijector()
    if isinstance(bij, tfb.Identity):
        return "real"
    if isinstance(bij, (tfb.Softplus, tfb.Exp)) and getattr(bij, "low", None) is None:
        return "positive"
    if isinstance(bij, tfb.Sigmoid):
        low, high = getattr(bij, "low", None), getattr(bij, "high", None)
        if (low is None and high is None) or (
            low is not None and high is not None and np.all(np.asarray(low) == 0) and np.all(np.asarray(high) == 1)
        ):
            return "unit_interval"
    if isinstance(bij, (tfb.SoftmaxCentered, tfb.IteratedSigmoidCentered)):
        return "simplex"
    return "other"


_allowing_rank_promotion = jax.numpy_rank_promotion("allow")  # a decorator: TFP's code broadcasts by rank promotion


@_allowing_rank_promotion
def _prior_distributions(joint_dist):
    """The joint's distributions at one prior draw, jitted; eager where a distribution is not a pytree."""
    draw = lambda key: joint_dist.sample_distributions(seed=key)[0]  # noqa: E731
    return jit_or_eager(setup_jit(draw), draw)(jax.random.PRNGKey(0))


def _validating(dist):
    """``dist`` rebuilt with ``validate_args=True`` (through ``Sample`` and ``Independent``), or None."""
    try:
        if type(dist).__name__ in ("Sample", "Independent"):
            inner = _validating(dist.distribution)
            return None if inner is None else dist.copy(distribution=inner, validate_args=True)
        return dist.copy(validate_args=True)
    except (TypeError, ValueError, NotImplementedError):
        return None


def _fixed_support(dist) -> bool:
    """Whether the support of ``dist`` does not move with its parameters: discrete, or one of ``SUPPORTS`` but "other"."""
    try:
        bijector = unwrap(dist).experimental_default_event_space_bijector()
    except NotImplementedError:
        return True
    return bijector is None or support_kind(dist) != "other"


def check_observed_support(name: str, dist, value) -> None:
    """Raises ArgumentError naming ``observed[name]`` where ``value`` lies outside the fixed support of ``dist``."""
    checked = _validating(dist) if _fixed_support(dist) else None
    if checked is None:
        return
    try:
        checked.log_prob(value)
    except ValueError as err:
        raise ArgumentError(
            "observed",
            f"observed[{name!r}]: values outside the support of the part's {type(unwrap(dist)).__name__} "
            f"(TFP: {str(err).splitlines()[0]}); correct the data or the distribution",
        ) from err


@_allowing_rank_promotion
def from_tfp(joint_dist, observed: Optional[Mapping[str, Any]] = None) -> Target:
    """A TFP joint distribution with ``observed`` pinned, as a target for ``vijax.inference.bbvi`` and ``ngvi``.

    The latent sites are the unpinned parts, mapped from the unconstrained space by the pinned joint's
    ``experimental_default_event_space_bijector()``. A batch is None or a dict of observed values replacing the
    pinned ones (a minibatch's scaling belongs in the joint). TFP's calls run with JAX's rank promotion allowed.

    Args:
      joint_dist: a ``tfp.distributions.JointDistribution`` of the JAX substrate with a scalar ``log_prob``.
      observed: the observed parts' values by name (None or empty: the target is the joint itself).

    Returns:
      A :class:`~vijax.interop.Target`; ``init_params`` is the unconstrained median of 15 prior draws.

    Raises:
      ValueError: naming the site: a discrete latent part; naming ``observed[name]``: not a part, values not
        finite, of another shape than the part's or outside its fixed support; a joint with batch shape.

    Examples:
        >>> import jax.numpy as jnp
        >>> from tensorflow_probability.substrates import jax as tfp
        >>> import vijax
        >>> tfd = tfp.distributions
        >>> joint = tfd.JointDistributionNamed(dict(
        ...     rate=tfd.Gamma(2.0, 1.0),
        ...     counts=lambda rate: tfd.Sample(tfd.Poisson(rate), 3)))
        >>> target = vijax.from_tfp(joint, observed={"counts": jnp.array([1.0, 3.0, 2.0])})
        >>> [(s.name, s.support) for s in target.sites.values()]
        [('rate', 'positive')]
    """
    tfd = tfp_jax().distributions
    if not isinstance(joint_dist, tfd.JointDistribution):
        raise ArgumentError(
            "joint_dist",
            f"joint_dist must be a tfp.distributions.JointDistribution (JAX substrate), got {joint_dist!r}",
            value=joint_dist,
        )
    names = part_names(joint_dist)
    if observed is not None and not isinstance(observed, Mapping):
        raise ArgumentError(
            "observed", f"observed must be a dict of the observed parts' values by name, got {type(observed).__name__}"
        )
    observed = dict(observed or {})
    for name in observed:
        if name not in names:
            raise ArgumentError(
                "observed", f"observed[{name!r}]: the joint has no part {name!r}; its parts are {list(names)}"
            )
        check_finite(f"observed[{name!r}]", observed[name])  # a NaN would make every step's ELBO NaN
    latent = [n for n in names if n not in observed]
    if not latent:
        raise ArgumentError("observed", "observed: every part of the joint is observed; there is nothing to fit")
    drawn = jax.eval_shape(lambda key: as_parts(joint_dist.sample(seed=key), names), jax.random.PRNGKey(0))
    for name, value in observed.items():
        if tuple(jnp.shape(value)) != tuple(drawn[name].shape):
            raise ArgumentError(
                "observed",
                f"observed[{name!r}]: shape {tuple(jnp.shape(value))}, where the joint draws its part {name!r} "
                f"with shape {tuple(drawn[name].shape)}; give the values of one draw of that part",
            )
    dtypes = as_parts(joint_dist.dtype, names)
    for name in latent:
        if not np.issubdtype(np.dtype(dtypes[name]), np.floating):
            raise ValueError(
                f"site {name!r}: a discrete latent part (dtype {np.dtype(dtypes[name])}); vijax fits continuous "
                "latent sites only (observe it, or marginalise it in the joint)"
            )
    dists = as_parts(_prior_distributions(joint_dist), names)
    for name, value in observed.items():
        check_observed_support(name, dists[name], value)
    bijectors = {}
    for name in latent:
        try:
            bijectors[name] = dists[name].experimental_default_event_space_bijector()
        except NotImplementedError:
            bijectors[name] = None
        if bijectors[name] is None:
            raise ValueError(
                f"site {name!r}: {type(unwrap(dists[name])).__name__} has no default event-space bijector (a discrete part, "
                "or a support TFP does not map onto); vijax fits continuous latent sites with a bijector only"
            )
    pinned = joint_dist.experimental_pin(**observed) if observed else joint_dist
    bijector = pinned.experimental_default_event_space_bijector()
    struct = pinned.event_shape
    u_shapes = as_parts(bijector.inverse_event_shape(struct), latent)
    shapes = as_parts(struct, latent)
    sites = {n: Site(n, tuple(shapes[n]), tuple(u_shapes[n]), support_kind(dists[n]), bijectors[n]) for n in latent}

    def structured(d):
        if hasattr(struct, "_asdict"):
            return type(struct)(**d)
        return dict(d) if isinstance(struct, Mapping) else [d[n] for n in latent]

    @_allowing_rank_promotion
    def log_prob(params, batch=None):
        data = check_batch(batch, tuple(observed), {}, "batch")
        return joint_dist.log_prob(**{**params, **observed, **data})

    # fresh copies in: TFP caches a bijector's results by its input's identity (an escaped tracer otherwise)
    @_allowing_rank_promotion
    def transform(params_u):
        u = structured({n: jnp.array(params_u[n]) for n in latent})
        return as_parts(bijector.forward(u), latent), bijector.forward_log_det_jacobian(u)

    @_allowing_rank_promotion
    def log_density(params_u, batch=None):
        params, log_det = transform(params_u)
        return log_prob(params, batch) + log_det

    @_allowing_rank_promotion
    def unconstrain(params):
        return as_parts(bijector.inverse(structured({n: jnp.array(params[n]) for n in latent})), latent)

    def bind(batch):
        return joint_dist, {**observed, **check_batch(batch, tuple(observed), {}, "batch")}

    @jax.jit
    @_allowing_rank_promotion
    def start(key):  # one draw per key: a joint need not draw a batch
        draws = jax.vmap(lambda k: as_parts(joint_dist.sample(seed=k), names))(jax.random.split(key, NUM_INIT_DRAWS))
        u_draws = jax.vmap(unconstrain)({n: draws[n] for n in latent})
        return {n: jnp.median(u_draws[n], axis=0) for n in latent}

    init_params = start(jax.random.PRNGKey(0))
    out = jax.eval_shape(log_density, init_params)
    if out.shape != ():
        raise ArgumentError(
            "joint_dist", f"joint_dist: its log_prob has batch shape {out.shape}; vijax needs a scalar log-joint"
        )
    fns = traced_once(log_prob), traced_once(log_density), transform, unconstrain
    return Target(*fns, sites, init_params, {}, tuple(observed), "tfp", bind)


__all__ = ["as_parts", "from_tfp", "part_names", "support_kind", "unwrap"]
