"""``from_numpyro``: a NumPyro model as a :class:`~vijax.interop.Target`, through NumPyro's own
machinery (``handlers.trace``/``seed``/``substitute``, the init strategies, ``biject_to``,
``log_density``, ``potential_energy``, ``transform_fn``). NumPyro is imported at the first call."""

from __future__ import annotations

import inspect
from typing import Any, Callable

import jax
import jax.numpy as jnp

from vijax.interop._target import Site, Target, check_batch
from vijax._validate import ArgumentError


def _numpyro():
    try:
        import numpyro  # noqa: F401
    except ImportError as err:  # pragma: no cover - numpyro is an optional dependency
        raise ImportError("vijax.from_numpyro needs NumPyro: pip install numpyro") from err
    return numpyro


def support_kind(support: Any) -> str:
    """The ``SUPPORTS`` name of a NumPyro constraint (an ``independent`` one by its base)."""
    from numpyro.distributions import constraints

    while isinstance(support, constraints.independent):
        support = support.base_constraint
    if support is constraints.real:
        return "real"
    if support is constraints.simplex:
        return "simplex"
    if isinstance(support, type(constraints.softplus_positive)):
        return "positive"
    if isinstance(support, constraints.greater_than) and _is(support.lower_bound, 0.0):
        return "positive"
    if isinstance(support, constraints.interval) and _is(support.lower_bound, 0.0) and _is(support.upper_bound, 1.0):
        return "unit_interval"
    return "other"


def _is(bound, value: float) -> bool:
    try:
        return bool(jnp.all(jnp.asarray(bound) == value))
    except jax.errors.ConcretizationTypeError:  # a traced bound: not a fixed support
        return False


def check_site(msg: dict, plates: dict) -> None:
    """Raises ValueError naming a site vijax cannot fit: a ``numpyro.param``, a discrete latent
    site, a latent site inside a subsampled plate (of ``plates``), a support without a bijector."""
    from numpyro.distributions.transforms import biject_to

    name = msg["name"]
    if msg["type"] == "param":
        raise ValueError(
            f"site {name!r}: a numpyro.param in the model; vijax fits distributions over sample sites "
            "(make it a sample site with a prior, or pass its value as an argument)"
        )
    fn = msg["fn"]
    if fn.support.is_discrete:
        finite = getattr(fn, "has_enumerate_support", False)
        raise ValueError(
            f"site {name!r}: a discrete latent site ({type(fn).__name__}, "
            + ("finite support: summing it out is not supported" if finite else "infinite support")
            + "); vijax fits continuous latent sites only (observe it, or marginalise it in the model)"
        )
    for frame in msg["cond_indep_stack"]:
        if frame.name in plates:
            raise ValueError(
                f"site {name!r}: a latent site inside the subsampled plate {frame.name!r}; local latent "
                "variables under subsampling are not supported (subsample only observed sites)"
            )
    try:
        biject_to(fn.support)
    except NotImplementedError as err:
        raise ValueError(
            f"site {name!r}: NumPyro has no bijector onto its support {fn.support} "
            f"({type(fn).__name__}); vijax cannot fit it"
        ) from err


def _checked_strategy(strategy: Callable, plates: dict) -> Callable:
    """NumPyro's init ``strategy`` as a ``substitute_fn`` that first records the subsampled plates
    (name -> (N, M)) in ``plates`` and checks each latent site (``check_site``) as the model meets
    it, before the strategy draws from it."""

    def substitute_fn(msg):
        if msg["type"] == "plate":
            size, sub = msg["args"]
            if sub is not None and sub != size:
                plates[msg["name"]] = (int(size), int(sub))
            return None
        if msg["type"] == "param" or (msg["type"] == "sample" and not msg["is_observed"]):
            check_site(msg, plates)
            return strategy(msg)
        return None

    return substitute_fn


