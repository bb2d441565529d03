"""Data-parallel local steps across devices (DESIGN.md, "Scale").

A minibatch's local step is a sum over its data points: the statistics
``sum_n E[s(x_n, z_n)]`` and the local ELBO terms add up over any split of the batch, and each
point's local parameters depend on the globals and on that point alone. ``data_parallel(model)``
wraps a model so that its ``local_step`` runs under ``jax.shard_map`` on a one-dimensional
device mesh: the batch is split along its leading axis into one contiguous block per device,
the globals (and hyperparameters) are replicated, each device runs the model's own local step on
its block, and the statistics and local terms are summed across devices with one ``psum``::

    suff_stats  = psum_d sum_{n in block d} E[s(x_n, z_n)]
    local_terms = psum_d (local terms of block d)
    local_params = concatenation of the blocks' local parameters (the batch's order)

Everything else (prior, initialization, hyperparameter objective, evaluation) is the wrapped
model's, so any algorithm that calls ``model.local_step`` (``cavi``, ``svi``, ``ssvi``, ``ssvi_a``,
``map_em``: whatever ``make_algorithm`` builds for a conjugate model) becomes data-parallel
without a change. The global update after the
``psum`` is computed on every device alike (it is cheap next to the local step for the models
here).

Devices. On accelerators, ``jax.devices()``. On a CPU, JAX shows one device unless told
otherwise before it starts (``jax.config.update("jax_num_cpu_devices", n)`` first thing in the
program, or ``XLA_FLAGS=--xla_force_host_platform_device_count=n``): with one device per core,
the blocks run on the cores in parallel.

Randomness. A stochastic local step (e.g. LDA's Gibbs E-step) gets ``fold_in(key, device index)``
on each device (the key itself on a single device, so that one device reproduces the unwrapped
model): results are reproducible for a given number of devices, not across numbers.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from vijax._validate import ArgumentError, batch_size
from vijax.inference.base import check_protocol
from vijax.models import ConditionallyConjugateModel, LocalResult
from vijax.types import PRNGKey


@dataclasses.dataclass(frozen=True, eq=False)
class DataParallel:
    """A model whose ``local_step`` runs split across the devices of ``mesh`` (see the module
    docstring); every other attribute is the wrapped ``model``'s. Build it with
    :func:`data_parallel`."""

    model: ConditionallyConjugateModel
    mesh: Mesh
    axis_name: str = "data"

    @property
    def num_devices(self) -> int:
        """The number of devices along ``axis_name`` of the mesh: the batch is split into this many shards."""
        return int(self.mesh.shape[self.axis_name])

    def __getattr__(self, name):
        # only called for attributes the dataclass lacks: delegate to the wrapped model
        if name in ("model", "mesh", "axis_name"):  # not yet set (during unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.model, name)

    def __hash__(self):
        return hash((type(self), self.model, self.mesh, self.axis_name))

    def __eq__(self, other):
        return type(other) is type(self) and (self.model, self.mesh, self.axis_name) == (
            other.model,
            other.mesh,
            other.axis_name,
        )

    def local_step(self, globals_view, batch, key: PRNGKey | None = None, **kwargs) -> LocalResult:
        """The wrapped model's ``local_step(globals_view, batch, key, **kwargs)``, each device on
        its block of the batch, statistics and local terms summed across devices.

        Raises:
          ValueError: when the batch's leading dimension is not a multiple of the number of
            devices (before anything compiles).
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
        # check_vma=False: the models' per-block while loops carry values that start replicated
        # (constants) and become per-device; the psum above makes the sums replicated explicitly.
        fn = jax.shard_map(
            block,
            mesh=self.mesh,
            in_specs=(rep, split, rep, rep),
            out_specs=LocalResult(rep, rep, split),
            check_vma=False,
        )
        return fn(globals_view, batch, key, traced)


def data_parallel(model, devices=None, axis_name: str = "data") -> DataParallel:
    """Wraps ``model`` so that its local step runs data-parallel over ``devices``.

    Args:
      model: a conditionally conjugate model (``local_step(globals_view, batch, key, **kw)``
        returning a ``LocalResult`` whose ``local_params`` have the batch's leading axis).
      devices: the devices to split the batch over: a non-empty sequence of distinct
        ``jax.Device`` objects of one platform, e.g. ``jax.devices("cpu")``; default
        ``jax.devices()`` (all devices of the default backend). A platform name such as ``"cpu"``
        is not a device: pass ``jax.devices("cpu")``.
      axis_name: the mesh axis name (the ``psum`` runs over it).

    Returns:
      A ``DataParallel`` model; hand it to ``svi``, ``ssvi``, ``make_algorithm``... in place of
      ``model``. The batch size must be a multiple of the number of devices.

    Raises:
      ValueError: naming ``model`` when it is already data-parallel or not a conditionally
        conjugate model, ``devices`` when it is not a non-empty sequence of distinct devices of
        one platform (a string among them included), and ``axis_name`` when it is not a
        non-empty string.

    Examples:
        >>> import jax
        >>> from vijax.data import sample_lda_corpus
        >>> from vijax.inference import data_parallel, svi
        >>> from vijax.models import LDA
        >>> docs = sample_lda_corpus(0, num_docs=40, num_topics=3, vocab_size=30).corpus
        >>> model = data_parallel(LDA(3, 30))  # one device here: the same results, one block
        >>> alg = svi(model, num_data=40)
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0)),
        ...                                 docs.batch(range(40)))
        >>> model.num_devices == len(jax.devices())
        True
    """
    if isinstance(model, DataParallel):
        raise ArgumentError("model", "model is already data_parallel")
    check_protocol(model, ConditionallyConjugateModel, "data_parallel")
    devices = _check_devices(jax.devices() if devices is None else devices)
    if not isinstance(axis_name, str) or not axis_name:
        raise ArgumentError("axis_name", f"axis_name must be a non-empty string, got {axis_name!r}", value=axis_name)
    return DataParallel(model, Mesh(np.array(devices), (axis_name,)), axis_name)


def _check_devices(devices) -> list:
    """``devices`` as a list, after checking that it is a non-empty sequence of distinct
    ``jax.Device`` objects of one platform; ValueError naming ``devices`` otherwise."""
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
    return devices
