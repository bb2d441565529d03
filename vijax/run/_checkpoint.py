"""Checkpoints of a run: the state pytree, the trace and evaluations so far, the step count.

One checkpoint is one ``.npz`` file ``ckpt_<step>.npz`` holding

- ``state/<i>``: the i-th leaf of the state, in ``jax.tree_util`` flattening order;
- ``trace/<name>``: every trace array (``"step"`` included);
- ``__meta__``: a JSON string with the step, the leaves' paths, shapes and dtypes, the
  evaluations, the cumulative wall time, the run's key data and, when the caller gives one, the
  run's *fingerprint* (its resolved config and data identity, see ``compare_fingerprints``);
- ``__checksum__``: the SHA-256 of every other member (names, shapes and bytes, in name order).

The tree structure itself is not pickled: loading unflattens the leaves with the treedef of a
*template* state built by the caller, after checking that the paths (``.q_global.eta``, ``[0]``,
...), shapes and dtypes agree. Paths are compared rather than ``str(treedef)`` because a treedef's
string may embed reprs of static fields (functions, addresses) that differ between processes.

Files are written atomically: into a temporary file in the same folder, flushed and fsync-ed,
then moved into place with ``os.replace``, and the folder is fsync-ed so that the rename itself
survives a power loss; a crash leaves the previous checkpoint intact. A file that cannot be read
back (truncated, not a zip, a member missing, a checksum that does not match) raises
``CorruptCheckpointError`` naming the file; ``find_resumable`` then renames it ``<name>.corrupt``
and falls back to the previous one.

Every reader takes the file's bytes as an optional argument (``data``): in a run of several
processes only process 0 reads the folder and sends the bytes of the checkpoint it chose to the
others (``vijax.run._checkpoint_store``), which load them with the same code.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import tempfile
import warnings
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from vijax.types import PyTree
from vijax._validate import ArgumentError

_FORMAT_VERSION = 2  # 2: __checksum__ and the fingerprint; version 1 files load without a check
_READABLE_VERSIONS = (1, 2)
_NAME = re.compile(r"^ckpt_(\d+)\.npz$")


class Checkpoint(NamedTuple):
    """A loaded checkpoint.

    Attributes:
      step: the number of updates applied to ``state``.
      state: the state pytree (leaves as ``jax.Array``), with the template's tree structure.
      trace: dict name -> ``np.ndarray`` over the ``step`` first updates.
      evals: list of evaluation dicts.
      wall_time: cumulative seconds spent by the runs that produced it.
      key_data: the uint32 data of the run's key (to refuse a resume with another key).
      fingerprint: the run fingerprint it was saved with, or None.
    """

    step: int
    state: PyTree
    trace: dict
    evals: list
    wall_time: float
    key_data: np.ndarray
    fingerprint: Optional[dict] = None


class CheckpointError(ValueError):
    """A checkpoint that cannot be used for this run; the message names the file."""


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


def _fsync_dir(directory: str) -> None:
    """Makes a rename inside ``directory`` durable (no-op where folders cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def compare_fingerprints(saved: Optional[dict], current: Optional[dict]) -> list[str]:
    """The keys whose values differ between two fingerprints, as ``"key: old -> new"`` lines.

    A fingerprint is ``{"hash": str, "values": {dotted key: JSON value}}`` (``vijax.run`` builds
    it from a resolved config with ``config_fingerprint``); the hash decides, the values name
    the keys. Either one None: nothing to compare (an empty list)."""
    if not saved or not current or saved.get("hash") == current.get("hash"):
        return []
    old, new = saved.get("values", {}), current.get("values", {})
    missing = object()
    lines = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, missing), new.get(key, missing)
        if a != b:
            show = lambda v: "(absent)" if v is missing else json.dumps(v)  # noqa: E731
            lines.append(f"{key}: {show(a)} -> {show(b)}")
    return lines or ["(the fingerprints differ but no key does: another vijax version?)"]


def checkpoint_path(directory: str, step: int) -> str:
    """The file name of the checkpoint after ``step`` updates."""
    return os.path.join(directory, f"ckpt_{step:010d}.npz")


