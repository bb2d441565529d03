"""Checkpoints of a run: one ``ckpt_<step>.npz`` per checkpoint with the state's leaves (``state/<i>``), the
trace (``trace/<name>``), ``__meta__`` (JSON) and ``__checksum__`` (SHA-256 of the rest), written atomically.
With several processes (``CheckpointStore``) process 0 alone reads, writes and locks the folder, and an
error on any process is raised on every process.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import uuid
import warnings
from typing import Any, Iterator, Mapping, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import ArgumentError
from vijax.types import PyTree
from ._lock import hold_folder

_FORMAT_VERSION = 2  # 2: __checksum__ and the fingerprint; version 1 files load without a check
_NAME = re.compile(r"^ckpt_(\d+)\.npz$")


class Checkpoint(NamedTuple):
    """A loaded checkpoint: ``step`` updates applied to ``state``, the ``trace`` and ``evals`` so far, the
    cumulative ``wall_time``, the uint32 ``key_data`` of the run's key and its ``fingerprint`` (or None)."""

    step: int
    state: PyTree
    trace: dict
    evals: list
    wall_time: float
    key_data: np.ndarray
    fingerprint: Optional[dict] = None


class CheckpointError(ValueError):
    """A checkpoint that cannot be used for this run; ``fingerprint``: the one it was saved with, if read."""

    fingerprint: Optional[dict] = None


class CorruptCheckpointError(CheckpointError):
    """A checkpoint file that cannot be read back intact (truncated, damaged, checksum mismatch)."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"checkpoint {path} is corrupt: {reason}")
        self.path, self.reason = path, reason


class ConfigChangedError(CheckpointError):
    """A resume whose run fingerprint (config, data) differs from the checkpoint's."""

    def __init__(self, message: str, changed: list):
        super().__init__(message)
        self.changed = changed


def _checksum(arrays: dict) -> str:
    """SHA-256 over the members' names, shapes and raw bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}\0{a.shape}\0".encode())
        h.update(a.reshape(-1).view(np.uint8) if a.size else b"")
    return h.hexdigest()


def compare_fingerprints(saved: Optional[dict], current: Optional[dict]) -> list[str]:
    """``"key: old -> new"`` lines of the values that differ between two fingerprints whose hashes differ."""
    if not saved or not current or saved.get("hash") == current.get("hash"):
        return []
    old, new, missing = saved.get("values", {}), current.get("values", {}), object()
    pairs = {k: (old.get(k, missing), new.get(k, missing)) for k in sorted(set(old) | set(new))}
    show = lambda v: "(absent)" if v is missing else json.dumps(v)  # noqa: E731
    lines = [f"{k}: {show(a)} -> {show(b)}" for k, (a, b) in pairs.items() if a != b]
    return lines or ["(the fingerprints differ but no key does: another vijax version?)"]


def checkpoint_path(directory: str, step: int) -> str:
    """The file name of the checkpoint after ``step`` updates."""
    return os.path.join(directory, f"ckpt_{step:010d}.npz")


def list_checkpoints(directory: str) -> list[tuple[int, str]]:
    """``[(step, path), ...]`` of the checkpoints in ``directory``, oldest first."""
    names = os.listdir(directory) if os.path.isdir(directory) else []
    return sorted((int(m.group(1)), os.path.join(directory, m.group())) for m in map(_NAME.match, names) if m)


def check_checkpoint_dir(directory: str, name: str = "checkpoint_dir") -> None:
    """ValueError starting with ``name`` when ``directory`` exists and is not a folder."""
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise ArgumentError(
            name, f"{name}: {directory!r} is a file, not a folder of checkpoints; move it away or choose another folder"
        )


def find_resumable(directory: str, *, stacklevel: int = 2) -> tuple[Optional[str], Optional[bytes]]:
    """``(path, bytes)`` of the newest intact checkpoint of ``directory``, ``(None, None)`` when there is none;
    a newer corrupt one is reported (``RuntimeWarning``) and renamed ``<name>.corrupt``.

    Raises:
      CheckpointError: there are checkpoints but none reads back intact (each one named).
    """
    corrupt = []
    for _, path in reversed(list_checkpoints(directory)):
        try:
            with open(path, "rb") as f:
                data = f.read()
            _read(path, data)
        except FileNotFoundError:
            continue
        except CorruptCheckpointError as e:
            corrupt.append(e)
            os.replace(path, path + ".corrupt")
            warnings.warn(
                f"{e}; it is renamed {os.path.basename(path)}.corrupt and the previous checkpoint is used",
                RuntimeWarning,
                stacklevel=stacklevel + 1,
            )
            continue
        return path, data
    if corrupt:
        raise CheckpointError(f"no intact checkpoint to resume in {directory}: " + "; ".join(str(e) for e in corrupt))
    return None, None


def _leaf_paths(tree: PyTree) -> tuple[list[str], list[Any]]:
    with_path, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [jax.tree_util.keystr(p) or "<root>" for p, _ in with_path], [leaf for _, leaf in with_path]


def jsonable(x: Any) -> Any:
    """Numbers, arrays and containers as plain JSON values (non-finite floats become None)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (jax.Array, np.ndarray, np.generic)):
        x = np.asarray(x)
        return jsonable(x.item() if x.ndim == 0 else x.tolist())
    if isinstance(x, float) and not np.isfinite(x):
        return None
    return x


