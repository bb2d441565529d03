"""The prior draws of ``from_numpyro``'s start: NumPyro's ``init_to_median`` compiled as one program
(``prior_median``), its Gamma variables by vijax's vectorised sampler (``VectorGammaDraws``), and a
summed-out site's value in the start's trace (``first_support_value``). NumPyro is imported at the
first call."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from jax.extend.core import Literal

from vijax._compile import setup_jit
from vijax.types import Array


def _eval_vector_gamma(jaxpr, consts, *args) -> list:
    """``jaxpr`` evaluated on ``args`` as ``jax.core.eval_jaxpr`` evaluates it, except that each
    ``random_gamma`` of one key (``jax.random.gamma`` and the samplers built on it: NumPyro's Gamma,
    Beta, Dirichlet, StudentT...) draws by vijax's vectorised Marsaglia-Tsang loop
    (``expfam.sample_log_gamma``, exact Gamma(a, 1) variables) instead of JAX's, whose loops of key
    splits per element compile in 0.7-1.0 s per call on a 2-core CPU against about 0.3 s. Random
    bits of more than one axis (15 draws of a site of 10 values) are drawn flat and reshaped, the
    same bits: XLA's CPU compiler emits the hash of a two-axis draw as a far larger kernel (the
    start of ``benchmarks/numpyro_models.py``'s logistic regression, ``from_numpyro``: 0.61-0.65 s
    against 0.51-0.54 s). Nested ``jit`` calls are evaluated the same way; every other operation is
    bound as it is."""
    from vijax.expfam import sample_log_gamma

    env: dict = {}

    def read(v):
        return v.val if isinstance(v, Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        vals = [read(v) for v in eqn.invars]
        if eqn.primitive.name == "random_gamma" and jnp.ndim(vals[0]) == 0:
            log_g = sample_log_gamma(vals[0], vals[1])
            out = [log_g if eqn.params["log_space"] else jnp.exp(log_g)]
        elif eqn.primitive.name == "random_bits" and len(eqn.params["shape"]) > 1:
            shape = eqn.params["shape"]
            flat = eqn.primitive.bind(*vals, **{**eqn.params, "shape": (math.prod(shape),)})
            out = [flat.reshape(flat.shape[:-1] + shape)]  # keys' batch axes (a vmap's) lead
        elif eqn.primitive.name in ("jit", "pjit"):
            inner = eqn.params["jaxpr"]
            out = _eval_vector_gamma(inner.jaxpr, inner.consts, *vals)
        else:
            with eqn.ctx.manager:
                out = eqn.primitive.bind(*vals, **eqn.primitive.get_bind_params(eqn.params))
            out = out if eqn.primitive.multiple_results else [out]
        env.update(zip(eqn.outvars, out))
    return [read(v) for v in jaxpr.outvars]


class VectorGammaDraws:
    """A NumPyro distribution ``fn`` whose draws (``fn(sample_shape=..., rng_key=...)``, the call
    an init strategy makes) take their Gamma variables from ``_eval_vector_gamma``; every other
    attribute is ``fn``'s. The draws have ``fn``'s law, from another random stream than
    ``fn.sample``'s where ``fn`` draws Gamma variables (the same values elsewhere)."""

    def __init__(self, fn: Any):
        self.fn = fn

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fn, name)

    def __call__(self, sample_shape: tuple = (), *, rng_key: Array) -> Array:
        closed = jax.make_jaxpr(lambda k: self.fn(sample_shape=sample_shape, rng_key=k))(rng_key)
        return _eval_vector_gamma(closed.jaxpr, closed.consts, rng_key)[0]


@setup_jit(static_argnames=("sample_shape",))
def prior_median(fn: Any, rng_key: Array, sample_shape: tuple = ()) -> Array:
    """NumPyro's ``init_to_median`` (the median of 15 prior draws on the unconstrained space) at a
    site of distribution ``fn`` (a NumPyro distribution, a pytree), compiled as one program (one
    per distribution type and shape, cached across calls) rather than op by op. The draws are
    ``fn``'s own (``VectorGammaDraws``): the strategy's own values (tested) for a site whose
    sampler draws no Gamma variable; where it does (Gamma, Beta, Dirichlet...), the same law from
    vijax's Gamma sampler, which halves the start's time on a model with Gamma sites
    (``from_numpyro`` of ``benchmarks/numpyro_models.py``'s Poisson model: 2.1 -> 1.0 s). Inside a larger program
    (``from_numpyro``'s start) optimization barriers keep its inputs and output apart from the
    rest, so that XLA compiles it as it compiles it alone (tested: the start is the op-by-op
    start bit for bit). A median on the support's boundary (infinite on the unconstrained space:
    the draws of a vague prior that underflow) becomes the nearest point of NumPyro's
    ``init_to_uniform`` box [-2, 2] on the unconstrained space."""
    from numpyro.distributions.transforms import biject_to
    from numpyro.infer import init_to_median

    fn, rng_key = jax.lax.optimization_barrier((fn, rng_key))
    site = {
        "type": "sample",
        "name": "",
        "fn": VectorGammaDraws(fn),
        "is_observed": False,
        "value": None,
        "kwargs": {"rng_key": rng_key, "sample_shape": sample_shape},
        "infer": {},
    }
    with jax.numpy_rank_promotion("allow"):
        median = init_to_median(site, num_samples=15)
        # a median on the support's boundary (the draws of a vague prior, Gamma(1e-3, 1e-3), underflow
        # to 0 in float32) is infinite on the unconstrained space: start at the nearest point of the
        # box [-2, 2] that NumPyro's init_to_uniform draws from
        bijector = biject_to(fn.support)
        u = bijector.inv(median)
        median = jnp.where(jnp.any(jnp.isinf(u)), bijector(jnp.clip(u, -2.0, 2.0)), median)
        return jax.lax.optimization_barrier(median)


def first_support_value(fn: Any, sample_shape: tuple) -> Array:
    """A summed-out site's value in the start's trace: the first value of its finite support, at
    every element (the trace only needs a value the model accepts, the site being summed out
    later), instead of a draw, whose random bits the start would compile (a categorical draw of
    the mixture of ``benchmarks/numpyro_models.py``: 8 of the program's 85 kernels)."""
    return jnp.broadcast_to(fn.enumerate_support(expand=False)[0], fn.shape(sample_shape))


__all__ = ["VectorGammaDraws", "first_support_value", "prior_median"]
