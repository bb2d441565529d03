"""``vijax.inference.jit_step``: the same results as ``jax.jit`` of a step, the same error for a bad
batch, and a program without host callbacks (which JAX's persistent compilation cache refuses)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.inference import cavi, jit_step
from vijax.models import DiagonalGMM


@pytest.fixture(scope="module")
def fit():
    x = jnp.asarray(np.random.default_rng(0).normal(size=(30, 2)))
    alg = cavi(DiagonalGMM.from_data(x, num_components=2))
    return alg, x, alg.init(jax.random.PRNGKey(0), x)


def test_same_steps_as_jax_jit_and_the_same_error(fit):
    alg, x, state = fit
    plain, checked = jax.jit(alg.step), jit_step(alg.step)
    a, b = state, state
    for t in range(2):
        key = jax.random.PRNGKey(t + 1)
        (a, ia), (b, ib) = plain(a, x, key), checked(b, x, key)
        np.testing.assert_array_equal(np.asarray(ia.elbo), np.asarray(ib.elbo))
    for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
    with pytest.raises(ValueError, match=r"batch x inf at \[3, 1\] is not finite \(in step 1\)"):
        checked(state, x.at[3, 1].set(jnp.inf), jax.random.PRNGKey(1))


def test_no_host_callback_in_the_program(fit):
    alg, x, state = fit
    args = (state, x, jax.random.PRNGKey(1))
    assert "callback" in jax.jit(alg.step).lower(*args).as_text()  # the checks' host callback
    assert "callback" not in jit_step(alg.step).lower(*args).as_text()


def test_a_data_parallel_step_keeps_the_callback_checks():
    """Under shard_map (data_parallel) checkify made the two-device LDA step 40% slower: jit_step
    runs jax.jit's program there (host-callback checks), and the same steps as jax.jit."""
    from vijax.data import BowBatch
    from vijax.inference import data_parallel, svi
    from vijax.models import LDA

    alg = svi(data_parallel(LDA(3, 30)), num_data=100)
    ids = jnp.arange(8 * 10, dtype=jnp.int32).reshape(8, 10) % 30
    batch = BowBatch(ids, jnp.ones((8, 10), jnp.float32))
    state = alg.init(jax.random.PRNGKey(0))
    step = jit_step(alg.step)
    text = step.lower(state, batch, jax.random.PRNGKey(1)).as_text()
    assert "manual_computation" in text and "callback" in text
    a, b = step(state, batch, jax.random.PRNGKey(1))[0], jax.jit(alg.step)(state, batch, jax.random.PRNGKey(1))[0]
    for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


def test_a_vmapped_step_with_a_while_loop_falls_back_to_jax_jit():
    """checkify cannot transform a batched while_loop (a vmapped step whose loop stops per member,
    e.g. LDA restarts in lock step): jit_step runs jax.jit's program, with the same results."""
    from jax import lax

    def count_up(x):
        return lax.while_loop(lambda c: c < x, lambda c: c + 1.0, 0.0)

    step = jit_step(jax.vmap(count_up))
    np.testing.assert_array_equal(np.asarray(step(jnp.array([0.5, 2.0, 3.5]))), [1.0, 2.0, 4.0])


def test_an_error_of_the_step_itself_is_raised():
    """The fallback does not swallow the step's own errors: jax.jit's tracing raises them."""

    def bad(x):
        raise ValueError("bad step argument x")

    with pytest.raises(ValueError, match="bad step argument x"):
        jit_step(bad)(jnp.ones(2))