def save_checkpoint(
    directory: str,
    step: int,
    state: PyTree,
    trace: dict,
    evals: list,
    *,
    wall_time: float,
    key_data: np.ndarray,
    keep: int = 2,
    fingerprint: Optional[dict] = None,
) -> str:
    """Writes a checkpoint (the fields of ``Checkpoint``) atomically into ``directory`` (created if missing)
    and deletes all but the ``keep`` (at least 1) most recent ones; returns the path written.

    Raises:
      ValueError: naming ``directory`` when it is a file, not a folder.
    """
    check_checkpoint_dir(directory)
    os.makedirs(directory, exist_ok=True)
    paths, leaves = _leaf_paths(state)
    leaves = [np.asarray(leaf) for leaf in leaves]
    meta = {
        "version": _FORMAT_VERSION,
        "step": int(step),
        "paths": paths,
        "shapes": [list(leaf.shape) for leaf in leaves],
        "dtypes": [leaf.dtype.name for leaf in leaves],
        "trace_names": list(trace),
        "trace_dtypes": [np.asarray(v).dtype.name for v in trace.values()],
        "evals": jsonable(evals),
        "wall_time": float(wall_time),
        "key_data": np.asarray(key_data).astype(np.uint32).tolist(),
        "fingerprint": fingerprint,
    }
    arrays = {f"state/{i}": leaf for i, leaf in enumerate(leaves)}
    arrays.update({f"trace/{name}": np.asarray(v) for name, v in trace.items()})
    arrays["__meta__"] = np.array(json.dumps(meta))
    arrays["__checksum__"] = np.array(_checksum(arrays))
    final = checkpoint_path(directory, step)
    tmp = os.path.join(directory, f".ckpt_{uuid.uuid4().hex}.tmp")  # the umask's mode (0644), not mkstemp's 0600
    try:
        with open(tmp, "xb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        with contextlib.suppress(OSError):  # makes the rename durable, where folders can be opened
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    for _, old in list_checkpoints(directory)[: -max(keep, 1)]:
        with contextlib.suppress(FileNotFoundError):  # gone already: what rotation wants
            os.remove(old)
    return final


def load_checkpoint(path: str, template: PyTree, data: Optional[bytes] = None) -> Checkpoint:
    """Loads the checkpoint ``path`` (or its bytes ``data``) into the structure of ``template`` (a state pytree
    or its ``jax.eval_shape``).

    Raises:
      CorruptCheckpointError: the file cannot be read back intact (the message names it).
      CheckpointError: (a ValueError) its leaves' paths, shapes or dtypes are not the template's.
    """
    meta, leaves, trace = _read(path, data)
    paths, t_leaves = _leaf_paths(template)
    dtype = lambda x: np.dtype(x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype).name  # noqa: E731
    expected = [f"{p} {tuple(np.shape(x))} {dtype(x)}" for p, x in zip(paths, t_leaves)]
    found = [f"{p} {tuple(s)} {d}" for p, s, d in zip(meta["paths"], meta["shapes"], meta["dtypes"])]
    if expected != found:
        n = max(len(expected), len(found))
        pad = lambda xs: xs + ["nothing"] * (n - len(xs))  # noqa: E731
        diffs = [
            f"  leaf {i}: expected {e}, found {g}" for i, (e, g) in enumerate(zip(pad(expected), pad(found))) if e != g
        ]
        error = CheckpointError(
            f"checkpoint {path} does not match the state's structure "
            f"({len(found)} leaves saved, {len(expected)} expected):\n" + "\n".join(diffs[:10])
        )
        error.fingerprint = meta.get("fingerprint")
        raise error
    state = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(template), [jnp.asarray(x) for x in leaves])
    key_data, fingerprint = np.asarray(meta["key_data"], np.uint32), meta.get("fingerprint")
    return Checkpoint(int(meta["step"]), state, trace, meta["evals"], float(meta["wall_time"]), key_data, fingerprint)


