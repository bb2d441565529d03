"""Where the optional reference data sets live, and how a configured data path is found."""

from __future__ import annotations

import os
import pathlib
import stat
from typing import Optional

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
)


def shared_data_path(*parts: str) -> Optional[pathlib.Path]:
    """The path of a reference data file in ``$VIJAX_SHARED_DATA``, else in ``../shared/data`` beside
    the current directory or the vijax checkout; None when it is absent."""
    env = os.environ.get("VIJAX_SHARED_DATA")
    beside = (pathlib.Path.cwd().parent, pathlib.Path(__file__).resolve().parents[3])
    roots = [pathlib.Path(env)] if env else [p / "shared" / "data" for p in beside]
    return next((p for p in (root.joinpath(*parts) for root in roots) if p.exists()), None)


def resolve_data_path(path: str | os.PathLike | None) -> Optional[pathlib.Path]:
    """A data file named in a config: ``path`` when it exists, else the reference data file it names
    (``"wiki_bnpy/vocab.txt"`` -> ``shared_data_path("wiki_bnpy", "vocab.txt")``), else None.

    Examples:
        >>> resolve_data_path("no/such/file.txt") is None
        True
    """
    if not path:
        return None
    if os.path.exists(path):
        return pathlib.Path(path)
    return shared_data_path(*os.fspath(path).split("/"))


def check_regular_file(path: str | os.PathLike) -> str:
    """``path`` as a string, after checking that it names a regular file (or a link to one), before it is opened.

    Raises:
      FileNotFoundError: naming ``path`` when nothing is there.
      ValueError: naming ``path`` and what it is, when it is not a regular file.

    Examples:
        >>> check_regular_file("/")
        Traceback (most recent call last):
        ...
        ValueError: /: is a directory, not a file
    """
    name = os.fspath(path)
    try:
        mode = os.stat(name).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"{name}: no such file") from None
    if not stat.S_ISREG(mode):
        kind = next((k for test, k in _KINDS if test(mode)), "something other than a regular file")
        raise ValueError(f"{name}: is {kind}, not a file")
    return name
