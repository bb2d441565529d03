"""The random start of :class:`vijax.models.LDA` (Hoffman et al. 2010), drawn on the host.

lambda_kv = init_scale * g_kv with g_kv ~ Gamma(100, rate 100): NumPy's default generator, seeded
with the key's data (``jax.random.key_data``), draws it, so that no program compiles for it; for a
traced key (under ``jit`` or ``vmap``) the same function runs as a host callback, so that a key
gives the same start in every context.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from vijax import expfam
from vijax._compile import host_key_data
from vijax._validate import is_tracer
from vijax.types import PRNGKey


def random_start(key: PRNGKey, scale: float, shape: tuple, dtype) -> expfam.Dirichlet:
    """Dirichlet(lambda), lambda = scale * g with g ~ Gamma(100, rate 100) of ``shape``, drawn on
    the host (:func:`host_start`): directly for a concrete key, by a host callback for a traced
    one (under ``jit`` or ``vmap``, which hands the callback a batch of keys' data)."""
    draw = functools.partial(host_start, scale=scale, shape=shape, dtype=np.dtype(dtype))
    if is_tracer(key):
        data = jax.random.key_data(key)
        natural = jax.pure_callback(draw, jax.ShapeDtypeStruct(shape, dtype), data, vmap_method="expand_dims")
    else:
        natural = jax.device_put(draw(host_key_data(key)))  # a transfer: jnp.asarray would compile a copy
    return expfam.Dirichlet.from_natural((natural,))


def host_start(data, *, scale: float, shape: tuple, dtype) -> np.ndarray:
    """The natural parameter scale * g - 1 of the random start, g ~ Gamma(100, rate 100) of
    ``shape``, for each key's data in ``data`` (..., words): NumPy's default generator seeded with
    the key's words, so that each key gives its own stream and the same key the same draw."""
    data = np.asarray(data, dtype=np.uint32)
    out = np.empty(data.shape[:-1] + tuple(shape), dtype)
    for i in np.ndindex(data.shape[:-1]):
        rng = np.random.default_rng(np.random.SeedSequence([int(w) for w in data[i]]))
        out[i] = scale * rng.gamma(100.0, 1.0 / 100.0, shape) - 1.0
    return out
