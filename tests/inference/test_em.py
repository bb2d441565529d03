"""EM: model-agnostic (a mixture written here, the HMMs), the objective never decreases, the fixed point
is a stationary point of the log-likelihood (jax.grad), the JAX contract, and its errors."""

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.data import sample_hmm
from vijax.inference import EMState, em, make_algorithm
from vijax.models import CategoricalHMM, EMModel, GaussianEmissions, GaussianHMM, HMMParams


class MixParams(NamedTuple):
    weights: jax.Array  # (K,)
    means: jax.Array  # (K,)


class UnitVarianceMixture:
    """A 1-D mixture of unit-variance Gaussians, written only for these tests: EM is model-agnostic."""

    def __init__(self, k):
        self.k = k

    def check_data(self, x):
        if np.ndim(x) != 1:
            raise ValueError("x must be 1-D")

    def batch_checks(self, x):
        return []

    def init_params(self, key, x=None):
        return MixParams(jnp.full(self.k, 1.0 / self.k), jax.random.normal(key, (self.k,)))

    def log_likelihood(self, params, x):
        lp = jnp.log(params.weights)[None] - 0.5 * (x[:, None] - params.means[None]) ** 2 - 0.5 * jnp.log(2 * jnp.pi)
        return jnp.sum(jax.nn.logsumexp(lp, axis=1))

    def e_step(self, params, x):
        lp = jnp.log(params.weights)[None] - 0.5 * (x[:, None] - params.means[None]) ** 2
        r = jax.nn.softmax(lp, axis=1)
        return (jnp.sum(r, 0), r.T @ x), self.log_likelihood(params, x)

    def m_step(self, stats):
        n, sx = stats
        return MixParams(n / jnp.sum(n), sx / n)

    def log_prior(self, params):
        return jnp.zeros(())


def _run(alg, state, data, steps):
    step = jax.jit(alg.step)
    out = []
    for i in range(steps):
        state, info = step(jax.random.PRNGKey(i), state, data)
        out.append(info)
    return state, jax.tree_util.tree_map(lambda *a: np.stack(a), *out)


def test_em_on_a_model_written_elsewhere_reaches_a_stationary_point():
    x = jnp.concatenate(
        [jax.random.normal(jax.random.PRNGKey(0), (60,)) - 2.0, jax.random.normal(jax.random.PRNGKey(1), (40,)) + 2.0]
    )
    model = UnitVarianceMixture(2)
    assert isinstance(model, EMModel)
    alg = em(model)
    state, trace = _run(alg, alg.init(jax.random.PRNGKey(2), x), x, 200)
    assert np.all(np.diff(trace.log_likelihood) >= -1e-9 * np.abs(trace.log_likelihood[-1]))
    np.testing.assert_allclose(trace.elbo, trace.log_likelihood)  # no log_prior: ML
    # at EM's fixed point the gradient of log p(x | theta) (along the simplex for the weights) vanishes
    g = jax.grad(model.log_likelihood)(state.q_global, x)
    np.testing.assert_allclose(g.means, 0.0, atol=1e-6)
    np.testing.assert_allclose(g.weights - jnp.dot(g.weights, state.q_global.weights), 0.0, atol=1e-6)
    assert int(state.count) == 200


@pytest.mark.parametrize("kind", ["categorical", "gaussian"])
@pytest.mark.slow
def test_em_never_lowers_the_hmm_log_likelihood(kind):
    r = np.random.default_rng(0)
    k = 3
    pi, trans = jnp.asarray(r.dirichlet(np.ones(k))), jnp.asarray(r.dirichlet(np.ones(k) * 0.5, k))
    if kind == "categorical":
        from vijax.models import CategoricalEmissions

        truth = HMMParams(pi, trans, CategoricalEmissions(jnp.asarray(r.dirichlet(np.ones(5) * 0.5, k))))
        model = CategoricalHMM(k, 5)
    else:
        truth = HMMParams(pi, trans, GaussianEmissions(jnp.asarray(r.normal(size=(k, 2)) * 2), jnp.ones((k, 2))))
        model = GaussianHMM(k, 2)
    data = sample_hmm(jax.random.PRNGKey(0), truth, num_sequences=40, length=25, min_length=5).data
    alg = em(model)
    state, trace = _run(alg, alg.init(jax.random.PRNGKey(1), data), data, 30)
    ll = trace.log_likelihood
    assert np.all(np.diff(ll) >= -1e-9 * np.abs(ll[-1])), np.diff(ll)
    assert ll[-1] > ll[0]
    # the reported value is log p(x | theta) at the step's starting parameters
    np.testing.assert_allclose(
        float(jnp.sum(model.log_likelihood(state.q_global, data))),
        float(model.e_step(state.q_global, data)[1]),
        rtol=1e-12,
    )


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_em_compiles_once_and_vmaps_over_restarts():
    model = CategoricalHMM(2, 3)
    obs = jnp.asarray(np.random.default_rng(1).integers(0, 3, (8, 10)))
    alg = em(model)
    step = jax.jit(chex.assert_max_traces(alg.step, n=1))
    state = alg.init(jax.random.PRNGKey(0), obs)
    for i in range(3):
        state, _ = step(jax.random.PRNGKey(i), state, obs)
    keys = jax.random.split(jax.random.PRNGKey(5), 4)
    states = jax.vmap(lambda k: alg.init(k, obs))(keys)
    states, infos = jax.vmap(alg.step, in_axes=(0, 0, None))(keys, states, obs)
    one_restart = jax.jit(lambda k: alg.step(k, alg.init(k, obs), obs))
    for r in range(4):
        one, info = one_restart(keys[r])
        np.testing.assert_allclose(infos.log_likelihood[r], info.log_likelihood, rtol=1e-12)
        np.testing.assert_allclose(states.q_global.transition_matrix[r], one.q_global.transition_matrix, rtol=1e-12)


def test_em_errors_name_the_problem():
    class NoMStep:
        def init_params(self, key, batch=None):
            return 0.0

        def e_step(self, params, batch):
            return 0.0, 0.0

        def check_data(self, batch):
            pass

        def batch_checks(self, batch):
            return []

    with pytest.raises(ValueError, match="em needs a EMModel: NoMStep offers no m_step") as e:
        em(NoMStep())
    assert e.value.argument == "model"  # the argument at fault, as data (the CLI maps it to a key)
    with pytest.raises(ValueError, match="num_data"):
        em(CategoricalHMM(2, 2), num_data=0)
    obs = jnp.zeros((4, 3), jnp.int32)
    alg = em(CategoricalHMM(2, 2), num_data=5)
    with pytest.raises(ValueError, match="whole data set"):
        alg.step(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0), obs), obs)
    with pytest.raises(ValueError, match="key"):
        alg.init(None, obs)
    with pytest.raises(ValueError, match="num_symbols"):
        alg.init(jax.random.PRNGKey(0), obs + 2)
    with pytest.raises(ValueError, match="no step size"):
        make_algorithm("em", CategoricalHMM(2, 2), schedule=0.5)
    state = make_algorithm("em", CategoricalHMM(2, 2)).init(jax.random.PRNGKey(0), obs)
    assert isinstance(state.inner, EMState)
