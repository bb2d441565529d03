"""Binary classification data sets for GP classification (Khan et al. 2016, §6.1, appendix F).

``sonar``, ``ionosphere`` and ``usps_3v5`` come from ``../shared/data`` with the splits of the paper's reference
code; ``breast_cancer`` and ``digits_3v5`` ship with scikit-learn (a seeded, stratified 80/20 split).
``labels="pm1"`` gives float {-1, +1}; ``labels="01"`` int {0, 1}, 1 for the +1 class.
"""

from __future__ import annotations

import gzip
import zlib
from typing import NamedTuple

import numpy as np

from vijax.data._paths import check_regular_file, shared_data_path
from vijax._validate import ArgumentError, check_scalar, require

DATASETS = ("sonar", "ionosphere", "usps_3v5", "breast_cancer", "digits_3v5")


class BinaryData(NamedTuple):
    """x_train (N, D), y_train (N,), x_test (P, D), y_test (P,), name."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    name: str


def check_features(x, name: str = "x") -> np.ndarray:
    """x as a float64 (N, D) array; ValueError naming ``name`` if it is not 2-D or not finite."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 1:
        raise ArgumentError(name, f"{name} must be a non-empty 2-D array, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        bad = int(np.sum(~np.isfinite(a)))
        raise ArgumentError(name, f"{name} has {bad} non-finite value(s) (NaN or inf)")
    return a


def _labels(y_pm1: np.ndarray, labels: str) -> np.ndarray:
    y = np.asarray(y_pm1)
    if not set(np.unique(y).tolist()) <= {-1, 1}:
        raise ArgumentError("labels", f"labels must be -1/+1 in the source, got {np.unique(y)[:5]}")
    return y.astype(np.float64) if labels == "pm1" else (y > 0).astype(np.int64)


def _finish(xtr, ytr, xte, yte, name, labels) -> BinaryData:
    if labels not in ("pm1", "01"):
        raise ArgumentError("labels", f"labels must be 'pm1' or '01', got {labels!r}", value=labels)
    return BinaryData(
        check_features(xtr, f"{name} training features"),
        _labels(ytr, labels),
        check_features(xte, f"{name} test features"),
        _labels(yte, labels),
        name,
    )


def _need(*parts: str):
    p = shared_data_path(*parts)
    if p is None:
        raise FileNotFoundError(f"reference data {'/'.join(parts)} not found in ../shared/data (or $VIJAX_SHARED_DATA)")
    return p


def read_labelled_csv(path) -> tuple[np.ndarray, np.ndarray]:
    """``(features, labels)`` of a comma-separated file whose last column is a -1/+1 label.

    Raises:
      ValueError: naming the file (and line): a ragged or non-numeric line, a non-finite value or a label other
        than -1/+1, text that is not UTF-8, not a regular file.
    """
    from vijax.data._readers import unreadable

    check_regular_file(path)
    try:
        a = np.loadtxt(path, delimiter=",", ndmin=2, encoding="utf-8")
    except UnicodeDecodeError as e:
        raise unreadable(str(path), 0, e) from None
    except ValueError as e:
        raise ArgumentError(path, f"{path}: {e}") from None
    if a.shape[0] < 1 or a.shape[1] < 2:
        raise ArgumentError(path, f"{path}: expected rows of features and a label, got shape {a.shape}")
    bad = ~np.all(np.isfinite(a), axis=1) | ~np.isin(a[:, -1], (-1.0, 1.0))
    if bad.any():
        row = int(np.argmax(bad))
        raise ArgumentError(
            path,
            f"{path}, data row {row + 1}: a non-finite value or a label other than -1/+1 (label {float(a[row, -1])})",
        )
    return a[:, :-1], a[:, -1]


_SHARED_FILES = {
    "sonar": ("sonar", "sonar.all-data-"),
    "ionosphere": ("ionosphere", "ionosphere.data-"),
    "usps_3v5": ("usps", "usps_resampled.mat.gz"),
}


def _csv_pair(name: str, labels: str) -> BinaryData:
    folder, stem = _SHARED_FILES[name]
    xtr, ytr = read_labelled_csv(_need(folder, stem + "tra.csv"))
    xte, yte = read_labelled_csv(_need(folder, stem + "tst.csv"))
    return _finish(xtr, ytr, xte, yte, name, labels)


def load_sonar(labels: str = "pm1") -> BinaryData:
    """UCI Sonar with the reference code's 165/43 split (+1 = mine)."""
    return _csv_pair("sonar", labels)


def load_ionosphere(labels: str = "pm1") -> BinaryData:
    """UCI Ionosphere with the reference code's 280/71 split (+1 = bad return)."""
    return _csv_pair("ionosphere", labels)


def load_usps_3v5(labels: str = "pm1") -> BinaryData:
    """USPS 3 (+1) vs 5 (-1) of R&W's resampled set: 767 train / 773 test (threes first; the reference
    scripts' MATLAB rows 3 and 5 are digits 2 vs 4, by mistake)."""
    import scipy.io

    path = check_regular_file(_need(*_SHARED_FILES["usps_3v5"]))
    try:
        with gzip.open(path) as f:
            mat = scipy.io.loadmat(f)
    except (EOFError, OSError, zlib.error, ValueError, TypeError) as e:
        raise ValueError(f"{path}: not a readable gzipped MATLAB file (truncated or corrupt?): {e}") from e

    def pick(patterns, onehot):
        pos, neg = onehot[3] == 1, onehot[5] == 1  # row r = digit r (0-based)
        x = np.concatenate([patterns[:, pos], patterns[:, neg]], axis=1).T
        y = np.concatenate([np.ones(pos.sum()), -np.ones(neg.sum())])
        return x, y

    xtr, ytr = pick(mat["train_patterns"], mat["train_labels"])
    xte, yte = pick(mat["test_patterns"], mat["test_labels"])
    return _finish(xtr, ytr, xte, yte, "usps_3v5", labels)


def split_train_test(x, y, seed: int, test_fraction: float):
    """A stratified random split: ``test_fraction`` of each class, rounded, goes to the test set."""
    check_scalar("test_fraction", test_fraction, low=0.0, high=1.0, include_high=False)
    rng = np.random.default_rng(seed)
    test = np.zeros(len(y), bool)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        test[rng.choice(idx, int(round(test_fraction * len(idx))), replace=False)] = True
    tr, te = np.flatnonzero(~test), np.flatnonzero(test)
    return x[tr], y[tr], x[te], y[te]


def sklearn_datasets():
    """``sklearn.datasets``, or an ImportError naming the extra that installs scikit-learn."""
    return require("sklearn.datasets", "datasets", "this data set (scikit-learn's)")  # deferred: slow to import


def load_breast_cancer(labels: str = "pm1", seed: int = 0, test_fraction: float = 0.2) -> BinaryData:
    """scikit-learn's Wisconsin breast cancer (+1 = benign), standardised by the training split."""
    d = sklearn_datasets().load_breast_cancer()
    xtr, ytr, xte, yte = split_train_test(d.data, np.where(d.target == 1, 1, -1), seed, test_fraction)
    mu, sd = xtr.mean(0), xtr.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    return _finish((xtr - mu) / sd, ytr, (xte - mu) / sd, yte, "breast_cancer", labels)


def load_digits_3v5(labels: str = "pm1", seed: int = 0, test_fraction: float = 0.2) -> BinaryData:
    """scikit-learn's 8x8 digits, 3 (+1) vs 5 (-1), pixels scaled from [0, 16] to [-1, 1]."""
    d = sklearn_datasets().load_digits()
    keep = (d.target == 3) | (d.target == 5)
    x = d.data[keep] / 8.0 - 1.0
    y = np.where(d.target[keep] == 3, 1, -1)
    return _finish(*split_train_test(x, y, seed, test_fraction), "digits_3v5", labels)


def load_binary_dataset(name: str, labels: str = "pm1", seed: int = 0) -> BinaryData:
    """One of ``DATASETS`` by name (``seed`` only affects the scikit-learn splits)."""
    if name in _SHARED_FILES:
        return {"sonar": load_sonar, "ionosphere": load_ionosphere, "usps_3v5": load_usps_3v5}[name](labels)
    if name in DATASETS:
        return {"breast_cancer": load_breast_cancer, "digits_3v5": load_digits_3v5}[name](labels, seed)
    raise ValueError(f"unknown dataset {name!r}; choose one of {DATASETS}")


def dataset_available(name: str) -> bool:
    """Whether ``load_binary_dataset(name)`` can find its files (scikit-learn's always can)."""
    if name not in _SHARED_FILES:
        return True
    folder, stem = _SHARED_FILES[name]
    return shared_data_path(folder, stem if name == "usps_3v5" else stem + "tra.csv") is not None
