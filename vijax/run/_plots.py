"""Generic plots of a run: the ELBO trace and held-out metrics against steps.

Figures are built with ``matplotlib.figure.Figure`` directly (no ``pyplot``, so no global state
and no GUI backend: PNGs are rendered by Agg whatever the session's backend is).

matplotlib is optional (the extra ``vijax-toolkit[plots]``): ``plot_elbo`` called without it raises
an ImportError that names the extra, while ``vijax run`` asks ``plots_missing`` first, skips the
plots (its own and the experiment's, whose plot functions do nothing then), writes every other
result and says so once.
"""

from __future__ import annotations

import os
import warnings
from typing import Optional, Sequence

import numpy as np

_MAX_EVAL_PANELS = 4


def moving_average(x: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over ``window`` rows (shorter at the start), NaN-aware.

    Args:
      x: values over steps, shape ``[T]``.
      window: the number of rows averaged (at least 1).

    Returns:
      ``[T]`` array whose entry t is the mean of the finite values in ``x[max(0, t-window+1):t+1]``.
    """
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x)
    csum = np.concatenate([[0.0], np.cumsum(np.where(finite, x, 0.0))])
    ccount = np.concatenate([[0], np.cumsum(finite)])
    hi = np.arange(1, len(x) + 1)
    lo = np.maximum(hi - max(int(window), 1), 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (csum[hi] - csum[lo]) / (ccount[hi] - ccount[lo])


def _robust_ylim(values: np.ndarray) -> Optional[tuple[float, float]]:
    """Limits that ignore the first 5% of steps (an early ELBO can be far below the rest)."""
    tail = values[len(values) // 20 :]
    tail = tail[np.isfinite(tail)]
    if tail.size == 0:
        return None
    lo, hi = np.percentile(tail, 0.5), np.max(tail)
    pad = 0.05 * (hi - lo) if hi > lo else max(abs(hi) * 0.05, 1e-12)
    return float(lo - pad), float(hi + pad)


def eval_metric_names(evals: Sequence[dict]) -> list[str]:
    """Numeric metric names in ``evals`` (``step`` and ``wall_time`` excluded), first-seen order."""
    names: list[str] = []
    for entry in evals:
        for k, v in entry.items():
            if k in ("step", "wall_time") or k in names:
                continue
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                names.append(k)
    return names


def _panels(names: Sequence[str]) -> dict:
    """metric -> [(line label, eval name)], in first-seen order: ``method.metric`` names grouped by
    their metric (labelled by the method), any other name a panel of its own (unlabelled)."""
    panels: dict = {}
    for name in names:
        method, _, metric = name.rpartition(".")
        panels.setdefault(metric if method else name, []).append((method or None, name))
    return panels


PLOTS_EXTRA = "pip install 'vijax-toolkit[plots]'"


def _figure_class():
    """``matplotlib.figure.Figure``, or an ImportError that names the extra that installs matplotlib."""
    try:
        from matplotlib.figure import Figure  # deferred: importing matplotlib is slow
    except ImportError as e:
        raise ImportError(f"the plots of vijax run need matplotlib: {PLOTS_EXTRA}", name="matplotlib") from e
    return Figure


def plots_missing() -> Optional[str]:
    """None where matplotlib imports; else the one line ``vijax run`` prints: the plots are skipped
    and how to get them."""
    try:
        _figure_class()
    except ImportError:
        return f"matplotlib is not installed: the plots (elbo.png and the experiment's figures) were skipped; {PLOTS_EXTRA}"
    return None


def plot_elbo(trace: dict, evals: Sequence[dict], path: str, title: str = "") -> str:
    """Writes a PNG of the ELBO trace and, if any, the held-out metrics against steps.

    Args:
      trace: a ``RunResult.trace`` (needs ``"step"`` and ``"elbo"``).
      evals: a ``RunResult.evals`` list.
      path: the PNG file to write (its folder is created).
      title: a title for the figure.

    Metrics named ``method.metric`` (a run of several methods: ``ssvi.kl``, ``gibbs.kl``) share the
    panel of ``metric``, one line per method. At most four panels are drawn; the metrics of the
    others are named in a note under the figure and in a warning (their values are in the run's
    evals), never dropped silently.

    Returns:
      ``path``.

    Raises:
      ImportError: matplotlib is not installed (``pip install 'vijax-toolkit[plots]'``).
    """
    Figure = _figure_class()

    steps = np.asarray(trace["step"])
    elbo = np.asarray(trace["elbo"], dtype=np.float64)
    elbo = elbo.reshape(len(elbo), -1).mean(axis=1) if elbo.ndim > 1 else elbo
    panels = _panels(eval_metric_names(evals))
    shown = list(panels)[:_MAX_EVAL_PANELS]
    dropped = [name for metric in list(panels)[_MAX_EVAL_PANELS:] for _, name in panels[metric]]
    fig = Figure(figsize=(7, 3 + 2.2 * len(shown)), layout="constrained")
    axes = fig.subplots(1 + len(shown), 1, sharex=True, squeeze=False)[:, 0]
    ax = axes[0]
    if len(elbo):
        window = max(len(elbo) // 50, 1)
        ax.plot(steps, elbo, lw=0.6, alpha=0.35, color="C0", label="ELBO (per step)")
        if window > 1:
            ax.plot(steps, moving_average(elbo, window), lw=1.5, color="C0", label=f"moving average ({window} steps)")
        limits = _robust_ylim(elbo)
        if limits is not None:
            ax.set_ylim(*limits)
        ax.legend(loc="lower right", fontsize="small")
    ax.set_ylabel("ELBO")
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title)
    for ax, metric in zip(axes[1:], shown):
        for i, (label, name) in enumerate(panels[metric]):
            pts = [(e["step"], e[name]) for e in evals if isinstance(e.get(name), (int, float))]
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", ms=3, color=f"C{(i + 1) % 10}", label=label)
        if len(panels[metric]) > 1:
            ax.legend(loc="best", fontsize="small")
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("step")
    if dropped:
        note = f"not plotted (only {_MAX_EVAL_PANELS} metric panels): {', '.join(dropped)}; their values are in evals"
        fig.supxlabel(note, fontsize="small")
        warnings.warn(f"{os.path.basename(path)}: {note}", stacklevel=2)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


__all__ = ["eval_metric_names", "moving_average", "plot_elbo", "plots_missing"]
