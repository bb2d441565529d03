"""``vijax._compile.reduce_in_one_kernel``: the reduction's value (against NumPy), under ``jit``,
``vmap`` and ``grad``, and the compiled program: no reduce-window of XLA's CPU compiler where the
plain reduction gets one, and the plain reduction where the axis cannot be cut or a float sum is
long."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax._compile import SHORT_AXIS, _cut, _short_factors, reduce_in_one_kernel

OPS = {
    "sum": (jnp.sum, np.sum),
    "all": (jnp.all, np.all),
    "any": (jnp.any, np.any),
    "max": (jnp.max, np.max),
    "min": (jnp.min, np.min),
}


def test_factors_are_at_most_32_and_multiply_back():
    for n in (33, 50, 64, 100, 256, 961, 5000, 250_000):
        f = _short_factors(n)
        assert f is not None and max(f) <= 32 and int(np.prod(f)) == n, (n, f)
    assert _short_factors(37) is None and _short_factors(2 * 37) is None  # a prime factor above 32
    assert _short_factors(20) == (20,)
    # a length with a prime factor above 32: the first multiple of 32 above it that has factors
    for n in (37, 257, 25_700, 1031):
        pad, f = _cut(n, True)
        assert 0 < pad < 32 * 32 and max(f) <= 32 and int(np.prod(f)) == n + pad and (n + pad) % 32 == 0, (n, pad, f)
    assert _cut(37, False) == (0, None)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize(
    "shape,axis", [((8, 50), -1), ((50, 64), 0), ((3, 100, 2), 1), ((8, 37), -1), ((7, 5), 1), ((3, 257, 2), 1)]
)
def test_value_is_the_plain_reduction(op, shape, axis):
    jop, nop = OPS[op]
    x = np.random.default_rng(0).normal(size=shape)
    # for all/any also the uniform array, where a padded entry would decide (37 and 257 are padded)
    xs = [x > 0.3, np.ones(shape, bool) if op == "all" else np.zeros(shape, bool)] if op in ("all", "any") else [x]
    for x in xs:
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


@pytest.mark.parametrize("op", ["all", "any", "max", "min", "sum"])
def test_padded_axis_gives_the_plain_value(op):
    """A prime length (257) is padded with the value the operation ignores: random data, the
    uniform arrays for all/any (where a wrong padding would flip the answer), ints for max/min."""
    jop, nop = OPS[op]
    rng = np.random.default_rng(3)
    xs = [rng.normal(size=(4, 257)) > 0.0, np.ones((4, 257), bool), np.zeros((4, 257), bool)]
    if op in ("max", "min", "sum"):
        xs = [rng.normal(size=(4, 257)) - 5.0, rng.integers(-9, -1, size=(4, 257)), rng.normal(size=(4, 257)) + 5.0]
    for x in xs:
        got = jax.jit(lambda a: reduce_in_one_kernel(jop, a))(x)
        np.testing.assert_allclose(np.asarray(got), nop(x, axis=-1), rtol=1e-12)
        got = jax.jit(lambda a: reduce_in_one_kernel(jop, a, axis=None))(x)
        np.testing.assert_allclose(np.asarray(got), nop(x), rtol=1e-12)


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
    prime = jnp.ones((4, 257), jnp.float32)  # padded
    assert _reduce_windows(lambda a: reduce_in_one_kernel(jnp.all, jnp.isfinite(a), axis=None), prime) == 0
    assert _reduce_windows(lambda a: reduce_in_one_kernel(jnp.sum, jnp.exp(a)), prime) == 0
    # a float sum longer than SHORT_AXIS stays the plain (pairwise) reduction
    long = jnp.ones((2, 4 * SHORT_AXIS), jnp.float32)
    plain = _reduce_windows(lambda a: jnp.sum(jnp.exp(a), -1), long)
    assert _reduce_windows(lambda a: reduce_in_one_kernel(jnp.sum, jnp.exp(a)), long) == plain


def test_plain_reduction_on_another_backend(monkeypatch):
    """Traced for another backend than the CPU, the plain reduction (no barrier, no reshape)."""
    x = jnp.ones((8, 50), jnp.float32)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    text = jax.jit(lambda a: reduce_in_one_kernel(jnp.sum, a)).lower(x).as_text()
    assert "optimization_barrier" not in text
    monkeypatch.undo()
    assert "optimization_barrier" in jax.jit(lambda a: reduce_in_one_kernel(jnp.sum, a)).lower(x).as_text()
