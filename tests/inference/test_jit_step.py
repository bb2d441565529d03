"""``vijax.inference.jit_step``: the same results as ``jax.jit`` of a step, the same error for a bad
batch, and a program without host callbacks (which JAX's persistent compilation cache refuses)."""

import chex
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
        (a, ia), (b, ib) = plain(key, a, x), checked(key, b, x)
        np.testing.assert_array_equal(np.asarray(ia.elbo), np.asarray(ib.elbo))
    chex.assert_trees_all_equal(a, b)
    with pytest.raises(ValueError, match=r"batch x inf at \[3, 1\] is not finite \(in step 1\)"):
        checked(jax.random.PRNGKey(1), state, x.at[3, 1].set(jnp.inf))


def test_no_host_callback_in_the_program(fit):
    alg, x, state = fit
    args = (jax.random.PRNGKey(1), state, x)
    assert "callback" in jax.jit(alg.step).lower(*args).as_text()  # the checks' host callback
    step = jit_step(alg.step)
    assert step.check_mode() is None
    text = step.lower(*args).as_text()
    assert "callback" not in text and step.check_mode() == "collected"
    assert jit_step(alg.step).lower(*args).as_text() == text  # the same program text: one cache entry


def test_the_program_returns_unreduced_checks_and_a_failure_is_located_by_a_second_run(fit):
    """The collected program never reduces a check across the batch's rows (a batch sharded over
    devices needs no collective for its checks): a small batch's bad entries come back as they are,
    a large one's per row; a failure runs the step again, located; with donated arguments one
    program returns everything."""
    alg, x, state = fit
    args = (jax.random.PRNGKey(1), state, x)
    step = jit_step(alg.step)
    results = jax.tree.leaves(step.lower(*args).out_info[1])  # (step's outputs, checks' results)
    assert [(tuple(a.shape), a.dtype) for a in results] == [((30, 2), jnp.bool_)]  # x's bad entries, unreduced
    bad = x.at[7, 0].set(jnp.nan)
    with pytest.raises(ValueError, match=r"batch x nan at \[7, 0\] is not finite \(in step 1\)"):
        step(jax.random.PRNGKey(1), state, bad)
    donating = jit_step(alg.step, donate_argnums=1)
    assert len(jax.tree.leaves(donating.lower(*args).out_info[1])) > 1  # flags, position, value, step, ...
    fresh = jax.tree.map(jnp.copy, state)
    with pytest.raises(ValueError, match=r"batch x nan at \[7, 0\] is not finite \(in step 1\)"):
        donating(jax.random.PRNGKey(1), fresh, bad)


def test_a_batch_passed_again_is_not_checked_again(monkeypatch):
    """The same jax.Array batch (a full-batch algorithm's data at every step) is checked at its first
    call only: the checks run under a ``lax.cond`` on a gate that the wrapper sets from whether every
    input they read is the very array whose checks last passed. A new array, a NumPy array (which can
    change in place) or a check that reads the state runs them again."""
    from vijax._validate import collected_failed, enforce_value_checks, finite_values
    from vijax.inference import base

    decisions, reads = [], []
    needs, read = base.CheckedInputs.needs_check, base.raise_collected
    monkeypatch.setattr(
        base.CheckedInputs, "needs_check", lambda self, *a: decisions.append(needs(self, *a)) or decisions[-1]
    )
    monkeypatch.setattr(base, "raise_collected", lambda *a: reads.append(1) or read(*a))

    def step(state, batch, scale):
        enforce_value_checks(lambda: [finite_values("batch x", batch), finite_values("scale", scale)])
        return state + scale * jnp.sum(batch)

    compiled = jit_step(step)
    x, s = jnp.ones((4, 3)), jnp.asarray(2.0)
    state = jnp.zeros(())
    for _ in range(3):
        state = compiled(state, x, s)
    assert decisions == [True, False, False] and float(state) == 72.0  # checked once, stepped three times
    assert len(reads) == 1  # results read back (a wait for the device) only where the checks ran
    compiled(state, x + 0.0, s)  # a new array of the same values
    compiled(state, x, jnp.asarray(2.0))  # a new scale: the checks read it too
    assert decisions[3:] == [True, True]
    host = np.ones((4, 3))
    compiled(state, host, s)
    host[1, 2] = np.nan  # changed in place: checked again, and refused
    with pytest.raises(ValueError, match=r"batch x nan at \[1, 2\] is not finite"):
        compiled(state, host, s)
    assert decisions[5:] == [True, True]
    bad = x.at[0, 0].set(jnp.inf)
    for _ in range(2):  # a failed batch is never remembered as checked
        with pytest.raises(ValueError, match=r"batch x inf at \[0, 0\] is not finite"):
            compiled(state, bad, s)
    assert decisions[7:] == [True, True]
    # the gate: False, the program computes no check (a bad batch's entries come back all False)
    program = compiled.lower(state, x, s).compile()
    assert collected_failed(program(state, bad, s, np.bool_(True))[1])
    assert not collected_failed(program(state, bad, s, np.bool_(False))[1])


