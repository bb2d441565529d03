"""Gaussian mixtures by EM: equal to scikit-learn's GaussianMixture from the same start (each covariance
type, in blocks), the log-likelihood never decreases, float32 agrees with float64, jit (one trace)
and vmap over restarts, and bad input."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.inference import EMState, em, make_algorithm
from vijax.models import GaussianMixtureEM, GMMParams

TYPES = ["full", "diag", "spherical", "tied"]
N, D, K = 300, 3, 3


def _data(seed=0):
    r = np.random.default_rng(seed)
    centers = 3.0 * r.normal(size=(K, D))
    x = np.concatenate([r.normal(size=(N // K, D)) @ r.normal(size=(D, D)) * 0.7 + c for c in centers])
    resp = r.uniform(size=(N, K))
    return x, resp / resp.sum(1, keepdims=True)


def _run(model, params, x, iters):
    """``iters`` EM steps by lax.scan in one compiled program: the final parameters, the log-likelihoods,
    and the final per-row log densities and responsibilities."""
    alg = em(model)

    @jax.jit
    def fit(p):
        state, info = jax.lax.scan(lambda s, k: alg.step(s, x, k), EMState(p, jnp.zeros((), jnp.int32)),
                                   jax.random.split(jax.random.PRNGKey(0), iters))
        q = state.q_global
        return q, info.log_likelihood, model.log_prob(q, x), model.responsibilities(q, x)

    return fit(params)


@pytest.mark.parametrize("covariance_type", TYPES)
def test_equals_sklearn_from_the_same_responsibilities(covariance_type):
    """5 EM iterations from the M-step of the same random responsibilities, float64: weights, means,
    covariances to 1e-10 (absolute; measured ~3e-14), the log-likelihood before the last M-step
    (sklearn's lower_bound_), per-row log densities (score_samples) and responsibilities (predict_proba)
    of the final parameters to 1e-10."""
    from sklearn.mixture import GaussianMixture

    x, resp = _data()
    model = GaussianMixtureEM(K, D, covariance_type=covariance_type, block_size=128, dtype="float64")  # 2 blocks + 44
    p0 = model.params_from_responsibilities(jnp.asarray(x), jnp.asarray(resp))
    cov = np.asarray(p0.covariances)
    prec = np.linalg.inv(cov) if covariance_type in ("full", "tied") else 1.0 / cov
    ref = GaussianMixture(K, covariance_type=covariance_type, max_iter=5, tol=0.0, reg_covar=1e-6,
                          weights_init=np.asarray(p0.weights), means_init=np.asarray(p0.means), precisions_init=prec,
                          init_params="random", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: tol=0 runs all 5 iterations
        ref.fit(x)
    params, lls, log_prob, resp_final = _run(model, p0, jnp.asarray(x), 5)
    np.testing.assert_allclose(params.weights, ref.weights_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(params.means, ref.means_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(params.covariances, ref.covariances_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(lls[-1] / N, ref.lower_bound_, rtol=1e-10)
    np.testing.assert_allclose(log_prob, ref.score_samples(x), rtol=1e-10)
    np.testing.assert_allclose(resp_final, ref.predict_proba(x), atol=1e-10)


@pytest.mark.parametrize("covariance_type", TYPES)
def test_log_likelihood_never_decreases(covariance_type):
    """30 iterations from k-means++ (full, tied) or random responsibilities (diag, spherical), float64:
    every step's log-likelihood >= the previous one - 1e-9 |ll| (Dempster et al. 1977, Theorem 1)."""
    x = jnp.asarray(_data(1)[0])
    for init in (("kmeans++",) if covariance_type in ("full", "tied") else ("random",)):
        model = GaussianMixtureEM(K, D, covariance_type=covariance_type, init=init, dtype="float64")
        alg = em(model)

        def body(s, key):
            s, info = alg.step(s, x, key)
            return s, info.log_likelihood

        _, lls = jax.jit(lambda k0: jax.lax.scan(body, alg.init(k0, x), jax.random.split(jax.random.PRNGKey(4), 30)))(
            jax.random.PRNGKey(3))
        lls = np.asarray(lls)
        assert np.all(np.isfinite(lls))
        assert np.all(np.diff(lls) >= -1e-9 * np.abs(lls[1:])), (init, np.diff(lls).min())


@pytest.mark.parametrize("covariance_type", [
    "full", "diag", pytest.param("spherical", marks=pytest.mark.slow), pytest.param("tied", marks=pytest.mark.slow)])
def test_float32_agrees_with_float64(covariance_type):
    """float32 (blocks of 64 rows + a remainder) equals float64 after 5 iterations from the same start:
    log-likelihoods to 1e-4 relative, means to 1e-3 absolute. (Blocks in float64 are covered by the
    scikit-learn test, which runs 2 blocks + a remainder.)"""
    x, resp = _data(2)
    m64 = GaussianMixtureEM(K, D, covariance_type=covariance_type, dtype="float64")
    p0 = m64.params_from_responsibilities(jnp.asarray(x), jnp.asarray(resp))
    m32 = GaussianMixtureEM(K, D, covariance_type=covariance_type, block_size=64, dtype="float32")
    p32, ll32, _, _ = _run(m32, jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), p0),
                           jnp.asarray(x, jnp.float32), 5)
    p64, ll64, _, _ = _run(m64, p0, jnp.asarray(x), 5)
    assert p32.means.dtype == jnp.float32
    np.testing.assert_allclose(ll32, ll64, rtol=1e-4)
    np.testing.assert_allclose(p32.means, p64.means, atol=1e-3)


