import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.inference import cavi, lock_step, replace_elbo, restarts, select_restart, svi
from vijax.models import UnivariateGMM


@pytest.mark.slow
def test_restarts_equal_independent_runs():
    x = jnp.asarray(np.random.default_rng(0).normal(0, 4, 200))
    base = cavi(UnivariateGMM(num_components=3))
    alg = restarts(base, 4)
    key, step_key = jax.random.PRNGKey(0), jax.random.PRNGKey(1)
    state = alg.init(key, x)
    state, info = alg.step(step_key, state, x)
    assert info.elbo.shape == (4,)
    k_init, k_step = jax.random.split(key, 4)[2], jax.random.split(step_key, 4)[2]
    one, info1 = base.step(k_step, base.init(k_init, x), x)
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
    state, info = both.step(step_key, both.init(key, x), x)
    for name, k in zip(algs, jax.random.split(step_key, 2)):
        one, info1 = algs[name].step(k, algs[name].init(key, x), x)
        np.testing.assert_allclose(state[name].q_global.mean, one.q_global.mean, rtol=1e-12)
        np.testing.assert_allclose(info[name]["elbo"], info1.elbo, rtol=1e-12)
    np.testing.assert_allclose(info["elbo"], info["svi"]["elbo"])
    with pytest.raises(ValueError, match="primary"):
        lock_step(algs, primary="adam")


def test_lock_step_init_groups_share_keys_within_a_group():
    """Algorithms of one init group start from the same key, split(key, G)[group]."""
    x = jnp.asarray(np.random.default_rng(2).normal(0, 4, 60))
    model = UnivariateGMM(num_components=3)
    algs = {"a": cavi(model), "b": svi(model, num_data=60), "c": cavi(model)}
    both = lock_step(algs, init_groups={"a": 0, "b": 0, "c": 1})
    key = jax.random.PRNGKey(5)
    state = both.init(key, x)
    k0, k1 = jax.random.split(key)
    np.testing.assert_array_equal(state["a"].q_global.mean, algs["a"].init(k0, x).q_global.mean)
    np.testing.assert_array_equal(state["b"].q_global.mean, state["a"].q_global.mean)
    np.testing.assert_array_equal(state["c"].q_global.mean, algs["c"].init(k1, x).q_global.mean)
    assert not np.allclose(state["c"].q_global.mean, state["a"].q_global.mean)
    with pytest.raises(ValueError, match="init_groups"):
        lock_step(algs, init_groups={"a": 0, "b": 2, "c": 2})  # not 0 .. G - 1
    with pytest.raises(ValueError, match="init_groups"):
        lock_step(algs, init_groups={"a": 0, "b": 0})  # c missing


def test_replace_elbo_reports_a_function_of_the_new_state():
    x = jnp.asarray(np.random.default_rng(3).normal(0, 4, 50))
    base = cavi(UnivariateGMM(num_components=2))
    alg = replace_elbo(base, lambda s: jnp.sum(s.q_global.mean))
    key = jax.random.PRNGKey(6)
    state, info = alg.step(key, alg.init(key, x), x)
    ref, ref_info = base.step(key, base.init(key, x), x)
    np.testing.assert_array_equal(state.q_global.mean, ref.q_global.mean)
    np.testing.assert_allclose(info.elbo, jnp.sum(ref.q_global.mean), rtol=1e-12)
    np.testing.assert_array_equal(info.num_damped, ref_info.num_damped)
