"""Natural-gradient SVI: equal to CAVI at rho = 1 and S = N; unbiased minibatch natural gradient;
convergence to the CAVI optimum; the JAX contract."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.inference import cavi, schedules, svi
from vijax.models import DiagonalGMM, UnivariateGMM
from vijax.testing import assert_trees_close


def _data(seed=0, n=400):
    r = np.random.default_rng(seed)
    return jnp.asarray(np.concatenate([r.normal(-2, 1, (n // 2, 2)), r.normal([3, 1], 0.7, (n - n // 2, 2))]))


def test_full_batch_rho_one_equals_cavi_step():
    x = _data()
    model = DiagonalGMM.from_data(np.asarray(x), 3)
    a_cavi = cavi(model)
    a_svi = svi(model, num_data=x.shape[0], schedule=schedules.constant(1.0))
    state = a_cavi.init(jax.random.PRNGKey(0), x)
    s1, _ = a_cavi.step(jax.random.PRNGKey(1), state, x)
    s2, info = a_svi.step(jax.random.PRNGKey(1), a_svi.init(jax.random.PRNGKey(0), x), x)
    assert_trees_close(s1.q_global, s2.q_global, rtol=1e-12, atol=1e-12)
    assert float(info.step_size) == 1.0


def test_minibatch_natural_gradient_is_unbiased():
    """Averaged over every minibatch of a partition, (N/S) sbar equals the full-data sbar."""
    x = _data(1, 400)
    model = DiagonalGMM.from_data(np.asarray(x), 3)
    q = model.init_globals(jax.random.PRNGKey(0), x)
    view = expfam.tree_mean_params(q)
    full = model.local_step(view, x).suff_stats
    parts = [model.local_step(view, x[i : i + 50]).suff_stats for i in range(0, 400, 50)]
    mean = jax.tree_util.tree_map(lambda *a: sum(a) / len(a) * (400 / 50), *parts)
    assert_trees_close(mean, full, rtol=1e-10, atol=1e-10)


@pytest.mark.slow
def test_converges_to_cavi_optimum():
    """With kappa = 0.7, tau = 10 and minibatches of 100 of 2000 points, 600 SVI steps land within 2%
    of CAVI's means, weights and ELBO."""
    r = np.random.default_rng(2)
    x = jnp.asarray(np.concatenate([r.normal(-4, 1, 1000), r.normal(3, 1, 1000)]))
    model = UnivariateGMM(num_components=2, prior_variance=100.0)
    a = cavi(model)
    sc = a.init(jax.random.PRNGKey(0), x)
    for t in range(100):
        sc, ic = jax.jit(a.step)(jax.random.PRNGKey(t), sc, x)
    alg = svi(model, num_data=2000, schedule=schedules.robbins_monro(1.0, tau=10.0, kappa=0.7))
    ss = alg.init(jax.random.PRNGKey(0), x)
    step = jax.jit(alg.step)
    for t in range(600):
        idx = jax.random.choice(jax.random.PRNGKey(1000 + t), 2000, (100,), replace=False)
        ss, info = step(jax.random.PRNGKey(t), ss, x[idx])
    np.testing.assert_allclose(np.sort(ss.q_global.mean), np.sort(sc.q_global.mean), rtol=0.02)
    s_elbo = a.step(jax.random.PRNGKey(0), ss._replace(count=sc.count), x)[1].elbo  # ELBO after one sweep from q_svi
    np.testing.assert_allclose(s_elbo, ic.elbo, rtol=0.02)


def test_ramp_scales_the_first_sweep():
    x = _data(3, 200)
    model = DiagonalGMM.from_data(np.asarray(x), 2)
    alg = svi(model, num_data=200, schedule=schedules.constant(1.0), ramp=True)
    s0 = alg.init(jax.random.PRNGKey(0), x)
    s1, _ = alg.step(jax.random.PRNGKey(1), s0, x[:50])
    # at t = 0, N_0 = S: lambda = eta + sbar (rho = 1), the full-data update of the batch alone
    view = expfam.tree_mean_params(s0.q_global)
    loc = model.local_step(view, x[:50])
    ref = jax.tree_util.tree_map(lambda e, s: e + s, expfam.tree_natural_params(model.prior()), loc.suff_stats)
    assert_trees_close(expfam.tree_natural_params(s1.q_global), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_compiles_once_and_vmaps():
    x = _data(4, 200)
    model = DiagonalGMM.from_data(np.asarray(x), 3)
    alg = svi(model, num_data=200)
    step = jax.jit(chex.assert_max_traces(alg.step, n=1))
    s = alg.init(jax.random.PRNGKey(0), x)
    for t in range(3):
        s, info = step(jax.random.PRNGKey(t), s, x[t * 20 : (t + 1) * 20])
    assert int(s.count) == 3
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    ss = jax.vmap(lambda k: alg.init(k, x))(keys)
    ss, infos = jax.vmap(alg.step, in_axes=(0, 0, None))(keys, ss, x[:20])
    assert infos.elbo.shape == (3,)


def test_bad_arguments():
    model = UnivariateGMM(num_components=2)
    with pytest.raises(ValueError, match="num_data"):
        svi(model, num_data=0)
    with pytest.raises(ValueError, match="kappa"):
        schedules.robbins_monro(1.0, tau=1.0, kappa=0.4)
    with pytest.raises(ValueError, match="local"):
        svi(model, num_data=10, local="cvb0")
