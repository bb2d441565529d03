"""The N / S multiplier of the stochastic conjugate algorithms: S counts the rows that hold data
(LDA's documents with a token), so that a batch padded with empty rows (a ``Minibatcher``'s last
batch of an epoch, or a batch larger than the corpus) takes the step of the same batch without its
padding; num_data below the batch's data points is refused."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.data import Minibatcher, sample_lda_corpus
from vijax.inference import map_em, schedules, ssvi, ssvi_a, svi
from vijax.models import LDA, DiagonalGMM

K, V = 2, 12
ALGORITHMS = {"svi": svi, "ssvi": ssvi, "ssvi_a": ssvi_a, "map_em": map_em}


@pytest.fixture(scope="module")
def corpus():
    return sample_lda_corpus(0, num_docs=5, num_topics=K, vocab_size=V, alpha=0.5, doc_length_mean=15.0).corpus


def _nat(q):
    return np.asarray(q.natural_params[0])


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@pytest.mark.parametrize("ramp", [False, True])
def test_a_padded_batch_takes_the_unpadded_step(corpus, name, ramp):
    """3 documents, N = 5, with and without 7 empty rows: the same lambda (rtol 1e-6: only the
    order of float sums may differ) and the same ELBO estimate. Before, the 10 rows were scaled by
    N / 10 instead of N / 3 (svi: topic mass 12.1 against 3.7 for the step of the reported case)."""
    alg = ALGORITHMS[name](LDA(K, V), num_data=5, schedule=0.5, ramp=ramp)
    state = alg.init(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(1)
    plain, info_plain = alg.step(state, corpus.batch([0, 1, 2]), key)
    padded, info_padded = alg.step(state, corpus.batch([0, 1, 2], num_rows=10), key)
    np.testing.assert_allclose(_nat(padded.q_global), _nat(plain.q_global), rtol=1e-6)
    np.testing.assert_allclose(float(info_padded.elbo), float(info_plain.elbo), rtol=1e-6)
    assert float(info_padded.step_size) == 0.5


def test_the_padded_last_batch_of_a_minibatcher_under_jit(corpus):
    """A Minibatcher of S = 4 over D = 5: the epoch's second batch holds one document and three
    empty rows; the jitted SVI step (S traced) equals the step on that document alone, S = 1
    (eager: one compilation)."""
    mb = Minibatcher(corpus, 4, seed=0)
    batch = mb.step_batch(1)
    (doc,) = [int(i) for i in mb.step_indices(1) if i >= 0]
    alg = svi(LDA(K, V), num_data=5, schedule=0.7)
    state = alg.init(jax.random.PRNGKey(0))
    padded, _ = jax.jit(alg.step)(state, batch, jax.random.PRNGKey(2))
    alone, _ = alg.step(state, corpus.batch([doc], length=batch.word_ids.shape[1]), jax.random.PRNGKey(2))
    np.testing.assert_allclose(_nat(padded.q_global), _nat(alone.q_global), rtol=1e-6)


def test_a_batch_without_data_is_not_stepped_on(corpus):
    """Every row empty: no information, so lambda is kept exactly and rho reported as 0."""
    alg = svi(LDA(K, V), num_data=5, schedule=0.5)
    state = alg.init(jax.random.PRNGKey(0))
    empty = corpus.batch([], num_rows=4, length=8)
    new, info = alg.step(state, empty, jax.random.PRNGKey(1))
    np.testing.assert_array_equal(_nat(new.q_global), _nat(state.q_global))
    assert float(info.step_size) == 0.0 and bool(info.accepted)


@pytest.mark.parametrize("name", ["svi", "map_em"])
def test_num_data_below_the_batch_is_refused(corpus, name):
    """More documents with tokens than num_data: a ValueError naming num_data (a value check of the
    step, since S is traced for LDA); padding rows beyond N are fine."""
    alg = ALGORITHMS[name](LDA(K, V), num_data=2, schedule=0.5)
    state = alg.init(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"^num_data = 2 is smaller than the batch's number of rows with data"):
        alg.step(state, corpus.batch([0, 1, 2]), jax.random.PRNGKey(1))
    alg.step(state, corpus.batch([0, 1], num_rows=6), jax.random.PRNGKey(1))  # 2 documents + padding


def test_num_data_below_a_static_batch_size_is_refused_at_trace_time():
    """A model whose every row is a data point (a GMM): S is static, the error comes while tracing."""
    x = np.random.default_rng(0).normal(size=(10, 2))
    alg = svi(DiagonalGMM.from_data(x, 2), num_data=4, schedule=schedules.constant(0.5))
    state = alg.init(jax.random.PRNGKey(0), x)
    with pytest.raises(ValueError, match=r"^num_data = 4 is smaller than the batch's 10 data points"):
        jax.jit(alg.step)(state, jnp.asarray(x), jax.random.PRNGKey(1))


def test_hyperparameter_step_ignores_padding_rows(corpus):
    """svi with hyper_step: the padding rows' alpha terms (weight 0) add no curvature, so alpha and
    eta after one step are those of the unpadded batch (before, in float32: alpha 0.0961 against
    0.0877)."""
    alg = svi(LDA(K, V), num_data=5, schedule=0.5, hyper_step=1.0)
    state = alg.init(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(1)
    _, plain = alg.step(state, corpus.batch([0, 1, 2]), key)
    _, padded = alg.step(state, corpus.batch([0, 1, 2], num_rows=10), key)
    for name in ("alpha", "eta"):
        np.testing.assert_allclose(float(padded.hyper[name]), float(plain.hyper[name]), rtol=1e-6)
