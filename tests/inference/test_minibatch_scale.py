"""The stochastic conjugate steps of LDA (svi, ssvi, ssvi_a, map_em).

N / S: S counts the rows that hold data (LDA's documents with a token), so that a batch padded
with empty rows (a ``Minibatcher``'s last batch of an epoch, or a batch larger than the corpus)
takes the step of the same batch without its padding; num_data below the batch's data points is
refused. One SVI step is pinned to (1 - rho) lambda + rho (eta + (N / S) c). (One model and two
batch shapes: the tests share their compilations.)"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.data import Minibatcher, bucket_length, sample_lda_corpus
from vijax.inference import map_em, schedules, ssvi, ssvi_a, svi
from vijax.inference._svi import hyper_newton_step
from vijax.models import LDA, DiagonalGMM

K, V = 2, 12
MODEL = LDA(K, V, accelerate=False)  # the plain E-step: a smaller program to compile
ALGORITHMS = {"svi": svi, "ssvi": ssvi, "ssvi_a": ssvi_a, "map_em": map_em}


@pytest.fixture(scope="module")
def corpus():
    return sample_lda_corpus(0, num_docs=5, num_topics=K, vocab_size=V, alpha=0.5, doc_length_mean=15.0).corpus


@pytest.fixture(scope="module")
def batches(corpus):
    """Documents 0-2 alone (3 rows) and with 7 empty rows (10): the module's only two shapes."""
    length = bucket_length(int(corpus.doc_unique_words.max()))
    return corpus.batch([0, 1, 2], length=length), corpus.batch([0, 1, 2], num_rows=10, length=length)


def _nat(q):
    return np.asarray(q.natural_params[0])


