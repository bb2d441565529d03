"""vijax.to_arviz: draws from fitted q's (a GMM by CAVI, a GLM by PG-SVI, black-box VI with
PSIS weights) as ArviZ InferenceData whose summaries agree with q's own moments."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import arviz as az

import vijax
from vijax import inference as vi
from vijax import expfam
from vijax.inference import bbvi, prox_svi
from vijax.models import GLM, DiagonalGMM


def _mean_within(draws, mean, sd, n, k=5.0):
    assert np.all(
        np.abs(np.asarray(draws).mean(axis=(0, 1)) - np.asarray(mean)) < k * np.asarray(sd) / np.sqrt(n) + 1e-9
    )


@pytest.mark.slow
def test_a_fitted_gmm_q_becomes_inference_data_with_q_moments():
    r = np.random.default_rng(0)
    x = jnp.asarray(np.concatenate([r.normal(-3, 1, (100, 2)), r.normal(3, 0.5, (100, 2))]))
    model = DiagonalGMM.from_data(x, 2)
    alg = vijax.cavi(model)
    state = alg.init(jax.random.PRNGKey(0), x)
    step = jax.jit(alg.step)
    for t in range(20):
        state, _ = step(jax.random.PRNGKey(t), state, x)
    n = 4000
    idata = vijax.to_arviz(state.q_global, jax.random.PRNGKey(1), n, names=["weights", "mean_precision"], num_chains=4)
    post = idata.posterior
    assert post["weights"].shape == (4, n // 4, 2) and post["mean_precision"].shape == (4, n // 4, 2, 2, 2)
    dirichlet, ng = state.q_global
    alpha = np.asarray(dirichlet.concentration)
    w_mean = alpha / alpha.sum()
    _mean_within(post["weights"].values, w_mean, np.sqrt(w_mean * (1 - w_mean) / (alpha.sum() + 1)), n)
    _mean_within(post["mean_precision"].values[..., 0], ng.loc, np.sqrt(ng.rate / (ng.concentration - 1) / ng.kappa), n)
    summary = az.summary(idata, var_names=["weights"])
    np.testing.assert_allclose(summary["mean"].values, w_mean, atol=0.01)


def test_a_glm_fitted_by_prox_svi_and_the_default_names():
    r = np.random.default_rng(1)
    x = jnp.asarray(r.normal(size=(60, 2)))
    y = jnp.asarray(r.poisson(np.exp(x @ np.array([0.5, -0.3]))), jnp.float32)
    model = GLM(2, "poisson")
    alg = prox_svi(model, num_data=60, schedule=0.5)
    state = alg.init(jax.random.PRNGKey(0), (x, y))
    step = jax.jit(alg.step)
    for t in range(30):
        state, _ = step(jax.random.PRNGKey(t), state, (x, y))
    q = state.q_global
    assert isinstance(q, expfam.MultivariateNormal)
    idata = vijax.to_arviz(q, jax.random.PRNGKey(2), 4000)
    (name,) = list(idata.posterior.data_vars)
    assert name == "MultivariateNormal"
    _mean_within(idata.posterior[name].values, q.mean, np.sqrt(np.diag(np.asarray(q.covariance))), 4000)


def test_bbvi_draws_with_log_weights_carry_the_psis_khat():
    def log_density(w, batch):
        return -0.5 * jnp.sum((w - batch) ** 2)

    alg = bbvi(log_density, family="meanfield", init_params=jnp.zeros(2), schedule=0.05, num_samples=4)
    data = jnp.array([1.0, -2.0])
    state = alg.init(jax.random.PRNGKey(0))
    step = jax.jit(alg.step)
    for t in range(300):
        state, _ = step(jax.random.PRNGKey(t), state, data)
    key = jax.random.PRNGKey(5)
    draws, lw = vi.sample(alg, key, state, 1000), vi.log_weights(alg, key, state, data, 1000)
    idata = vijax.to_arviz({"w": draws}, log_weights=lw)
    assert idata.sample_stats["log_weight"].shape == (1, 1000)
    assert idata.sample_stats.attrs["khat"] < 0.7  # q is close to the Gaussian target
    np.testing.assert_array_equal(idata.posterior["w"].values[0], np.asarray(draws))  # the same draws, in order
    np.testing.assert_allclose(idata.sample_stats["log_weight"].values[0], np.asarray(lw), rtol=1e-6)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((expfam.Gamma.from_shape_rate(2.0, 1.0),), {}, "key"),
        (({"a": jnp.zeros(5), "b": jnp.zeros(4)},), {}, "leading number of draws"),
        (({"a": jnp.zeros(5)},), {"names": ["a", "b"]}, "names"),
        (({"a": jnp.zeros(5)},), {"log_weights": jnp.zeros(4)}, "log_weights"),
        (({"a": jnp.zeros(5)},), {"num_chains": 2}, "num_chains"),
    ],
)
def test_bad_arguments_are_named(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        vijax.to_arviz(*args, **kwargs)


def test_the_draws_of_q_families_are_each_familys_own_draws():
    """``to_arviz(q, key)`` draws the i-th leaf of q with the i-th key split from ``key``; an array
    leaf is taken as it is."""
    q = {
        "rate": expfam.Gamma.from_shape_rate(jnp.full((3,), 2.5), jnp.full((3,), 1.5)),
        "loc": expfam.Normal.from_mean_variance(jnp.zeros(2), jnp.ones(2)),
        "fixed": jnp.arange(53.0),  # an array leaf: its values as they are
    }
    key = jax.random.PRNGKey(5)
    idata = vijax.to_arviz(q, key, num_draws=53)
    keys = jax.random.split(key, 3)  # the leaves in the dict's sorted order: fixed, loc, rate
    for i, name in ((1, "loc"), (2, "rate")):
        np.testing.assert_allclose(idata.posterior[name].values[0], q[name].sample(keys[i], (53,)), rtol=1e-6)
    np.testing.assert_array_equal(idata.posterior["fixed"].values.ravel(), np.arange(53.0))
