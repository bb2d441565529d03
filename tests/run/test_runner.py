"""The runner on a toy algorithm: gradient ascent on a concave quadratic "ELBO"
L(x) = offset - curvature/2 * ||x - mu||^2, whose optimum (x = mu, L = offset) is known.
The noisy variant perturbs the gradient with the step key and the data with the batch key."""

from __future__ import annotations

import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.inference.base import VIAlgorithm, safe_increment
from vijax.run import RunResult, run
from vijax.run import _checkpoint

MU = jnp.array([1.0, -2.0, 0.5])
SEED = 0


class ToyState(NamedTuple):
    x: jax.Array  # [D]
    count: jax.Array  # int32 scalar


class ToyInfo(NamedTuple):
    elbo: jax.Array
    grad_norm: jax.Array
    step_noise: jax.Array  # a normal drawn from the step key
    batch_noise: jax.Array  # a normal drawn from the batch key


def toy_algorithm(lr=0.1, noise=0.0, curvature=1.0, offset=-10.0, dim=3, counter=None):
    """A ``VIAlgorithm`` maximizing the quadratic; ``counter["traces"]`` counts step traces."""

    def init(key, batch=None):
        return ToyState(jax.random.normal(key, (dim,)), jnp.zeros((), jnp.int32))

    def step(key, state, batch):
        if counter is not None:
            counter["traces"] += 1
        mu, batch_noise = batch
        diff = state.x - mu
        elbo = offset - 0.5 * curvature * jnp.sum(diff**2)
        eps = jax.random.normal(key, (dim,))
        grad = -curvature * diff + noise * eps
        new = ToyState(state.x + lr * grad, safe_increment(state.count))
        return new, ToyInfo(elbo, jnp.linalg.norm(grad), eps[0], batch_noise)

    return VIAlgorithm(init, step)


def toy_batch_fn(mu=MU, noise=0.0):
    def batch_fn(key, t):
        z = jax.random.normal(key, ())
        return mu + noise * z, z

    return batch_fn


