"""NormalGamma has no single TFP distribution: check it against a TFP joint distribution for
log_prob, against closed-form entropy (Gamma entropy + E_tau[Normal entropy]), autodiff of its
log-normalizer, and Monte Carlo estimates of E[t] and of the KL divergence."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from vijax import expfam
from vijax.testing import assert_trees_close
from tests.conftest import tol


def _ng(dt, seed=0):
    r = np.random.default_rng(seed)
    return expfam.NormalGamma.from_params(
        jnp.asarray(r.normal(size=3), dt),
        jnp.asarray(r.uniform(0.5, 5, 3), dt),
        jnp.asarray(r.uniform(0.6, 8, 3), dt),
        jnp.asarray(r.uniform(0.3, 4, 3), dt),
    )


def test_round_trip_parameters():
    q = expfam.NormalGamma.from_params(1.5, 2.0, 3.0, 0.7)
    np.testing.assert_allclose([q.loc, q.kappa, q.concentration, q.rate], [1.5, 2.0, 3.0, 0.7], rtol=1e-12)


def test_grad_and_hessian_of_log_normalizer(dtype):
    q = _ng(dtype)
    f = lambda nat: jnp.sum(expfam.NormalGamma.from_natural(nat).log_normalizer())
    assert_trees_close(q.mean_params(), tuple(jax.grad(f)(q.natural_params)), rtol=tol(dtype), atol=tol(dtype))
    v = tuple(jnp.asarray(np.random.default_rng(1).normal(size=3), dtype) for _ in range(4))
    hvp = jax.jvp(jax.grad(f), (q.natural_params,), (v,))[1]
    assert_trees_close(q.fisher_vp(v), tuple(hvp), rtol=10 * tol(dtype), atol=10 * tol(dtype))
    q64 = _ng("float64")
    v64 = tuple(x.astype(jnp.float64) for x in v)
    assert_trees_close(q64.inv_fisher_vp(q64.fisher_vp(v64)), v64, rtol=1e-6, atol=1e-8)


@pytest.mark.slow
def test_log_prob_matches_tfp_joint(dtype):
    q = _ng(dtype)
    x = q.sample(jax.random.PRNGKey(0), (4,))
    with jax.numpy_rank_promotion("allow"):
        ref = q.to_tfp().log_prob([x[..., 1], x[..., 0]])
    np.testing.assert_allclose(q.log_prob(x), ref, rtol=10 * tol(dtype), atol=10 * tol(dtype))


def test_entropy_closed_form():
    q = _ng("float64")
    g = expfam.Gamma.from_shape_rate(q.concentration, q.rate)
    e_log_tau = q.mean_params()[3]
    ref = g.entropy() + 0.5 * (1.0 + jnp.log(2 * jnp.pi)) - 0.5 * jnp.log(q.kappa) - 0.5 * e_log_tau
    np.testing.assert_allclose(q.entropy(), ref, rtol=1e-10)


def test_monte_carlo_mean_params_and_kl():
    q, p = _ng("float64", 0), _ng("float64", 1)
    n = 40000
    x = q.sample(jax.random.PRNGKey(2), (n,))
    for ti, mi in zip(q.sufficient_stats(x), q.mean_params()):
        mean, se = jnp.mean(ti, 0), jnp.std(ti, 0) / np.sqrt(n)
        assert np.all(np.abs(mean - mi) <= 5 * se), (mean, mi, se)
    d = q.log_prob(x) - p.log_prob(x)
    mean, se = jnp.mean(d, 0), jnp.std(d, 0) / np.sqrt(n)
    assert np.all(np.abs(mean - q.kl(p)) <= 5 * se), (mean, q.kl(p), se)


pos = st.floats(min_value=1e-2, max_value=1e3)


@settings(max_examples=40, deadline=None)
@given(m=st.floats(-100, 100), k=pos, a=pos, b=pos)
def test_properties_wide_range(m, k, a, b):
    q = expfam.NormalGamma.from_params(jnp.float64(m), jnp.float64(k), jnp.float64(a), jnp.float64(b))
    np.testing.assert_allclose([q.loc, q.kappa, q.concentration, q.rate], [m, k, a, b], rtol=1e-8, atol=1e-8)
    p = expfam.NormalGamma.from_params(0.0, 1.0, 1.0, 1.0)
    assert float(q.kl(p)) >= -1e-6
    assert bool(q.is_valid())


def test_bad_parameters_name_the_argument():
    with pytest.raises(ValueError, match="kappa"):
        expfam.NormalGamma.from_params(0.0, 0.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="loc"):
        expfam.NormalGamma.from_params(float("inf"), 1.0, 1.0, 1.0)