def _read(path: str, data: Optional[bytes] = None) -> tuple[dict, list, dict]:
    """The meta data, state leaves and trace of a checkpoint, checksum verified (``CorruptCheckpointError``)."""

    def as_dtype(a: np.ndarray, name: str) -> np.ndarray:  # np.savez stores bfloat16 & co. as void bytes
        return a if a.dtype == jnp.dtype(name) else a.view(jnp.dtype(name))

    try:
        with np.load(path if data is None else io.BytesIO(data), allow_pickle=False) as f:
            arrays = {name: f[name] for name in f.files}
        meta = json.loads(str(arrays["__meta__"]))
        if meta.get("version") not in (1, 2):
            raise CheckpointError(f"checkpoint {path}: unknown format version {meta.get('version')}")
        if meta["version"] >= 2 and str(arrays.pop("__checksum__")) != _checksum(arrays):
            raise CorruptCheckpointError(path, "its checksum does not match its contents")
        leaves = [as_dtype(arrays[f"state/{i}"], d) for i, d in enumerate(meta["dtypes"])]
        trace = {n: as_dtype(arrays[f"trace/{n}"], d) for n, d in zip(meta["trace_names"], meta["trace_dtypes"])}
        for key in ("step", "paths", "shapes", "evals", "wall_time", "key_data"):
            meta[key]  # noqa: B018 (a KeyError is a damaged file)
    except (CheckpointError, FileNotFoundError):
        raise
    except Exception as e:  # zipfile.BadZipFile, EOFError, zlib.error, KeyError, JSON errors, ...
        raise CorruptCheckpointError(path, f"{type(e).__name__}: {e}") from None
    return meta, leaves, trace


# ----------------------------------------------------------------------------- several processes
def _broadcast_bytes(data: bytes, source: int) -> bytes:
    """``data`` of process ``source``, on every process (exact: bytes summed with zeros)."""
    from jax.experimental import multihost_utils as mh

    me = jax.process_index() == source
    size = np.frombuffer(len(data).to_bytes(8, "little") if me else bytes(8), np.uint8)
    n = int.from_bytes(np.asarray(mh.broadcast_one_to_all(size, is_source=me), np.uint8).tobytes(), "little")
    if n == 0:
        return b""
    buf = np.frombuffer(data, np.uint8) if me else np.zeros(n, np.uint8)
    return np.asarray(mh.broadcast_one_to_all(buf, is_source=me), np.uint8).tobytes()


def raise_together(error: Optional[BaseException], what: str) -> None:
    """Raises on every process when ``error`` is not None on any (collective): that process its error, the
    others a ``CheckpointError`` naming ``what``, the process and its message."""
    if jax.process_count() == 1:
        if error is not None:
            raise error
        return
    from jax.experimental import multihost_utils as mh

    bad = np.flatnonzero(np.asarray(mh.process_allgather(np.int32(error is not None))).reshape(-1))
    if bad.size == 0:
        return
    source = int(bad[0])
    message = _broadcast_bytes(str(error).encode() if error is not None else b"", source).decode()
    if error is not None:
        raise error
    raise CheckpointError(f"{what}: process {source} failed: {message}")


