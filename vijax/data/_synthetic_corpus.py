"""Synthetic corpora drawn from the generative processes of LDA (in memory or streamed to disk) and
of the correlated topic model."""

from __future__ import annotations

import os
from typing import Iterator, NamedTuple, Optional, Sequence

import numpy as np

from vijax._validate import ArgumentError, check_draw_args, check_int, check_positive, check_scalar
from vijax.data._csr import Corpus, CorpusWriter, as_rng, seed_entropy, vouched
from vijax.data._npz import open_npz

LDA_BLOCK_DOCS = 512  # documents drawn together, each block from its own stream (the key, the block's index)


class LDASample(NamedTuple):
    """A synthetic LDA corpus with its ground truth."""

    corpus: Corpus  # D documents
    topics: np.ndarray  # (K, V) true topics beta
    doc_topics: Optional[np.ndarray]  # (D, K) true topic proportions theta, or None when not kept


def _concentration(name, value, size):
    check_positive(name, value)
    return np.broadcast_to(np.asarray(value, np.float64), (size,)).copy()


def _flat_cdf(probs: np.ndarray) -> np.ndarray:
    """Rows' cumulative sums, row r shifted by r, flattened (``_categorical_rows`` draws from it)."""
    cdf = np.cumsum(probs, axis=1)
    cdf[:, -1] = 1.0
    return (cdf + np.arange(probs.shape[0])[:, None]).ravel()


def _categorical_rows(flat_cdf: np.ndarray, rows: np.ndarray, query: np.ndarray, n: int) -> np.ndarray:
    """Draws from the given rows of a ``_flat_cdf``; ``query = rows + u`` with u ~ Uniform[0, 1)."""
    draw = np.searchsorted(flat_cdf, query, side="right") - rows * n
    return np.clip(draw, 0, n - 1)  # guards the rounding of rows + u up to rows + 1


class _Setup(NamedTuple):
    entropy: list
    num_docs: int
    topics: np.ndarray
    topic_cdf: np.ndarray
    alpha: np.ndarray
    doc_length_mean: float
    doc_length_log_sd: float


def _setup(key, num_docs, num_topics, vocab_size, alpha, eta, doc_length_mean, doc_length_log_sd=0.0) -> _Setup:
    check_int("num_docs", num_docs, 0)
    check_int("num_topics", num_topics, 1)
    check_int("vocab_size", vocab_size, 1)
    if not doc_length_mean >= 0:
        raise ArgumentError(
            "doc_length_mean", f"doc_length_mean must be non-negative, got {doc_length_mean!r}", value=doc_length_mean
        )
    check_scalar("doc_length_log_sd", doc_length_log_sd, low=0.0, high=None, include_low=True)
    alpha = _concentration("alpha", alpha, num_topics)
    eta = _concentration("eta", eta, vocab_size)
    entropy = seed_entropy(key)
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(0,)))
    topics = rng.dirichlet(eta, size=num_topics)
    return _Setup(
        entropy, int(num_docs), topics, _flat_cdf(topics), alpha, float(doc_length_mean), float(doc_length_log_sd)
    )


