"""CAVI: monotone ELBO, cluster recovery, agreement with scikit-learn, and the JAX contract."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.inference import _cavi, cavi
from vijax.models import DiagonalGMM, UnivariateGMM
from vijax.testing import matched_sklearn_bgmm


def _fit(alg, state, x, steps, seed=0):
    step = jax.jit(alg.step)
    elbos = []
    for t in range(steps):
        state, info = step(jax.random.fold_in(jax.random.PRNGKey(seed), t), state, x)
        elbos.append(float(info.elbo))
    return state, np.array(elbos)


def _blobs(seed, n, k, d, spread=10.0):
    r = np.random.default_rng(seed)
    centers = r.normal(0, spread, (k, d))
    scales = r.uniform(0.3, 1.5, (k, d))
    z = r.integers(0, k, n)
    return centers[z] + scales[z] * r.normal(size=(n, d)), centers, z


@pytest.mark.parametrize("seed", range(4))
def test_elbo_never_decreases(seed):
    r = np.random.default_rng(seed)
    x1 = jnp.asarray(r.normal(0, 3, 200))
    alg = cavi(UnivariateGMM(num_components=4, prior_variance=10.0))
    _, elbos = _fit(alg, alg.init(jax.random.PRNGKey(seed), x1), x1, 40)
    assert np.all(np.diff(elbos) >= -1e-9 * np.abs(elbos[1:])), np.diff(elbos).min()

    x, _, _ = _blobs(seed, 300, 3, 3, spread=2.0)
    model = DiagonalGMM.from_data(x, 5)
    alg = cavi(model)
    _, elbos = _fit(alg, alg.init(jax.random.PRNGKey(seed), x), jnp.asarray(x), 60)
    assert np.all(np.diff(elbos) >= -1e-9 * np.abs(elbos[1:])), np.diff(elbos).min()


def test_recovers_well_separated_clusters():
    x, centers, z = _blobs(0, 1500, 4, 2, spread=8.0)
    model = DiagonalGMM.from_data(x, 4)
    alg = cavi(model)
    best = None
    for restart in range(3):  # CAVI finds local optima: keep the best of a few restarts
        state, elbos = _fit(alg, alg.init(jax.random.PRNGKey(restart), x), jnp.asarray(x), 100)
        if best is None or elbos[-1] > best[1]:
            best = (state, elbos[-1])
    w, means, _ = model.point_estimates(best[0].q_global)
    for c in centers:  # every true center has a fitted mean within 0.2
        assert np.min(np.linalg.norm(np.asarray(means) - c, axis=1)) < 0.2
    true_w = np.bincount(z, minlength=4) / len(z)
    np.testing.assert_allclose(np.sort(np.asarray(w)), np.sort(true_w), atol=0.01)

    r = np.random.default_rng(1)
    x1 = np.concatenate([r.normal(-8, 1, 300), r.normal(0, 1, 300), r.normal(8, 1, 300)])
    alg = cavi(UnivariateGMM(num_components=3, prior_variance=100.0))
    state, _ = _fit(alg, alg.init(jax.random.PRNGKey(3), x1), jnp.asarray(x1), 50)
    np.testing.assert_allclose(np.sort(np.asarray(state.q_global.mean)), [-8, 0, 8], atol=0.15)


def test_diagonal_gmm_matches_sklearn_fit():
    """Same priors and initial responsibilities: same fitted weights and means to 1e-4 (sklearn's
    'diag' uses the Wishart digamma sum for E[log det Lambda], which differs from the product of
    Gammas by O(D^2 / nu_k); with these well-populated clusters that moves nothing visible)."""
    x, _, z = _blobs(5, 2000, 3, 3, spread=4.0)
    model = DiagonalGMM.from_data(x, 3)
    r = np.random.default_rng(0)
    # noisy responsibilities around the truth, so that both land in the same (good) optimum
    resp0 = 0.5 * np.eye(3)[z] + 0.5 * r.dirichlet(np.ones(3), size=x.shape[0])
    est = matched_sklearn_bgmm(model, resp0=resp0, max_iter=500, tol=1e-10).fit(x)
    alg = cavi(model)
    q0 = model.posterior_from_responsibilities(jnp.asarray(x), jnp.asarray(resp0))
    state = _cavi.CAVIState(q0, jnp.zeros((), jnp.int32))
    state, _ = _fit(alg, state, jnp.asarray(x), 300)
    w, means, _ = model.point_estimates(state.q_global)
    np.testing.assert_allclose(w, est.weights_, atol=1e-4)
    np.testing.assert_allclose(means, est.means_, atol=1e-4)


@pytest.mark.slow
def test_step_compiles_once_and_vmaps_over_restarts():
    x, _, _ = _blobs(1, 200, 3, 2)
    x = jnp.asarray(x)
    alg = cavi(DiagonalGMM.from_data(x, 3))
    step = jax.jit(chex.assert_max_traces(alg.step, n=1))
    state = alg.init(jax.random.PRNGKey(0), x)
    for t in range(3):
        state, _ = step(jax.random.PRNGKey(t), state, x)
    keys = jax.random.split(jax.random.PRNGKey(1), 4)
    states = jax.vmap(lambda k: alg.init(k, x))(keys)
    states, infos = jax.jit(jax.vmap(alg.step, in_axes=(0, 0, None)))(keys, states, x)
    assert infos.elbo.shape == (4,)
    one, info1 = alg.step(keys[2], jax.tree_util.tree_map(lambda a: a[2], states), x)
    # restart 2 of the vmapped batch equals the same restart run alone
    two, info2 = jax.vmap(alg.step, in_axes=(0, 0, None))(keys, states, x)
    np.testing.assert_allclose(info2.elbo[2], info1.elbo, rtol=1e-10)


def test_float32_run_stays_float32():
    x, _, _ = _blobs(2, 300, 3, 2)
    x = jnp.asarray(x, jnp.float32)
    alg = cavi(DiagonalGMM.from_data(np.asarray(x), 3, dtype=jnp.float32))
    state, elbos = _fit(alg, alg.init(jax.random.PRNGKey(0), x), x, 30)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree_util.tree_leaves(state.q_global))
    assert np.all(np.isfinite(elbos))
    assert np.all(np.diff(elbos) >= -1e-4 * np.abs(elbos[1:]))


def test_unknown_local_method_is_an_error():
    with pytest.raises(ValueError, match="gibbs"):
        cavi(UnivariateGMM(num_components=2), local="gibbs")


def test_domain_guard_damps_and_counts():
    q = expfam.Dirichlet.from_concentration(jnp.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]]))
    bad_target = (jnp.array([[0.5, 0.5, 0.5], [-5.0, 0.0, 0.0]]),)  # second row: alpha = -4 at rho = 1
    new, num = expfam.tree_interpolate(q, bad_target, 1.0)
    assert int(num) == 1
    assert bool(jnp.all(new.is_valid()))
    np.testing.assert_allclose(new.eta[0], bad_target[0][0])  # the valid row takes the full step
    np.testing.assert_allclose(new.eta[1], [-0.625, 0.0, 0.0])  # rho halved to 1/8: 1/8 * -5
    _, num = expfam.tree_interpolate(q, (jnp.array([[-9.0, 0, 0], [0.0, 0, 0]]),), 1.0, max_halvings=0)
    assert int(num) == 1


def _foreign_batch(given):
    from vijax.data import BowBatch

    x = jnp.zeros((5, 2))
    if given == "an LDA batch":
        return BowBatch(jnp.zeros((3, 4), jnp.int32), jnp.ones((3, 4), jnp.float32))
    return (x, x) if given == "a tuple" else {"x": x}


@pytest.mark.parametrize(
    "model, given",
    [
        ("DiagonalGMM", "an LDA batch"),
        ("DiagonalGMM", "a tuple"),
        ("DiagonalGMM", "a dict"),
        ("CategoricalHMM", "an LDA batch"),  # a NamedTuple of another model (a plain pair is (obs, lengths))
        ("CategoricalHMM", "a dict"),
    ],
)
def test_step_on_a_batch_of_another_kind_names_batch_and_what_the_model_takes(model, given):
    """Not the model's own check_data blamed: the batch named, with what the model takes and what it got."""
    from vijax.models import CategoricalHMM

    if model == "DiagonalGMM":
        model, data, takes = DiagonalGMM(2, 2), jnp.asarray(np.random.default_rng(0).normal(size=(5, 2))), "(N, 2)"
    else:
        model, data, takes = CategoricalHMM(2, 3), jnp.zeros((2, 4), jnp.int32), "(B, T)"
    batch = _foreign_batch(given)
    alg = cavi(model)
    state = alg.init(jax.random.PRNGKey(0), data)
    with pytest.raises(ValueError, match=r"batch is not what") as info:
        alg.step(jax.random.PRNGKey(1), state, batch)
    assert info.value.argument == "batch" and takes in str(info.value) and type(batch).__name__ in str(info.value)
