import jax
import numpy as np
import pytest

from vijax.data import sample_gmm, sample_histogram_mixture
from vijax.metrics import match_components


def test_sample_gmm_moments():
    d = sample_gmm(jax.random.PRNGKey(0), 20000, 3, 2, spread=10.0)
    assert d.x.shape == (20000, 2) and d.z.shape == (20000,)
    for k in range(3):
        xk = np.asarray(d.x)[np.asarray(d.z) == k]
        n = len(xk)
        se = np.asarray(d.scales[k]) / np.sqrt(n)
        assert np.all(np.abs(xk.mean(0) - np.asarray(d.means[k])) < 5 * se)
        np.testing.assert_allclose(xk.std(0), d.scales[k], rtol=0.1)
        p = float(d.weights[k])
        assert abs(n / 20000 - p) < 5 * np.sqrt(p * (1 - p) / 20000)


def test_histograms_are_normalized_per_channel():
    d = sample_histogram_mixture(jax.random.PRNGKey(1), 50, 4, bins=16, pixels=200)
    assert d.x.shape == (50, 48)
    np.testing.assert_allclose(np.asarray(d.x).reshape(50, 3, 16).sum(-1), 1.0, rtol=1e-6)
    assert np.all(np.asarray(d.x) >= 0)


def test_generators_validate_arguments():
    with pytest.raises(ValueError, match="num_points"):
        sample_gmm(jax.random.PRNGKey(0), 0, 2, 2)
    with pytest.raises(ValueError, match="num_components"):
        sample_histogram_mixture(jax.random.PRNGKey(0), 10, 0)


def test_match_components_hungarian():
    true = np.array([[0.0, 0.0], [5.0, 5.0]])
    fit = np.array([[5.1, 5.0], [9.0, 9.0], [0.0, -0.2]])
    match, dist = match_components(true, fit)
    assert match.tolist() == [2, 0]
    np.testing.assert_allclose(dist, [0.2, 0.1], rtol=1e-9)
    match, _ = match_components(true, fit, fitted_weights=[0.5, 0.4, 0.001], min_weight=0.01)
    assert match.tolist() == [0, 1]  # 7.14 + 5.66 beats 12.73 + 0.10


def test_shared_data_path_is_none_when_absent(monkeypatch, tmp_path):
    from vijax.data import shared_data_path

    monkeypatch.setenv("VIJAX_SHARED_DATA", str(tmp_path / "nowhere"))
    assert shared_data_path("wiki_bnpy", "train.ldac.gz") is None
    (tmp_path / "here" / "wiki_bnpy").mkdir(parents=True)
    (tmp_path / "here" / "wiki_bnpy" / "vocab.txt").write_text("a\n")
    monkeypatch.setenv("VIJAX_SHARED_DATA", str(tmp_path / "here"))
    assert shared_data_path("wiki_bnpy", "vocab.txt") == tmp_path / "here" / "wiki_bnpy" / "vocab.txt"


def test_resolve_data_path(monkeypatch, tmp_path):
    from vijax.data import resolve_data_path

    local = tmp_path / "corpus.ldac"
    local.write_text("1 0:1\n")
    monkeypatch.setenv("VIJAX_SHARED_DATA", str(tmp_path / "shared"))
    assert resolve_data_path(str(local)) == local  # an existing file, as given
    assert resolve_data_path(local) == local
    assert resolve_data_path(str(tmp_path / "missing.ldac")) is None
    assert resolve_data_path("wiki_bnpy/vocab.txt") is None
    assert resolve_data_path("") is None and resolve_data_path(None) is None
    (tmp_path / "shared" / "wiki_bnpy").mkdir(parents=True)
    (tmp_path / "shared" / "wiki_bnpy" / "vocab.txt").write_text("a\n")
    assert resolve_data_path("wiki_bnpy/vocab.txt") == tmp_path / "shared" / "wiki_bnpy" / "vocab.txt"