def test_jit_traces_once_and_vmap_over_restarts():
    """A whole fit (init from a key, 4 steps of the registry's "em" by lax.scan) is traced once for two
    keys under jit; vmap over 2 restarts equals each restart run alone to 1e-10 (float64)."""
    x = jnp.asarray(_data(3)[0])
    alg = make_algorithm("em", GaussianMixtureEM(K, D, covariance_type="diag", dtype="float64"))
    traces = []

    def fit(key):
        traces.append(1)
        k0, k1 = jax.random.split(key)
        s = alg.init(k0, x)
        s, info = jax.lax.scan(lambda c, k: alg.step(c, x, k), s, jax.random.split(k1, 4))
        return s.q_global, info.log_likelihood

    keys = jax.random.split(jax.random.PRNGKey(5), 2)
    one = jax.jit(fit)
    alone = [one(k) for k in keys]
    assert len(traces) == 1
    batched = jax.jit(jax.vmap(fit))(keys)
    for i in range(2):
        for a, b in zip(jax.tree_util.tree_leaves(alone[i]), jax.tree_util.tree_leaves(batched)):
            np.testing.assert_allclose(b[i], a, rtol=1e-10, atol=1e-10)


def test_bad_input_names_the_argument():
    x = np.zeros((10, D))
    with pytest.raises(ValueError, match="num_components"):
        GaussianMixtureEM(0, D)
    with pytest.raises(ValueError, match="covariance_type"):
        GaussianMixtureEM(K, D, covariance_type="banded")
    with pytest.raises(ValueError, match="reg_covar"):
        GaussianMixtureEM(K, D, reg_covar=-1e-3)
    with pytest.raises(ValueError, match="init"):
        GaussianMixtureEM(K, D, init="kmeans")
    model = GaussianMixtureEM(K, D)
    with pytest.raises(ValueError, match="x must have 3 columns"):
        em(model).init(jax.random.PRNGKey(0), np.zeros((10, D + 1)))
    with pytest.raises(ValueError, match="x must be numeric and finite"):
        model.check_data(np.where(np.eye(10, D) > 0, np.nan, x))
    with pytest.raises(ValueError, match="resp"):
        model.params_from_responsibilities(x, np.full((10, K), 0.5))
    good = GMMParams(jnp.full((K,), 1.0 / K), jnp.zeros((K, D)), jnp.broadcast_to(jnp.eye(D), (K, D, D)))
    model.check_params(good)
    with pytest.raises(ValueError, match="params.covariances"):
        model.check_params(good._replace(covariances=-good.covariances))
    with pytest.raises(ValueError, match="params.weights"):
        model.check_params(good._replace(weights=jnp.ones(K)))
