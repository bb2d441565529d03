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
_ARRAYS: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()
_GUARANTEES: dict = {}  # id -> guarantee, pruned with the array (weakref.finalize)


def mark_source_checked(array: np.ndarray, guarantee: Hashable) -> np.ndarray:
    """Records that the values of ``array`` (a read-only NumPy array its maker has just filled from
    checked data) satisfy ``guarantee`` (a hashable description, e.g. ``("word ids", V)``), and
    returns it."""
    if not isinstance(array, np.ndarray) or array.flags.writeable:
        raise TypeError("mark_source_checked takes a read-only NumPy array")
    key = id(array)
    with _LOCK:
        _ARRAYS[key] = array
        _GUARANTEES[key] = guarantee
    weakref.finalize(array, _forget, key)
    return array


def _forget(key: int) -> None:
    with _LOCK:
        if key not in _ARRAYS:  # not reused by a newer array at the same address
            _GUARANTEES.pop(key, None)


def source_guarantee(array: Any) -> Optional[Hashable]:
    """What the maker of ``array`` guaranteed about its values (``mark_source_checked``), or None:
    only for the very array object it marked, while that array is still read-only."""
    if not isinstance(array, np.ndarray) or array.flags.writeable:
        return None
    key = id(array)
    with _LOCK:
        if _ARRAYS.get(key) is not array:
            return None
        return _GUARANTEES.get(key)
