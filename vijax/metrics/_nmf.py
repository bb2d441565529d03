"""Metrics of non-negative matrix factorisations: how well an estimated dictionary recovers the
true one, and how many components a GaP-NMF fit uses (Hoffman and Blei 2015, "Structured
stochastic variational inference", AISTATS, §4.3)."""

from __future__ import annotations

import numpy as np

from vijax import expfam


def dictionary_correlations(true_w, est_w) -> np.ndarray:
    """For each true column, the largest Pearson correlation (over frequencies) with any column of
    ``est_w``, sorted in decreasing order (Hoffman and Blei 2015, §4.3, figure 5). A constant
    estimated column (no variance, e.g. one back at its prior mean) correlates 0 with everything.

    Args:
      true_w: (F, K_true).
      est_w: (F, K_est).

    Returns:
      (K_true,) correlations, largest first.
    """
    a, b = np.asarray(true_w, np.float64), np.asarray(est_w, np.float64)
    a = a - a.mean(0)
    b = b - b.mean(0)
    na, nb = np.linalg.norm(a, axis=0), np.linalg.norm(b, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = (a.T @ b) / np.outer(na, nb)
    c = np.where(np.isfinite(c), c, 0.0)
    return np.sort(c.max(axis=1))[::-1]


def gap_nmf_components_used(model, q, frames, min_share: float = 1e-3) -> int:
    """The number of components of a GaP-NMF fit that explain at least ``min_share`` of the
    counts: sum_fn E[z_fkn] from the mean-field local step at E_q[t(W, theta)], divided by
    sum_fn y_fn.

    Args:
      model: a :class:`~vijax.models.GaPNMF`.
      q: its q(W, theta).
      frames: the spectrogram frames (T, F), one per row.
      min_share: the least share of the counts of a component that counts as used.
    """
    stats = model.local_step(expfam.tree_mean_params(q), frames).suff_stats[1][0]  # (K,) sum_fn E z_fkn
    share = np.asarray(stats) / max(float(np.sum(np.asarray(frames))), 1e-300)
    return int(np.sum(share >= min_share))


__all__ = ["dictionary_correlations", "gap_nmf_components_used"]
