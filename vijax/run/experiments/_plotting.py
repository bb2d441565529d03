"""The experiments' figures need matplotlib, which is optional (the extra ``vijax-toolkit[plots]``):
a plot function under ``optional_plot`` does nothing and returns None where matplotlib does not
import, so that the report still writes its tables and summary; ``vijax run`` says once that the
plots were skipped and how to get them (``vijax/run/_cli.py``)."""

from __future__ import annotations

import contextlib
import functools

from vijax._validate import require


def optional_plot(plot):
    """``plot``, or a no-op returning None where ``matplotlib.figure`` does not import."""

    @functools.wraps(plot)
    def plot_if_matplotlib(*args, **kwargs):
        try:
            require("matplotlib.figure", "plots", plot.__name__)  # deferred: importing matplotlib is slow
        except ImportError:  # vijax run says once that the plots were skipped, naming the extra
            return None
        return plot(*args, **kwargs)

    return plot_if_matplotlib


@contextlib.contextmanager
def figure(path: str, figsize: tuple, *grid, dpi: int = 100, **subplots):
    """``(fig, axes)``: a figure of ``figsize`` inches with ``fig.subplots(*grid, **subplots)``, laid out
    and saved to ``path`` at ``dpi`` when the block ends."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    yield fig, fig.subplots(*grid, **subplots)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
