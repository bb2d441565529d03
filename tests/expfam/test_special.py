"""The fast digamma against scipy."""
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import digamma as scipy_digamma

from vijax.expfam._special import digamma


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
