"""Arrays whose values were checked where they were made (a ``Corpus``'s minibatches), so that a step need not
check them again: ``source_guarantee`` gives back the guarantee ``mark_source_checked`` recorded for that very
read-only array object, None for anything else (a copy, a device array). The records are weak references.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Hashable, Optional

import numpy as np

_LOCK = threading.Lock()  # a Minibatcher's batches may be cut in a prefetch thread
_MARKS: dict = {}  # id(array) -> (weak reference to it, guarantee); dropped when the array dies


def mark_source_checked(array: np.ndarray, guarantee: Hashable) -> np.ndarray:
    """Records that the values of the read-only ``array`` satisfy ``guarantee`` (``("word ids", V)``); returns it."""
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
    """What the maker of ``array`` guaranteed about its values (``mark_source_checked``), or None."""
    if not isinstance(array, np.ndarray) or array.flags.writeable:
        return None
    with _LOCK:
        ref, guarantee = _MARKS.get(id(array), (None, None))
    return guarantee if ref is not None and ref() is array else None
