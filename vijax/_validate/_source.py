"""Arrays whose values were checked where they were made, so that a step need not check them again.

A ``Corpus`` checks its word ids and counts once, when it is built; the minibatches it cuts
(``Corpus.batch``, hence every ``Minibatcher`` batch) are read-only NumPy copies of those values.
``mark_source_checked`` records such an array with what its maker guarantees about it (word ids in
``[0, V)``, or counts finite, >= 0 and whole); ``source_guarantee`` gives that guarantee back for
the very same array object while it is still read-only, and None for anything else (a copy, a
device array, the result of any operation on it, an array made writeable again). The records are
weak: they do not keep an array alive.

A traced array carries no such record: the minibatch type (``vijax.data.CorpusBatch``) carries the
guarantee through ``jit`` in its pytree metadata instead (docs/design.md, "Checked steps").
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Hashable, Optional

import numpy as np

_LOCK = threading.Lock()  # a Minibatcher's batches may be cut in a prefetch thread
_MARKS: dict = {}  # id(array) -> (weak reference to it, guarantee); dropped when the array dies


def mark_source_checked(array: np.ndarray, guarantee: Hashable) -> np.ndarray:
    """Records that the values of ``array`` (a read-only NumPy array its maker has just filled from
    checked data) satisfy ``guarantee`` (a hashable description, e.g. ``("word ids", V)``), and
    returns it."""
    if not isinstance(array, np.ndarray) or array.flags.writeable:
        raise TypeError("mark_source_checked takes a read-only NumPy array")
    key = id(array)

    def forget(ref):  # runs as the array dies, before its id can be reused
        with _LOCK:
            if _MARKS.get(key, (None,))[0] is ref:
                del _MARKS[key]

    with _LOCK:
        _MARKS[key] = (weakref.ref(array, forget), guarantee)
    return array


def source_guarantee(array: Any) -> Optional[Hashable]:
    """What the maker of ``array`` guaranteed about its values (``mark_source_checked``), or None:
    only for the very array object it marked, while that array is still read-only."""
    if not isinstance(array, np.ndarray) or array.flags.writeable:
        return None
    with _LOCK:
        ref, guarantee = _MARKS.get(id(array), (None, None))
    return guarantee if ref is not None and ref() is array else None
