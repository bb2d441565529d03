"""Where a run's checkpoints go, and which process touches them, in a run of one process or of
several (``jax.distributed``, ``vijax.inference.initialize_processes``).

The protocol of a run of several processes (the state is replicated: every process holds all of it):

- **One writer.** Process 0 alone lists, reads, writes, rotates and renames the files of its
  ``checkpoint_dir``, and holds the folder's lock (``vijax.run._lock``). The other processes may
  be given the same folder (shared or not) or none: they never touch it.
- **The same settings.** At the start the processes gather their ``resume`` and
  ``checkpoint_every`` (and whether each has a ``checkpoint_dir``), and the run's other settings
  that decide how many collective calls it makes (``num_steps``, ``chunk_size``, the stopping
  rule's ``tol`` and ``patience``, ``eval_every``, ...): a difference raises the same
  ``ValueError`` on every process, naming the setting, since the chunks' ``psum`` and the saves
  are collective and a process that went on would wait for the others forever.
- **Every process restores.** On resume process 0 picks the newest intact checkpoint (a corrupt
  newer one renamed and skipped, as in one process) and broadcasts the file's bytes; every process
  loads those same bytes with the same code, so all of them start from the same state, trace and
  step, and raise the same error when it does not fit the run. No shared file system is needed.
- **Errors and barriers.** After each checkpoint, and after the start, the processes exchange a
  flag: an error on any process (a folder that is a file, one in use, a failed write, no intact
  checkpoint) is raised on every process (the others get a ``CheckpointError`` with its message),
  and a process returns from ``run`` only once the final checkpoint is written.
- **Leaves split across processes** (not replicated) are gathered to every process before the
  write (``multihost_utils.process_allgather``), which all processes call alike.

A ``KeyboardInterrupt`` stops one process, not the others; so its checkpoint is written by
process 0 alone, without exchanging anything, when it can (its leaves all on this host), and
skipped otherwise. One process: none of the exchanges, the same files and checks.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Iterator, Mapping, Optional

import jax
import numpy as np

from . import _checkpoint
from ._lock import hold_folder
from vijax.types import PyTree
from vijax._validate import ArgumentError


def _multihost():
    from jax.experimental import multihost_utils

    return multihost_utils


def _broadcast_bytes(data: bytes, source: int) -> bytes:
    """``data`` of process ``source``, on every process (exact: bytes summed with zeros)."""
    mh, me = _multihost(), jax.process_index() == source
    size = np.frombuffer(len(data).to_bytes(8, "little") if me else bytes(8), np.uint8)
    n = int.from_bytes(np.asarray(mh.broadcast_one_to_all(size, is_source=me), np.uint8).tobytes(), "little")
    if n == 0:
        return b""
    buf = np.frombuffer(data, np.uint8) if me else np.zeros(n, np.uint8)
    return np.asarray(mh.broadcast_one_to_all(buf, is_source=me), np.uint8).tobytes()


def _allgather_bytes(data: bytes) -> list:
    """Every process's ``data``, in process order (a collective call)."""
    mh = _multihost()
    sizes = np.asarray(mh.process_allgather(np.int32(len(data)))).reshape(-1)
    buf = np.zeros(int(sizes.max()), np.uint8)
    buf[: len(data)] = np.frombuffer(data, np.uint8)
    rows = np.asarray(mh.process_allgather(buf), np.uint8).reshape(len(sizes), -1)
    return [rows[i, : sizes[i]].tobytes() for i in range(len(sizes))]


def raise_together(error: Optional[BaseException], what: str) -> None:
    """Raises on every process when ``error`` is not None on any (a collective call).

    The process with the error raises it; the others raise a ``CheckpointError`` with ``what``, the
    first such process's index and its message."""
    if jax.process_count() == 1:
        if error is not None:
            raise error
        return
    flags = np.asarray(_multihost().process_allgather(np.int32(error is not None))).reshape(-1)
    bad = np.flatnonzero(flags)
    if bad.size == 0:
        return
    source = int(bad[0])
    message = _broadcast_bytes(str(error).encode() if error is not None else b"", source).decode()
    if error is not None:
        raise error
    raise _checkpoint.CheckpointError(f"{what}: process {source} failed: {message}")


