"""The fast digamma and log-gamma against scipy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import digamma as scipy_digamma
from scipy.special import gammaln as scipy_gammaln

from vijax.expfam._special import digamma, digamma_and_gammaln, trigamma


@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-13), ("float32", 2e-6)])
def test_fast_digamma_matches_scipy(dtype, rtol):
    x = np.geomspace(1e-4, 1e6, 5001)
    got = np.asarray(digamma(jnp.asarray(x, dtype)), np.float64)
    ref = scipy_digamma(np.asarray(x.astype(dtype), np.float64))
    np.testing.assert_array_less(np.abs(got - ref) / np.maximum(np.abs(ref), 1.0), rtol)


def test_fast_digamma_derivative_is_trigamma():
    from scipy.special import polygamma
    import jax

    x = np.geomspace(1e-3, 1e4, 301)
    got = np.asarray(jax.vmap(jax.grad(digamma))(jnp.asarray(x)))
    np.testing.assert_allclose(got, polygamma(1, x), rtol=1e-9)


@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-13), ("float32", 2e-6)])
def test_fast_trigamma_matches_scipy(dtype, rtol):
    from scipy.special import polygamma

    x = np.geomspace(1e-4, 1e6, 5001)
    got = np.asarray(trigamma(jnp.asarray(x, dtype)), np.float64)
    ref = polygamma(1, np.asarray(x.astype(dtype), np.float64))
    np.testing.assert_array_less(np.abs(got - ref) / ref, rtol)


def test_fast_trigamma_is_the_derivative_of_digamma_and_differentiable():
    import jax
    from scipy.special import polygamma

    x = np.geomspace(1e-3, 1e4, 301)
    np.testing.assert_allclose(trigamma(jnp.asarray(x)), jax.vmap(jax.grad(digamma))(jnp.asarray(x)), rtol=1e-9)
    # its own derivative (a Fisher product differentiated) is psi''
    np.testing.assert_allclose(jax.vmap(jax.grad(trigamma))(jnp.asarray(x)), polygamma(2, x), rtol=1e-8)


@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-13), ("float32", 1e-5)])
def test_fast_gammaln_matches_scipy_and_digamma_is_unchanged(dtype, rtol):
    x = np.geomspace(1e-4, 1e6, 5001)
    psi, lgam = (np.asarray(a, np.float64) for a in digamma_and_gammaln(jnp.asarray(x, dtype)))
    ref = scipy_gammaln(np.asarray(x.astype(dtype), np.float64))
    np.testing.assert_array_less(np.abs(lgam - ref) / np.maximum(np.abs(ref), 1.0), rtol)
    np.testing.assert_array_equal(psi, np.asarray(digamma(jnp.asarray(x, dtype)), np.float64))


def test_fast_gammaln_derivative_is_digamma():
    import jax

    x = np.geomspace(1e-3, 1e4, 301)
    got = np.asarray(jax.vmap(jax.grad(lambda t: digamma_and_gammaln(t)[1]))(jnp.asarray(x)))
    np.testing.assert_allclose(got, scipy_digamma(x), rtol=1e-9, atol=1e-12)


def test_results_are_typed_as_jnp_would_type_them():
    """A Python number in gives a weakly typed result, as jax.numpy's arithmetic would (so that
    it does not promote the arrays it meets); an array of floats gives its own dtype."""
    assert digamma(2.0).weak_type and digamma_and_gammaln(3)[1].weak_type
    assert not digamma(jnp.ones(3, jnp.float32)).weak_type and digamma(jnp.ones(3, jnp.float32)).dtype == jnp.float32


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 1e-5)])
def test_digamma_and_gammaln_with_total_matches_scipy(dtype, tol):
    """psi and log Gamma of [a, sum a] over the last axis (a batch of rows, one of them long)."""
    from scipy.special import digamma as sp_psi
    from scipy.special import gammaln as sp_gammaln

    from vijax.expfam import digamma_and_gammaln_with_total

    for shape in [(3, 7), (2, 257)]:
        a = np.random.default_rng(0).gamma(0.7, 2.0, shape) + 0.05
        full = np.concatenate([a, a.sum(-1, keepdims=True)], -1)
        psi, lgam = jax.jit(digamma_and_gammaln_with_total)(jnp.asarray(a, dtype))
        np.testing.assert_allclose(np.asarray(psi), sp_psi(full), rtol=tol, atol=tol)
        np.testing.assert_allclose(np.asarray(lgam), sp_gammaln(full), rtol=tol, atol=tol)
