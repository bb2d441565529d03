"""Held-out predictive scores and matching of fitted components to the truth."""

from __future__ import annotations

import numpy as np
import jax.numpy as jnp


def mean_log_predictive(model, q_global, x_test) -> float:
    """Average over held-out points of log p(x* | x) under q (``model.log_predictive``)."""
    return float(jnp.mean(model.log_predictive(q_global, jnp.asarray(x_test))))


def match_components(true_means, fitted_means, fitted_weights=None, min_weight: float = 0.0):
    """Hungarian matching of true to fitted components by Euclidean distance.

    Components with weight below ``min_weight`` are left out of the match.

    Returns:
      (indices of the fitted component matched to each true one, distances).
    """
    from scipy.optimize import linear_sum_assignment

    t = np.asarray(true_means)
    f = np.asarray(fitted_means)
    keep = np.arange(f.shape[0]) if fitted_weights is None else np.flatnonzero(np.asarray(fitted_weights) >= min_weight)
    cost = np.linalg.norm(t[:, None, :] - f[keep][None, :, :], axis=-1)
    rows, cols = linear_sum_assignment(cost)
    match = np.full(t.shape[0], -1)
    dist = np.full(t.shape[0], np.inf)
    match[rows] = keep[cols]
    dist[rows] = cost[rows, cols]
    return match, dist
