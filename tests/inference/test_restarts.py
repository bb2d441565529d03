import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.inference import cavi, restarts, select_restart
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
