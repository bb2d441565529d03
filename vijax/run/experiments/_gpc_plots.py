"""The figures of the GP classification experiments (Khan et al. 2016, Figures 1 and 2)."""

from __future__ import annotations

import numpy as np
from ._plotting import optional_plot


@optional_plot
def plot_compare(path, curves, name, labels):
    """Figure 2 of Khan et al. 2016: negative ELBO and test log-loss against passes, one line per method."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4))
    ax = fig.subplots(1, 2)
    for m, c in curves.items():
        p = np.maximum(np.asarray(c["passes"]), 1e-2)
        ax[0].plot(p, -np.asarray(c["elbo"]), label=labels[m], lw=2 if m == "pg_svi" else 1)
        ax[1].plot(p, c["log_loss"], label=labels[m], lw=2 if m == "pg_svi" else 1)
    for a, t in zip(ax, ("negative ELBO", "test log-loss (bits)")):
        a.set_xscale("log")
        a.set_xlabel("passes")
        a.set_title(f"{name}: {t}")
    ax[0].set_yscale("log")
    ax[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


@optional_plot
def plot_step_size(path, out, name, cap, labels):
    """Figure 1 of Khan et al. 2016: examples seen until converged against the step size (x: not
    converged within the budget ``cap``)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for m, lst in out.items():
        ss = np.array([r[0] for r in lst], float)
        ex = np.array([np.nan if r[1] is None else r[1] for r in lst], float)
        (line,) = ax.plot(ss, ex, "o-", label=labels[m])
        miss = np.isnan(ex)
        if miss.any():
            ax.plot(ss[miss], np.full(miss.sum(), cap), "x", color=line.get_color())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("step size")
    ax.set_ylabel("examples seen until converged")
    ax.set_title(f"{name} (x: not converged within the budget)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
