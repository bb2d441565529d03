"""Calibration of predictive probabilities: the reliability diagram and the expected calibration error of Guo,
Pleiss, Sun and Weinberger (2017, §2), ECE = sum_k (|B_k| / N) |acc(B_k) - conf(B_k)| over equal-width bins B_k of
the confidence (the probability given to the predicted class). Binary predictions are P(y = 1) (N,) with labels in
{0, 1}; multiclass ones are class probabilities (N, C) with integer labels.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from vijax._validate import ArgumentError, check_int


class Reliability(NamedTuple):
    """Per bin (K,): the mean confidence, the accuracy (NaN in an empty bin) and the count; and
    the bin edges (K + 1,)."""

    confidence: np.ndarray
    accuracy: np.ndarray
    count: np.ndarray
    edges: np.ndarray


def _confidence_and_correct(probs, labels):
    p, y = np.asarray(probs, np.float64), np.asarray(labels)
    if p.size and not np.all(np.isfinite(p)):
        raise ArgumentError("probs", "probs has non-finite entries")
    if np.any(p < 0) or np.any(p > 1):
        raise ArgumentError("probs", f"probs must be probabilities in [0, 1], got entries from {p.min()} to {p.max()}")
    if p.ndim == 1:
        if p.shape != y.shape:
            raise ArgumentError("labels", f"labels must have the shape of probs {p.shape}, got {y.shape}")
        if not np.all((y == 0) | (y == 1)):
            raise ArgumentError("labels", "labels must be 0 or 1 for binary probabilities P(y = 1)")
        pred = p > 0.5
        return np.where(pred, p, 1.0 - p), pred == (y == 1)
    if p.ndim != 2 or y.shape != (p.shape[0],) or p.shape[1] < 1:
        raise ArgumentError("probs", f"probs must be (N,) or (N, C) with labels (N,), got {p.shape} and {y.shape}")
    if y.size and not (np.all(np.isfinite(y)) and np.all(y == np.round(y)) and y.min() >= 0 and y.max() < p.shape[1]):
        raise ArgumentError(
            "labels", f"labels must be class indices in [0, {p.shape[1]}) for probs (N, C = {p.shape[1]})"
        )
    pred = np.argmax(p, axis=1)
    return p[np.arange(p.shape[0]), pred], pred == y


def reliability(probs, labels, num_bins: int = 10) -> Reliability:
    """The reliability diagram's bins (equal-width in confidence, the last bin closed)."""
    num_bins = check_int("num_bins", num_bins)
    conf, correct = _confidence_and_correct(probs, labels)
    if conf.size == 0:
        raise ArgumentError("probs", "probs must hold at least one prediction")
    edges = np.linspace(0.0, 1.0, num_bins + 1)
    idx = np.clip(np.searchsorted(edges, conf, side="right") - 1, 0, num_bins - 1)
    count = np.bincount(idx, minlength=num_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(idx, conf, num_bins) / count
        acc = np.bincount(idx, correct.astype(np.float64), num_bins) / count
    return Reliability(mean_conf, acc, count, edges)


def expected_calibration_error(probs, labels, num_bins: int = 10) -> float:
    """ECE with ``num_bins`` equal-width confidence bins (see the module docstring)."""
    r = reliability(probs, labels, num_bins)
    full = r.count > 0
    return float(np.sum(r.count[full] * np.abs(r.accuracy[full] - r.confidence[full])) / np.sum(r.count))


__all__ = ["Reliability", "expected_calibration_error", "reliability"]
