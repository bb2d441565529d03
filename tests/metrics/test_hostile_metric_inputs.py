"""Every function of ``vijax.metrics`` refuses empty or non-finite input with a ValueError naming the
argument, rather than returning NaN (or a number that reads as a result: a held-out score of 0
for a held-out set without tokens, a correlation of 0 for NaN dictionaries)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

import vijax.metrics as vm
from vijax.data import BowBatch, Corpus
from vijax.models import UnivariateGMM

NAN = float("nan")


def _exact(message):
    return "^" + re.escape(message) + "$"


def _not_finite(name):
    return _exact(f"{name} must be numeric and finite (no NaN or inf)")


# ------------------------------------------------------------------ held-out scores of topic models


class _Uniform:
    """A stand-in topic model that predicts each held-out word with probability 1/4 (so the
    perplexity is 4 exactly), fast enough to run eagerly."""

    def check_data(self, batch):
        pass

    def batch_checks(self, batch):
        return []

    def log_predictive(self, q, observed, heldout):
        return -jnp.sum(heldout.counts, axis=-1) * jnp.log(4.0)


UNIFORM, Q = _Uniform(), {"beta": jnp.ones(4)}
OBS = BowBatch(jnp.array([[0, 1]]), jnp.array([[2.0, 1.0]]))
NO_HELD = BowBatch(jnp.array([[2]]), jnp.array([[0.0]]))
NO_TOKENS = (
    "heldout has no tokens to score: num_tokens = 0 (1 document skipped for an empty observed or held-out part); "
    "the per-word log predictive is undefined"
)


def test_a_batch_without_held_out_tokens_has_no_per_word_score_or_perplexity():
    """Zero totals (they add up over batches), but per_word and perplexity refuse to divide 0 by 0;
    under jit, where nothing can be raised, the per-word score is NaN (never 0)."""
    res = vm.document_completion(UNIFORM, Q, OBS, NO_HELD)
    assert (float(res.log_prob), float(res.num_tokens), int(res.num_skipped)) == (0.0, 0.0, 1)
    with pytest.raises(ValueError, match=_exact(NO_TOKENS)):
        _ = res.per_word
    with pytest.raises(ValueError, match=_exact(NO_TOKENS)):
        vm.perplexity(UNIFORM, Q, OBS, NO_HELD)
    jitted = jax.jit(lambda q: vm.document_completion(UNIFORM, q, OBS, NO_HELD).per_word)(Q)
    assert np.isnan(float(jitted))
    held = BowBatch(jnp.array([[2]]), jnp.array([[3.0]]))
    assert float(vm.perplexity(UNIFORM, Q, OBS, held)) == pytest.approx(4.0, rel=1e-6)
    with pytest.raises(ValueError, match=_exact("q_global must be finite, got NaN or infinite entries")):
        vm.perplexity(UNIFORM, {"beta": jnp.full(4, NAN)}, OBS, held)


def test_corpus_document_completion_refuses_a_held_out_part_without_tokens():
    empty4 = Corpus(np.array([0, 0, 0]), np.zeros(0, np.int32), np.zeros(0), 4)
    observed = Corpus(np.array([0, 2, 3]), np.array([0, 1, 3]), np.array([2.0, 1.0, 1.0]), 4)
    with pytest.raises(
        ValueError, match=_exact("heldout has no tokens: its 2 documents are all empty, so there is nothing to score")
    ):
        vm.corpus_document_completion(UNIFORM, Q, observed, empty4)
    heldout = Corpus(np.array([0, 1, 2]), np.array([2, 2]), np.array([1.0, 4.0]), 4)
    with pytest.raises(
        ValueError,
        match=_exact(
            "heldout has no tokens in a document whose observed part has tokens: all 2 documents were skipped, "
            "so there is nothing to score"
        ),
    ):
        vm.corpus_document_completion(UNIFORM, Q, empty4, heldout)
    with pytest.raises(ValueError, match=_exact("q_global must be finite, got NaN or infinite entries")):
        vm.corpus_document_completion(UNIFORM, {"beta": jnp.full(4, NAN)}, observed, heldout)
    with pytest.raises(ValueError, match=_exact("batch_docs must be an integer >= 1, got 0")):
        vm.corpus_document_completion(UNIFORM, Q, observed, heldout, batch_docs=0)
    r = vm.corpus_document_completion(UNIFORM, Q, observed, heldout)
    assert (r.num_tokens, r.num_docs, r.num_skipped) == (5.0, 2, 0)
    assert r.per_word == pytest.approx(-np.log(4.0), rel=1e-6)


# ------------------------------------------------------------------ mean_log_predictive


GMM = UnivariateGMM(num_components=2)
Q_GMM = GMM.init_globals(jax.random.PRNGKey(0), jnp.array([0.0, 1.0, 2.0]))


def test_mean_log_predictive_against_scipy_and_refusing_empty_or_nan_input():
    x = np.array([0.5, 1.0, -2.0])
    var = 1.0 + np.asarray(Q_GMM.variance, np.float64)
    mean = np.asarray(Q_GMM.mean, np.float64)
    ref = np.mean(np.log(np.mean(norm.pdf(x[:, None], mean[None], np.sqrt(var)[None]), axis=1)))
    np.testing.assert_allclose(vm.mean_log_predictive(GMM, Q_GMM, x), ref, rtol=1e-5)  # float32 model
    with pytest.raises(ValueError, match=_exact("x_test is empty")):
        vm.mean_log_predictive(GMM, Q_GMM, np.zeros(0))
    with pytest.raises(ValueError, match=_not_finite("x_test")):
        vm.mean_log_predictive(GMM, Q_GMM, np.array([0.5, NAN]))
    bad_q = jax.tree_util.tree_map(lambda a: a * NAN, Q_GMM)
    with pytest.raises(ValueError, match=_exact("q_global must be finite, got NaN or infinite entries")):
        vm.mean_log_predictive(GMM, bad_q, x)


# ------------------------------------------------------------------ matching, topics, dictionaries


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: vm.match_components(np.array([[NAN, 0.0]]), np.ones((2, 2))), _not_finite("true_means")),
        (lambda: vm.match_components(np.zeros((0, 2)), np.ones((2, 2))), _exact("true_means is empty")),
        (lambda: vm.match_components(np.ones((1, 2)), np.full((2, 2), np.inf)), _not_finite("fitted_means")),
        (
            lambda: vm.match_components(np.ones((1, 2)), np.ones((2, 3))),
            _exact("fitted_means must have the D = 2 columns of true_means, got shape (2, 3)"),
        ),
        (
            lambda: vm.match_components(np.ones((1, 2)), np.ones((2, 2)), np.array([0.5, NAN])),
            _not_finite("fitted_weights"),
        ),
        (lambda: vm.top_words(np.array([[NAN, 1.0, 2.0]]), n=2), _not_finite("topics")),
        (lambda: vm.top_words(np.zeros((0, 3))), _exact("topics is empty")),
        (lambda: vm.top_words(np.ones((2, 3)), n=0), _exact("n must be an integer >= 1, got 0")),
        (lambda: vm.topic_recovery(np.zeros((0, 3)), np.ones((2, 3))), _exact("true_topics is empty")),
        (lambda: vm.topic_recovery(np.full((2, 3), NAN), np.ones((2, 3))), _not_finite("true_topics")),
        (lambda: vm.topic_recovery(np.ones((2, 3)), np.full((2, 3), NAN)), _not_finite("fitted_topics")),
        (lambda: vm.dictionary_correlations(np.full((4, 2), NAN), np.ones((4, 2))), _not_finite("true_w")),
        (lambda: vm.dictionary_correlations(np.ones((4, 2)), np.full((4, 2), NAN)), _not_finite("est_w")),
        (lambda: vm.dictionary_correlations(np.zeros((0, 2)), np.zeros((0, 2))), _exact("true_w is empty")),
        (
            lambda: vm.dictionary_correlations(np.ones((4, 2)), np.ones((3, 2))),
            _exact("est_w must have the F = 4 rows of true_w, got shape (3, 2)"),
        ),
    ],
)
def test_matching_topics_and_dictionaries_name_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_gap_nmf_components_used_names_bad_frames_q_and_min_share():
    """The checks come before the local step, so a stand-in q (any pytree) suffices."""
    from vijax.models import GaPNMF

    model = GaPNMF(6, 17)
    frames = np.random.default_rng(0).gamma(1.0, size=(40, 17))
    q = {"w": np.ones(3)}
    with pytest.raises(ValueError, match=_not_finite("frames")):
        vm.gap_nmf_components_used(model, q, np.where(np.arange(17) == 3, NAN, frames))
    with pytest.raises(
        ValueError, match=_exact("frames must be non-negative with some positive entry, got min 0.0 and max 0.0")
    ):
        vm.gap_nmf_components_used(model, q, np.zeros_like(frames))
    with pytest.raises(ValueError, match=_exact("q must be finite, got NaN or infinite entries")):
        vm.gap_nmf_components_used(model, {"w": np.array([1.0, NAN])}, frames)
    with pytest.raises(ValueError, match=_exact("min_share must be a finite number >= 0, got -0.1")):
        vm.gap_nmf_components_used(model, q, frames, min_share=-0.1)


# ------------------------------------------------------------------ mixtures, calibration, ArviZ

W2, P2 = jnp.array([0.5, 0.5]), jnp.full((2, 3), 0.5)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: vm.count_distinct([]), _exact("z is empty (shape (0,)): there are no labels to count")),
        (lambda: vm.count_distinct([NAN, 1.0]), _exact("z holds NaN labels")),
        (lambda: vm.components_used(W2, P2, jnp.zeros((0, 3))), _exact("y is empty")),
        (lambda: vm.components_used(W2, P2, jnp.full((2, 3), NAN)), _not_finite("y")),
        (
            lambda: vm.components_used(jnp.array([NAN, 1.0]), P2, jnp.ones((2, 3))),
            _exact("weights must be finite, >= 0 and not all 0, got [nan  1.]"),
        ),
        (
            lambda: vm.bernoulli_mixture_kl(jax.random.PRNGKey(0), W2, P2.at[0, 0].set(NAN), W2, P2, 100),
            _exact("true_probs must be finite probabilities in [0, 1], got NaN, infinite or outside entries"),
        ),
        (
            lambda: vm.bernoulli_mixture_kl_exact(W2, P2, jnp.array([NAN]), jnp.full((1, 3), 0.5)),
            _exact("fit_weights must be finite, >= 0 and not all 0, got [nan]"),
        ),
        (  # p(y) of weights summing to 1.4 is no distribution: the KL of identical mixtures came out 0.47
            lambda: vm.bernoulli_mixture_kl_exact(jnp.array([0.7, 0.7]), P2, W2, P2),
            _exact("true_weights must sum to 1 (mixture weights, a point of the simplex), got sum 1.4"),
        ),
        (
            lambda: vm.bernoulli_mixture_kl_exact(W2, P2, jnp.array([1.0]), jnp.full((1, 4), 0.5)),
            _exact("fit_probs must have D = 3 columns, got shape (1, 4)"),
        ),
        (
            lambda: vm.expected_calibration_error(np.array([NAN, 0.2]), np.array([0, 1])),
            _exact("probs has non-finite entries"),
        ),
        (
            lambda: vm.expected_calibration_error(np.array([1.5, 0.2]), np.array([0, 1])),
            _exact("probs must be probabilities in [0, 1], got entries from 0.2 to 1.5"),
        ),
        (
            lambda: vm.reliability(np.array([[0.5, 0.5]]), np.array([7])),
            _exact("labels must be class indices in [0, 2) for probs (N, C = 2)"),
        ),
        (
            lambda: vm.expected_calibration_error(np.zeros(0), np.zeros(0)),
            _exact("probs must hold at least one prediction"),
        ),
        (
            lambda: vm.to_arviz({"x": np.array([0.1, NAN])}),
            _exact("q_or_draws: the draws of 'x' have NaN or infinite entries"),
        ),
        (lambda: vm.to_arviz({"x": np.zeros(0)}), _exact("q_or_draws holds no draws (S = 0)")),
    ],
)
def test_mixture_calibration_and_arviz_name_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_mixture_kl_stays_jit_able():
    """Under jit the value checks are skipped (tracers), the shape checks still run."""
    f = jax.jit(lambda w, p: vm.bernoulli_mixture_kl_exact(w, p, w, p))
    assert float(f(W2, P2)) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(
        ValueError,
        match="^" + re.escape("true_probs must be (K, D) with the K = 2 of true_weights, got shape (3, 3)\n"),
    ):
        f(W2, jnp.full((3, 3), 0.5))
