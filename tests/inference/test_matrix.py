"""The E-step x M-step matrix (Hoffman and Blei 2015, §2.5, appendix D) through the algorithm registry."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.data import sample_lda_corpus
from vijax.inference import MAPInfo, MAPState, SSVIState, SVIState, make_algorithm
from vijax.models import LDA, DiagonalGMM, UnivariateGMM

K, V, S = 3, 20, 6
KEY = jax.random.PRNGKey(11)
ONE = lambda count: jnp.asarray(1.0)  # noqa: E731


@pytest.fixture(scope="module")
def batch():
    corpus = sample_lda_corpus(
        2, num_docs=S, num_topics=K, vocab_size=V, alpha=0.3, eta=0.1, doc_length_mean=30.0
    ).corpus
    return corpus.batch(range(S), length=32)


GLOBAL_UPDATES = ("map", "svi", "ssvi", "ssvi_a")  # the M-steps of the matrix, by registry name
ALL_CELLS = [(g, l) for g in GLOBAL_UPDATES for l in LDA.local_methods]


@pytest.mark.parametrize("global_update,local", ALL_CELLS)
@pytest.mark.slow
def test_cells_of_the_lda_matrix_follow_their_equations(global_update, local, batch):
    """Every (M-step, E-step) pair of LDA builds, jits and takes a valid step equal to its M-step's
    equation on its E-step's statistics (each E-step checked against its own oracle in
    tests/models/test_lda.py): lambda' = (1 - rho) lambda + rho (eta + (N / S) T(c)), c the E-step's
    statistics at the row's view of q(beta), T the row's transform. SVI: the view E_q[log beta], T
    the identity, the step's key to the E-step. MAP-EM: the view log of q's mode, T the identity.
    SSVI-A: t(beta) of one draw by inversion, T the identity. SSVI: the same draw and T = V, the
    product F^-1 J^T s of Hoffman and Blei (2015), eq. 8 (``expfam.stats_and_v_product``, checked
    against the dense F^-1 J^T in tests/expfam). MAP-EM and the SSVI rows split the key as
    ``key_beta, key_local``. rho = 0.01, so that no update is damped."""
    model = LDA(K, V, alpha=0.3, eta=1.5, gibbs_sweeps=2, gibbs_burn_in=1, max_iters=20, cvb0_iters=20)
    # a small step, so that no cell's update leaves the domain (an SSVI target V c may have negative
    # entries, where a full step would be damped)
    alg = make_algorithm(global_update, model, num_data=60, local=local, schedule=0.01)
    state0 = alg.init(KEY)
    state, info = jax.jit(alg.step)(KEY, state0, batch)
    q0 = state0.q_global
    key_beta, key_local = jax.random.split(KEY)
    transform = lambda s: s  # noqa: E731
    if global_update == "svi":
        view, key_local = q0.mean_params(), KEY
    elif global_update == "map":
        view = q0.mode_stats()
    elif global_update == "ssvi_a":
        view = expfam.reparam_stats(q0, key_beta)
    else:
        view, transform = expfam.stats_and_v_product(q0, key_beta)
    (c,) = transform(model.local_step(tuple(view), batch, key_local, local).suff_stats)
    rho = float(info.step_size)
    want = (1.0 - rho) * q0.concentration + rho * (model.eta + (60 / S) * c)
    np.testing.assert_allclose(state.q_global.concentration, want, rtol=1e-9, err_msg=f"{global_update}/{local}")
    assert int(info.num_damped) == 0
    assert np.isfinite(float(info.elbo)), (global_update, local)
    assert bool(jnp.all(state.q_global.is_valid()))
    assert int(state.count) == 1
    assert isinstance(state.inner, {"svi": SVIState, "map": MAPState}.get(global_update, SSVIState))


def test_map_step_with_rho_one_and_all_data_is_an_em_step(batch):
    """MAP-EM with rho = 1 on the whole data set: E-step at the mode of q(beta), then lambda =
    eta + sum c, whose mode is the MAP estimate argmax p(beta) p(y, E[z] | beta)
    (beta_kv ∝ eta - 1 + c_kv for eta > 1)."""
    model = LDA(K, V, alpha=0.3, eta=1.5)
    lam = 1.5 + jax.random.uniform(KEY, (K, V)) * 3.0
    state = MAPState(expfam.Dirichlet.from_concentration(lam), jnp.zeros((), jnp.int32))
    alg = make_algorithm("map", model, num_data=S, local="meanfield", schedule=ONE)
    new, info = alg.step(KEY, state, batch)
    mode = (lam - 1.0) / jnp.sum(lam - 1.0, -1, keepdims=True)
    _, key_local = jax.random.split(KEY)
    loc = model.local_step((jnp.log(mode),), batch, key_local, "meanfield")
    (c,) = loc.suff_stats
    np.testing.assert_allclose(new.q_global.concentration, 1.5 + c, rtol=1e-10)
    # The new point estimate is the MAP of the complete-data posterior.
    new_mode = (new.q_global.concentration - 1.0) / jnp.sum(new.q_global.concentration - 1.0, -1, keepdims=True)
    np.testing.assert_allclose(new_mode, (0.5 + c) / jnp.sum(0.5 + c, -1, keepdims=True), rtol=1e-10)
    # info.elbo: (N/S)(<c, log beta-hat> + local_terms) + log p(beta-hat)
    prior = model.prior()
    log_prior = jnp.sum(prior.log_prob(mode))
    np.testing.assert_allclose(info.elbo, jnp.sum(c * jnp.log(mode)) + loc.local_terms + log_prior, rtol=1e-9)
    assert isinstance(info.inner, MAPInfo)


def test_meanfield_row_is_svi(batch):
    model = LDA(K, V, alpha=0.3, eta=0.5)
    from vijax.inference import svi

    a = make_algorithm("svi", model, num_data=60, local="cvb0", schedule=ONE)
    b = svi(model, num_data=60, local="cvb0", schedule=ONE)
    sa, _ = a.step(KEY, a.init(KEY), batch)
    sb, _ = b.step(KEY, b.init(KEY), batch)
    np.testing.assert_array_equal(sa.q_global.eta, sb.q_global.eta)


def test_map_with_normal_globals():
    """The mode of a Normal is its mean: MAP-EM on the one-component Gaussian model reaches the
    exact posterior mode (= mean) in one rho = 1 step with all data."""
    x = jax.random.normal(KEY, (30,)) + 1.0
    model = UnivariateGMM(num_components=1, prior_variance=4.0)
    alg = make_algorithm("map", model, num_data=30, local="meanfield", schedule=ONE)
    state, _ = alg.step(KEY, alg.init(KEY, x), x)
    np.testing.assert_allclose(state.q_global.mean, jnp.sum(x) / (30.0 + 0.25), rtol=1e-10)


@pytest.mark.slow
def test_bad_combinations_raise_clear_errors():
    lda = LDA(K, V)
    with pytest.raises(ValueError, match="unknown algorithm 'laplace'"):
        make_algorithm("laplace", lda, num_data=10, local="meanfield")
    with pytest.raises(ValueError, match="local='exact' is not offered by LDA"):
        make_algorithm("ssvi", lda, num_data=10, local="exact")
    with pytest.raises(ValueError, match="unknown \\['hyper_step'\\]"):
        make_algorithm("ssvi", lda, num_data=10, local="meanfield", hyper_step=1.0)
    # NormalGamma draws by inversion (SSVI runs on the diagonal GMM) but has no mode (MAP-EM does not)
    gmm_ssvi = make_algorithm("ssvi_a", DiagonalGMM(num_components=2, dim=2), num_data=10, local="meanfield")
    x = jnp.asarray(np.random.default_rng(0).normal(size=(10, 2)))
    _, info = gmm_ssvi.step(jax.random.PRNGKey(1), gmm_ssvi.init(jax.random.PRNGKey(0), x), x)
    assert np.isfinite(float(info.elbo))
    with pytest.raises(ValueError, match="map_em needs the mode.*NormalGamma"):
        make_algorithm("map", DiagonalGMM(num_components=2, dim=2), num_data=10, local="meanfield")
    with pytest.raises(ValueError, match="num_data"):
        make_algorithm("map", lda, num_data=0, local="meanfield")
    with pytest.raises(ValueError, match="has no step size"):
        make_algorithm("cavi", lda, num_data=10, schedule=0.5)
    # svi passes hyper_step through
    alg = make_algorithm("svi", lda, num_data=10, local="meanfield", hyper_step=1.0)
    assert alg.init(KEY).hyper is not None
