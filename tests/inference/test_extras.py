"""The module functions over an algorithm and its state (``guide``, ``sample``, ``log_weights``,
``elbo``, and ``aevb``'s evaluations): the algorithms are plain ``VIAlgorithm``s, the functions read
the factory's settings from the step, and they refuse an algorithm they do not apply to by name."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax import inference as vi
from vijax.inference import VIAlgorithm, bbvi, ngvi, restarts, svi
from vijax.models import UnivariateGMM

Y = jnp.array([0.3, -0.2, 1.1, 0.4])


def _log_lik(params, batch):  # y_i ~ N(mu, 1)
    return -0.5 * jnp.sum((batch - params["mu"]) ** 2) - 0.5 * batch.shape[0] * jnp.log(2 * jnp.pi)


def test_bbvi_extras_are_functions_of_the_algorithm_and_state():
    alg = bbvi(_log_lik, init_params={"mu": jnp.zeros(())}, log_prior=lambda p: -0.5 * p["mu"] ** 2, schedule=0.05)
    assert type(alg) is VIAlgorithm
    state = alg.init(jax.random.PRNGKey(0), Y)
    g = vi.guide(alg)
    draws = vi.sample(alg, jax.random.PRNGKey(1), state, 7)
    assert draws["mu"].shape == (7,)
    # the draws are q's: the guide's own sampler with the same keys
    keys = jax.random.split(jax.random.PRNGKey(1), 7)
    own = jax.vmap(lambda k: g.constrain(g.sample(state.q_global, k))[0]["mu"])(keys)
    np.testing.assert_allclose(draws["mu"], own, rtol=1e-12)
    # log-weights: log p(y, mu) - log q(mu) at the same draws (identity bijector: no Jacobian)
    lw = vi.log_weights(alg, jax.random.PRNGKey(1), state, Y, 7)
    q = g.to_tfp(state.q_global)
    want = jax.vmap(lambda m: _log_lik({"mu": m}, Y) - 0.5 * m**2)(draws["mu"]) - jax.vmap(q.log_prob)(
        draws["mu"][:, None]
    )
    np.testing.assert_allclose(lw, want, rtol=1e-6)
    # elbo: the objective step ascends, differentiable in q_global; it is info.elbo of the step
    e = vi.elbo(alg, jax.random.PRNGKey(2), state.q_global, Y)
    _, info = alg.step(jax.random.PRNGKey(2), state, Y)
    np.testing.assert_allclose(e, info.elbo, rtol=1e-6)
    grads = jax.grad(lambda v: vi.elbo(alg, jax.random.PRNGKey(2), v, Y))(state.q_global)
    assert all(np.all(np.isfinite(x)) for x in jax.tree_util.tree_leaves(grads))
    with pytest.raises(ValueError, match="num_samples: bbvi's elbo takes no options"):
        vi.elbo(alg, jax.random.PRNGKey(2), state.q_global, Y, num_samples=3)


def test_the_step_is_a_plain_function_that_chex_and_jit_take():
    alg = bbvi(_log_lik, init_params={"mu": jnp.zeros(())}, schedule=0.05)
    step = jax.jit(chex.assert_max_traces(alg.step, n=1))
    state = alg.init(jax.random.PRNGKey(0))
    for i in range(3):
        state, _ = step(jax.random.PRNGKey(i + 1), state, Y)
    assert int(state.count) == 3


def test_ngvi_sample_and_log_weights():
    alg = ngvi(_log_lik_flat, family=expfam.Normal.from_mean_variance(0.0, 1.0), log_prior=lambda z: -0.5 * z**2)
    state = alg.init(jax.random.PRNGKey(0))
    z = vi.sample(alg, jax.random.PRNGKey(1), state, 5)
    assert z.shape == (5,)
    lw = vi.log_weights(alg, jax.random.PRNGKey(1), state, Y, 5)
    q = state.q_global.to_tfp()
    want = jax.vmap(lambda m: _log_lik_flat(m, Y) - 0.5 * m**2)(z) - q.log_prob(z)
    np.testing.assert_allclose(lw, want, rtol=1e-6)


def _log_lik_flat(mu, batch):
    return _log_lik({"mu": mu}, batch)


def test_an_algorithm_they_do_not_apply_to_is_named():
    alg = bbvi(_log_lik, init_params={"mu": jnp.zeros(())})
    with pytest.raises(ValueError, match="alg: iwae_log_likelihood takes an algorithm returned by aevb"):
        vi.iwae_log_likelihood(alg, jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0)), Y)
    conj = svi(UnivariateGMM(num_components=2), num_data=4)
    with pytest.raises(
        ValueError,
        match=r"alg: sample takes an algorithm returned by bbvi or ngvi or amortized or discrete_bbvi or aevb .*got VIAlgorithm",
    ):
        vi.sample(conj, jax.random.PRNGKey(1), conj.init(jax.random.PRNGKey(0)), 3)
    with pytest.raises(ValueError, match="not wrapped by a combinator"):
        vi.guide(restarts(alg, 2))