def list_checkpoints(directory: str) -> list[tuple[int, str]]:
    """``[(step, path), ...]`` of the checkpoints in ``directory``, oldest first."""
    if not os.path.isdir(directory):
        return []
    found = []
    for name in os.listdir(directory):
        m = _NAME.match(name)
        if m:
            found.append((int(m.group(1)), os.path.join(directory, name)))
    return sorted(found)


def latest_checkpoint(directory: str) -> Optional[str]:
    """The path of the checkpoint with the most steps in ``directory``, or None."""
    found = list_checkpoints(directory)
    return found[-1][1] if found else None


def clear_checkpoints(directory: str) -> None:
    """Removes every checkpoint file from ``directory`` (other files are left alone)."""
    for _, path in list_checkpoints(directory):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def check_checkpoint_dir(directory: str, name: str = "checkpoint_dir") -> None:
    """ValueError starting with ``name`` when ``directory`` exists and is not a folder."""
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise ArgumentError(
            name, f"{name}: {directory!r} is a file, not a folder of checkpoints; move it away or choose another folder"
        )


def read_bytes(path: str) -> bytes:
    """The bytes of a checkpoint file (``FileNotFoundError`` when it is gone)."""
    with open(path, "rb") as f:
        return f.read()


def find_resumable(directory: str, *, stacklevel: int = 2) -> tuple[Optional[str], Optional[bytes]]:
    """The newest checkpoint of ``directory`` that reads back intact, as ``(path, bytes)``;
    ``(None, None)`` when there is none at all.

    A newer one that does not read back intact (``CorruptCheckpointError``) is reported with a
    ``RuntimeWarning`` naming it, renamed ``<name>.corrupt`` (out of the history, kept for
    inspection) and skipped. Only the file's integrity is checked here: whether it fits the run
    (structure, key, fingerprint) is ``load_checkpoint``'s and the runner's business.

    Raises:
      CheckpointError: there are checkpoints but none reads back intact (each one named).
    """
    corrupt = []
    for _, path in reversed(list_checkpoints(directory)):
        try:
            data = read_bytes(path)
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
    paths = [jax.tree_util.keystr(p) or "<root>" for p, _ in with_path]
    return paths, [leaf for _, leaf in with_path]


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
    """Writes a checkpoint atomically and deletes all but the ``keep`` most recent ones.

    Args:
      directory: the checkpoint folder (created if missing).
      step: the number of updates applied to ``state``.
      state: the state pytree.
      trace: dict name -> array over the first ``step`` updates.
      evals: list of evaluation dicts (JSON-able after converting numbers).
      wall_time: cumulative seconds of the run so far.
      key_data: the uint32 data of the run's key.
      keep: how many checkpoints to keep (at least 1).
      fingerprint: the run's fingerprint (``compare_fingerprints``), stored for resume checks.

    Returns:
      The path written.

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
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ckpt_", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        _fsync_dir(directory)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    for _, old in list_checkpoints(directory)[: -max(keep, 1)]:
        with contextlib.suppress(FileNotFoundError):  # gone already: what rotation wants
            os.remove(old)
    return final


def load_checkpoint(path: str, template: PyTree, data: Optional[bytes] = None) -> Checkpoint:
    """Loads a checkpoint into the tree structure of ``template``.

    Args:
      path: a file written by ``save_checkpoint``.
      template: a state pytree (or its ``jax.eval_shape``) with the expected structure.
      data: the file's bytes, read already (then ``path`` only names it); None reads ``path``.

    Returns:
      The ``Checkpoint``.

    Raises:
      CorruptCheckpointError: the file cannot be read back intact (the message names it).
      CheckpointError: (a ValueError) if the checkpoint's leaves (paths, shapes or dtypes) do not
        match the template's.
    """
    meta, leaves, trace = _read(path, data)
    paths, t_leaves = _leaf_paths(template)
    expected = [(p, tuple(np.shape(x)), _dtype_name(x)) for p, x in zip(paths, t_leaves)]
    found = [(p, tuple(s), d) for p, s, d in zip(meta["paths"], meta["shapes"], meta["dtypes"])]
    if expected != found:
        diffs = []
        for i in range(max(len(expected), len(found))):
            e = expected[i] if i < len(expected) else None
            g = found[i] if i < len(found) else None
            if e != g:
                diffs.append(f"  leaf {i}: expected {_describe(e)}, found {_describe(g)}")
        raise CheckpointError(
            f"checkpoint {path} does not match the state's structure "
            f"({len(found)} leaves saved, {len(expected)} expected):\n" + "\n".join(diffs[:10])
        )
    treedef = jax.tree_util.tree_structure(template)
    state = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(leaf) for leaf in leaves])
    return Checkpoint(
        step=int(meta["step"]),
        state=state,
        trace=trace,
        evals=meta["evals"],
        wall_time=float(meta["wall_time"]),
        key_data=np.asarray(meta["key_data"], np.uint32),
        fingerprint=meta.get("fingerprint"),
    )


def read_fingerprint(path: str, data: Optional[bytes] = None) -> Optional[dict]:
    """The fingerprint a checkpoint was saved with (None if none), reading only its meta data
    (from ``data``, its bytes, when given); ``CorruptCheckpointError`` when that cannot be read."""
    try:
        with np.load(path if data is None else io.BytesIO(data), allow_pickle=False) as f:
            return json.loads(str(f["__meta__"])).get("fingerprint")
    except Exception as e:
        raise CorruptCheckpointError(path, f"{type(e).__name__}: {e}") from None


def _read(path: str, data: Optional[bytes] = None) -> tuple[dict, list, dict]:
    """The meta data, state leaves and trace of a checkpoint file (of its bytes ``data`` when
    given), checksum verified; ``CorruptCheckpointError`` for anything that does not read back
    intact."""
    try:
        with np.load(path if data is None else io.BytesIO(data), allow_pickle=False) as f:
            arrays = {name: f[name] for name in f.files}
        meta = json.loads(str(arrays["__meta__"]))
        if meta.get("version") not in _READABLE_VERSIONS:
            raise CheckpointError(f"checkpoint {path}: unknown format version {meta.get('version')}")
        if meta["version"] >= 2:
            stored = str(arrays.pop("__checksum__"))
            if _checksum(arrays) != stored:
                raise CorruptCheckpointError(path, "its checksum does not match its contents")
        leaves = [_as_dtype(arrays[f"state/{i}"], d) for i, d in enumerate(meta["dtypes"])]
        trace = {
            name: _as_dtype(arrays[f"trace/{name}"], d) for name, d in zip(meta["trace_names"], meta["trace_dtypes"])
        }
        for key in ("step", "paths", "shapes", "evals", "wall_time", "key_data"):
            meta[key]  # noqa: B018 (a KeyError is a damaged file)
    except CheckpointError:
        raise
    except FileNotFoundError:
        raise
    except Exception as e:  # zipfile.BadZipFile, EOFError, zlib.error, KeyError, JSON errors, ...
        raise CorruptCheckpointError(path, f"{type(e).__name__}: {e}") from None
    return meta, leaves, trace


def _describe(entry) -> str:
    if entry is None:
        return "nothing"
    path, shape, dtype = entry
    return f"{path} {shape} {dtype}"


def _dtype_name(x: Any) -> str:
    return np.dtype(x.dtype).name if hasattr(x, "dtype") else np.asarray(x).dtype.name


def _as_dtype(a: np.ndarray, name: str) -> np.ndarray:
    """Undoes ``np.savez`` storing extension dtypes (bfloat16, ...) as raw void bytes."""
    dtype = jnp.dtype(name)
    return a if a.dtype == dtype else a.view(dtype)


__all__ = [
    "Checkpoint",
    "CheckpointError",
    "ConfigChangedError",
    "CorruptCheckpointError",
    "check_checkpoint_dir",
    "checkpoint_path",
    "compare_fingerprints",
    "clear_checkpoints",
    "find_resumable",
    "jsonable",
    "latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "read_bytes",
    "read_fingerprint",
    "save_checkpoint",
]
