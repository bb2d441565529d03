"""The fast digamma and log-gamma against scipy."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import digamma as scipy_digamma
from scipy.special import gammaln as scipy_gammaln

from vijax.expfam._special import digamma, digamma_and_gammaln


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
