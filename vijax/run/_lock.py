"""A folder that one run writes at a time: an exclusive ``fcntl.flock`` on ``<path>/.vijax.lock``, taken
without waiting, holding ``"<pid> <host>"``. The kernel drops it when the holder ends; the file is never
deleted (else two runs could lock two files). A folder inside one this process holds is held once; only
process 0 of a distributed run locks; without ``fcntl`` nothing is locked.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from typing import Iterator, Type

try:
    import fcntl
except ImportError:  # pragma: no cover (Windows)
    fcntl = None

LOCK_FILE = ".vijax.lock"
_HELD: dict = {}  # real path of a folder this process holds -> its lock file's descriptor


def _holder(fd: int) -> str:
    """The holder's ``"pid N on HOST"`` as it wrote it, or a phrase saying it has not yet."""
    try:
        text = os.pread(fd, 256, 0).decode("utf-8", "replace").split()
    except OSError:
        text = []
    if len(text) >= 2 and text[0].isdigit():
        return f"pid {text[0]} on {text[1]}"
    return "a process that has not yet written its pid"


@contextlib.contextmanager
def hold_folder(path: str, name: str, error: Type[Exception] = ValueError) -> Iterator[None]:
    """Holds the folder ``path`` for the ``with`` block (creating it).

    Args:
      path: the folder.
      name: the argument or config key it comes from, which starts every error message.
      error: the class of the errors raised (``ValueError`` or a subclass, e.g. ``ConfigError``).

    Raises:
      error: ``path`` is a file, cannot be created, or another run holds it (its pid named).
    """
    if os.path.lexists(path) and not os.path.isdir(path):
        raise error(f"{name}: {path!r} is a file, not a folder; move it away or choose another folder")
    real = os.path.realpath(path)
    held = any(real == p or real.startswith(p.rstrip(os.sep) + os.sep) for p in _HELD)
    jax = sys.modules.get("jax")  # not imported: no distributed run (nor a reason to start a backend)
    writer = jax is None or not jax.distributed.is_initialized() or jax.process_index() == 0
    if fcntl is None or held or not writer:
        os.makedirs(path, exist_ok=True)
        yield
        return
    try:
        os.makedirs(path, exist_ok=True)
        fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise error(f"{name}: cannot write the output folder {path!r}: {e.strerror or e}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise error(
                f"{name}: the folder {path!r} is in use by another vijax run ({_holder(fd)}); wait until "
                "it ends or choose another folder"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        _HELD[real] = fd
        try:
            yield
        finally:
            del _HELD[real]
            os.ftruncate(fd, 0)  # before the unlock: the next holder writes its own pid
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