def test_a_batch_given_by_keyword_is_checked_once_and_a_new_one_again():
    from vijax._validate import enforce_value_checks, finite_values

    def step(state, *, batch, scale):  # batch: an array or a tuple of arrays, checked stacked
        enforce_value_checks(lambda: [finite_values("batch x", jnp.stack(jax.tree.leaves(batch)))])
        return state + scale * sum(jnp.sum(b) for b in jax.tree.leaves(batch))

    compiled = jit_step(step)
    x, s = jnp.ones(3), jnp.asarray(1.0)
    state = compiled(jnp.zeros(()), batch=x, scale=s)
    state = compiled(state, batch=x, scale=s)
    with pytest.raises(ValueError, match=r"batch x nan at \[0, 1\] is not finite"):
        compiled(state, batch=x.at[1].set(jnp.nan), scale=s)
    assert float(compiled(state, batch=x, scale=s)) == 9.0
    # another structure of the inputs (a pair of batches): checked, whatever its leaves
    with pytest.raises(ValueError, match=r"batch x nan at \[1, 2\] is not finite"):
        compiled(state, batch=(x, x.at[2].set(jnp.nan)), scale=s)


def test_checks_reading_the_state_run_at_every_step():
    """Which inputs the checks read comes from the traced program: a check of the state (new at
    every step) is computed at every call, though the batch is the same."""
    from vijax._validate import enforce_value_checks, finite_values

    def step(state, batch):
        enforce_value_checks(lambda: [finite_values("state", state)])
        return state + jnp.sum(batch)

    compiled = jit_step(step)
    x = jnp.ones(3)
    state = compiled(jnp.zeros(()), x)
    state = compiled(state, x)
    with pytest.raises(ValueError, match=r"state inf at \[\] is not finite"):
        compiled(jnp.asarray(jnp.inf), x)


def test_the_inputs_a_program_output_reads():
    from vijax.inference.base import inputs_read

    def f(a, b, c):
        return a * 2.0, jax.lax.cond(c > 0, lambda: jnp.sum(b), lambda: 0.0)

    jaxpr = jax.make_jaxpr(f)(1.0, jnp.ones(3), 1.0).jaxpr
    assert inputs_read(jaxpr, jaxpr.outvars[:1]) == {0}
    assert inputs_read(jaxpr, jaxpr.outvars[1:]) == {1, 2}


def test_a_large_check_comes_back_per_row():
    from vijax._validate import collected_failed, collected_value_checks, enforce_value_checks, finite_values

    def f(x):
        with collected_value_checks(locate=False) as sink:
            enforce_value_checks([finite_values("x", x)])
        return sink.results()

    x = jnp.zeros((300, 300))  # 90,000 entries: above the unreduced size
    rows = jax.eval_shape(f, x)["rows"]
    assert [r.shape for r in rows] == [(300,)]
    assert not collected_failed(jax.jit(f)(x)) and collected_failed(jax.jit(f)(x.at[299, 5].set(jnp.inf)))


def test_checks_below_the_step_level_are_checkify_checks(fit):
    """A check in a loop body (a scan of steps, as the runner's chunk) cannot be an output of the
    program: jit_step traces it with checkify checks instead, with the same error."""
    alg, x, state = fit

    def two_steps(key, state, xs):
        def body(s, xk):
            s, info = alg.step(xk[1], s, xk[0])
            return s, info.elbo

        return jax.lax.scan(body, state, (xs, jax.random.split(key)))

    step = jit_step(two_steps)
    xs = jnp.stack([x, x])
    a, elbos = step(jax.random.PRNGKey(1), state, xs)
    b, elbos_jit = jax.jit(two_steps)(jax.random.PRNGKey(1), state, xs)
    np.testing.assert_array_equal(np.asarray(elbos), np.asarray(elbos_jit))
    assert step.check_mode() == "checkify" and "callback" not in step.lower(jax.random.PRNGKey(1), state, xs).as_text()
    with pytest.raises(ValueError, match=r"batch x nan at \[4, 0\] is not finite \(in step 2\)"):
        step(jax.random.PRNGKey(1), state, xs.at[1, 4, 0].set(jnp.nan))


