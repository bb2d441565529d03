"""The simple mixture model (*Raise your ELBO*, §SMM) by EM: against an independent NumPy EM written
from the tutorial's eq. 2.7-2.8, the likelihood by enumeration, monotone EM, MAP-EM, bad input."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.inference import em, jit_step
from vijax.models import SMM, SMMParams

K, V = 3, 5


def _data(m=400, seed=0):
    rng = np.random.default_rng(seed)
    pi = np.array([0.5, 0.3, 0.2])
    eta = rng.dirichlet(np.full(V, 0.4), size=K)
    z = rng.choice(K, size=m, p=pi)
    return np.array([rng.choice(V, p=eta[k]) for k in z]), pi, eta


def _numpy_em(x, pi, eta, steps, c=1.0):
    """EM as the tutorial writes it, with MAP pseudo-counts c - 1, in float64 NumPy; returns the
    parameters and the objective (log-likelihood + log prior) at each step's start."""
    trace = []
    for _ in range(steps):
        joint = pi[None, :] * eta[:, x].T  # (m, K)
        px = joint.sum(1)
        prior = (c - 1) * (np.log(pi).sum() + np.log(eta).sum()) if c != 1 else 0.0
        trace.append(np.log(px).sum() + prior)
        r = joint / px[:, None]
        nk = r.sum(0) + (c - 1)
        nkw = np.stack([np.bincount(x, weights=r[:, k], minlength=V) for k in range(K)]) + (c - 1)
        pi, eta = nk / nk.sum(), nkw / nkw.sum(1, keepdims=True)
    return pi, eta, np.array(trace)


@pytest.mark.parametrize("c", [1.0, 1.5])
def test_em_equals_an_independent_numpy_em_and_never_decreases(c):
    x, _, _ = _data()
    model = SMM(K, V, concentration=c, dtype=jnp.float64)
    alg = em(model)
    state = alg.init(jax.random.PRNGKey(0), x)
    pi0, eta0 = (np.asarray(a) for a in state.q_global)
    step = jit_step(alg.step)
    trace = []
    for t in range(30):
        state, info = step(jax.random.PRNGKey(t), state, x)
        trace.append(float(info.elbo))
    pi, eta, want = _numpy_em(x, pi0, eta0, 30, c)
    np.testing.assert_allclose(state.q_global.weights, pi, rtol=1e-10)
    np.testing.assert_allclose(state.q_global.probs, eta, rtol=1e-10)
    np.testing.assert_allclose(trace, want, rtol=1e-12)
    assert np.all(np.diff(trace) >= -1e-9)  # EM's objective never decreases


def test_log_likelihood_by_enumeration_of_every_assignment():
    """log p(x | theta) of e_step equals log sum over all K^m assignments of prod_i pi_z eta_{z x}."""
    x = np.array([0, 3, 3, 1, 4])
    rng = np.random.default_rng(1)
    params = SMMParams(jnp.asarray(rng.dirichlet(np.ones(K))), jnp.asarray(rng.dirichlet(np.ones(V), size=K)))
    _, ll = SMM(K, V, dtype=jnp.float64).e_step(params, x)
    pi, eta = np.asarray(params.weights), np.asarray(params.probs)
    total = sum(
        np.prod([pi[z] * eta[z, xi] for z, xi in zip(zs, x)]) for zs in itertools.product(range(K), repeat=len(x))
    )
    np.testing.assert_allclose(float(ll), np.log(total), rtol=1e-12)


def test_an_empty_component_gets_a_uniform_row_and_zero_weight():
    model = SMM(2, 3)
    stats = model.e_step(SMMParams(jnp.array([1.0, 0.0]), jnp.full((2, 3), 1 / 3)), np.array([0, 1, 2, 2]))[0]
    params = model.m_step(stats)
    np.testing.assert_allclose(params.weights, [1.0, 0.0])
    np.testing.assert_allclose(params.probs[1], 1 / 3)
    np.testing.assert_allclose(params.probs[0], [0.25, 0.25, 0.5])


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="num_components"):
        SMM(0, 3)
    with pytest.raises(ValueError, match="concentration"):
        SMM(2, 3, concentration=0.5)
    model = SMM(2, 3)
    alg = em(model)
    with pytest.raises(ValueError, match=r"x must hold symbols in \[0, num_symbols=3\)"):
        alg.init(jax.random.PRNGKey(0), np.array([0, 3]))
    with pytest.raises(ValueError, match="x must be a 1-D array of integer symbols"):
        alg.init(jax.random.PRNGKey(0), np.array([0.5, 1.0]))
    state = alg.init(jax.random.PRNGKey(0), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"batch symbol 7 at \[1\] is out of range \[0, 3\)"):
        jit_step(alg.step)(jax.random.PRNGKey(1), state, jnp.array([0, 7, 1]))