def assert_results_identical(a: RunResult, b: RunResult):
    for x, y in zip(jax.tree.leaves(a.state), jax.tree.leaves(b.state)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert sorted(a.trace) == sorted(b.trace)
    for name in a.trace:
        np.testing.assert_array_equal(a.trace[name], b.trace[name], err_msg=name)
    assert a.num_steps == b.num_steps and a.converged == b.converged


def test_reaches_optimum_and_trace():
    # 300 steps of lr 0.1 on curvature 1: error shrinks by 0.9**300 ~ 2e-14.
    res = run(
        toy_algorithm(), jax.random.PRNGKey(SEED), batch_fn=toy_batch_fn(), num_steps=300, chunk_size=50, progress=False
    )
    np.testing.assert_allclose(res.state.x, MU, rtol=0, atol=1e-10)
    assert int(res.state.count) == 300 and res.num_steps == 300 and not res.converged
    assert set(res.trace) == {"elbo", "grad_norm", "step_noise", "batch_noise", "step"}
    for v in res.trace.values():
        assert v.shape == (300,)
    np.testing.assert_array_equal(res.trace["step"], np.arange(1, 301))
    assert np.all(np.diff(res.trace["elbo"]) >= 0)
    np.testing.assert_allclose(res.trace["elbo"][-1], -10.0, rtol=1e-12)
    assert res.evals == [] and res.wall_time > 0


def test_zero_steps_return_the_start_state_and_an_empty_trace():
    """``num_steps=0`` (allowed in code, refused in a config) runs nothing: the start state, an
    empty trace, no evaluation, health of zero steps."""
    start = ToyState(jnp.arange(3.0), jnp.zeros((), jnp.int32))
    res = run(
        toy_algorithm(),
        jax.random.PRNGKey(SEED),
        batch_fn=toy_batch_fn(),
        num_steps=0,
        progress=False,
        init_state=start,
    )
    np.testing.assert_array_equal(np.asarray(res.state.x), np.arange(3.0))
    assert int(res.state.count) == 0 and res.num_steps == 0 and res.evals == []
    assert {k: v.shape for k, v in res.trace.items()} == {"step": (0,)}


def test_compiles_once_with_partial_chunk():
    counter = {"traces": 0}
    res = run(
        toy_algorithm(counter=counter),
        jax.random.PRNGKey(SEED),
        batch_fn=toy_batch_fn(),
        num_steps=130,
        chunk_size=50,
        progress=False,
    )
    assert counter["traces"] == 1
    assert res.trace["elbo"].shape == (130,) and int(res.state.count) == 130


def test_programs_keep_the_chunk_for_a_continued_run_and_rebuild_it_for_another_step():
    counter = {"traces": 0}
    alg, batches, programs = toy_algorithm(counter=counter), toy_batch_fn(), {}
    settings = dict(batch_fn=batches, num_steps=50, chunk_size=50, progress=False, programs=programs)
    first = run(alg, jax.random.PRNGKey(SEED), **settings)
    again = run(alg, jax.random.PRNGKey(1), init_state=first.state, **settings)
    assert counter["traces"] == 1 and int(again.state.count) == 100  # continued, traced once
    run(alg, jax.random.PRNGKey(1), **{**settings, "batch_fn": toy_batch_fn(mu=MU + 1.0)})  # other batches
    run(alg, jax.random.PRNGKey(1), **{**settings, "programs": None})  # nothing kept
    assert counter["traces"] == 3
    steps = toy_algorithm(lr=0.5, counter=counter)  # another step: its own chunk, not the kept one
    np.testing.assert_allclose(run(steps, jax.random.PRNGKey(1), **settings).state.x, MU, atol=1e-6)
    assert counter["traces"] == 4
    typed = run(alg, jax.random.key(1), init_state=first.state, **settings)  # a typed key: a chunk of its own
    assert counter["traces"] == 5 and int(typed.state.count) == 100


def test_keys_follow_documented_layout_and_differ():
    key = jax.random.PRNGKey(SEED)
    alg = toy_algorithm(noise=0.3)
    res = run(alg, key, batch_fn=toy_batch_fn(noise=0.1), num_steps=45, chunk_size=20, progress=False)
    init_key, step_base = jax.random.split(key)
    expected_step, expected_batch = [], []
    state = alg.init(init_key)
    for t in range(45):
        kb, ks = jax.random.split(jax.random.fold_in(step_base, t))
        expected_step.append(float(jax.random.normal(ks, (3,))[0]))
        expected_batch.append(float(jax.random.normal(kb, ())))
        state, _ = alg.step(ks, state, toy_batch_fn(noise=0.1)(kb, t))
    np.testing.assert_allclose(res.trace["step_noise"], expected_step, rtol=1e-12)
    np.testing.assert_allclose(res.trace["batch_noise"], expected_batch, rtol=1e-12)
    np.testing.assert_allclose(res.state.x, state.x, rtol=1e-10)
    noises = np.concatenate([res.trace["step_noise"], res.trace["batch_noise"]])
    assert len(np.unique(noises)) == len(noises)  # no key used twice


def test_tolerance_stops_and_converged():
    chunk, tol, patience = 20, 1e-6, 3
    res = run(
        toy_algorithm(lr=0.05),
        jax.random.PRNGKey(SEED),
        batch_fn=toy_batch_fn(),
        num_steps=100_000,
        chunk_size=chunk,
        tol=tol,
        patience=patience,
        progress=False,
    )
    assert res.converged
    assert res.num_steps < 100_000 and res.num_steps % chunk == 0
    means = res.trace["elbo"].reshape(-1, chunk).mean(axis=1)
    rel = np.abs(np.diff(means)) / np.abs(means[1:])
    assert np.all(rel[-patience:] < tol)
    assert not np.all(rel[-patience - 1 : -1] < tol)  # it stopped at the first such boundary
    np.testing.assert_allclose(res.state.x, MU, atol=1e-2)


def test_min_steps_holds_the_rule_back():
    """The run that stops at the first boundary where the rule holds, given ``min_steps`` past it, stops at the first
    boundary at or after ``min_steps`` (the rule still holding there)."""
    settings = dict(batch_fn=toy_batch_fn(), num_steps=100_000, chunk_size=20, tol=1e-6, patience=3, progress=False)
    first = run(toy_algorithm(lr=0.05), jax.random.PRNGKey(SEED), **settings)
    later = first.num_steps + 50
    held = run(toy_algorithm(lr=0.05), jax.random.PRNGKey(SEED), min_steps=later, **settings)
    assert held.converged and held.num_steps == -(-later // 20) * 20
    np.testing.assert_array_equal(held.trace["elbo"][: first.num_steps], first.trace["elbo"])
    with pytest.raises(ValueError, match="min_steps: must be >= 0"):
        run(toy_algorithm(lr=0.05), jax.random.PRNGKey(SEED), min_steps=-1, **settings)


def test_noisy_variant_converges_in_chunk_mean():
    # Constant step 0.05 with gradient noise 0.2: the stationary spread of x is about
    # 0.2 * sqrt(0.05 / 2) ~ 0.03 per coordinate; 0.2 is over 6 of those.
    res = run(
        toy_algorithm(lr=0.05, noise=0.2),
        jax.random.PRNGKey(SEED),
        batch_fn=toy_batch_fn(noise=0.05),
        num_steps=20_000,
        chunk_size=100,
        tol=1e-3,
        patience=3,
        progress=False,
    )
    assert res.converged and res.num_steps < 20_000
    np.testing.assert_allclose(res.state.x, MU, atol=0.2)


def test_eval_cadence_rounded_to_chunks():
    calls = []

    def eval_fn(state):
        calls.append(int(state.count))
        return {"dist": jnp.linalg.norm(state.x - MU), "count": state.count}

    res = run(
        toy_algorithm(),
        jax.random.PRNGKey(SEED),
        batch_fn=toy_batch_fn(),
        num_steps=200,
        chunk_size=20,
        eval_every=50,
        eval_fn=eval_fn,
        progress=False,
    )
    assert [e["step"] for e in res.evals] == [60, 100, 160, 200] == calls
    assert all(isinstance(e["dist"], float) and e["wall_time"] >= 0 for e in res.evals)
    assert res.evals[-1]["count"] == 200
    # Without eval_every: one evaluation at the end.
    res = run(
        toy_algorithm(),
        jax.random.PRNGKey(SEED),
        batch_fn=toy_batch_fn(),
        num_steps=70,
        chunk_size=20,
        eval_fn=eval_fn,
        progress=False,
    )
    assert [e["step"] for e in res.evals] == [70]


@pytest.mark.parametrize("tol", [None, 1e-4])
def test_resume_is_bit_identical(tmp_path, tol):
    alg = toy_algorithm(lr=0.05, noise=0.1)
    kw = dict(
        batch_fn=toy_batch_fn(noise=0.05), chunk_size=40, tol=tol, patience=2, checkpoint_every=60, progress=False
    )
    key = jax.random.PRNGKey(3)
    full = run(alg, key, num_steps=250, checkpoint_dir=str(tmp_path / "full"), **kw)
    # With tol, the uninterrupted run stops at step 200, after the interruption point 130.
    assert (full.converged, full.num_steps) == ((False, 250) if tol is None else (True, 200))
    ckpt = str(tmp_path / "ck")
    first = run(alg, key, num_steps=130, checkpoint_dir=ckpt, **kw)  # stops mid-chunk
    assert first.num_steps == 130
    assert _checkpoint.list_checkpoints(ckpt)[-1][0] == 130
    resumed = run(alg, key, num_steps=250, checkpoint_dir=ckpt, resume=True, **kw)
    assert_results_identical(full, resumed)
    # Resuming a finished run returns it as is.
    again = run(alg, key, num_steps=250, checkpoint_dir=ckpt, resume=True, **kw)
    assert_results_identical(full, again)


def test_keyboard_interrupt_checkpoints_then_resume(tmp_path):
    alg = toy_algorithm(lr=0.05, noise=0.1)
    kw = dict(batch_fn=toy_batch_fn(noise=0.05), chunk_size=25, progress=False)
    key = jax.random.PRNGKey(4)
    full = run(alg, key, num_steps=200, **kw)

    def interrupting_eval(state):
        if int(state.count) == 75:
            raise KeyboardInterrupt
        return {"count": state.count}

    ckpt = str(tmp_path / "ck")
    with pytest.raises(KeyboardInterrupt):
        run(alg, key, num_steps=200, checkpoint_dir=ckpt, eval_fn=interrupting_eval, eval_every=25, **kw)
    assert _checkpoint.list_checkpoints(ckpt)[-1][0] == 75
    resumed = run(alg, key, num_steps=200, checkpoint_dir=ckpt, resume=True, **kw)
    assert_results_identical(full, resumed)
    assert [e["step"] for e in resumed.evals] == [25, 50]  # the evaluations done before


def test_bad_alg_key_eval_fn_and_progress_fields_are_named_and_the_steps_kept(tmp_path):
    """Each met an AttributeError, a TypeError or nothing at all: a non-algorithm, a None key, an
    eval_fn returning a number, a misspelt progress field (skipped without a word). A failing
    evaluation or a misspelt field comes after steps were taken: they are checkpointed first."""
    kw = dict(batch_fn=toy_batch_fn(), num_steps=40, chunk_size=10, progress=False)
    with pytest.raises(ValueError, match=r"^alg must be an algorithm \(a VIAlgorithm with init and step.*got 3"):
        run(3, jax.random.PRNGKey(0), **kw)
    with pytest.raises(ValueError, match=r"^key must be a PRNG key"):
        run(toy_algorithm(), None, **kw)
    ckpt = str(tmp_path / "eval")
    with pytest.raises(ValueError, match=r"^eval_fn must return a dict of metrics .*, got float"):
        run(toy_algorithm(), jax.random.PRNGKey(0), eval_fn=lambda s: 1.0, eval_every=20, checkpoint_dir=ckpt, **kw)
    assert _checkpoint.list_checkpoints(ckpt)[-1][0] == 20  # the first evaluation's steps were kept
    ckpt = str(tmp_path / "fields")
    with pytest.raises(ValueError, match=r"^progress_fields: \['grad_nrom'\] are not fields of this algorithm's trace"):
        run(toy_algorithm(), jax.random.PRNGKey(0), progress_fields=["elbo", "grad_nrom"], checkpoint_dir=ckpt, **kw)
    assert _checkpoint.list_checkpoints(ckpt)[-1][0] == 10
    with pytest.raises(ValueError, match=r"^progress_fields: \['grad_nrom'\]"):  # a resumed run checks them too
        run(
            toy_algorithm(),
            jax.random.PRNGKey(0),
            progress_fields=["grad_nrom"],
            checkpoint_dir=ckpt,
            resume=True,
            **kw,
        )
    assert _checkpoint.list_checkpoints(ckpt)[-1][0] == 20
    # one field given as a string is that field, not its letters
    res = run(toy_algorithm(), jax.random.PRNGKey(0), progress_fields="grad_norm", **kw)
    assert res.num_steps == 40


def test_checkpoint_files_atomic_and_pruned(tmp_path):
    ckpt = str(tmp_path / "ck")
    run(
        toy_algorithm(),
        jax.random.PRNGKey(SEED),
        batch_fn=toy_batch_fn(),
        num_steps=100,
        chunk_size=10,
        checkpoint_dir=ckpt,
        checkpoint_every=20,
        progress=False,
    )
    # the run's lock file stays, emptied when the run released it (vijax.run._lock)
    assert sorted(os.listdir(ckpt)) == [".vijax.lock", "ckpt_0000000080.npz", "ckpt_0000000100.npz"]
    assert os.path.getsize(os.path.join(ckpt, ".vijax.lock")) == 0
    # A new (not resumed) run in the same folder replaces the old history, so that a later
    # resume cannot pick up the old run's step-100 checkpoint.
    run(
        toy_algorithm(),
        jax.random.PRNGKey(SEED),
        batch_fn=toy_batch_fn(),
        num_steps=30,
        chunk_size=10,
        checkpoint_dir=ckpt,
        progress=False,
    )
    assert sorted(os.listdir(ckpt)) == [".vijax.lock", "ckpt_0000000030.npz"]


def test_resume_without_checkpoint_starts_fresh(tmp_path):
    kw = dict(batch_fn=toy_batch_fn(), num_steps=40, chunk_size=20, progress=False)
    a = run(toy_algorithm(), jax.random.PRNGKey(SEED), **kw)
    b = run(toy_algorithm(), jax.random.PRNGKey(SEED), checkpoint_dir=str(tmp_path), resume=True, **kw)
    assert_results_identical(a, b)


def test_checkpoint_structure_mismatch_errors(tmp_path):
    ckpt = str(tmp_path / "ck")
    key = jax.random.PRNGKey(SEED)
    run(
        toy_algorithm(dim=3),
        key,
        batch_fn=toy_batch_fn(),
        num_steps=20,
        chunk_size=10,
        checkpoint_dir=ckpt,
        progress=False,
    )
    with pytest.raises(ValueError, match=r"does not match.*\n.*\.x.*\(4,\).*\(3,\)"):
        run(
            toy_algorithm(dim=4),
            key,
            batch_fn=toy_batch_fn(jnp.zeros(4)),
            num_steps=40,
            chunk_size=10,
            checkpoint_dir=ckpt,
            resume=True,
            progress=False,
        )
    other_tree = {"x": jnp.zeros(3), "count": jnp.zeros((), jnp.int32), "extra": jnp.zeros(())}
    with pytest.raises(ValueError, match="does not match"):
        _checkpoint.load_checkpoint(_checkpoint.list_checkpoints(ckpt)[-1][1], other_tree)
    with pytest.raises(ValueError, match="another key"):
        run(
            toy_algorithm(dim=3),
            jax.random.PRNGKey(SEED + 1),
            batch_fn=toy_batch_fn(),
            num_steps=40,
            chunk_size=10,
            checkpoint_dir=ckpt,
            resume=True,
            progress=False,
        )


def test_init_state_pytree_or_callable():
    key = jax.random.PRNGKey(SEED)
    start = ToyState(jnp.zeros(3), jnp.zeros((), jnp.int32))
    kw = dict(batch_fn=toy_batch_fn(), num_steps=30, chunk_size=10, progress=False)
    a = run(toy_algorithm(), key, init_state=start, **kw)
    b = run(toy_algorithm(), key, init_state=lambda k: start, **kw)
    assert_results_identical(a, b)
    np.testing.assert_allclose(a.trace["elbo"][0], -10.0 - 0.5 * float(jnp.sum(MU**2)))


def test_info_must_have_elbo_and_args_are_checked():
    def step(key, state, batch):
        return state, {"loss": jnp.sum(state)}

    alg = VIAlgorithm(lambda key, batch=None: jnp.zeros(2), step)
    with pytest.raises(ValueError, match="elbo"):
        run(alg, jax.random.PRNGKey(0), batch_fn=lambda k, t: None, num_steps=5, progress=False)
    for bad in [
        dict(chunk_size=0),
        dict(num_steps=-1),
        dict(tol=0.0),
        dict(patience=0),
        dict(checkpoint_every=10),
        dict(resume=True),
        dict(chunksize=10),
    ]:
        kw = dict(batch_fn=toy_batch_fn(), num_steps=10, progress=False) | bad
        with pytest.raises(ValueError):
            run(toy_algorithm(), jax.random.PRNGKey(0), **kw)


def test_dict_info_and_typed_key():
    def step(key, state, batch):
        return state + 1.0, {"elbo": -jnp.sum(state), "parts": {"a": state[0], "b": state[1]}}

    alg = VIAlgorithm(lambda key, batch=None: jnp.zeros(2), step)
    res = run(alg, jax.random.key(0), batch_fn=lambda k, t: None, num_steps=7, chunk_size=3, progress=False)
    assert set(res.trace) == {"elbo", "parts.a", "parts.b", "step"}
    np.testing.assert_array_equal(res.trace["parts.a"], np.arange(7.0))


def _host_source(calls=None):
    """Host batches as a pure function of the update index: batch t has noise sin(t)."""

    def host_batches(t0, n):
        if calls is not None:
            calls.append((t0, n))
        ts = np.arange(t0, t0 + n)
        z = np.sin(ts).astype(np.float32)
        return np.broadcast_to(np.asarray(MU, np.float32), (n, 3)) + 0.1 * z[:, None], z

    return host_batches


def test_host_batches_feed_the_scan_and_resume_identically(tmp_path):
    calls = []
    alg = toy_algorithm(noise=0.1)
    full = run(
        alg, jax.random.PRNGKey(SEED), host_batches=_host_source(calls), num_steps=70, chunk_size=20, progress=False
    )
    np.testing.assert_allclose(full.trace["batch_noise"], np.sin(np.arange(70)), rtol=1e-6)
    assert calls[0] == (0, 20) and all(n == 20 for _, n in calls)
    ck = str(tmp_path / "ck")
    run(
        alg,
        jax.random.PRNGKey(SEED),
        host_batches=_host_source(),
        num_steps=35,
        chunk_size=20,
        checkpoint_dir=ck,
        checkpoint_every=20,
        progress=False,
    )
    assert [s for s, _ in _checkpoint.list_checkpoints(ck)] == [20, 35]
    asked = []
    resumed = run(
        alg,
        jax.random.PRNGKey(SEED),
        host_batches=_host_source(asked),
        num_steps=70,
        chunk_size=20,
        checkpoint_dir=ck,
        resume=True,
        progress=False,
    )
    assert_results_identical(full, resumed)
    # from the newest checkpoint (step 35): a replay from the older one (step 20) ends bit-identical
    # too, but asks for the batches of updates 20 .. 34 again
    assert asked[0] == (35, 20) and min(t0 for t0, _ in asked) == 35, asked
    with pytest.raises(ValueError, match="exactly one"):
        run(
            alg,
            jax.random.PRNGKey(SEED),
            batch_fn=toy_batch_fn(),
            host_batches=_host_source(),
            num_steps=5,
            progress=False,
        )


def test_run_config_is_the_one_home_of_the_run_settings():
    """run() and a config's run section share RunConfig's defaults and checks."""
    from vijax.run import RunConfig
    from vijax.run._config import _check_run

    assert RunConfig().as_dict() == _check_run({}, {})  # the YAML schema's defaults are RunConfig's
    with pytest.raises(ValueError, match="chunk_size: must be >= 1"):
        RunConfig(chunk_size=0)
    with pytest.raises(ValueError, match="run.tol"):
        RunConfig.from_dict({"tol": -1.0})
    with pytest.raises(ValueError, match="unknown config key 'run.chunksize'"):
        RunConfig.from_dict({"chunksize": 3})
    assert RunConfig(tol=1).tol == 1.0  # an int where a float is expected
    a = run(
        toy_algorithm(),
        jax.random.PRNGKey(SEED),
        batch_fn=toy_batch_fn(),
        config=RunConfig(num_steps=30, chunk_size=10, progress=False),
    )
    b = run(
        toy_algorithm(), jax.random.PRNGKey(SEED), batch_fn=toy_batch_fn(), num_steps=30, chunk_size=10, progress=False
    )
    assert_results_identical(a, b)
    with pytest.raises(ValueError, match="x64"):  # the suite runs in float64: ask for what it lacks
        jax.config.update("jax_enable_x64", False)
        try:
            run(
                toy_algorithm(),
                jax.random.PRNGKey(SEED),
                batch_fn=toy_batch_fn(),
                num_steps=5,
                x64=True,
                progress=False,
            )
        finally:
            jax.config.update("jax_enable_x64", True)


def test_runner_reports_the_psis_khat_against_0_7():
    """An evaluation field "khat" (``vijax.metrics.psis`` of a fit; its values are tested in
    tests/metrics/test_psis.py) is reported: above 0.7 the runner warns, at or below it passes."""
    from vijax.run._health import psis_note

    alg = VIAlgorithm(init=lambda key, batch=None: jnp.zeros(()), step=lambda k, s, b: (s + b, {"elbo": -s}))
    for khat, warns in ((0.9, True), (0.4, False)):
        kw = dict(
            batch_fn=lambda k, t: jnp.ones(()),
            num_steps=1,
            chunk_size=1,
            eval_fn=lambda s: {"khat": khat},
            progress=False,
        )
        if warns:
            with pytest.warns(UserWarning, match="k-hat 0.9 is above 0.7"):
                run(alg, jax.random.PRNGKey(0), **kw)
        else:
            assert "passes" in psis_note(run(alg, jax.random.PRNGKey(0), **kw).evals)
    assert psis_note([{"step": 1}]) is None


def test_arrays_the_batch_function_captures_are_arguments_of_the_compiled_chunk():
    """A batch function returning captured data (a batch algorithm's ``lambda key, t: y``) gives the
    same run as one computing it, and the data is an argument of the compiled chunk, not a constant
    embedded in it (XLA folds what depends on a constant at compile time: the default experiment's
    chunk compiled 1.6x slower): the lowered chunk does not grow with the captured array."""
    from vijax.run._runner import make_chunk_fn

    def sized(n):
        big = jnp.linspace(0.0, 1.0, n)  # captured; the batch's mean term is mu + 0 * big.sum()
        return lambda key, t: (MU + 0.0 * jnp.sum(big), jax.random.normal(key, ()))

    key = jax.random.PRNGKey(SEED)
    alg = toy_algorithm(noise=0.3)
    a = run(alg, key, batch_fn=sized(100_000), num_steps=7, chunk_size=4, progress=False)
    b = run(alg, key, batch_fn=toy_batch_fn(), num_steps=7, chunk_size=4, progress=False)
    np.testing.assert_allclose(np.asarray(a.state.x), np.asarray(b.state.x), rtol=1e-12)
    np.testing.assert_array_equal(a.trace["batch_noise"], b.trace["batch_noise"])

    state = alg.init(key)
    sizes = []
    for n in (10, 100_000):
        chunk = make_chunk_fn(alg.step, sized(n), 4, key)
        assert (n,) in [c.shape for c in chunk.consts]  # big (and MU) are arguments
        sizes.append(len(chunk.lower(state, key, np.int32(0), np.int32(4), None).as_text()))
    assert sizes[1] < sizes[0] + 2_000, sizes  # 100,000 float32 constants would be > 400 kB of text


@pytest.mark.slow
def test_a_checked_chunk_collects_its_steps_checks_and_raises_the_first_failing_step():
    """The chunk's steps' value checks come back as outputs of its scan (no checkify, no host
    callback): a bad batch at step 3 raises naming step 3; a bad batch of a step past the run's
    end (the last chunk's unused rows) is not applied, nor checked."""
    from vijax.inference import cavi
    from vijax.models import DiagonalGMM
    from vijax.run._runner import make_chunk_fn

    x = jnp.asarray(np.random.default_rng(0).normal(size=(20, 2)))
    alg = cavi(DiagonalGMM.from_data(x, num_components=2))
    key = jax.random.PRNGKey(0)
    chunk = make_chunk_fn(alg.step, lambda k, t: x, 2, key, checked=True)
    state = alg.init(key, x)
    lowered = chunk.lower(state, key, np.int32(0), np.int32(2), None)
    assert "callback" not in lowered.as_text() and chunk.collect
    # per step, x's (20, 2) bad entries and nothing else: no reduction across the batch's rows
    assert [tuple(a.shape) for a in jax.tree.leaves(lowered.out_info[1][1])] == [(2, 20, 2)]
    assert chunk.located is None  # the located chunk is compiled at a first failure only

    def bad_from(t_bad):
        return lambda k, t: jnp.where(t >= t_bad, x.at[3, 1].set(jnp.nan), x)

    with pytest.raises(ValueError, match=r"batch x nan at \[3, 1\] is not finite \(in step 3\)"):
        run(alg, key, batch_fn=bad_from(2), num_steps=4, chunk_size=2, progress=False)
    failing = make_chunk_fn(alg.step, bad_from(1), 2, key, checked=True)
    with pytest.raises(ValueError, match=r"batch x nan at \[3, 1\] is not finite \(in step 2\)"):
        failing(state, key, np.int32(0), np.int32(2), None)
    assert failing.located is not None
    result = run(alg, key, batch_fn=bad_from(3), num_steps=3, chunk_size=2, progress=False)
    assert result.num_steps == 3


@pytest.mark.slow
def test_restarts_of_a_step_with_data_dependent_loops_run():
    """Restarts in lock step (vmap) of LDA's mean-field SVI step, as in the lda_ssvi experiment: its
    E-step's while loops become batched, which checkify cannot transform ("checkify-of-vmap-of-while"),
    and its checks run under the vmap; ``restarts`` enforces them outside the vmap
    (``vmap_with_checks``), so the chunk collects them: no host callback, and a bad batch still
    raises the step's ValueError."""
    from vijax.data import BowBatch
    from vijax.inference import restarts, svi
    from vijax.models import LDA
    from vijax.run._runner import make_chunk_fn

    alg = restarts(svi(LDA(3, 20, max_iters=10), num_data=40), 2)
    ids = jnp.arange(4 * 6, dtype=jnp.int32).reshape(4, 6) % 20
    batch = BowBatch(ids, jnp.ones((4, 6), jnp.float32))
    result = run(alg, jax.random.PRNGKey(0), batch_fn=lambda k, t: batch, num_steps=4, chunk_size=2, progress=False)
    assert result.trace["elbo"].shape == (4, 2) and np.all(np.isfinite(result.trace["elbo"]))
    chunk = make_chunk_fn(alg.step, lambda k, t: batch, 2, jax.random.PRNGKey(1), checked=True)
    text = chunk.lower(alg.init(jax.random.PRNGKey(0)), jax.random.PRNGKey(1), np.int32(0), np.int32(2), None).as_text()
    assert chunk.collect and "callback" not in text
    bad = BowBatch(ids.at[1, 2].set(25), batch.counts)
    with pytest.raises(ValueError, match="out of range"):
        run(alg, jax.random.PRNGKey(0), batch_fn=lambda k, t: bad, num_steps=2, chunk_size=2, progress=False)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="jit_step's own options are the CPU's")
def test_a_chunk_is_compiled_with_jit_steps_quick_options(monkeypatch):
    """In a process whose XLA_FLAGS leave the emitter open, a run's chunk is compiled with the options a
    user's ``jit_step`` gets (the classic emitter), whether jit_step compiles it (a step's checks below its
    own level: a plain vmap of a checked step) or jax.jit (the checks collected at the chunk's level)."""
    from vijax._compile import step_compile_options

    from vijax.inference import cavi
    from vijax.models import DiagonalGMM
    from vijax.run._runner import make_chunk_fn

    monkeypatch.setenv("XLA_FLAGS", "")  # jit_step alone would take its quick options here
    x = jnp.asarray(np.random.default_rng(0).normal(size=(20, 2)))
    alg = cavi(DiagonalGMM.from_data(x, num_components=2))
    states = jax.tree.map(lambda a: jnp.stack([a, a]), alg.init(jax.random.PRNGKey(0), x))

    def step(key, st, batch):  # the checks run under the vmap: not at the chunk's level
        return jax.vmap(lambda s: alg.step(key, s, batch))(st)

    chunk = make_chunk_fn(step, lambda k, t: x, 2, jax.random.PRNGKey(1), checked=True)
    chunk.lower(states, jax.random.PRNGKey(1), np.int32(0), np.int32(2), None)
    assert not chunk.collect and chunk.fn.check_mode() in ("checkify", "plain")
    assert chunk.fn.compiler_options() == step_compile_options() is not None
    jitted, jit = [], jax.jit
    monkeypatch.setattr(jax, "jit", lambda fn, **kw: jitted.append(kw) or jit(fn, **kw))
    collected = make_chunk_fn(alg.step, lambda k, t: x, 2, jax.random.PRNGKey(1), checked=True)
    collected.lower(alg.init(jax.random.PRNGKey(0), x), jax.random.PRNGKey(1), np.int32(0), np.int32(2), None)
    assert collected.collect and jitted and jitted[0].get("compiler_options") == step_compile_options()
