"""Reading and scoring fitted topics: top words, and recovery of known topics."""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import numpy as np

from vijax._validate import ArgumentError, check_data_array, check_int


def _topics(name: str, x) -> np.ndarray:
    """``x`` as a finite float (K, V) array with K, V >= 1, or ValueError naming ``name``."""
    a = np.asarray(x)
    check_data_array(name, a, 2)
    if a.shape[1] < 1:
        raise ArgumentError(name, f"{name} must have at least one word (V >= 1), got shape {a.shape}")
    return a.astype(np.float64)


def top_words(topics, vocab: Optional[Sequence[str]] = None, n: int = 10) -> list[list]:
    """The ``n`` heaviest words of each topic, heaviest first.

    Args:
      topics: (K, V) topic-word weights (only the order within a row matters).
      vocab: the V words (a sequence or a ``Vocabulary``); None gives word ids instead.
      n: words per topic (at most V).

    Returns:
      K lists of ``n`` words (or int ids). Ties keep the lower id first.

    Raises:
      ValueError: naming ``topics`` (not finite (K, V)), ``vocab`` (not V words) or ``n`` (not a positive int).

    Examples:
      >>> top_words(np.array([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]]), ["a", "b", "c"], n=2)
      [['b', 'c'], ['a', 'c']]
    """
    t = _topics("topics", topics)
    if vocab is not None and len(vocab) != t.shape[1]:
        raise ArgumentError("vocab", f"vocab has {len(vocab)} words but topics have V = {t.shape[1]}")
    n = min(check_int("n", n), t.shape[1])
    order = np.argsort(-t, axis=1, kind="stable")[:, :n]
    if vocab is None:
        return [[int(i) for i in row] for row in order]
    words = list(vocab)
    return [[words[i] for i in row] for row in order]


class TopicRecovery(NamedTuple):
    """How well fitted topics recover known ones (see ``topic_recovery``).

    Attributes:
      mean_cosine: mean over the true topics of the cosine similarity to their matched fitted topic (0 unmatched).
      matching: (K_true,) int index of the fitted topic matched to each true topic (-1: none).
      cosine: (K_true,) cosine similarity of each matched pair (0 where unmatched).
    """

    mean_cosine: float
    matching: np.ndarray
    cosine: np.ndarray


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)


def topic_recovery(true_topics, fitted_topics) -> TopicRecovery:
    """Matches fitted topics one-to-one to the true ones by the Hungarian algorithm on the rows' cosine similarities.

    Args:
      true_topics: (K_true, V).
      fitted_topics: (K_fit, V); with fewer fitted than true topics, some true topics stay unmatched.

    Returns:
      ``TopicRecovery(mean_cosine, matching, cosine)``.

    Raises:
      ValueError: naming ``true_topics`` or ``fitted_topics`` when not finite (K, V), or when their V differ.

    Examples:
      >>> true = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
      >>> r = topic_recovery(true, true[::-1])
      >>> round(r.mean_cosine, 6), r.matching.tolist()
      (1.0, [1, 0])
    """
    from scipy.optimize import linear_sum_assignment

    t = _topics("true_topics", true_topics)
    f = _topics("fitted_topics", fitted_topics)
    if t.shape[1] != f.shape[1]:
        raise ArgumentError(
            "fitted_topics",
            f"fitted_topics must have the same V = {t.shape[1]} columns as true_topics, got shape {f.shape}",
        )
    sim = _unit_rows(t) @ _unit_rows(f).T  # (K_true, K_fit)
    rows, cols = linear_sum_assignment(sim, maximize=True)
    matching = np.full(t.shape[0], -1, np.int64)
    cosine = np.zeros(t.shape[0])
    matching[rows] = cols
    cosine[rows] = sim[rows, cols]
    return TopicRecovery(float(cosine.mean()), matching, cosine)
