"""A grid of step sizes is one vmapped program: the factory called inside ``vmap`` with a traced
constant (or traced Robbins-Monro constants) equals the runs one setting at a time; a concrete
schedule is checked without compiling operation by operation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.inference import prox_svi, schedules, svi
from vijax.models import GLM, LDA, DiagonalGMM

KEY = jax.random.PRNGKey(0)
X = jnp.asarray(np.random.default_rng(0).normal(size=(40, 2)) + np.repeat([[-3.0, 0.0], [3.0, 0.0]], 20, 0))


def _close(a, b, rtol=1e-10):
    for u, v in zip(expfam.tree_natural_params(a), expfam.tree_natural_params(b)):
        np.testing.assert_allclose(u, v, rtol=rtol, atol=1e-12)


@pytest.mark.slow
def test_svi_step_size_grid_compiles_once_and_equals_each_run():
    model = DiagonalGMM(2, 2)
    s0 = svi(model, num_data=40).init(KEY, X)
    traces = []

    def run(scale, state):
        traces.append(1)
        alg = svi(model, num_data=40, schedule=schedules.robbins_monro(scale, tau=1.0, kappa=0.7))
        for i in range(3):
            state, info = alg.step(jax.random.fold_in(KEY, i), state, X[10 * i : 10 * i + 10])
        return state, info

    scales = jnp.array([0.2, 0.6, 1.0])
    states, infos = jax.jit(jax.vmap(run, in_axes=(0, None)))(scales, s0)
    assert len(traces) == 1
    for g, scale in enumerate([0.2, 0.6, 1.0]):
        one, info = jax.jit(lambda s: run(scale, s))(s0)
        # (rtol 1e-6: robbins_monro's step is float32 from a Python scale, float64 from the grid's array)
        _close(jax.tree_util.tree_map(lambda u: u[g], states.q_global), one.q_global, rtol=1e-6)
        np.testing.assert_allclose(infos.step_size[g], info.step_size, rtol=1e-6)


def test_prox_svi_constant_step_grid_equals_each_run():
    r = np.random.default_rng(1)
    x = jnp.asarray(r.normal(size=(30, 2)))
    y = jnp.asarray((r.uniform(size=30) < 1 / (1 + np.exp(-x @ np.array([1.5, -1.0])))).astype(float))
    model = GLM(2)
    s0 = prox_svi(model, num_data=30, schedule=0.5).init(KEY)
    step = lambda beta, s: prox_svi(model, num_data=30, schedule=beta).step(jax.random.PRNGKey(1), s, (x, y))
    betas = jnp.array([0.1, 0.5, 2.0])
    states, _ = jax.jit(jax.vmap(step, in_axes=(0, None)))(betas, s0)
    for g, beta in enumerate([0.1, 0.5, 2.0]):
        one, _ = prox_svi(model, num_data=30, schedule=beta).step(jax.random.PRNGKey(1), s0, (x, y))
        _close(jax.tree_util.tree_map(lambda u: u[g], states.q_global), one.q_global)


def test_schedules_are_checked_without_compiling_operation_by_operation(caplog):
    """``robbins_monro`` checks its first step when it is made, so an algorithm built with it
    compiles nothing; another callable is evaluated at count 0 in one compiled call, and a bad
    first step is still refused, naming the argument."""
    import logging

    from vijax._validate import ArgumentError
    from vijax.inference.schedules import as_schedule, robbins_monro

    rm = robbins_monro(1.0, tau=37.0, kappa=0.61)  # constants no other test uses: nothing cached
    assert rm.first_step == pytest.approx(37.0**-0.61)
    with jax.log_compiles(True), caplog.at_level(logging.DEBUG):
        svi(LDA(3, 7), num_data=11, schedule=rm)
        compiled_rm = [r.getMessage() for r in caplog.records if "Finished XLA compilation" in r.getMessage()]
        caplog.clear()
        as_schedule(lambda count: 0.3 * (count + 3.0) ** -0.55)
        compiled_other = [r.getMessage() for r in caplog.records if "Finished XLA compilation" in r.getMessage()]
    assert compiled_rm == [] and len(compiled_other) == 1, (compiled_rm, compiled_other)
    with pytest.raises(
        ArgumentError, match="schedule must give a finite step size in \\(0, 1\\], got array\\(2.\\) at count 0"
    ):
        as_schedule(lambda count: 2.0 + 0.0 * count)
    assert float(as_schedule(0.25)(jnp.int32(9))) == 0.25
