"""``vijax.run.lower_run`` (the chunk program a run compiles, lowered, not compiled) and
``vijax.run.build_experiment`` (a resolved config's experiment, as ``vijax run`` builds it)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.inference import VIAlgorithm
from vijax.run import ConfigError, Experiment, build_experiment, import_builtin_experiments, load_config, lower_run


class Info(NamedTuple):
    elbo: jax.Array


ALG = VIAlgorithm(
    init=lambda key, batch=None: jnp.zeros((3,)),
    step=lambda k, x, b: (x + 0.5 * (b.mean(0) - x), Info(-jnp.sum((x - b.mean(0)) ** 2))),
)
DATA = jnp.arange(50 * 3, dtype=jnp.float64).reshape(50, 3) / 7.0


def test_the_batch_functions_arrays_are_arguments_of_a_scan_not_constants():
    text = lower_run(ALG, jax.random.PRNGKey(0), batch_fn=lambda k, t: DATA, chunk_size=4).as_text()
    main = next(line for line in text.splitlines() if "func.func public @main" in line)
    assert "tensor<50x3xf64>" in main  # the captured data is an argument of the program
    assert "stablehlo.while" in text  # the scan of chunk_size steps is a loop, not unrolled
    assert lower_run(ALG, jax.random.PRNGKey(0), batch_fn=lambda k, t: DATA, chunk_size=40).as_text().count(
        "stablehlo.while"
    ) == text.count("stablehlo.while")


def test_an_init_with_host_code_is_run_and_gives_the_same_program():
    concrete = []

    def host_init(key):
        concrete.append(not isinstance(key, jax.core.Tracer))
        return jnp.zeros(3) + 0.0 * float(np.asarray(key)[0])  # np.asarray of a tracer: not traceable

    traced = lower_run(ALG, jax.random.PRNGKey(0), batch_fn=lambda k, t: DATA, chunk_size=4)
    run_init = lower_run(ALG, jax.random.PRNGKey(0), batch_fn=lambda k, t: DATA, init_state=host_init, chunk_size=4)
    assert concrete == [False, True]  # traced first, then run
    assert run_init.as_text() == traced.as_text()


def test_host_batches_give_the_first_chunks_stacked_shapes():
    calls = []

    def host_batches(t0, n):
        calls.append((t0, n))
        return np.ones((n, 5, 3))

    text = lower_run(ALG, jax.random.PRNGKey(0), host_batches=host_batches, chunk_size=6).as_text()
    assert calls == [(0, 6)]
    assert "tensor<6x5x3xf64>" in next(line for line in text.splitlines() if "func.func public @main" in line)


def test_exactly_one_batch_source():
    with pytest.raises(ValueError, match="exactly one of batch_fn and host_batches"):
        lower_run(ALG, jax.random.PRNGKey(0), chunk_size=2)
    with pytest.raises(ValueError, match="exactly one of batch_fn and host_batches"):
        lower_run(ALG, jax.random.PRNGKey(0), batch_fn=lambda k, t: DATA, host_batches=lambda t0, n: DATA)


def test_build_experiment_builds_the_registered_experiment_and_names_bad_keys():
    import_builtin_experiments()
    small = ["model.num_topics=3", "data.num_docs=20", "data.vocab_size=30", "data.true_topics=3"]
    exp = build_experiment(load_config({"experiment": "plsa"}, small))
    assert isinstance(exp, Experiment) and exp.batch_fn is not None and len(exp.baselines) == 2
    with pytest.raises(ConfigError, match="num_topics"):
        build_experiment(load_config({"experiment": "plsa"}, small + ["model.num_topics=0"]))