def test_sample_ctm_corpus():
    from vijax.data import sample_ctm_corpus

    corpus, truth = sample_ctm_corpus(3, 50, 4, 30, doc_length=25, topic_concentration=0.5)
    assert corpus.num_docs == 50 and corpus.vocab_size == 30
    np.testing.assert_array_equal(corpus.doc_lengths, 25.0)
    np.testing.assert_allclose(truth["topics"].sum(1), 1.0)
    assert truth["topics"].shape == (4, 30) and truth["mu"].shape == (3,)
    assert np.all(np.linalg.eigvalsh(truth["sigma"]) >= 0.5 - 1e-12)  # correlation A A^T / (K-1) + 0.5 I
    again, _ = sample_ctm_corpus(3, 50, 4, 30, doc_length=25, topic_concentration=0.5)
    np.testing.assert_array_equal(again.word_ids, corpus.word_ids)
    np.testing.assert_array_equal(again.counts, corpus.counts)
    with pytest.raises(ValueError, match="num_topics"):
        sample_ctm_corpus(0, 5, 1, 30)


def test_sparse_regression_has_its_zeros_design_correlation_and_noise():
    from vijax.data import sample_sparse_regression

    d = sample_sparse_regression(jax.random.PRNGKey(0), 20000, 6, 2, noise=0.5, correlation=0.6)
    w = np.asarray(d.w)
    assert np.all(np.abs(w[:2]) >= 1.0) and np.all(w[2:] == 0)
    c = np.corrcoef(np.asarray(d.x).T)
    np.testing.assert_allclose(c[0, 1], 0.6, atol=0.02)  # AR(1): 0.6^|i-j|, SE ~ 0.005
    np.testing.assert_allclose(c[0, 2], 0.36, atol=0.02)
    resid = np.asarray(d.y) - np.asarray(d.x) @ w
    np.testing.assert_allclose(resid.std(), 0.5, rtol=0.03)
    for kwargs, match in [
        ({"num_relevant": 7}, "num_relevant"),
        ({"noise": 0.0}, "noise"),
        ({"correlation": 1.0}, "correlation"),
    ]:
        args = dict(num_relevant=2) | kwargs
        with pytest.raises(ValueError, match=match):
            sample_sparse_regression(jax.random.PRNGKey(0), 10, 6, args.pop("num_relevant"), **args)


def test_generators_name_a_key_that_is_none_and_ctm_refuses_a_seed_of_none():
    """The generators that take a JAX key named none of these (JAX's own TypeError); the CTM's
    seed None drew a corpus from fresh entropy, which no run could reproduce."""
    from vijax.data import (
        sample_bernoulli_mixture,
        sample_ctm_corpus,
        sample_latent_bernoulli,
        sample_sparse_regression,
        sample_speech_spectrogram,
    )

    for call in (
        lambda k: sample_gmm(k, 10, 2, 3),
        lambda k: sample_bernoulli_mixture(k, 10, 2, 3),
        lambda k: sample_latent_bernoulli(k, 10, 4, 2),
        lambda k: sample_sparse_regression(k, 10, 4, 2),
        lambda k: sample_speech_spectrogram(k, 8, 2, 5),
        lambda k: sample_histogram_mixture(k, 10),
    ):
        for bad in (None, "abc"):
            with pytest.raises(ValueError, match=r"^key must be a PRNG key"):
                call(bad)
    with pytest.raises(ValueError, match=r"^seed must be an int or a JAX PRNG key, got None"):
        sample_ctm_corpus(None, 5, 3, 10)
    with pytest.raises(ValueError, match=r"^topic_concentration must be a finite number > 0"):
        sample_ctm_corpus(0, 5, 3, 10, topic_concentration=-1.0)
    with pytest.raises(ValueError, match=r"^correlation must be a finite number >= 0"):
        sample_ctm_corpus(0, 5, 3, 10, correlation=float("nan"))
    a, b = sample_ctm_corpus(7, 5, 3, 10)[0], sample_ctm_corpus(7, 5, 3, 10)[0]  # a seed reproduces
    np.testing.assert_array_equal(a.word_ids, b.word_ids)