def replicated(state: PyTree) -> PyTree:
    """In a run of several processes, the state's leaves that this process holds (all of them, at
    the start) as arrays replicated over every device of every process, as the chunks leave them:
    so every chunk, the first one included (of a fresh run, or of a resumed one continuing inside
    the chunk grid), runs one and the same compiled program. Every process must hold the same
    values (the same init, or the same checkpoint). One process: ``state`` as it is."""
    if jax.process_count() == 1:
        return state
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    everywhere = NamedSharding(Mesh(np.array(jax.devices()), ("processes",)), PartitionSpec())

    def leaf(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return x
        if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jax.random.wrap_key_data(leaf(jax.random.key_data(x)), impl=jax.random.key_impl(x))
        return jax.device_put(np.asarray(x), everywhere)  # host values, the same in every process

    return jax.tree.map(leaf, state)


def _host_leaf(x):
    """A leaf as one host array; leaves split across processes gathered (collective)."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable and not x.is_fully_replicated:
        return np.asarray(_multihost().process_allgather(x, tiled=True))
    return np.asarray(x)


class CheckpointStore:
    """A run's checkpoint folder as this process sees it (the module docstring's protocol).

    Build it in every process of the run at the same point (it exchanges the settings).

    Attributes:
      enabled: whether the run writes checkpoints (process 0 has a ``checkpoint_dir``).
      directory: the folder this process reads and writes: ``checkpoint_dir`` on process 0, None on
        the others.
      multi: whether the run has several processes.
    """

    def __init__(
        self,
        checkpoint_dir: Optional[str],
        resume: bool,
        checkpoint_every: Optional[int],
        settings: Optional[Mapping[str, Any]] = None,
    ):
        """``settings``: the run's other settings that every process must share (name -> a
        JSON value), checked with ``resume`` and ``checkpoint_every`` in a run of several processes."""
        self.multi = jax.process_count() > 1
        writer = jax.process_index() == 0
        if not self.multi:
            if checkpoint_dir is None and (checkpoint_every is not None or resume):
                raise ArgumentError("checkpoint_every", "checkpoint_every and resume need a checkpoint_dir")
            self.enabled, self.directory = checkpoint_dir is not None, checkpoint_dir
            return
        mine = {"resume": bool(resume), "checkpoint_every": checkpoint_every, **(settings or {})}
        rows = [json.loads(b) for b in _allgather_bytes(json.dumps([checkpoint_dir is not None, mine]).encode())]
        for name in mine:
            got = [row[1].get(name) for row in rows]
            if len({json.dumps(v) for v in got}) > 1:
                listed = ", ".join(f"process {i}: {v}" for i, v in enumerate(got))
                raise ArgumentError(name, f"{name} must be the same in every process of the run; got {listed}")
        has_dir = [row[0] for row in rows]
        if not has_dir[0] and (resume or checkpoint_every is not None):
            raise ArgumentError(
                "checkpoint_every",
                "checkpoint_every and resume need a checkpoint_dir on process 0, which writes the checkpoints",
            )
        others = [i for i in range(1, len(rows)) if has_dir[i]]
        if not has_dir[0] and others:
            raise ArgumentError(
                "checkpoint_dir",
                f"checkpoint_dir is given to process {others[0]} but not to process 0, which writes the "
                "checkpoints; give it to process 0 (the others need none)",
            )
        self.enabled = bool(has_dir[0])
        self.directory = checkpoint_dir if writer else None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Holds the folder for the ``with`` block (process 0; ``vijax.run._lock``): a folder that
        is a file or one that another run holds raises on every process, naming it."""
        if not self.enabled:
            yield
            return
        with contextlib.ExitStack() as stack:
            error = None
            if self.directory is not None:
                try:
                    _checkpoint.check_checkpoint_dir(self.directory)
                    stack.enter_context(hold_folder(self.directory, "checkpoint_dir"))
                except (ValueError, OSError) as e:
                    error = e
            raise_together(error, "checkpoint_dir")
            yield

    def resumable(self) -> tuple[Optional[str], Optional[bytes]]:
        """``(path, bytes)`` of the newest intact checkpoint, on every process; ``(None, None)``
        when there is none (``_checkpoint.find_resumable`` on process 0)."""
        found, error = (None, None), None
        if self.directory is not None:
            try:
                found = _checkpoint.find_resumable(self.directory, stacklevel=4)
            except _checkpoint.CheckpointError as e:
                error = e
        if not self.multi:
            if error is not None:
                raise error
            return found
        raise_together(error, "resume")
        path, data = found
        header = _broadcast_bytes(json.dumps(path).encode(), 0)
        path = json.loads(header.decode())
        if path is None:
            return None, None
        return path, _broadcast_bytes(data if data is not None else b"", 0)

    def save(
        self, step: int, state: PyTree, trace: dict, evals: list, *, fresh: bool, collective: bool = True, **kwargs
    ) -> None:
        """Writes a checkpoint (process 0), first clearing the folder's older ones when ``fresh``;
        ``kwargs`` go to ``_checkpoint.save_checkpoint``. With ``collective`` (between chunks) every
        process calls it and an error on process 0 is raised on all; without (an interrupt),
        process 0 writes alone when it holds every leaf."""
        if not collective and any(
            isinstance(x, jax.Array) and not x.is_fully_addressable and not x.is_fully_replicated
            for x in jax.tree.leaves(state)
        ):
            return
        host_state = jax.tree.map(_host_leaf, state) if collective else state
        error = None
        if self.directory is not None:
            try:
                if fresh:
                    _checkpoint.clear_checkpoints(self.directory)
                _checkpoint.save_checkpoint(self.directory, step, host_state, trace, evals, **kwargs)
            except Exception as e:
                if not (self.multi and collective):
                    raise
                error = e
        if self.multi and collective:
            raise_together(error, f"the checkpoint of step {step}")


__all__ = ["CheckpointStore", "raise_together", "replicated"]
