import numpy as np
import pytest

from vijax.data import Vocabulary, sample_lda_corpus
from vijax.metrics import TopicRecovery, top_words, topic_recovery


def test_top_words():
    topics = np.array([[0.1, 0.5, 0.1, 0.3], [0.4, 0.4, 0.1, 0.1]])
    vocab = ["apple", "banana", "cherry", "date"]
    assert top_words(topics, vocab, n=2) == [["banana", "date"], ["apple", "banana"]]  # ties: lower id
    assert top_words(topics, Vocabulary(vocab), n=10)[0] == ["banana", "date", "apple", "cherry"]
    assert top_words(topics, n=1) == [[1], [0]]
    with pytest.raises(ValueError, match="vocab has 3 words"):
        top_words(topics, vocab[:3])


def test_topic_recovery_of_a_permuted_copy():
    topics = sample_lda_corpus(0, 1, 8, 100, eta=0.1).topics
    perm = np.random.default_rng(1).permutation(8)
    r = topic_recovery(topics, topics[perm])
    assert isinstance(r, TopicRecovery)
    np.testing.assert_allclose(r.mean_cosine, 1.0, rtol=1e-12)
    np.testing.assert_allclose(r.cosine, 1.0, rtol=1e-12)
    np.testing.assert_array_equal(r.matching, np.argsort(perm))  # the inverse permutation
    np.testing.assert_array_equal(topics[perm][r.matching], topics)
    # cosines ignore scale: unnormalised Dirichlet parameters match the same way
    scaled = topic_recovery(topics, 50.0 * topics[perm] * np.arange(1, 9)[:, None])
    np.testing.assert_array_equal(scaled.matching, np.argsort(perm))


def test_topic_recovery_noisy_and_unequal_sizes():
    rng = np.random.default_rng(2)
    topics = rng.dirichlet(np.full(50, 0.1), size=5)
    noisy = topics + 0.01 * rng.random(topics.shape)
    r = topic_recovery(topics, noisy)
    np.testing.assert_array_equal(r.matching, np.arange(5))
    assert 0.9 < r.mean_cosine < 1.0
    extra = np.vstack([rng.dirichlet(np.ones(50), size=3), topics[::-1]])  # 8 fitted for 5 true
    r = topic_recovery(topics, extra)
    np.testing.assert_array_equal(r.matching, 3 + np.arange(5)[::-1])
    fewer = topic_recovery(topics, topics[:3])
    assert sorted(fewer.matching.tolist()) == [-1, -1, 0, 1, 2]
    np.testing.assert_allclose(fewer.mean_cosine, 3 / 5, rtol=1e-12)
    with pytest.raises(ValueError, match="same V"):
        topic_recovery(topics, topics[:, :10])
