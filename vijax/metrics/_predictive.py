"""Held-out predictive scores and matching of fitted components to the truth (host-side, inputs checked)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import ArgumentError, check_data_array, check_finite


def mean_log_predictive(model, q_global, x_test) -> float:
    """Average over held-out points of log p(x* | x) under q (``model.log_predictive``).

    Returns:
      The mean as a Python float (-inf when some point has zero predictive density).

    Raises:
      ValueError: naming ``x_test`` (empty, not finite, misshaped), ``q_global`` (not finite) or ``x_test[i]`` (NaN).
    """
    x = np.asarray(x_test)
    check_data_array("x_test", x, max(x.ndim, 1))
    if hasattr(model, "check_data"):
        model.check_data(x)
    for leaf in jax.tree_util.tree_leaves(q_global):
        check_finite("q_global", leaf)
    lp = np.asarray(model.log_predictive(q_global, jnp.asarray(x)), np.float64)
    if np.isnan(lp).any():
        i = int(np.argmax(np.isnan(lp.reshape(lp.shape[0], -1)).any(axis=1)))
        raise ArgumentError("x_test", f"x_test[{i}]: the log predictive density under q_global is NaN")
    return float(np.mean(lp))


def match_components(true_means, fitted_means, fitted_weights=None, min_weight: float = 0.0):
    """Hungarian matching of true to fitted components by Euclidean distance, leaving out those below ``min_weight``.

    Returns:
      (the fitted component matched to each true one, distances); -1 and inf for a true one left unmatched.

    Raises:
      ValueError: naming the argument that is empty, misshaped or not finite.
    """
    from scipy.optimize import linear_sum_assignment

    t = np.asarray(true_means, np.float64)
    f = np.asarray(fitted_means, np.float64)
    check_data_array("true_means", t, 2)
    check_data_array("fitted_means", f, 2)
    if f.shape[1] != t.shape[1]:
        raise ArgumentError(
            "fitted_means", f"fitted_means must have the D = {t.shape[1]} columns of true_means, got shape {f.shape}"
        )
    if fitted_weights is None:
        keep = np.arange(f.shape[0])
    else:
        w = np.asarray(fitted_weights, np.float64)
        check_data_array("fitted_weights", w, 1)
        if w.shape != (f.shape[0],):
            raise ArgumentError(
                "fitted_weights",
                f"fitted_weights must have one weight per fitted component ({f.shape[0]},), got {w.shape}",
            )
        check_finite("min_weight", min_weight)
        keep = np.flatnonzero(w >= min_weight)
    cost = np.linalg.norm(t[:, None, :] - f[keep][None, :, :], axis=-1)
    rows, cols = linear_sum_assignment(cost)
    match = np.full(t.shape[0], -1)
    dist = np.full(t.shape[0], np.inf)
    match[rows] = keep[cols]
    dist[rows] = cost[rows, cols]
    return match, dist
