"""Hyperparameters in the state (``inject_hyperparameters``): a vmapped grid of LDA's (alpha, eta)
settings is one compiled program, and each of its members equals SVI run on LDA(alpha, eta) alone."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.data import sample_lda_corpus
from vijax.inference import inject_hyperparameters, svi
from vijax.models import LDA, DiagonalGMM

K, V, D = 3, 20, 24
ALPHAS = jnp.array([0.1, 0.5, 1.0])
ETAS = jnp.array([0.05, 0.3, 0.3])


def _batches():
    corpus = sample_lda_corpus(0, num_docs=D, num_topics=K, vocab_size=V, alpha=0.2).corpus
    return [corpus.batch(range(i, i + 8)) for i in range(0, D, 8)]


@pytest.mark.slow
def test_vmapped_grid_equals_runs_one_by_one_and_compiles_once():
    batches = _batches()
    key = jax.random.PRNGKey(0)
    alg = svi(LDA(K, V), num_data=D, schedule=0.7)
    s0 = alg.init(key)
    traces = []

    def step(k, state, batch):
        traces.append(1)  # a Python side effect: runs once per trace
        return alg.step(k, state, batch)

    grid_step = jax.jit(jax.vmap(step, in_axes=(None, 0, None)))
    states = jax.vmap(lambda a, e: inject_hyperparameters(s0, alg_model(), alpha=a, eta=e))(ALPHAS, ETAS)
    for i, b in enumerate(batches):
        states, infos = grid_step(jax.random.fold_in(key, i), states, b)
    assert len(traces) == 1  # one program for the grid and every batch
    for g in range(len(ALPHAS)):
        a, e = float(ALPHAS[g]), float(ETAS[g])
        one = svi(LDA(K, V, alpha=a, eta=e), num_data=D, schedule=0.7)
        s = one.init(key)  # init does not depend on alpha or eta
        for i, b in enumerate(batches):
            s, info = jax.jit(one.step)(jax.random.fold_in(key, i), s, b)
        got = jax.tree_util.tree_map(lambda u: u[g], states.q_global)
        for u, v in zip(expfam.tree_natural_params(got), expfam.tree_natural_params(s.q_global)):
            np.testing.assert_allclose(u, v, rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(infos.elbo[g], info.elbo, rtol=2e-5)
    assert not np.allclose(infos.elbo[0], infos.elbo[1])  # the settings do differ


def alg_model():
    return LDA(K, V)


def test_inject_hyperparameters_refuses_unknown_names_and_models_without_them():
    alg = svi(LDA(K, V), num_data=D)
    s0 = alg.init(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="^gamma is not a hyperparameter of LDA; choose from"):
        inject_hyperparameters(s0, LDA(K, V), gamma=1.0)
    gmm = DiagonalGMM(2, 2)
    s1 = svi(gmm, num_data=10).init(jax.random.PRNGKey(0), jnp.ones((10, 2)) * jnp.arange(10)[:, None])
    with pytest.raises(ValueError, match="^model must offer hyperparameters"):
        inject_hyperparameters(s1, gmm, alpha=1.0)


@pytest.mark.parametrize("name", ["ssvi", "map"])
@pytest.mark.slow
def test_ssvi_and_map_grids_equal_runs_one_by_one(name):
    """SSVI and MAP-EM read the hyperparameters in their state too: a vmapped (alpha, eta) grid of
    two steps equals each setting's own model."""
    from vijax.inference import make_algorithm

    batches = _batches()[:2]
    key = jax.random.PRNGKey(3)
    alg = make_algorithm(name, LDA(K, V), num_data=D, schedule=0.7)
    s0 = alg.init(key)
    model = LDA(K, V)

    def run(a, e):
        s = inject_hyperparameters(s0, model, alpha=a, eta=e)
        for i, b in enumerate(batches):
            s, info = alg.step(jax.random.fold_in(key, i), s, b)
        return s, info

    states, infos = jax.jit(jax.vmap(run))(ALPHAS[:2], ETAS[:2])
    for g in range(2):
        one = make_algorithm(name, LDA(K, V, alpha=float(ALPHAS[g]), eta=float(ETAS[g])), num_data=D, schedule=0.7)
        s = one.init(key)
        for i, b in enumerate(batches):
            s, info = jax.jit(one.step)(jax.random.fold_in(key, i), s, b)
        got = jax.tree_util.tree_map(lambda u: u[g], states.q_global)
        for u, v in zip(expfam.tree_natural_params(got), expfam.tree_natural_params(s.q_global)):
            np.testing.assert_allclose(u, v, rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(infos.elbo[g], info.elbo, rtol=2e-5)
