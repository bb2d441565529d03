"""Pareto-smoothed importance sampling (PSIS) diagnostics of a fitted q.

The shape k-hat of the generalized Pareto fitted to the largest weights w_s = p(x, z_s) / q(z_s) says how far q's
tails fall short of the posterior's (Yao, Vehtari, Simpson and Gelman 2018): below 0.5 good, up to
``KHAT_THRESHOLD`` = 0.7 usable. The fit is ArviZ's ``psislw``.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
from vijax._validate import ArgumentError, require

KHAT_THRESHOLD = 0.7
PSIS_MIN_DRAWS = 10  # the fewest draws whose tail a Pareto fit takes


class PSISResult(NamedTuple):
    """khat: the Pareto shape estimate; ess: 1 / sum w_s^2 of the smoothed normalized weights; ok: khat <=
    ``KHAT_THRESHOLD``; log_weights: the smoothed normalized log-weights (S,)."""

    khat: float
    ess: float
    ok: bool
    log_weights: np.ndarray


def _psislw():
    """ArviZ's ``psislw``, or an ImportError naming the extra."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return require("arviz", "arviz", "psis (ArviZ's psislw)").psislw


EQUAL_WEIGHTS_RTOL = 1e-9  # log-weights this close (relative to their magnitude) are equal: rounding, not a tail
EQUAL_WEIGHTS_ULPS = 1e3  # ... or this many units of their own dtype's precision, if more (float32: 1.2e-4)


def psis(log_weights) -> PSISResult:
    """The PSIS diagnostic of raw log-weights log p(x, z_s) - log q(z_s), z_s ~ q.

    Args:
      log_weights: shape (S,), S >= 10 finite or -inf values (e.g. ``vijax.inference.log_weights(alg, key, state, batch, S)``).

    Returns:
      A :class:`PSISResult`; equal weights (q proportional to the target), up to rounding (``EQUAL_WEIGHTS_RTOL`` of
      their magnitude, or ``EQUAL_WEIGHTS_ULPS`` units of their dtype's precision where that is more: a closed-form
      q's float32 weights), give k-hat = -inf.

    Raises:
      ValueError: a misshaped array, fewer than 10 draws, NaN or +inf weights, or all weights -inf.
      ImportError: ArviZ is not installed (``pip install "vijax-toolkit[arviz]"``).

    Examples:
        >>> import numpy as np
        >>> r = psis(np.zeros(1000))  # q equal to the posterior: equal weights
        >>> r.ok, round(r.ess)
        (True, 1000)
    """
    given = np.asarray(log_weights)
    lw = given.astype(np.float64)
    if lw.ndim != 1 or lw.shape[0] < PSIS_MIN_DRAWS:
        raise ArgumentError(
            "log_weights", f"log_weights must have shape (S,) with S >= {PSIS_MIN_DRAWS} draws, got {lw.shape}"
        )
    if np.any(np.isnan(lw)) or np.any(lw == np.inf):
        raise ArgumentError(
            "log_weights", "log_weights has NaN or +inf entries: the log-density or log q is not finite at some draws"
        )
    if not np.any(np.isfinite(lw)):  # every weight zero: nothing to normalize, no tail to fit
        raise ArgumentError(
            "log_weights",
            "log_weights are all -inf: the target's density is zero at every draw of q (q's support misses the "
            "posterior's, or the log-density refuses every draw)",
        )
    psislw = _psislw()  # also for equal weights, so that a missing ArviZ shows on any input
    eps = np.finfo(given.dtype).eps if np.issubdtype(given.dtype, np.floating) else 0.0
    rtol = max(EQUAL_WEIGHTS_RTOL, EQUAL_WEIGHTS_ULPS * float(eps))
    if np.all(np.isfinite(lw)) and np.ptp(lw) <= rtol * max(1.0, np.max(np.abs(lw))):
        # q proportional to the target: every weight equal up to rounding, no tail to fit (the Pareto fit of a tail
        # of rounding errors is degenerate: k-hat = inf)
        return PSISResult(-np.inf, float(lw.shape[0]), True, np.full_like(lw, -np.log(lw.shape[0])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        smoothed, khat = psislw(lw - np.max(lw))
    smoothed = np.asarray(smoothed)
    w = np.exp(smoothed - np.max(smoothed))
    w = w / np.sum(w)
    khat = float(np.asarray(khat))
    return PSISResult(khat, float(1.0 / np.sum(w * w)), bool(khat <= KHAT_THRESHOLD), smoothed)


__all__ = ["KHAT_THRESHOLD", "PSISResult", "psis"]
