"""Reading and scoring fitted topics: top words, and recovery of known topics."""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import numpy as np


def top_words(topics, vocab: Optional[Sequence[str]] = None, n: int = 10) -> list[list]:
    """The ``n`` heaviest words of each topic, heaviest first.

    Args:
      topics: (K, V) topic-word weights (probabilities, or Dirichlet parameters lambda: only the
        order within a row matters).
      vocab: the V words (a sequence or a ``Vocabulary``); None gives word ids instead.
      n: words per topic (at most V).

    Returns:
      K lists of ``n`` words (or int ids). Ties keep the lower id first.

    Examples:
      >>> top_words(np.array([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]]), ["a", "b", "c"], n=2)
      [['b', 'c'], ['a', 'c']]
    """
    t = np.asarray(topics)
    if t.ndim != 2:
        raise ValueError(f"topics must be (K, V), got shape {t.shape}")
    if vocab is not None and len(vocab) != t.shape[1]:
        raise ValueError(f"vocab has {len(vocab)} words but topics have V = {t.shape[1]}")
    n = min(int(n), t.shape[1])
    order = np.argsort(-t, axis=1, kind="stable")[:, :n]
    if vocab is None:
        return [[int(i) for i in row] for row in order]
    words = list(vocab)
    return [[words[i] for i in row] for row in order]


class TopicRecovery(NamedTuple):
    """How well fitted topics recover known ones (see ``topic_recovery``).

    Attributes:
      mean_cosine: mean over the true topics of the cosine similarity to their matched fitted
        topic (an unmatched true topic counts as 0).
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
    """Matches fitted topics one-to-one to the true ones, maximising total cosine similarity.

    Topics are identified only up to a permutation, so each true topic is paired with a distinct
    fitted one by the Hungarian algorithm (``scipy.optimize.linear_sum_assignment``) on the
    matrix of cosine similarities between rows. Cosines do not depend on scale, so rows may be
    probabilities or unnormalised weights (Dirichlet parameters lambda).

    Args:
      true_topics: (K_true, V).
      fitted_topics: (K_fit, V); with more fitted than true topics the extra ones stay unmatched,
        with fewer some true topics do (matching -1, cosine 0).

    Returns:
      ``TopicRecovery(mean_cosine, matching, cosine)``.

    Examples:
      >>> true = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
      >>> r = topic_recovery(true, true[::-1])
      >>> round(r.mean_cosine, 6), r.matching.tolist()
      (1.0, [1, 0])
    """
    from scipy.optimize import linear_sum_assignment

    t = np.asarray(true_topics, np.float64)
    f = np.asarray(fitted_topics, np.float64)
    if t.ndim != 2 or f.ndim != 2 or t.shape[1] != f.shape[1]:
        raise ValueError(f"topics must be (K, V) with the same V, got {t.shape} and {f.shape}")
    sim = _unit_rows(t) @ _unit_rows(f).T  # (K_true, K_fit)
    rows, cols = linear_sum_assignment(sim, maximize=True)
    matching = np.full(t.shape[0], -1, np.int64)
    cosine = np.zeros(t.shape[0])
    matching[rows] = cols
    cosine[rows] = sim[rows, cols]
    return TopicRecovery(float(cosine.mean()) if cosine.size else float("nan"), matching, cosine)