@pytest.mark.parametrize(
    ("name", "ramp"),
    [("svi", False), ("svi", True), ("ssvi", False), ("ssvi_a", False), ("ssvi_a", True), ("map_em", False)],
)
def test_a_padded_batch_takes_the_unpadded_step(batches, name, ramp):
    """3 documents, N = 5, with and without 7 empty rows: the same lambda (rtol 1e-6: only the
    order of float sums may differ) and the same ELBO estimate. Before, the 10 rows were scaled by
    N / 10 instead of N / 3 (svi: topic mass 12.1 against 3.7 for the step of the reported case)."""
    alg = ALGORITHMS[name](MODEL, num_data=5, schedule=0.5, ramp=ramp)
    state = alg.init(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(1)
    plain, info_plain = alg.step(key, state, batches[0])
    padded, info_padded = alg.step(key, state, batches[1])
    np.testing.assert_allclose(_nat(padded.q_global), _nat(plain.q_global), rtol=1e-6)
    np.testing.assert_allclose(float(info_padded.elbo), float(info_plain.elbo), rtol=1e-6)
    assert float(info_padded.step_size) == 0.5


def test_the_hyperparameter_step_gives_the_padding_rows_no_weight(batches):
    """svi's Newton step on alpha and eta with the padded batch's locals and SVI's per-row weight
    (N / S on the rows with data, 0 on padding) equals the step with the unpadded batch's locals
    and N / S (rtol 1e-6); the same locals with N / S on every row (the padding rows' alpha terms
    adding curvature) move alpha less: 0.0961 against 0.0877 in float32 before."""
    model = MODEL
    q = model.init_globals(jax.random.PRNGKey(0))
    view, hyper = expfam.tree_mean_params(q), {"alpha": jnp.asarray(0.1), "eta": jnp.asarray(0.01)}
    loc_plain, loc_padded = (model.local_step(view, b) for b in batches)
    rows = model.present_rows(batches[1])

    @jax.jit  # one small program per shape: eager, the Hessian's ops compile one by one
    def step(loc, scale):
        return hyper_newton_step(lambda h: model.hyper_objective(h, q, loc, scale), hyper, 0.5, 1.0)

    def newton(loc, scale):
        new = step(loc, jnp.asarray(scale))
        return np.array([float(new["alpha"]), float(new["eta"])])

    want = newton(loc_plain, 5.0 / 3.0)
    np.testing.assert_allclose(newton(loc_padded, jnp.where(rows, 5.0 / 3.0, 0.0)), want, rtol=1e-6)
    assert abs(newton(loc_padded, 5.0 / 3.0)[0] - want[0]) > 1e-3 * want[0]


def test_a_minibatchers_padding_rows_are_not_present(corpus):
    """A Minibatcher of S = 4 over D = 5: the epoch's second batch holds one document and three
    empty rows, and LDA.present_rows marks that one row."""
    mb = Minibatcher(corpus, 4, seed=0)
    present = np.asarray(MODEL.present_rows(mb.step_batch(1)))
    np.testing.assert_array_equal(present, mb.step_indices(1) >= 0)
    assert present.sum() == 1


def test_one_svi_step_is_the_interpolation_towards_eta_plus_scaled_statistics(batches):
    """S = 3 of N = 5, rho = 0.3: lambda' = 0.7 lambda + 0.3 (eta + (5 / 3) c), with eta the
    prior's natural parameters (eta - 1) and c the local step's statistics at E_q[log beta],
    computed here apart from the algorithm; rtol 1e-10 (float64). A prior weighted by N / S, or
    statistics by 1, is off by more than 1%."""
    model = MODEL
    alg = svi(model, num_data=5, schedule=0.3)
    state = alg.init(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(1)
    new, _ = alg.step(key, state, batches[0])
    (c,) = model.local_step(expfam.tree_mean_params(state.q_global), batches[0], key).suff_stats
    (lam,) = state.q_global.natural_params
    (eta,) = model.prior().natural_params
    expected = 0.7 * np.asarray(lam) + 0.3 * (np.asarray(eta) + 5.0 / 3.0 * np.asarray(c))
    np.testing.assert_allclose(_nat(new.q_global), expected, rtol=1e-10)


def test_a_batch_without_data_is_not_stepped_on(corpus, batches):
    """Every row empty: no information, so lambda is kept exactly and rho reported as 0."""
    alg = svi(MODEL, num_data=5, schedule=0.5)
    state = alg.init(jax.random.PRNGKey(0))
    empty = corpus.batch([], num_rows=10, length=batches[1].word_ids.shape[1])
    new, info = alg.step(jax.random.PRNGKey(1), state, empty)
    np.testing.assert_array_equal(_nat(new.q_global), _nat(state.q_global))
    assert float(info.step_size) == 0.0 and bool(info.accepted)


@pytest.mark.parametrize("name", ["svi", "map_em"])
def test_num_data_below_the_batch_is_refused(batches, name):
    """More documents with tokens than num_data: a ValueError naming num_data (a value check of the
    step, since S is traced for LDA); 10 rows of which 3 hold documents pass with N = 3."""
    alg = ALGORITHMS[name](MODEL, num_data=2, schedule=0.5)
    state = alg.init(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"^num_data = 2 is smaller than the batch's number of rows with data"):
        alg.step(jax.random.PRNGKey(1), state, batches[1])
    ALGORITHMS[name](MODEL, num_data=3, schedule=0.5).step(jax.random.PRNGKey(1), state, batches[1])


def test_num_data_below_a_static_batch_size_is_refused_at_trace_time():
    """A model whose every row is a data point (a GMM): S is static, the error comes while tracing."""
    x = np.random.default_rng(0).normal(size=(10, 2))
    alg = svi(DiagonalGMM.from_data(x, 2), num_data=4, schedule=schedules.constant(0.5))
    state = alg.init(jax.random.PRNGKey(0), x)
    with pytest.raises(ValueError, match=r"^num_data = 4 is smaller than the batch's 10 data points"):
        jax.jit(alg.step)(jax.random.PRNGKey(1), state, jnp.asarray(x))


def test_a_batch_of_at_most_num_data_rows_compiles_no_num_data_check(batches):
    """S rows cannot hold more than N rows with data when S <= N: the step's program then holds no
    check of num_data (no host callback under a plain ``jax.jit``), where S > N needs one."""
    rows = batches[1].word_ids.shape[0]

    def callbacks(num_data):
        alg = svi(MODEL, num_data=num_data, schedule=0.5)
        state = alg.init(jax.random.PRNGKey(0))
        return jax.jit(alg.step).lower(jax.random.PRNGKey(1), state, batches[1]).as_text().count("callback")

    assert callbacks(rows + 1) < callbacks(rows - 1)
    assert callbacks(rows) == callbacks(rows + 1) == callbacks(10 * rows)
