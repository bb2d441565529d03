"""Data parallelism across processes (hosts): after ``initialize_processes(...)``, ``jax.devices()`` holds
every process's devices, so ``data_parallel(model)``'s local step runs across processes. Each process
reads its own ``process_shard(D)`` of the data; ``global_batch`` / ``global_host_batches`` assemble the
processes' rows, in process order, into the global batch (``jax.make_array_from_process_local_data``).
"""

from __future__ import annotations

from typing import Callable, Optional

import jax
from jax.sharding import NamedSharding, PartitionSpec

from vijax.inference._parallel import DataParallel
from vijax.types import PyTree
from vijax._validate import ArgumentError


def initialize_processes(
    coordinator_address: Optional[str] = None,
    num_processes: Optional[int] = None,
    process_id: Optional[int] = None,
    *,
    cpu_collectives: Optional[str] = "gloo",
    **kwargs,
) -> None:
    """Starts JAX's distributed runtime (``jax.distributed.initialize``), first thing in every process,
    with the same ``coordinator_address`` ("host:port" of process 0) and ``num_processes`` and each its
    own ``process_id`` (all three None: JAX detects them under SLURM, Open MPI, Cloud TPU).

    Args:
      cpu_collectives: the CPU collectives implementation (``"gloo"`` or ``"mpi"``); None: JAX's.
      **kwargs: passed to ``jax.distributed.initialize``.

    Raises:
      ValueError: naming the argument, for a ``process_id`` outside ``[0, num_processes)`` or ``num_processes`` < 1.
    """
    if num_processes is not None and (isinstance(num_processes, bool) or int(num_processes) < 1):
        raise ArgumentError(
            "num_processes", f"num_processes must be a positive integer, got {num_processes!r}", value=num_processes
        )
    if process_id is not None and num_processes is not None and not 0 <= int(process_id) < int(num_processes):
        raise ArgumentError(
            "process_id",
            f"process_id must lie in [0, num_processes = {num_processes}), got {process_id!r}",
            value=process_id,
        )
    if cpu_collectives is not None:
        jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
    jax.distributed.initialize(coordinator_address, num_processes, process_id, **kwargs)


def process_shard(num_items: int, process_index: Optional[int] = None, process_count: Optional[int] = None) -> range:
    """The contiguous block of ``range(num_items)`` that process ``process_index`` (default this one)
    of ``process_count`` reads: equal blocks, the first ``num_items mod process_count`` one longer.

    Examples:
      >>> [list(process_shard(5, p, 2)) for p in range(2)]
      [[0, 1, 2], [3, 4]]
    """
    p = jax.process_index() if process_index is None else int(process_index)
    n = jax.process_count() if process_count is None else int(process_count)
    if n < 1 or not 0 <= p < n:
        raise ArgumentError("process_index", f"process_index must lie in [0, process_count = {n}), got {p}")
    base, extra = divmod(int(num_items), n)
    start = p * base + min(p, extra)
    return range(start, start + base + (p < extra))


def global_batch(model: DataParallel, local_batch: PyTree, axis: int = 0) -> PyTree:
    """The processes' ``local_batch`` rows along ``axis`` concatenated in process order, split over
    ``model``'s mesh (``axis=1`` for the stacked ``(n, S, ...)`` chunks of ``Minibatcher.host_batches``)."""
    if not isinstance(model, DataParallel):
        raise ArgumentError("model", f"model must be a data_parallel model, got {type(model).__name__}")
    spec = PartitionSpec(*([None] * int(axis)), model.axis_name)
    sharding = NamedSharding(model.mesh, spec)
    return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, x), local_batch)


def global_host_batches(model: DataParallel, local_host_batches: Callable) -> Callable:
    """``(t0, n) -> global_batch(model, local_host_batches(t0, n), axis=1)``: the runner's
    ``host_batches`` for a multi-process run, from this process's own ``Minibatcher.host_batches``."""
    return lambda t0, n: global_batch(model, local_host_batches(t0, n), axis=1)