def replicated(state: PyTree) -> PyTree:
    """With several processes, the state's leaves replicated over every device, as the chunks leave them."""
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


def _split(x) -> bool:
    """Whether ``x`` is an array split across processes."""
    return isinstance(x, jax.Array) and not x.is_fully_addressable and not x.is_fully_replicated


class CheckpointStore:
    """A run's checkpoint folder as this process sees it; build it in every process at the same point.
    ``settings``: the run's other settings every process must share (name -> a JSON value).

    Attributes:
      enabled: whether the run writes checkpoints (process 0 has a ``checkpoint_dir``).
      directory: the folder this process reads and writes (None except on process 0).
      multi: whether the run has several processes.
    """

    def __init__(
        self,
        checkpoint_dir: Optional[str],
        resume: bool,
        checkpoint_every: Optional[int],
        settings: Optional[Mapping[str, Any]] = None,
    ):
        self.multi = jax.process_count() > 1
        if not self.multi:
            if checkpoint_dir is None and (checkpoint_every is not None or resume):
                raise ArgumentError("checkpoint_every", "checkpoint_every and resume need a checkpoint_dir")
            self.enabled, self.directory = checkpoint_dir is not None, checkpoint_dir
            return
        from jax.experimental import multihost_utils as mh

        mine = {"resume": bool(resume), "checkpoint_every": checkpoint_every, **(settings or {})}
        data = json.dumps([checkpoint_dir is not None, mine]).encode()  # every process's, in process order:
        sizes = np.asarray(mh.process_allgather(np.int32(len(data)))).reshape(-1)
        buf = np.zeros(int(sizes.max()), np.uint8)
        buf[: len(data)] = np.frombuffer(data, np.uint8)
        gathered = np.asarray(mh.process_allgather(buf), np.uint8).reshape(len(sizes), -1)
        rows = [json.loads(gathered[i, : sizes[i]].tobytes()) for i in range(len(sizes))]
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
        self.directory = checkpoint_dir if jax.process_index() == 0 else None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Holds the folder for the ``with`` block (process 0); a file or a held folder raises on every process."""
        with contextlib.ExitStack() as stack:
            error = None
            if self.enabled and self.directory is not None:
                try:
                    check_checkpoint_dir(self.directory)
                    stack.enter_context(hold_folder(self.directory, "checkpoint_dir"))
                except (ValueError, OSError) as e:
                    error = e
            if self.enabled:
                raise_together(error, "checkpoint_dir")
            yield

    def resumable(self) -> tuple[Optional[str], Optional[bytes]]:
        """``find_resumable`` of process 0, on every process."""
        found, error = (None, None), None
        if self.directory is not None:
            try:
                found = find_resumable(self.directory, stacklevel=4)
            except CheckpointError as e:
                error = e
        raise_together(error, "resume")
        if not self.multi:
            return found
        path = json.loads(_broadcast_bytes(json.dumps(found[0]).encode(), 0).decode())
        return (None, None) if path is None else (path, _broadcast_bytes(found[1] or b"", 0))

    def save(
        self, step: int, state: PyTree, trace: dict, evals: list, *, fresh: bool, collective: bool = True, **kwargs
    ) -> None:
        """Writes a checkpoint on process 0 (first removing older ones when ``fresh``). ``collective``: every
        process calls it; otherwise (an interrupt) process 0 writes alone when it holds every leaf."""
        if not collective and any(_split(x) for x in jax.tree.leaves(state)):
            return
        if collective:  # leaves split across processes gathered (a collective call)
            from jax.experimental import multihost_utils as mh

            state = jax.tree.map(lambda x: np.asarray(mh.process_allgather(x, tiled=True) if _split(x) else x), state)
        error = None
        if self.directory is not None:
            try:
                for _, path in list_checkpoints(self.directory) if fresh else ():
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(path)
                save_checkpoint(self.directory, step, state, trace, evals, **kwargs)
            except Exception as e:
                if not (self.multi and collective):
                    raise
                error = e
        if self.multi and collective:
            raise_together(error, f"the checkpoint of step {step}")