def _lda_blocks(setup: _Setup) -> Iterator[tuple[np.ndarray, Corpus]]:
    """Yields (theta, corpus) for consecutive blocks of ``LDA_BLOCK_DOCS`` documents."""
    num_topics, vocab_size = setup.topics.shape
    for b, start in enumerate(range(0, setup.num_docs, LDA_BLOCK_DOCS)):
        n = min(LDA_BLOCK_DOCS, setup.num_docs - start)
        rng = np.random.default_rng(np.random.SeedSequence(setup.entropy, spawn_key=(1, b)))
        theta = rng.dirichlet(setup.alpha, size=n)
        mean, sd = setup.doc_length_mean, setup.doc_length_log_sd
        if sd > 0:  # a Poisson-lognormal: the rate's log is normal, its mean doc_length_mean
            mean = mean * rng.lognormal(-0.5 * sd**2, sd, size=n)
        lengths = rng.poisson(mean, size=n)
        tok_doc = np.repeat(np.arange(n), lengths)
        z = _categorical_rows(_flat_cdf(theta), tok_doc, tok_doc + rng.random(tok_doc.size), num_topics)
        # words drawn in increasing order of their search key: the look-ups walk the (K * V) table forwards
        query = z + rng.random(tok_doc.size)
        order = np.argsort(query)
        w = _categorical_rows(setup.topic_cdf, z[order], query[order], vocab_size)
        pairs, counts = np.unique(tok_doc[order] * vocab_size + w, return_counts=True)  # by doc, word
        doc_ptr = np.concatenate([[0], np.cumsum(np.bincount(pairs // vocab_size, minlength=n))])
        ids = (pairs % vocab_size).astype(np.int32)
        yield theta, Corpus(doc_ptr, ids, counts.astype(np.float32), vocab_size, validate=False)


def sample_lda_corpus(
    key,
    num_docs: int,
    num_topics: int,
    vocab_size: int,
    *,
    alpha=0.1,
    eta=0.01,
    doc_length_mean: float = 100.0,
    doc_length_log_sd: float = 0.0,
    vocab: Optional[Sequence[str]] = None,
) -> LDASample:
    """A corpus drawn from latent Dirichlet allocation, with its true topics and proportions.

    beta_k ~ Dirichlet(eta); for each document theta_d ~ Dirichlet(alpha), N_d ~ Poisson(doc_length_mean), and
    N_d tokens, each z ~ Categorical(theta_d) then w ~ Categorical(beta_z) (Blei, Ng & Jordan, 2003, §3).

    Args:
      key: int seed or JAX PRNG key; the same key gives the same corpus.
      alpha: document-topic concentration, scalar or (K,).
      eta: topic-word concentration, scalar or (V,).
      doc_length_mean: mean of the Poisson number of tokens per document (empty documents are kept).
      doc_length_log_sd: 0, or sigma > 0: each document's Poisson rate is doc_length_mean times a lognormal of log-mean
        -sigma^2 / 2 and log-sd sigma (mean 1), heavy-tailed lengths like real articles' (Wikipedia's: sigma near 0.9).
      vocab: optional V words for the corpus.

    Returns:
      ``LDASample(corpus, topics (K, V), doc_topics (D, K))``, arrays in float64.

    Examples:
      >>> s = sample_lda_corpus(0, num_docs=20, num_topics=3, vocab_size=50, doc_length_mean=30)
      >>> s.corpus.num_docs, s.topics.shape, s.doc_topics.shape
      (20, (3, 50), (20, 3))
    """
    setup = _setup(key, num_docs, num_topics, vocab_size, alpha, eta, doc_length_mean, doc_length_log_sd)
    thetas, lengths, ids, counts = [np.zeros((0, num_topics))], [], [], []
    for theta, block in _lda_blocks(setup):
        thetas.append(theta)
        lengths.append(block.doc_unique_words)
        ids.append(block.word_ids)
        counts.append(block.counts)
    ptr = np.concatenate([[0], np.cumsum(np.concatenate(lengths or [np.zeros(0, np.int64)]))])
    cat = lambda parts, dt: np.concatenate(parts) if parts else np.zeros(0, dt)  # noqa: E731
    corpus = vouched(  # ids in [0, V) and whole counts >= 0 by construction
        Corpus(ptr.astype(np.int64), cat(ids, np.int32), cat(counts, np.float32), vocab_size, vocab, validate=False)
    )
    return LDASample(corpus, setup.topics, np.concatenate(thetas))


def write_lda_corpus_npz(
    path: str | os.PathLike,
    key,
    num_docs: int,
    num_topics: int,
    vocab_size: int,
    *,
    alpha=0.1,
    eta=0.01,
    doc_length_mean: float = 100.0,
    doc_length_log_sd: float = 0.0,
    vocab: Optional[Sequence[str]] = None,
    save_doc_topics: bool = True,
) -> LDASample:
    """``sample_lda_corpus``'s documents for the same arguments, streamed to the ``.npz`` file ``path`` a block at a
    time (``save_doc_topics``: theta (D, K) too, as member ``doc_topics``).

    Returns:
      ``LDASample`` whose corpus and doc_topics are memory-mapped from the file (topics in memory, and stored).
    """
    setup = _setup(key, num_docs, num_topics, vocab_size, alpha, eta, doc_length_mean, doc_length_log_sd)
    extra = {"doc_topics": (np.float32, (num_topics,))} if save_doc_topics else {}
    with CorpusWriter(path, vocab_size, vocab, extra_streams=extra, extra_arrays={"topics": setup.topics}) as writer:
        for theta, block in _lda_blocks(setup):
            writer.append(block)
            if save_doc_topics:
                writer.append_extra("doc_topics", theta)
    corpus = vouched(Corpus.load_npz(path, mmap=True, validate=False))  # the file just written from valid blocks
    doc_topics = open_npz(path, mmap=True)["doc_topics"] if save_doc_topics else None
    return LDASample(corpus, setup.topics, doc_topics)


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
    """A synthetic corpus from the CTM (Blei & Lafferty 2007): z_d ~ N(0, Sigma) in R^(K-1), Sigma =
    correlation A A^T/(K-1) + 0.5 I (A standard normal), topic proportions softmax((z_d, 0)), topics ~
    Dirichlet(topic_concentration), ``doc_length`` tokens per document; K >= 2. ``seed``: int or JAX PRNG key.

    Returns:
      (Corpus, dict with "topics" (K, V), "mu" (K-1,), "sigma" (K-1, K-1)).

    Examples:
        >>> corpus, truth = sample_ctm_corpus(0, num_docs=5, num_topics=3, vocab_size=40, doc_length=20)
        >>> corpus.num_docs, truth["topics"].shape, truth["sigma"].shape
        (5, (3, 40), (2, 2))
    """
    sizes = dict(num_docs=num_docs, num_topics=(num_topics, 2), vocab_size=vocab_size, doc_length=doc_length)
    check_draw_args(sizes)
    check_scalar("topic_concentration", topic_concentration, low=0.0, high=None)
    check_scalar("correlation", correlation, low=0.0, high=None, include_low=True)
    rng = as_rng(seed)
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
    c = np.stack([rng.multinomial(doc_length, probs[doc]) for doc in range(num_docs)])
    ptr = np.concatenate([[0], np.cumsum(np.count_nonzero(c, 1))])
    corpus = Corpus(ptr.astype(np.int64), np.nonzero(c)[1].astype(np.int32), c[c > 0].astype(np.float32), vocab_size)
    return corpus, {"topics": topics, "mu": np.zeros(d), "sigma": sigma}
