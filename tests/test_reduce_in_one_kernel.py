"""``vijax._compile.reduce_in_one_kernel``: the reduction's value (against NumPy), under ``jit``,
``vmap`` and ``grad``, and the compiled program: no reduce-window of XLA's CPU compiler where the
plain reduction gets one, and the plain reduction where the axis cannot be cut or a float sum is
long."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax._compile import SHORT_AXIS, _short_factors, reduce_in_one_kernel

OPS = {"sum": (jnp.sum, np.sum), "all": (jnp.all, np.all), "any": (jnp.any, np.any), "max": (jnp.max, np.max)}


def test_factors_are_at_most_32_and_multiply_back():
    for n in (33, 50, 64, 100, 256, 961, 5000, 250_000):
        f = _short_factors(n)
        assert f is not None and max(f) <= 32 and int(np.prod(f)) == n, (n, f)
    assert _short_factors(37) is None and _short_factors(2 * 37) is None  # a prime factor above 32
    assert _short_factors(20) == (20,)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("shape,axis", [((8, 50), -1), ((50, 64), 0), ((3, 100, 2), 1), ((8, 37), -1), ((7, 5), 1)])
def test_value_is_the_plain_reduction(op, shape, axis):
    jop, nop = OPS[op]
    x = np.random.default_rng(0).normal(size=shape)
    x = x > 0.3 if op in ("all", "any") else x
    for keepdims in (False, True):
        got = jax.jit(lambda a: reduce_in_one_kernel(jop, a, axis, keepdims))(x)
        np.testing.assert_allclose(np.asarray(got), nop(x, axis=axis, keepdims=keepdims), rtol=1e-12)


def test_axis_none_takes_the_array_flat():
    x = np.random.default_rng(1).normal(size=(50, 100)) > -2.0
    assert bool(reduce_in_one_kernel(jnp.all, x, axis=None)) == bool(np.all(x))
    x[17, 3] = False
    assert not bool(jax.jit(lambda a: reduce_in_one_kernel(jnp.all, a, axis=None))(x))
    with pytest.raises(ValueError, match="keepdims"):
        reduce_in_one_kernel(jnp.all, x, axis=None, keepdims=True)


def test_vmap_and_grad():
    x = jnp.asarray(np.random.default_rng(2).normal(size=(4, 6, 50)))
    got = jax.vmap(lambda a: reduce_in_one_kernel(jnp.sum, a * a))(x)
    np.testing.assert_allclose(got, jnp.sum(x * x, -1), rtol=1e-12)
    g = jax.grad(lambda a: jnp.sum(reduce_in_one_kernel(jnp.sum, a * a)))(x)
    np.testing.assert_allclose(g, 2 * x, rtol=1e-12)


def _reduce_windows(fn, x) -> int:
    return jax.jit(fn).lower(x).compile().as_text().count("reduce-window(")


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA's CPU compiler's rewrite")
def test_compiled_without_a_reduce_window():
    x = jnp.ones((8, 50), jnp.float32)
    assert _reduce_windows(lambda a: reduce_in_one_kernel(jnp.sum, jnp.exp(a)), x) == 0
    assert _reduce_windows(lambda a: reduce_in_one_kernel(jnp.all, a > 0, axis=None), x) == 0
    # a float sum longer than SHORT_AXIS stays the plain (pairwise) reduction
    long = jnp.ones((2, 4 * SHORT_AXIS), jnp.float32)
    plain = _reduce_windows(lambda a: jnp.sum(jnp.exp(a), -1), long)
    assert _reduce_windows(lambda a: reduce_in_one_kernel(jnp.sum, jnp.exp(a)), long) == plain
