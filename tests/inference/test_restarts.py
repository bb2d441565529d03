import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.inference import cavi, lock_step, restarts, select_restart, svi
from vijax.models import UnivariateGMM


def test_restarts_equal_independent_runs():
    x = jnp.asarray(np.random.default_rng(0).normal(0, 4, 200))
    base = cavi(UnivariateGMM(num_components=3))
    alg = restarts(base, 4)
    key, step_key = jax.random.PRNGKey(0), jax.random.PRNGKey(1)
    state = alg.init(key, x)
    state, info = alg.step(state, x, step_key)
    assert info.elbo.shape == (4,)
    k_init, k_step = jax.random.split(key, 4)[2], jax.random.split(step_key, 4)[2]
    one, info1 = base.step(base.init(k_init, x), x, k_step)
    np.testing.assert_allclose(select_restart(state, 2).q_global.mean, one.q_global.mean, rtol=1e-12)
    np.testing.assert_allclose(info.elbo[2], info1.elbo, rtol=1e-12)
    with pytest.raises(ValueError, match="num_restarts"):
        restarts(base, 0)


def test_lock_step_equals_separate_runs_with_split_keys():
    x = jnp.asarray(np.random.default_rng(1).normal(0, 4, 100))
    model = UnivariateGMM(num_components=3)
    algs = {"cavi": cavi(model), "svi": svi(model, num_data=100)}
    both = lock_step(algs, primary="svi")
    key, step_key = jax.random.PRNGKey(3), jax.random.PRNGKey(4)
    state, info = both.step(both.init(key, x), x, step_key)
    for name, k in zip(algs, jax.random.split(step_key, 2)):
        one, info1 = algs[name].step(algs[name].init(key, x), x, k)
        np.testing.assert_allclose(state[name].q_global.mean, one.q_global.mean, rtol=1e-12)
        np.testing.assert_allclose(info[name]["elbo"], info1.elbo, rtol=1e-12)
    np.testing.assert_allclose(info["elbo"], info["svi"]["elbo"])
    with pytest.raises(ValueError, match="primary"):
        lock_step(algs, primary="adam")
