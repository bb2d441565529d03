"""Metrics of non-negative matrix factorisations: dictionary recovery and the components a GaP-NMF fit uses
(Hoffman and Blei 2015, "Structured stochastic variational inference", §4.3)."""

from __future__ import annotations

import jax
import numpy as np

from vijax import expfam
from vijax._validate import ArgumentError, check_data_array, check_finite, check_scalar


def dictionary_correlations(true_w, est_w) -> np.ndarray:
    """(K_true,): for each column of ``true_w`` (F, K_true), its largest Pearson correlation with a column of
    ``est_w`` (F, K_est), largest first (Hoffman and Blei 2015, §4.3, figure 5); a constant column correlates 0.

    Raises:
      ValueError: naming ``true_w`` or ``est_w`` when not finite (F, K) with F >= 2 and K >= 1, or F differs.
    """
    a, b = np.asarray(true_w), np.asarray(est_w)
    for name, x in (("true_w", a), ("est_w", b)):
        check_data_array(name, x, 2)
        if x.shape[0] < 2 or x.shape[1] < 1:
            raise ValueError(f"{name} must be (F, K) with F >= 2 frequencies and K >= 1 columns, got shape {x.shape}")
    if b.shape[0] != a.shape[0]:
        raise ArgumentError("est_w", f"est_w must have the F = {a.shape[0]} rows of true_w, got shape {b.shape}")
    a, b = a.astype(np.float64), b.astype(np.float64)
    a = a - a.mean(0)
    b = b - b.mean(0)
    na, nb = np.linalg.norm(a, axis=0), np.linalg.norm(b, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = (a.T @ b) / np.outer(na, nb)
    c = np.where(np.isfinite(c), c, 0.0)
    return np.sort(c.max(axis=1))[::-1]


def gap_nmf_components_used(model, q, frames, min_share: float = 1e-3) -> int:
    """The number of components of a GaP-NMF fit that explain at least ``min_share`` of the counts
    (sum_fn E[z_fkn] at E_q[t(W, theta)] / sum_fn y_fn).

    Args:
      model: a :class:`~vijax.models.GaPNMF`.
      q: its q(W, theta).
      frames: the spectrogram frames (T, F), one per row.
      min_share: the least share of the counts of a used component.

    Raises:
      ValueError: naming ``frames`` (empty, not finite, negative or all zero), ``q`` (not finite) or ``min_share``.
    """
    y = np.asarray(frames)
    check_data_array("frames", y, 2)
    if (y < 0).any() or not (y > 0).any():
        raise ArgumentError(
            "frames", f"frames must be non-negative with some positive entry, got min {y.min()} and max {y.max()}"
        )
    for leaf in jax.tree_util.tree_leaves(q):
        check_finite("q", leaf)
    check_scalar("min_share", min_share, low=0.0, include_low=True)
    stats = model.local_step(expfam.tree_mean_params(q), frames).suff_stats[1][0]  # (K,) sum_fn E z_fkn
    share = np.asarray(stats, np.float64) / float(np.sum(y, dtype=np.float64))
    if not np.all(np.isfinite(share)):
        raise ArgumentError("q", "q: the expected counts of its components are not finite (local step under q)")
    return int(np.sum(share >= min_share))


__all__ = ["dictionary_correlations", "gap_nmf_components_used"]
