"""A benchmark process's memory: its peak RSS (``resource.getrusage``: the whole process, the pages
of memory-mapped files it touched included) and its peak anonymous RSS (``RssAnon`` of
/proc/self/status sampled every 20 ms in a thread: the memory the process itself holds, without
file pages the kernel can drop and read again). Linux; elsewhere RssAnon is NaN."""

from __future__ import annotations

import resource
import threading


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def status_mib(field: str) -> float:
    """A field of /proc/self/status (Linux) in MiB, NaN elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


class AnonPeak:
    """Samples RssAnon every 20 ms in a thread from its creation; ``stop()`` returns the largest seen."""

    def __init__(self):
        self.peak, self._stop = 0.0, threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, status_mib("RssAnon"))

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return max(self.peak, status_mib("RssAnon"))
