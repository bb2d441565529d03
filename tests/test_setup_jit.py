"""``vijax._compile.setup_jit``: programs that run once compiled with XLA's quick CPU settings where
they apply, the plain ``jax.jit`` elsewhere, the same values either way."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import _compile
from vijax._compile import SETUP_CPU_OPTIONS, SetupJit, setup_jit


def _fn(x, n):
    return jnp.sum(jnp.exp(jnp.sin(x) * n) / (1.0 + jnp.log1p(x * x)))


def _fresh():
    """A function of its own (JAX's jit caches are per function and options)."""
    return lambda x, n: _fn(x, n)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the quick settings are the CPU's")
def test_a_top_level_call_compiles_the_quick_program_with_the_plain_programs_values():
    f = setup_jit(_fresh(), static_argnums=1)
    x = jnp.linspace(0.1, 3.0, 257)
    out = f(x, 3)
    assert f.quick._cache_size() == 1 and f.plain._cache_size() == 0
    # the same values up to floating-point rounding (another kernel emitter: not always bit for bit)
    np.testing.assert_allclose(out, jax.jit(_fn, static_argnums=1)(x, 3), rtol=1e-12 if x.dtype == np.float64 else 1e-6)
    assert f._cache_size() == 1


def test_inside_a_trace_it_is_the_plain_jit():
    f = setup_jit(_fresh(), static_argnums=1)
    x = jnp.linspace(0.1, 3.0, 5)
    want = _fn(x, 2)
    # traced arguments, concrete arguments inside a caller's trace, vmap and grad: no error from
    # compiler_options on a nested jit, and the same values
    np.testing.assert_allclose(jax.jit(lambda y: f(y, 2))(x), want, rtol=1e-6)
    np.testing.assert_allclose(jax.jit(lambda s: s * f(x, 2))(1.0), want, rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(lambda y: f(y, 2))(x[None])[0], want, rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda y: f(y, 2))(x), jax.grad(_fn)(x, 2), rtol=1e-5)
    assert f.quick._cache_size() == 0


def test_an_option_xla_does_not_know_falls_back_to_the_plain_jit(monkeypatch):
    monkeypatch.setattr(_compile, "SETUP_CPU_OPTIONS", {**SETUP_CPU_OPTIONS, "xla_no_such_option_here": True})
    monkeypatch.setattr(_compile, "_OPTIONS_KNOWN", [True])
    f = SetupJit(_fresh(), static_argnums=1)
    x = jnp.ones(3)
    np.testing.assert_allclose(f(x, 1), _fn(x, 1), rtol=1e-6)
    if jax.default_backend() == "cpu":
        assert _compile._OPTIONS_KNOWN == [False]  # refused once, plain from then on
    assert f.plain._cache_size() == 1


def test_an_error_of_the_function_itself_is_raised_as_it_is():
    f = setup_jit(lambda x: x.reshape(7))
    with pytest.raises(TypeError, match="reshape"):
        f(jnp.ones(3))