@pytest.mark.slow
def test_several_checked_steps_in_one_program_report_the_failing_one(fit):
    """Two algorithms' steps side by side (lock_step): each step's checks are collected, and the
    error is that of the step whose batch fails, at its own step count."""
    from vijax.inference import lock_step

    alg, x, state = fit
    both = lock_step({"a": alg, "b": alg})
    states = {"a": state, "b": alg.step(jax.random.PRNGKey(5), state, x)[0]}  # b is one step ahead
    step = jit_step(both.step)
    new, info = step(jax.random.PRNGKey(1), states, x)
    ref, ref_info = jax.jit(both.step)(jax.random.PRNGKey(1), states, x)
    np.testing.assert_array_equal(np.asarray(info["elbo"]), np.asarray(ref_info["elbo"]))
    assert step.check_mode() == "collected"
    with pytest.raises(ValueError, match=r"batch x -?inf at \[2, 0\] is not finite \(in step 1\)"):
        step(jax.random.PRNGKey(1), states, x.at[2, 0].set(-jnp.inf))


def test_under_the_callers_jit_it_is_jax_jit(fit):
    alg, x, state = fit
    step = jit_step(alg.step)
    out = jax.jit(lambda k, s, b: step(k, s, b)[1].elbo)(jax.random.PRNGKey(1), state, x)
    np.testing.assert_array_equal(
        np.asarray(out), np.asarray(jax.jit(alg.step)(jax.random.PRNGKey(1), state, x)[1].elbo)
    )


@pytest.mark.skipif(jax.device_count() < 2, reason="data_parallel's shard_map needs two devices (one GPU: none)")
@pytest.mark.slow
def test_a_data_parallel_step_has_its_checks_outside_the_shard_map():
    """Under shard_map (data_parallel) checkify made the two-device LDA step 40% slower: the step's
    checks run before its shard_map, so jit_step collects them there as outputs (no checkify, no
    host callback), with the same steps as jax.jit and the same error for a bad batch."""
    from vijax.data import BowBatch
    from vijax.inference import data_parallel, svi
    from vijax.models import LDA

    alg = svi(data_parallel(LDA(3, 30)), num_data=100)
    ids = jnp.arange(8 * 10, dtype=jnp.int32).reshape(8, 10) % 30
    batch = BowBatch(ids, jnp.ones((8, 10), jnp.float32))
    state = alg.init(jax.random.PRNGKey(0))
    step = jit_step(alg.step)
    text = step.lower(jax.random.PRNGKey(1), state, batch).as_text()
    assert "manual_computation" in text and "callback" not in text
    a, b = step(jax.random.PRNGKey(1), state, batch)[0], jax.jit(alg.step)(jax.random.PRNGKey(1), state, batch)[0]
    chex.assert_trees_all_equal(a, b)
    with pytest.raises(ValueError, match=r"batch word id 99 at \[2, 3\] is out of range \[0, 30\) \(in step 1\)"):
        step(jax.random.PRNGKey(1), state, BowBatch(ids.at[2, 3].set(99), batch.counts))


def test_a_vmapped_step_with_a_while_loop_falls_back_to_jax_jit():
    """checkify cannot transform a batched while_loop (a vmapped step whose loop stops per member,
    e.g. LDA restarts in lock step), and checks under vmap cannot be collected: jit_step runs
    jax.jit's program, with the same results."""
    from jax import lax

    from vijax._validate import enforce_value_checks, finite_values

    def count_up(x):
        enforce_value_checks([finite_values("x", x)])
        return lax.while_loop(lambda c: c < x, lambda c: c + 1.0, 0.0)

    step = jit_step(jax.vmap(count_up))
    np.testing.assert_array_equal(np.asarray(step(jnp.array([0.5, 2.0, 3.5]))), [1.0, 2.0, 4.0])
    assert step.check_mode() == "plain"


def test_an_error_of_the_step_itself_is_raised():
    """The fallback does not swallow the step's own errors: jax.jit's tracing raises them."""

    def bad(x):
        raise ValueError("bad step argument x")

    with pytest.raises(ValueError, match="bad step argument x"):
        jit_step(bad)(jnp.ones(2))


