"""Data-parallel local steps across devices: a minibatch's local step is a sum over its data points,
so ``data_parallel(model)`` runs ``local_step`` under ``jax.shard_map`` on a one-dimensional mesh, one
contiguous block of the batch per device, the globals replicated and the sums ``psum``med::

    suff_stats  = psum_d sum_{n in block d} E[s(x_n, z_n)]
    local_terms = psum_d (local terms of block d)

Any algorithm that calls ``model.local_step`` becomes data-parallel unchanged (on a CPU, first
``jax.config.update("jax_num_cpu_devices", n)``). Its steps return states replicated over the mesh;
``model.replicate(alg.init(key))`` starts there too, so the jitted step compiles once. A stochastic local step gets ``fold_in(key, device
index)`` on each device (the key itself on one device).
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from vijax._validate import ArgumentError, batch_size
from vijax.inference.base import check_protocol
from vijax.models import ConditionallyConjugateModel, LocalResult
from vijax.types import PRNGKey


@dataclasses.dataclass(frozen=True)
class DataParallel:
    """A model whose ``local_step`` runs split across the devices of ``mesh`` (:func:`data_parallel`)."""

    model: ConditionallyConjugateModel
    mesh: Mesh
    axis_name: str = "data"

    @property
    def num_devices(self) -> int:
        """The number of devices along ``axis_name`` (of shards of the batch)."""
        return int(self.mesh.shape[self.axis_name])

    def replicate(self, tree):
        """``tree`` replicated over the mesh, where a step's output state sits (a state from ``init`` or a
        checkpoint placed there compiles the step once, not once per placement)."""
        return jax.device_put(tree, NamedSharding(self.mesh, PartitionSpec()))

    def __getattr__(self, name):
        if name in ("model", "mesh", "axis_name"):  # not yet set (during unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.model, name)

    def local_step(self, globals_view, batch, key: PRNGKey | None = None, **kwargs) -> LocalResult:
        """The wrapped model's ``local_step``, each device on its block, the sums ``psum``med.

        Raises:
          ValueError: when the batch size is not a multiple of the number of devices.
        """
        s, d = batch_size(batch), self.num_devices
        if s % d:
            raise ValueError(
                f"the batch size ({s}) must be a multiple of the number of devices ({d}) "
                f"for data_parallel; pick a batch size divisible by {d}"
            )
        axis = self.axis_name
        static = {k: v for k, v in kwargs.items() if isinstance(v, (str, bool, int, float, type(None)))}
        traced = {k: v for k, v in kwargs.items() if k not in static}

        def block(view, part, key_, traced_):
            if key_ is not None and d > 1:
                key_ = jax.random.fold_in(key_, jax.lax.axis_index(axis))
            loc = self.model.local_step(view, part, key_, **static, **traced_)
            return LocalResult(
                jax.lax.psum(loc.suff_stats, axis), jax.lax.psum(loc.local_terms, axis), loc.local_params
            )

        rep, split = PartitionSpec(), PartitionSpec(axis)
        # check_vma=False: the models' while loops carry values that start replicated and become per-device
        specs = dict(in_specs=(rep, split, rep, rep), out_specs=LocalResult(rep, rep, split))
        fn = jax.shard_map(block, mesh=self.mesh, check_vma=False, **specs)
        return fn(globals_view, batch, key, traced)


def data_parallel(model, devices=None, axis_name: str = "data") -> DataParallel:
    """Wraps ``model`` so that its local step runs data-parallel over ``devices``.

    Args:
      model: a conditionally conjugate model.
      devices: distinct ``jax.Device`` objects of one platform (default ``jax.devices()``).
      axis_name: the mesh axis name (the ``psum`` runs over it).

    Returns:
      A ``DataParallel`` model to hand to ``svi``, ``ssvi``, ``make_algorithm``... in place of ``model``.

    Raises:
      ValueError: naming the argument: a model already data-parallel or not conjugate, bad ``devices`` or ``axis_name``.

    Examples:
        >>> import jax
        >>> from vijax.data import sample_lda_corpus
        >>> from vijax.inference import data_parallel, svi
        >>> from vijax.models import LDA
        >>> docs = sample_lda_corpus(0, num_docs=40, num_topics=3, vocab_size=30).corpus
        >>> model = data_parallel(LDA(3, 30))  # one device here: the same results, one block
        >>> alg = svi(model, num_data=40)
        >>> state = model.replicate(alg.init(jax.random.PRNGKey(0)))  # where the steps' states sit
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(1), state, docs.batch(range(40)))
        >>> model.num_devices == len(jax.devices())
        True
    """
    if isinstance(model, DataParallel):
        raise ArgumentError("model", "model is already data_parallel")
    check_protocol(model, ConditionallyConjugateModel, "data_parallel")
    devices = jax.devices() if devices is None else devices
    if isinstance(devices, (str, bytes)):
        raise ArgumentError(
            "devices",
            f"devices must be a sequence of jax.Device objects, got the string {devices!r}; pass "
            f"jax.devices({devices!r}) for that platform's devices",
            value=devices,
        )
    try:
        devices = list(np.ravel(devices)) if isinstance(devices, np.ndarray) else list(devices)
    except TypeError:
        raise ArgumentError(
            "devices", f"devices must be a sequence of jax.Device objects, got {devices!r}", value=devices
        ) from None
    if not devices:
        raise ArgumentError("devices", "devices must name at least one device, got an empty sequence", value=devices)
    for i, d in enumerate(devices):
        if not isinstance(d, jax.Device):
            hint = f'jax.devices("{d}")' if isinstance(d, str) else 'jax.devices("cpu")'
            raise ArgumentError(
                "devices",
                f"devices[{i}] must be a jax.Device, got {d!r} ({type(d).__name__}); pass device objects, "
                f"e.g. {hint} for a platform's devices",
                value=devices,
            )
    if len(set(devices)) != len(devices):
        twice = next(d for d in devices if devices.count(d) > 1)
        raise ArgumentError(
            "devices", f"devices must be distinct: {twice} is listed {devices.count(twice)} times", value=devices
        )
    platforms = sorted({d.platform for d in devices})
    if len(platforms) > 1:
        raise ArgumentError(
            "devices", f"devices must all be of one platform, got devices of {platforms}", value=devices
        )
    if not isinstance(axis_name, str) or not axis_name:
        raise ArgumentError("axis_name", f"axis_name must be a non-empty string, got {axis_name!r}", value=axis_name)
    return DataParallel(model, Mesh(np.array(devices), (axis_name,)), axis_name)
