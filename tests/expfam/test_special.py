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


def _series_fused_freely(x):
    # the series as in digamma_and_gammaln, without its optimization barrier: XLA fuses it as it likes
    from vijax.expfam._special import _psi, _shifted

    small, num, den, y, log_y, r, r2 = _shifted(x)
    lgam = (
        (y - 0.5) * log_y
        - y
        + 0.91893853320467274178
        + r * (1 / 12 - r2 * (1 / 360 - r2 * (1 / 1260 - r2 * (1 / 1680 - r2 * (1 / 1188)))))
    )
    return _psi(small, num, den, y, log_y, r2), lgam - jnp.where(small, jnp.log(den), 0.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_kernel_series_changes_no_value(dtype):
    # digamma_and_gammaln is compiled as one kernel (an optimization barrier around its two
    # results); under jit, in a program shaped as LDA's E-step calls it, its values are those of
    # the same series left to XLA's fusion, and its psi is digamma's
    import jax

    a = jnp.asarray(np.random.default_rng(0).gamma(0.3, 3.0, size=(64, 50)) + 1e-3, dtype)

    def on_rows(f):
        return jax.jit(lambda a: f(jnp.concatenate([a, jnp.sum(a, -1, keepdims=True)], -1)))(a)

    psi, lgam = on_rows(digamma_and_gammaln)
    ref_psi, ref_lgam = on_rows(_series_fused_freely)
    np.testing.assert_array_equal(np.asarray(psi), np.asarray(ref_psi))
    np.testing.assert_array_equal(np.asarray(lgam), np.asarray(ref_lgam))
    np.testing.assert_array_equal(np.asarray(psi), np.asarray(on_rows(digamma)))


def test_an_eager_call_is_one_compiled_program(caplog):
    """Each special function is one jitted program: called on concrete arrays (a notebook, a
    family's ``mean_params`` outside ``jit``) it compiles once per shape, not its ~65 operations
    one by one; inside a user's ``jit`` the call is inlined (the same values: tests above)."""
    import logging

    import jax

    x = jnp.linspace(0.25, 30.0, 37)  # a shape no other test uses: nothing cached
    with jax.log_compiles(True), caplog.at_level(logging.DEBUG):
        digamma(x)
        digamma_and_gammaln(x)
        compiled = [r.getMessage() for r in caplog.records if "Finished XLA compilation" in r.getMessage()]
    assert len(compiled) == 2, compiled


def _digamma_in_jnp(x):
    # the same recurrence and series written with jax.numpy's operations and weak-typed constants
    small = x < 10.0
    xc = jnp.where(small, x, 1.0)
    num, den = jnp.zeros_like(x), jnp.ones_like(x)
    for i in range(10):
        t = xc + i
        num, den = num * t + den, den * t
    y = jnp.where(small, x + 10.0, x)
    log_y, r2 = jnp.log(y), 1.0 / (y * y)
    psi = log_y - 0.5 / y - r2 * (1 / 12 - r2 * (1 / 120 - r2 * (1 / 252 - r2 * (1 / 240 - r2 * (1 / 132)))))
    return psi - jnp.where(small, num / den, 0.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lax_series_is_the_jnp_series_bit_for_bit(dtype):
    """The series are written with jax.lax's operations (faster to trace); their values are those
    of the same formulas in jax.numpy, to the bit, under jit and in the gradient."""
    import jax

    x = jnp.asarray(
        np.concatenate([np.random.default_rng(1).gamma(0.3, 2.0, 4000), np.geomspace(1e-6, 1e7, 500)]), dtype
    )
    np.testing.assert_array_equal(np.asarray(jax.jit(digamma)(x)), np.asarray(jax.jit(_digamma_in_jnp)(x)))
    grads = [jax.jit(jax.vmap(jax.grad(f)))(x[:500]) for f in (digamma, _digamma_in_jnp)]
    np.testing.assert_array_equal(np.asarray(grads[0]), np.asarray(grads[1]))


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