def test_checks_under_vmap_are_enforced_outside_it():
    """vmap_with_checks (the vmap of restarts): the members' checks are collected inside the vmap and
    enforced outside it for the first failing member, so jit_step still collects them (no host
    callback); eagerly, under jit_step and under jax.jit, a bad batch raises the same words."""
    from vijax._validate import enforce_value_checks, finite_values, vmap_with_checks

    def member(scale, x, count):
        enforce_value_checks([finite_values("batch x", x * scale)], count)
        return jnp.sum(x * scale)

    f = vmap_with_checks(member, in_axes=(0, None, 0))
    scales, counts, x = jnp.array([1.0, 2.0, 3.0]), jnp.array([4, 4, 4]), jnp.arange(6.0).reshape(3, 2)
    step = jit_step(f)
    np.testing.assert_allclose(np.asarray(step(scales, x, counts)), [15.0, 30.0, 45.0])
    assert step.check_mode() == "collected" and "callback" not in step.lower(scales, x, counts).as_text()
    bad = scales.at[1].set(jnp.inf)  # only member 1 fails, at every entry: the first is [0, 0]
    words = r"batch x inf at \[0, 0\] is not finite \(in step 5\)"
    with pytest.raises(ValueError, match=words):
        step(bad, x.at[0, 0].set(1.0), counts)
    with pytest.raises(ValueError, match=words):
        f(bad, x.at[0, 0].set(1.0), counts)
    with pytest.raises(Exception, match=words):  # jax.jit: a host callback's JaxRuntimeError
        jax.block_until_ready(jax.jit(f)(bad, x.at[0, 0].set(1.0), counts))


def test_the_value_check_switch_is_an_argument(fit):
    """``jit_step(step, check_values=False)`` compiles a step without value checks (a bad batch
    gives a non-finite step, rejected by the step's guard), ``check_values=True`` checks, and an
    algorithm made by ``with_value_checks(alg, False)`` keeps its own setting under either."""
    from vijax.inference import with_value_checks

    alg, x, state = fit
    bad = x.at[3, 1].set(jnp.inf)
    unchecked = jit_step(alg.step, check_values=False)
    new, info = unchecked(jax.random.PRNGKey(1), state, bad)
    assert not bool(info.accepted) and int(new.num_rejected) == 1
    checked = jit_step(alg.step, check_values=True)
    with pytest.raises(ValueError, match=r"batch x inf at \[3, 1\] is not finite"):
        checked(jax.random.PRNGKey(1), state, bad)
    own = jit_step(with_value_checks(alg, False).step, check_values=True)
    new, info = own(jax.random.PRNGKey(1), state, bad)
    assert not bool(info.accepted) and int(new.num_rejected) == 1
    with pytest.raises(ValueError, match="^enabled must be"):
        with_value_checks(alg, "no")


# -- compiler options: the quick CPU options by default, XLA's settings with cpu_compile="xla"
_cpu_only = pytest.mark.skipif(jax.default_backend() != "cpu", reason="the quick settings are the CPU's")


@_cpu_only
def test_cpu_compile_quick_compiles_with_step_cpu_options_and_the_same_values(fit, monkeypatch):
    from vijax._compile import step_cpu_options

    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")  # no emitter flag
    alg, x, state = fit
    assert jit_step(alg.step, cpu_compile="xla").compiler_options() is None  # XLA's settings
    step = jit_step(alg.step)  # the quick options by default
    assert step.compiler_options() == step_cpu_options()
    a, b = state, state
    for t in range(3):
        key = jax.random.PRNGKey(t + 1)
        (a, ia), (b, ib) = jax.jit(alg.step)(key, a, x), step(key, b, x)
    rtol = 1e-12 if x.dtype == np.float64 else 1e-5  # another kernel emitter: the same values up to rounding
    np.testing.assert_allclose(np.asarray(ib.elbo), np.asarray(ia.elbo), rtol=rtol)
    chex.assert_trees_all_close(b, a, rtol=rtol, atol=rtol)
    with pytest.raises(ValueError, match=r"batch x inf at \[3, 1\] is not finite"):
        step(jax.random.PRNGKey(1), state, x.at[3, 1].set(jnp.inf))
    assert jit_step(alg.step, cpu_compile="quick", compiler_options={}).compiler_options() is None
    with pytest.raises(ValueError, match="cpu_compile"):
        jit_step(alg.step, cpu_compile="fast")
