"""Gaussian mixtures by EM: equal to scikit-learn's GaussianMixture from the same start (each covariance
type, in blocks), the log-likelihood never decreases, float32 agrees, jit (one trace) and vmap over
restarts (from k-means++ seeds), and bad input."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.inference import EMState, GuardedState, em, make_algorithm
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
        state, info = jax.lax.scan(
            lambda s, k: alg.step(k, s, x),
            GuardedState(EMState(p, jnp.zeros((), jnp.int32)), jnp.zeros((), jnp.int32)),
            jax.random.split(jax.random.PRNGKey(0), iters),
        )
        q = state.q_global
        return q, info.log_likelihood, model.log_prob(q, x), model.responsibilities(q, x)

    return fit(params)


@pytest.mark.parametrize("covariance_type", TYPES)
def test_equals_sklearn_from_the_same_responsibilities_and_never_decreases(covariance_type):
    """20 EM iterations from the M-step of the same random responsibilities, float64 (full: in blocks of
    128 rows, 2 blocks + a remainder of 44): weights, means, covariances equal scikit-learn's to 1e-10
    (absolute; measured ~3e-14); the log-likelihood before the last M-step (sklearn's lower_bound_), the
    final per-row log densities (score_samples) and responsibilities (predict_proba) to 1e-10. The
    log-likelihood never decreases (each step >= the previous - 1e-9 |ll|; Dempster et al. 1977,
    Theorem 1). For full and diag, float32 from the same start: log-likelihoods to 1e-4 relative, means to
    1e-3 absolute."""
    from sklearn.mixture import GaussianMixture

    iters = 20
    x, resp = _data()
    model = GaussianMixtureEM(
        K, D, covariance_type=covariance_type, dtype="float64", block_size=128 if covariance_type == "full" else 8192
    )
    p0 = model.params_from_responsibilities(jnp.asarray(x), jnp.asarray(resp))
    cov = np.asarray(p0.covariances)
    prec = np.linalg.inv(cov) if covariance_type in ("full", "tied") else 1.0 / cov
    ref = GaussianMixture(
        K,
        covariance_type=covariance_type,
        max_iter=iters,
        tol=0.0,
        reg_covar=1e-6,
        weights_init=np.asarray(p0.weights),
        means_init=np.asarray(p0.means),
        precisions_init=prec,
        init_params="random",
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: tol=0 runs every iteration
        ref.fit(x)
    params, lls, log_prob, resp_final = _run(model, p0, jnp.asarray(x), iters)
    np.testing.assert_allclose(params.weights, ref.weights_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(params.means, ref.means_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(params.covariances, ref.covariances_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(lls[-1] / N, ref.lower_bound_, rtol=1e-10)
    np.testing.assert_allclose(log_prob, ref.score_samples(x), rtol=1e-10)
    np.testing.assert_allclose(resp_final, ref.predict_proba(x), atol=1e-10)
    lls = np.asarray(lls)
    assert np.all(np.diff(lls) >= -1e-9 * np.abs(lls[1:])), np.diff(lls).min()
    if covariance_type in ("full", "diag"):
        m32 = GaussianMixtureEM(K, D, covariance_type=covariance_type, block_size=128, dtype="float32")
        p32, ll32, _, _ = _run(
            m32, jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), p0), jnp.asarray(x, jnp.float32), iters
        )
        assert p32.means.dtype == jnp.float32
        np.testing.assert_allclose(ll32, lls, rtol=1e-4)
        np.testing.assert_allclose(p32.means, ref.means_, atol=1e-3)


def test_jit_traces_once_and_vmap_over_restarts():
    """A whole fit (init from a key -- random responsibilities here, k-means++ in the experiment's test --
    and 4 steps of the registry's "em" by lax.scan) is traced once for two keys under jit; vmap over 2
    restarts equals each restart run alone to 1e-10 (float64), and the restarts differ."""
    x = jnp.asarray(_data(3)[0])
    alg = make_algorithm("em", GaussianMixtureEM(K, D, covariance_type="diag", init="random", dtype="float64"))
    traces = []

    def fit(key):
        traces.append(1)
        k0, k1 = jax.random.split(key)
        s = alg.init(k0, x)
        s, info = jax.lax.scan(lambda c, k: alg.step(k, c, x), s, jax.random.split(k1, 4))
        return s.q_global, info.log_likelihood

    keys = jax.random.split(jax.random.PRNGKey(5), 2)
    one = jax.jit(fit)
    alone = [one(k) for k in keys]
    assert len(traces) == 1
    batched = jax.jit(jax.vmap(fit))(keys)
    for i in range(2):
        for a, b in zip(jax.tree_util.tree_leaves(alone[i]), jax.tree_util.tree_leaves(batched)):
            np.testing.assert_allclose(b[i], a, rtol=1e-10, atol=1e-10)
    assert np.max(np.abs(alone[0][0].means - alone[1][0].means)) > 1e-3


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


@pytest.mark.parametrize(
    "data, k, covariance_type, reg_covar",
    [("one point", 1, "diag", 0.0), ("a constant column", 2, "full", 1e-6), ("a constant column", 2, "tied", 1e-6)],
)
def test_a_single_point_or_a_constant_column_is_refused_naming_reg_covar_and_the_data(
    data, k, covariance_type, reg_covar
):
    """Maximum likelihood gives such a column variance reg_covar: below rounding, a singular
    covariance, refused by the step with what to change (not a spurious log-likelihood, then NaN)."""
    x = jnp.array([[-2.0, 0.1], [-1.5, 0.3], [1.5, -0.2], [2.0, 0.0], [0.1, 0.2]], jnp.float32)
    x = x[:1] if data == "one point" else x.at[:, 1].set(0.3)
    alg = em(GaussianMixtureEM(k, 2, covariance_type=covariance_type, reg_covar=reg_covar, dtype=jnp.float32))
    with pytest.raises(ValueError, match="reg_covar") as info:  # by the start's M-step or a step's
        state = alg.init(jax.random.PRNGKey(1), x)
        for i in range(3):
            state, _ = alg.step(jax.random.PRNGKey(2 + i), state, x)
    assert "constant" in str(info.value) and "single point" in str(info.value)
