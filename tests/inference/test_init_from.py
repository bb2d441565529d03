"""init_from: any algorithm starts from a given q (a previous fit's), keeping the rest of its init."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.inference import bbvi, cavi, init_from, svi
from vijax.models import DiagonalGMM

X = jnp.asarray(np.random.default_rng(0).normal(size=(30, 2)) + np.repeat([[-4.0, 0.0], [4.0, 0.0]], 15, 0))
KEY = jax.random.PRNGKey(0)


def test_svi_continues_from_cavi_solution_and_the_step_is_the_same():
    model = DiagonalGMM(2, 2)
    a_cavi = cavi(model)
    s = a_cavi.init(KEY, X)
    for i in range(5):
        s, _ = a_cavi.step(jax.random.fold_in(KEY, i), s, X)
    a_svi = svi(model, num_data=30, schedule=1.0)
    s_svi = init_from(a_svi, KEY, s.q_global, X)
    assert int(s_svi.count) == 0 and int(s_svi.num_rejected) == 0
    # a full-batch SVI step with rho = 1 from q is a CAVI step from q
    s1, _ = a_svi.step(jax.random.PRNGKey(1), s_svi, X)
    s2, _ = a_cavi.step(jax.random.PRNGKey(1), s, X)
    for u, v in zip(expfam.tree_natural_params(s1.q_global), expfam.tree_natural_params(s2.q_global)):
        np.testing.assert_allclose(u, v, rtol=1e-10)


def test_bbvi_starts_from_given_parameters_with_a_fresh_optimizer():
    def log_density(z, batch=None):
        return -0.5 * jnp.sum((z["m"] - 3.0) ** 2)

    alg = bbvi(log_density, init_params={"m": jnp.zeros(2)}, schedule=0.1)
    s0 = alg.init(KEY)
    q = jax.tree_util.tree_map(lambda a: a + 1.0, s0.q_global)
    s = init_from(alg, KEY, q)
    assert all(
        np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(s.q_global), jax.tree_util.tree_leaves(q))
    )
    assert int(s.count) == 0
    s1, info = alg.step(jax.random.PRNGKey(1), s, None)
    assert bool(info.accepted)


def test_a_q_of_another_structure_or_shape_is_refused():
    model = DiagonalGMM(2, 2)
    alg = cavi(model)
    with pytest.raises(ValueError, match="^q_global must be structured as this algorithm's q"):
        init_from(alg, KEY, model.prior()[1], X)
    with pytest.raises(ValueError, match="^q_global must have this algorithm's shapes and dtypes"):
        init_from(alg, KEY, DiagonalGMM(3, 2).prior(), X)
