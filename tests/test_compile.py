"""vijax._compile's set-up helpers: ``setup_jit`` (a set-up program compiled at LLVM -O0 on a CPU)
and ``draws_on_host`` (the draws of q that ``ngvi``'s start checks evaluate the joint at); the GPU's
compile options."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax import _compile
from vijax._compile import draws_on_host, setup_jit


def test_setup_jit_gives_jax_jit_values_at_the_top_level_and_inside_a_caller_trace():
    f = setup_jit(lambda x, n: jnp.sin(x) * n, static_argnums=1)
    x = jnp.linspace(0.0, 3.0, 7)
    np.testing.assert_allclose(f(x, 2), jnp.sin(x) * 2, rtol=1e-6)
    # inside a caller's jit, vmap or grad it is part of the caller's program (no compiler options there)
    np.testing.assert_allclose(jax.jit(lambda y: f(y, 2) + 1.0)(x), jnp.sin(x) * 2 + 1.0, rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda y: f(y, 3))(0.5), 3 * np.cos(0.5), rtol=1e-6)


def test_setup_jit_raises_the_function_s_own_value_error():
    def bad(x):
        raise ValueError("the model's own error")

    with pytest.raises(ValueError, match="the model's own error"):
        setup_jit(bad)(jnp.ones(2))


def test_draws_on_host_follow_each_family_s_law():
    """Monte Carlo: 20,000 draws' means within 5 standard errors of each family's mean, in its dtype."""
    n = 20_000
    q = {
        "normal": expfam.Normal.from_mean_variance(jnp.array([-1.0, 2.0]), jnp.array([0.5, 4.0])),
        "gamma": expfam.Gamma.from_shape_rate(jnp.array([2.0, 0.5]), jnp.array([1.0, 3.0])),
        "beta": expfam.Beta.from_concentrations(jnp.array(2.0), jnp.array(5.0)),
        "dirichlet": expfam.Dirichlet.from_concentration(jnp.array([1.0, 2.0, 3.0])),
    }
    z = draws_on_host(q, jax.random.PRNGKey(0), n)
    means = {
        "normal": (np.array([-1.0, 2.0]), np.sqrt([0.5, 4.0])),
        "gamma": (np.array([2.0, 0.5 / 3.0]), np.sqrt([2.0, 0.5 / 9.0])),
        "beta": (2.0 / 7.0, np.sqrt(10.0 / (49.0 * 8.0))),
        "dirichlet": (np.array([1.0, 2.0, 3.0]) / 6.0, np.sqrt(np.array([5.0, 8.0, 9.0]) / (36.0 * 7.0))),
    }
    for name, (mean, sd) in means.items():
        assert z[name].shape == (n,) + np.shape(mean) and z[name].dtype == jax.tree_util.tree_leaves(q[name])[0].dtype
        np.testing.assert_array_less(np.abs(z[name].mean(0) - mean), 5 * sd / np.sqrt(n))
    np.testing.assert_allclose(z["dirichlet"].sum(-1), 1.0, rtol=1e-5)
    again = draws_on_host(q, jax.random.PRNGKey(0), n)  # a key gives the same draws
    np.testing.assert_array_equal(again["gamma"], z["gamma"])


def test_draws_on_host_is_none_for_a_family_numpy_has_no_sampler_for():
    q = {
        "x": expfam.Normal.from_mean_variance(0.0, 1.0),
        "w": expfam.MultivariateNormal.from_mean_covariance(jnp.zeros(2), jnp.eye(2)),
    }
    assert draws_on_host(q, jax.random.PRNGKey(0), 3) is None


def test_jit_step_pauses_the_collector_for_its_first_trace_and_compile_and_restores_it():
    import gc

    from vijax.inference import jit_step

    seen = []

    def step(key, state, batch):
        seen.append(gc.isenabled())  # runs while the step is traced
        return state + batch, None

    fn = jit_step(step)
    assert gc.isenabled()
    fn(jax.random.PRNGKey(0), jnp.zeros(2), jnp.ones(2))
    assert seen and not any(seen) and gc.isenabled()
    gc.disable()  # off stays off
    try:
        jit_step(step)(jax.random.PRNGKey(0), jnp.zeros(3), jnp.ones(3))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_autotuning_level_is_set_on_a_gpu_only_unless_xla_flags_set_it(monkeypatch):
    from vijax.inference import jit_step

    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    assert _compile.step_gpu_options() is None  # this CPU
    assert _compile.step_compile_options() == _compile.step_cpu_options()
    for backend, expected in (("gpu", {"xla_gpu_autotune_level": _compile.GPU_AUTOTUNE_LEVEL}), ("tpu", None)):
        monkeypatch.setattr(jax, "default_backend", lambda b=backend: b)
        assert _compile.step_gpu_options() == expected
        assert _compile.step_cpu_options() is None and _compile.step_compile_options() == expected
        assert jit_step(lambda key, x: x).compiler_options() == expected  # jit_step's quick default
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_autotune_level=2")  # the user's level stays
    assert _compile.step_gpu_options() is None
    # a program compiled with the option runs (on the CPU the option has no effect)
    f = jax.jit(lambda x: x @ x.T, compiler_options={"xla_gpu_autotune_level": _compile.GPU_AUTOTUNE_LEVEL})
    np.testing.assert_allclose(f(jnp.ones((2, 3))), np.full((2, 2), 3.0))
