"""Generic plots of a run: the ELBO trace and held-out metrics against steps, drawn with
``matplotlib.figure.Figure`` (no ``pyplot``); matplotlib is the optional extra ``vijax-toolkit[plots]``.
"""

from __future__ import annotations

import os
import warnings
from typing import Optional, Sequence

import numpy as np

from vijax._validate import install_line, require

_MAX_EVAL_PANELS = 4
PLOTS_EXTRA = install_line("plots")


def _panels(names: Sequence[str]) -> dict:
    """metric -> [(method or None, eval name)]: ``method.metric`` names grouped by their metric."""
    panels: dict = {}
    for name in names:
        method, _, metric = name.rpartition(".")
        panels.setdefault(metric if method else name, []).append((method or None, name))
    return panels


def _figure_class():
    """``matplotlib.figure.Figure``, or an ImportError that names the extra that installs matplotlib."""
    return require("matplotlib.figure", "plots", "the plots of vijax run").Figure  # deferred: matplotlib is slow


def plots_missing() -> Optional[str]:
    """None where matplotlib imports; else the line ``vijax run`` prints: the plots are skipped."""
    try:
        _figure_class()
    except ImportError:
        return f"matplotlib is not installed: the plots (elbo.png and the experiment's figures) were skipped; {PLOTS_EXTRA}"
    return None


def plot_elbo(trace: dict, evals: Sequence[dict], path: str, title: str = "") -> str:
    """Writes a PNG of the ELBO trace (with a moving average) and the held-out metrics against steps; metrics
    ``method.metric`` share the panel of ``metric``, and at most four panels are drawn (a warning names the rest).

    Args:
      trace: a ``RunResult.trace`` (needs ``"step"`` and ``"elbo"``).
      evals: a ``RunResult.evals`` list.
      path: the PNG file to write (its folder is created).
      title: a title for the figure.

    Returns:
      ``path``.

    Raises:
      ImportError: matplotlib is not installed (``pip install "vijax-toolkit[plots]"``).
    """
    Figure = _figure_class()
    steps = np.asarray(trace["step"])
    elbo = np.asarray(trace["elbo"], dtype=np.float64)
    elbo = elbo.reshape(len(elbo), -1).mean(axis=1) if elbo.ndim > 1 else elbo
    names: list[str] = []  # numeric metrics, first-seen order
    for entry in evals:
        for k, v in entry.items():
            if k not in ("step", "wall_time", *names) and isinstance(v, (int, float)) and not isinstance(v, bool):
                names.append(k)
    panels = _panels(names)
    shown = list(panels)[:_MAX_EVAL_PANELS]
    dropped = [name for metric in list(panels)[_MAX_EVAL_PANELS:] for _, name in panels[metric]]
    fig = Figure(figsize=(7, 3 + 2.2 * len(shown)), layout="constrained")
    axes = fig.subplots(1 + len(shown), 1, sharex=True, squeeze=False)[:, 0]
    ax = axes[0]
    if len(elbo):
        window = max(len(elbo) // 50, 1)
        ax.plot(steps, elbo, lw=0.6, alpha=0.35, color="C0", label="ELBO (per step)")
        if window > 1:  # the trailing mean of the finite values over `window` steps (shorter at the start)
            finite = np.isfinite(elbo)
            total, count = (np.convolve(v, np.ones(window))[: len(elbo)] for v in (np.where(finite, elbo, 0.0), finite))
            with np.errstate(invalid="ignore", divide="ignore"):
                smooth = total / count
            ax.plot(steps, smooth, lw=1.5, color="C0", label=f"moving average ({window} steps)")
        tail = elbo[len(elbo) // 20 :]  # limits that ignore the first 5% of steps (an early ELBO can be far below)
        tail = tail[np.isfinite(tail)]
        if tail.size:
            lo, hi = np.percentile(tail, 0.5), np.max(tail)
            pad = 0.05 * (hi - lo) if hi > lo else max(abs(hi) * 0.05, 1e-12)
            ax.set_ylim(float(lo - pad), float(hi + pad))
        ax.legend(loc="lower right", fontsize="small")
    ax.set_ylabel("ELBO")
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title)
    for ax, metric in zip(axes[1:], shown):
        for i, (label, name) in enumerate(panels[metric]):
            xs, ys = zip(*[(e["step"], e[name]) for e in evals if isinstance(e.get(name), (int, float))])
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
