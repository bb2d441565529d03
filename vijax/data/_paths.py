"""Where the optional reference data sets live, and how a configured data path is found."""

from __future__ import annotations

import os
import pathlib
from typing import Optional


def shared_data_path(*parts: str) -> Optional[pathlib.Path]:
    """The path of a reference data file, or None when it is absent.

    Looked up in ``$VIJAX_SHARED_DATA``, else in ``../shared/data`` beside the current directory
    and beside the vijax checkout. A user's machine usually has none of them: callers skip.
    """
    env = os.environ.get("VIJAX_SHARED_DATA")
    roots = (
        [pathlib.Path(env)]
        if env
        else [
            pathlib.Path.cwd().parent / "shared" / "data",
            pathlib.Path(__file__).resolve().parents[3] / "shared" / "data",
        ]
    )
    for root in roots:
        p = root.joinpath(*parts)
        if p.exists():
            return p
    return None


def resolve_data_path(path: str | os.PathLike | None) -> Optional[pathlib.Path]:
    """A data file named in a config: ``path`` itself when it exists, else the reference data
    file it names under the shared data folder (``"wiki_bnpy/vocab.txt"`` ->
    ``shared_data_path("wiki_bnpy", "vocab.txt")``), else None (also for an empty ``path``).

    Examples:
        >>> resolve_data_path("no/such/file.txt") is None
        True
    """
    if not path:
        return None
    if os.path.exists(path):
        return pathlib.Path(path)
    return shared_data_path(*os.fspath(path).split("/"))
