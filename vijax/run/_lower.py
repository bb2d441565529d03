"""The program a run compiles, lowered but not compiled: ``lower_run`` (for compile-time and
program-size measurements, ``benchmarks/compile_time.py``)."""

from __future__ import annotations

from typing import Callable, Optional, Union

import jax
import numpy as np

from vijax._compile import host_key_data
from vijax._validate import value_checks
from vijax.inference import VIAlgorithm
from vijax.types import Array, PRNGKey, PyTree
from ._chunk import _make_chunk_fn
from ._runner import RunConfig, _initial_progress


def _abstract_init(alg, init_state, init_key):
    """The shapes and dtypes (no weak types) of the state a run starts from, by tracing its init;
    None when the init cannot be traced."""
    if init_state is not None and not callable(init_state):
        return None
    make = (lambda k: alg.init(k)) if init_state is None else init_state
    try:
        shapes = jax.eval_shape(make, init_key)
    except jax.errors.JAXTypeError:
        return None
    return jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=s.sharding), shapes)


def lower_run(
    alg: VIAlgorithm,
    key: PRNGKey,
    *,
    batch_fn: Optional[Callable[[PRNGKey, Array], PyTree]] = None,
    host_batches: Optional[Callable[[int, int], PyTree]] = None,
    init_state: Union[PyTree, Callable[[PRNGKey], PyTree], None] = None,
    config: Optional[RunConfig] = None,
    **settings,
) -> jax.stages.Lowered:
    """The chunk program that ``vijax.run.run`` with the same arguments compiles before its first
    step (a ``lax.scan`` of ``chunk_size`` steps of ``alg.step``, the batch function's captured
    arrays as arguments), traced and lowered but not compiled. The init is only traced (for the
    state's shapes), or run when it cannot be traced (host code); ``host_batches`` is called
    once, for the first chunk.

    ``.as_text()`` is its StableHLO (whose size the program-size tests bound) and ``.compile()``
    compiles it as the run would. The arguments are those of ``run`` (``init_state`` may be a state
    already made from the run's init key, ``jax.random.split(key)[0]``); the persistent compilation
    cache is left as it is, so a ``.compile()`` measures a cold start when it is off.

    Raises:
      ValueError: as ``run`` does, for ``x64`` / ``cpu_devices`` this process does not have, or
        not exactly one of ``batch_fn`` and ``host_batches``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from vijax.inference import VIAlgorithm
      >>> alg = VIAlgorithm(init=lambda key, batch=None: jnp.zeros(()),
      ...                   step=lambda k, x, b: (x + 0.5 * (b - x), {"elbo": -(x - b) ** 2}))
      >>> low = lower_run(alg, jax.random.PRNGKey(0), batch_fn=lambda k, t: jnp.ones(()), chunk_size=20)
      >>> "stablehlo" in low.as_text()
      True
    """
    rc = (config if config is not None else RunConfig()).replace(**settings)
    rc.check_process_settings()
    if (batch_fn is None) == (host_batches is None):
        raise ValueError("give exactly one of batch_fn and host_batches")
    init_key, step_base = jax.random.split(key)
    state = _abstract_init(alg, init_state, init_key)
    if state is None:  # an init with host code: run it, as run does
        state = _initial_progress(alg, init_state, init_key, host_key_data(key), None, False).state
    chunk_fn = _make_chunk_fn(alg.step, batch_fn, rc.chunk_size, step_base, rc.check_values)
    pending = None if host_batches is None else host_batches(0, rc.chunk_size)
    with value_checks(rc.check_values):  # read when the chunk is traced, as in run
        return chunk_fn.lower(state, step_base, np.int32(0), np.int32(rc.chunk_size), pending)


__all__ = ["lower_run"]