def from_numpyro(model: Callable, *args: Any, **kwargs: Any) -> Target:
    """A NumPyro model as a target, for ``vijax.inference.bbvi`` and ``ngvi``.

    The model is called as ``model(*args, **kwargs)``. A batch (the ``batch`` argument of the
    target's functions and of an algorithm's ``step``) is None or a dict: its entries named after
    the model's arguments replace those arguments, and the entry named after a subsampled plate
    (``numpyro.plate(name, N, subsample_size=M)``) gives the minibatch's indices, substituted for
    the plate's own draw (``handlers.substitute``), so that NumPyro scales the plate's sites by
    N / M itself. A model with a subsampled plate needs its indices in every batch. The unbiased
    minibatch ELBO is then the model's own: no ``num_data`` is given to the algorithm.

    NumPyro's code relies on JAX's rank promotion; its calls run with rank promotion allowed.

    Args:
      model: a function of NumPyro primitives.
      *args: its positional arguments (data and observed values).
      **kwargs: its keyword arguments.

    Returns:
      A :class:`~vijax.interop.Target`. Its ``init_params`` come from NumPyro's ``init_to_median``
      (the median of 15 prior draws, seed 0) applied as NumPyro's ``initialize_model`` applies an
      init strategy, without its compiled search for a finite potential: ``bbvi``'s and
      ``ngvi``'s ``init`` check the log-density at the start.

    Raises:
      ValueError: naming the site: a discrete latent site, a support without a bijector, a
        ``numpyro.param``, a latent site inside a subsampled plate; or arguments the model does
        not take.

    Examples:
        >>> import jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> import vijax
        >>> def model(y):
        ...     mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        ...     sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
        ...     with numpyro.plate("data", y.shape[0]):
        ...         numpyro.sample("y", dist.Normal(mu, sigma), obs=y)
        >>> target = vijax.from_numpyro(model, jnp.array([0.5, 1.5, 1.0]))
        >>> [(s.name, s.support) for s in target.sites.values()]
        [('mu', 'real'), ('sigma', 'positive')]
        >>> round(float(target.constrain({"mu": 0.0, "sigma": 0.0})["sigma"]), 6)  # exp(0)
        1.0
    """
    _numpyro()
    from numpyro import handlers
    from numpyro.distributions.transforms import biject_to
    from numpyro.infer import init_to_median
    from numpyro.infer.util import log_density, potential_energy, transform_fn

    if not callable(model):
        raise ArgumentError("model", f"model must be a function of NumPyro primitives, got {model!r}", value=model)
    signature = inspect.signature(model)
    try:
        signature.bind(*args, **kwargs)
    except TypeError as err:
        raise ArgumentError("model", f"model: it does not take these arguments: {err}") from err
    named = tuple(n for n, p in signature.parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
    takes_any = any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values())
    # one trace finds the sites, checks each as the model meets it, and applies the init strategy
    # as initialize_model applies it (a substitute_fn under a seed), without initialize_model's
    # compiled search for a finite potential (4.7 s against 4 ms for a one-site model on a 2-core
    # CPU): bbvi's and ngvi's init check the log-density at the start
    plates: dict = {}
    strategy = _checked_strategy(init_to_median(num_samples=15), plates)
    with jax.numpy_rank_promotion("allow"):
        seeded = handlers.substitute(handlers.seed(model, rng_seed=0), substitute_fn=strategy)
        trace = handlers.trace(seeded).get_trace(*args, **kwargs)
    latent = [n for n, m in trace.items() if m["type"] == "sample" and not m["is_observed"]]
    if not latent:
        raise ArgumentError("model", "model: it has no latent sample site (every site is observed)")
    transforms = {n: biject_to(trace[n]["fn"].support) for n in latent}
    sites = {}
    for n in latent:
        shape = tuple(jnp.shape(trace[n]["value"]))
        support = trace[n]["fn"].support
        sites[n] = Site(n, shape, tuple(transforms[n].inverse_shape(shape)), support_kind(support), support)
    with jax.numpy_rank_promotion("allow"):
        init_params = transform_fn(transforms, {n: trace[n]["value"] for n in latent}, invert=True)
    init_params = {n: jnp.asarray(init_params[n]) for n in latent}

    def call(batch):
        """(the model with the batch's plate indices substituted, its args, its kwargs)."""
        data = check_batch(batch, None if takes_any else named, plates, "batch")
        indices = {p: data.pop(p) for p in plates}
        bound = signature.bind_partial(*args, **kwargs)
        extra = {}
        for key, value in data.items():
            if key in signature.parameters:
                bound.arguments[key] = value
            else:
                extra[key] = value
        fn = handlers.substitute(model, data=indices) if indices else model
        return fn, bound.args, {**bound.kwargs, **extra}

    def log_prob(params, batch=None):
        fn, a, kw = call(batch)
        with jax.numpy_rank_promotion("allow"):
            return log_density(fn, a, kw, params)[0]

    def log_density_u(params_u, batch=None):
        fn, a, kw = call(batch)
        with jax.numpy_rank_promotion("allow"):
            return -potential_energy(fn, a, kw, params_u)

    def transform(params_u):
        with jax.numpy_rank_promotion("allow"):
            params = transform_fn(transforms, params_u)
            log_det = sum(
                jnp.sum(transforms[n].log_abs_det_jacobian(jnp.asarray(params_u[n]), params[n])) for n in sites
            )
        return params, log_det

    def unconstrain(params):
        with jax.numpy_rank_promotion("allow"):
            return transform_fn(transforms, params, invert=True)

    return Target(
        log_prob=log_prob,
        log_density=log_density_u,
        transform=transform,
        unconstrain=unconstrain,
        sites=sites,
        init_params=init_params,
        plates=plates,
        batch_keys=None if takes_any else named,
        library="numpyro",
        bind=call,
    )


__all__ = ["from_numpyro", "support_kind"]
