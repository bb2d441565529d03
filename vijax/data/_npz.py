"""Uncompressed ``.npz`` archives written in pieces (``StreamingNpzWriter``) and read back memory-mapped
(``open_npz``, which ``np.load(path, mmap_mode="r")`` does not do for an ``.npz``)."""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import zipfile
from typing import Mapping

import numpy as np
from numpy.lib import format as npy_format

from vijax.data._paths import check_regular_file
from vijax._validate import ArgumentError

_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # the fixed 30 bytes of a zip local file header
_LOCAL_MAGIC = b"PK\x03\x04"
_COPY_BLOCK = 1 << 20  # bytes copied at a time when an archive is assembled
_HEADER_READERS = {(1, 0): npy_format.read_array_header_1_0, (2, 0): npy_format.read_array_header_2_0}


def open_npz(path: str | os.PathLike, mmap: bool = True) -> dict[str, np.ndarray]:
    """All arrays of an ``.npz`` archive, numeric ones memory-mapped read-only when ``mmap``.

    Args:
      path: an archive of ``np.savez`` or ``StreamingNpzWriter`` (not compressed when ``mmap``).
      mmap: map numeric members with ``np.memmap(mode="r")``; string and zero-size members are read.

    Raises:
      FileNotFoundError: for a missing file.
      ValueError: naming the file: not a readable ``.npz`` archive, or not a regular file.
    """
    check_regular_file(path)
    try:
        return _open_npz(path, mmap)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, KeyError) as e:
        msg = str(e)
        if os.fspath(path) in msg:
            raise
        raise ValueError(f"{os.fspath(path)!r} is not a readable .npz archive (truncated or corrupt?): {msg}") from e


def _open_npz(path: str | os.PathLike, mmap: bool) -> dict[str, np.ndarray]:
    if not mmap:
        with np.load(path, allow_pickle=False) as z:
            return {name: z[name] for name in z.files}
    out = {}
    with zipfile.ZipFile(path) as zf, open(path, "rb") as fp:
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                continue
            name = info.filename[: -len(".npy")]
            if info.compress_type != zipfile.ZIP_STORED:
                raise ValueError(
                    f"member {name!r} of {os.fspath(path)!r} is compressed and cannot be "
                    "memory-mapped; load with mmap=False or save uncompressed"
                )
            fp.seek(info.header_offset)
            fields = _LOCAL_HEADER.unpack(fp.read(_LOCAL_HEADER.size))
            if fields[0] != _LOCAL_MAGIC:
                raise ValueError(f"corrupt zip archive: bad local header for member {info.filename!r}")
            fp.seek(info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1])  # past the name and extra field
            version = npy_format.read_magic(fp)
            if version not in _HEADER_READERS:
                raise ValueError(f"unsupported .npy format version {version}")
            shape, fortran, dtype = _HEADER_READERS[version](fp)
            offset = fp.tell()
            if dtype.hasobject:
                raise ValueError(f"member {name!r} holds Python objects; refusing to unpickle it")
            if dtype.kind in "US" or int(np.prod(shape)) == 0:
                with zf.open(info) as member:
                    out[name] = npy_format.read_array(member, allow_pickle=False)
            else:
                out[name] = np.memmap(
                    path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C"
                )
    return out


class FileWriter:
    """A writer that ``close()`` finishes; a ``with`` block that raises discards what it wrote instead."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self._discard()
        return False


class StreamingNpzWriter(FileWriter):
    """Writes an uncompressed ``.npz`` whose arrays grow along their first axis, chunk by chunk.

    ``path`` is either untouched or the complete archive, never a partial one; leaving a ``with`` block by an
    exception writes nothing. ``streams``: ``name -> (dtype, trailing_shape)`` of the arrays to stream.
    """

    def __init__(self, path: str | os.PathLike, streams: Mapping[str, tuple]):
        self.path = os.fspath(path)
        self._tmpdir = tempfile.mkdtemp(prefix=".npz-spool-", dir=os.path.dirname(os.path.abspath(self.path)))
        self._streams = {}
        for name, (dtype, trailing) in streams.items():
            spool = os.path.join(self._tmpdir, f"{len(self._streams)}.raw")
            self._streams[name] = [np.dtype(dtype), tuple(trailing), 0, open(spool, "wb")]
        self._arrays: dict[str, np.ndarray] = {}
        self._closed = False

    def append(self, name: str, rows) -> None:
        """Appends ``rows`` (shape ``(n, *trailing)``) to the array ``name``."""
        dtype, trailing, _, fh = self._streams[name]
        rows = np.ascontiguousarray(rows, dtype=dtype)
        if rows.shape[1:] != trailing:
            raise ArgumentError("rows", f"rows for {name!r} must have trailing shape {trailing}, got {rows.shape[1:]}")
        fh.write(rows.tobytes())
        self._streams[name][2] += rows.shape[0]

    def put(self, name: str, array) -> None:
        """Stores a small array whole (written by ``close``)."""
        if name in self._streams:
            raise ValueError(f"{name!r} is a streamed array")
        self._arrays[name] = np.asarray(array)

    def length(self, name: str) -> int:
        """The number of rows appended so far to the streamed array ``name``."""
        return self._streams[name][2]

    def close(self) -> None:
        """Writes the archive and removes the spool folder."""
        if self._closed:
            return
        try:
            for entry in self._streams.values():
                entry[3].close()
            tmp = os.path.join(self._tmpdir, "archive.npz")
            with (
                open(tmp, "wb") as dst,
                zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf,
            ):
                for name, (dtype, trailing, n, fh) in self._streams.items():
                    header = {
                        "descr": npy_format.dtype_to_descr(dtype),
                        "fortran_order": False,
                        "shape": (n, *trailing),
                    }
                    with zf.open(name + ".npy", "w", force_zip64=True) as out, open(fh.name, "rb") as src:
                        npy_format.write_array_header_1_0(out, header)
                        shutil.copyfileobj(src, out, _COPY_BLOCK)
                for name, array in self._arrays.items():
                    with zf.open(name + ".npy", "w", force_zip64=True) as out:
                        npy_format.write_array(out, array, allow_pickle=False)
                zf.close()  # writes the central directory before the flush
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(tmp, self.path)
        finally:
            self._discard()

    def _discard(self) -> None:
        for entry in self._streams.values():
            entry[3].close()
        shutil.rmtree(self._tmpdir, ignore_errors=True)
        self._closed = True
