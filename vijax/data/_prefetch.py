"""Background-thread prefetch of host minibatches, so that the device never waits on the host. Both kinds give the
source's items in its order, raise a failure of the thread in the consumer at its item, and stop the thread on
``close()``, the end of a ``with`` block or exhaustion.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Iterable, Iterator, NamedTuple, Optional

from vijax._validate import ArgumentError, check_int

_DONE = object()


class _Failure(NamedTuple):
    exc: BaseException


class _Worker:
    """A daemon thread that puts ``next(source)`` into a bounded queue until ``stop``."""

    def __init__(self, source: Iterator, depth: int):
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._source = source
        self._thread = threading.Thread(target=self._work, name="vijax-prefetch", daemon=True)
        self._thread.start()

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _work(self):
        try:
            for item in self._source:
                if not self._put(item):
                    return
        except BaseException as e:  # handed to the consumer, raised there
            self._put(_Failure(e))
            return
        self._put(_DONE)

    def get(self):
        item = self._queue.get()
        if isinstance(item, _Failure):
            self.stop()
            raise item.exc
        return item

    def stop(self):
        self._stop.set()
        while True:  # unblock a put waiting on a full queue
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join()


class _Owner:
    """An optional ``_Worker`` that ``close()`` stops (also at the end of a ``with`` block, or when collected)."""

    _worker: Optional[_Worker] = None

    def close(self) -> None:
        """Stops the thread (idempotent)."""
        if self._worker is not None:
            self._worker.stop()
            self._worker = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class prefetch(_Owner):
    """An iterator over ``iterable``'s items, produced ``depth`` ahead in a background thread.

    Args:
      iterable: any iterable (e.g. a ``Minibatcher`` or its ``chunks(n)``).
      depth: the most items held ready (the queue's bound).

    Examples:
      >>> list(prefetch(range(5), depth=2))
      [0, 1, 2, 3, 4]
    """

    def __init__(self, iterable: Iterable, depth: int = 2):
        self._worker: Optional[_Worker] = _Worker(iter(iterable), check_int("depth", depth))

    def __iter__(self):
        return self

    def __next__(self):
        if self._worker is None:
            raise StopIteration
        item = self._worker.get()
        if item is _DONE:
            self.close()
            raise StopIteration
        return item


class PrefetchHostBatches(_Owner):
    """``host_batches(t0, n)`` (e.g. ``Minibatcher.host_batches``) with the next calls ``(t0 + n, n), ...``
    computed ahead in a background thread; any other call is computed directly and restarts the thread.

    Args:
      host_batches: a function ``(t0, n) -> batches`` of the update indices alone.
      depth: the most chunks held ready.

    Examples:
      >>> f = PrefetchHostBatches(lambda t0, n: list(range(t0, t0 + n)), depth=2)
      >>> f(0, 3), f(3, 3), f(10, 2)
      ([0, 1, 2], [3, 4, 5], [10, 11])
      >>> f.close()
    """

    def __init__(self, host_batches: Callable, depth: int = 2):
        if not callable(host_batches):
            raise ArgumentError("host_batches", f"host_batches must be callable, got {type(host_batches).__name__}")
        self.host_batches = host_batches
        self.depth = check_int("depth", depth)
        self._worker: Optional[_Worker] = None
        self._next: Optional[tuple[int, int]] = None  # the (t0, n) the queue's head answers

    def _restart(self, t0: int, n: int):
        self.close()
        fn = self.host_batches  # not self: an unclosed prefetcher can still be collected (and closed)

        def ahead(t=t0):
            while True:
                yield fn(t, n)
                t += n

        self._worker = _Worker(ahead(), self.depth)
        self._next = (t0, n)

    def __call__(self, t0: int, n: int):
        t0, n = int(t0), int(n)
        if self._worker is None or self._next != (t0, n):
            out = self.host_batches(t0, n)
            self._restart(t0 + n, n)
            return out
        out = self._worker.get()
        self._next = (t0 + n, n)
        return out

    def close(self) -> None:
        """Stops the thread (idempotent); a later call starts it again."""
        super().close()
        self._next = None
