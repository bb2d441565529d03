"""Synthetic corpora drawn from the correlated topic model (Blei and Lafferty, "A correlated topic
model of Science", Annals of Applied Statistics, 2007, §2)."""

from __future__ import annotations

import numpy as np

from vijax._validate import check_int, check_scalar
from vijax.data._csr import Corpus, as_rng


def sample_ctm_corpus(
    seed: int,
    num_docs: int,
    num_topics: int,
    vocab_size: int,
    *,
    doc_length: int = 100,
    topic_concentration: float = 0.05,
    correlation: float = 1.0,
):
    """A synthetic corpus from the CTM: z_d ~ N(0, Sigma) in R^(K-1), Sigma = correlation A A^T/(K-1)
    + 0.5 I (A standard normal), topic proportions softmax((z_d, 0)), topics ~
    Dirichlet(topic_concentration), ``doc_length`` tokens per document.

    Args:
      seed: int seed of NumPy's generator, or a JAX PRNG key (``vijax.data.as_rng``); the same
        seed gives the same corpus.
      num_docs: D >= 1.
      num_topics: K >= 2.
      vocab_size: V >= 1.
      doc_length: tokens per document (>= 1).
      topic_concentration: symmetric Dirichlet concentration of the topics (> 0).
      correlation: weight of the random part A A^T / (K-1) of Sigma.

    Returns:
      (Corpus, dict with "topics" (K, V), "mu" (K-1,), "sigma" (K-1, K-1)).

    Examples:
        >>> corpus, truth = sample_ctm_corpus(0, num_docs=5, num_topics=3, vocab_size=40, doc_length=20)
        >>> corpus.num_docs, truth["topics"].shape, truth["sigma"].shape
        (5, (3, 40), (2, 2))
    """
    check_int("num_docs", num_docs)
    check_int("num_topics", num_topics, minimum=2)
    check_int("vocab_size", vocab_size)
    check_int("doc_length", doc_length)
    check_scalar("topic_concentration", topic_concentration, low=0.0, high=None)
    check_scalar("correlation", correlation, low=0.0, high=None, include_low=True)
    rng = as_rng(seed)  # None was NumPy's fresh entropy: a corpus no run could reproduce
    d = num_topics - 1
    a = rng.normal(size=(d, d))
    sigma = correlation * a @ a.T / d + 0.5 * np.eye(d)
    topics = rng.dirichlet(np.full(vocab_size, topic_concentration), size=num_topics)
    z = rng.multivariate_normal(np.zeros(d), sigma, size=num_docs)
    z = np.concatenate([z, np.zeros((num_docs, 1))], 1)  # the last logit is 0 (Blei & Lafferty)
    theta = np.exp(z - z.max(1, keepdims=True))
    theta /= theta.sum(1, keepdims=True)
    probs = theta @ topics
    probs /= probs.sum(1, keepdims=True)
    ptr, ids, cnts = [0], [], []
    for doc in range(num_docs):
        c = rng.multinomial(doc_length, probs[doc])
        nz = np.flatnonzero(c)
        ids.append(nz)
        cnts.append(c[nz])
        ptr.append(ptr[-1] + nz.size)
    corpus = Corpus(
        np.asarray(ptr, np.int64),
        np.concatenate(ids).astype(np.int32),
        np.concatenate(cnts).astype(np.float32),
        vocab_size,
    )
    return corpus, {"topics": topics, "mu": np.zeros(d), "sigma": sigma}


__all__ = ["sample_ctm_corpus"]
