"""``averaged``: the polynomial-decay average of an algorithm's iterates, checked against its closed-form weights,
on a family's natural parameters, under jit and vmap, and through the module functions that read q."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax._validate import ArgumentError
from vijax.inference import VIAlgorithm, averaged, ngvi, sample


class State(NamedTuple):
    x: jax.Array
    q_global: dict
    count: jax.Array


class Info(NamedTuple):
    elbo: jax.Array


def _path(t):
    """The iterate after step t (0-based): a vector and a Normal's natural parameters, both moving with t."""
    t = jnp.asarray(t, jnp.float32)
    x = jnp.stack([jnp.sin(t), jnp.cos(0.3 * t), t])
    return x, expfam.Normal.from_natural((jnp.sin(t) + 2.0, -1.0 - 0.1 * t))


def _walk():
    """A step that jumps to ``_path(count)``: the iterates are known in advance."""

    def init(key, batch=None):
        x, q = _path(-1)
        return State(x, {"z": q}, jnp.zeros((), jnp.int32))

    def step(key, state, batch):
        x, q = _path(state.count)
        return State(x, {"z": q}, state.count + 1), Info(-jnp.sum(x**2))

    return VIAlgorithm(init, step)


@pytest.mark.parametrize("eta", [0, 1, 3])
def test_the_average_has_the_closed_form_weights(eta):
    """With integer eta the recursion's weights are the rising factorials (t + 1)(t + 2)...(t + eta) normalized
    (the hockey-stick identity: their partial sums are (T + eta)! / ((eta + 1) (T - 1)!)); eta = 0 is the plain
    mean. The family is averaged in its natural parameters, the int count is the current one."""
    alg = averaged(_walk(), eta=eta)
    key = jax.random.PRNGKey(0)
    state = alg.init(key)
    step = jax.jit(alg.step)
    num = 37
    for _ in range(num):
        state, info = step(key, state, None)
    a = np.array([np.prod([t + j for j in range(1, eta + 1)]) for t in range(num)], np.float64)
    a /= a.sum()
    paths = [_path(t) for t in range(num)]
    want_x = sum(w * np.asarray(x, np.float64) for w, (x, _) in zip(a, paths))
    want_nat = [sum(w * np.asarray(q.natural_params[i], np.float64) for w, (_, q) in zip(a, paths)) for i in (0, 1)]
    np.testing.assert_allclose(state.mean.x, want_x, rtol=1e-5, atol=1e-5)
    for got, want in zip(state.mean.q_global["z"].natural_params, want_nat):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(state.inner.x, paths[-1][0])  # the iterate moves as the algorithm's
    assert int(state.mean.count) == int(state.inner.count) == num and int(state.count) == num
    assert state.q_global is state.mean.q_global
    np.testing.assert_allclose(info.elbo, -np.sum(np.asarray(paths[-1][0]) ** 2), rtol=1e-6)  # the iterate's info


def test_steps_vmap_over_keys_and_states():
    alg = averaged(_walk())
    keys = jax.random.split(jax.random.PRNGKey(1), 4)
    states = jax.vmap(alg.init)(keys)
    for _ in range(3):
        states, _ = jax.vmap(alg.step, in_axes=(0, 0, None))(keys, states, None)
    one = alg.init(keys[0])
    for _ in range(3):
        one, _ = alg.step(keys[0], one, None)
    np.testing.assert_allclose(states.mean.x[0], one.mean.x, rtol=1e-6)


def test_sample_reads_the_averaged_q():
    """``sample`` of the averaged algorithm is the inner algorithm's ``sample`` at ``state.mean``; after noisy
    steps (two Monte Carlo draws each) on a Gaussian target the average is closer to it than the last iterate."""
    q0 = {"x": expfam.Normal.from_mean_variance(jnp.zeros(50), jnp.ones(50))}
    inner = ngvi(
        lambda z, batch: -0.5 * jnp.sum((z["x"] - 1.5) ** 2), family=q0, num_samples=2, schedule=0.3, gradient="reparam"
    )
    alg = averaged(inner)
    key = jax.random.PRNGKey(2)
    state = alg.init(key)
    step = jax.jit(alg.step)
    for k in jax.random.split(key, 300):
        state, _ = step(k, state, None)
    draws = sample(alg, key, state, 5)
    np.testing.assert_array_equal(draws["x"], sample(inner, key, state.mean, 5)["x"])
    last = float(jnp.max(jnp.abs(state.inner.q_global["x"].mean - 1.5)))
    mean = float(jnp.max(jnp.abs(state.mean.q_global["x"].mean - 1.5)))
    assert mean < 0.5 * last, (mean, last)


def test_arguments_are_checked_by_name():
    with pytest.raises(ArgumentError, match="eta"):
        averaged(_walk(), eta=-1.0)
    with pytest.raises(ArgumentError, match="alg"):
        averaged("ngvi")
    with pytest.raises(ArgumentError, match="AveragedState"):
        averaged(_walk()).step(jax.random.PRNGKey(0), _walk().init(jax.random.PRNGKey(0)), None)
    with pytest.raises(ArgumentError, match="offers no log_weights"):
        averaged(_walk()).extras.log_weights(jax.random.PRNGKey(0), None, None, 3)
