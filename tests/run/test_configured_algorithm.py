"""``algorithm.name`` reaches every registered algorithm through ``configured_algorithm``: other
algorithms than an experiment's default run a few steps, unknown names and settings the chosen
algorithm does not take are ConfigErrors naming the key; ``eval_steps`` matches the runner."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.inference import VIAlgorithm
from vijax.models import LDA
from vijax.run import ConfigError, configured_algorithm, eval_steps, load_config, run, run_experiment

_RUN = {"num_steps": 4, "chunk_size": 2, "eval_every": 2, "progress": False}


def _gmm(tmp_path, **algorithm):
    return load_config(
        {
            "experiment": "gmm_simulation",
            "data": {"num_train": 60, "num_test": 40},
            "algorithm": dict({"num_restarts": 2}, **algorithm),
            "run": dict(_RUN, tol=None),
            "output": {"dir": str(tmp_path)},
        }
    )


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_gmm_runs_svi_on_the_full_data(tmp_path):
    result, metrics = run_experiment(_gmm(tmp_path, name="svi"))
    assert metrics["num_steps"] == 4 and int(result.state.count[0]) == 4
    assert np.all(np.isfinite(np.asarray(metrics["elbo"])))
    assert np.isfinite(metrics["summary"]["heldout_log_predictive"])


@pytest.mark.parametrize("name", ["ssvi_a", "map"])
@pytest.mark.slow
def test_lda_synthetic_runs_other_m_steps(tmp_path, name):
    cfg = load_config(
        {
            "experiment": "lda_synthetic",
            "model": {"num_topics": 3, "max_iters": 10},
            "data": {
                "num_docs": 60,
                "vocab_size": 20,
                "true_topics": 3,
                "doc_length_mean": 10.0,
                "max_test_docs": 10,
                "eval_batch": 10,
            },
            "algorithm": {"name": name, "batch_size": 10, "local": "cvb0"},
            "run": _RUN,
            "output": {"dir": str(tmp_path)},
        }
    )
    result, metrics = run_experiment(cfg)
    assert int(result.state.count) == 4 and [e["step"] for e in metrics["evals"]] == [2, 4]
    assert np.isfinite(metrics["summary"]["heldout_per_word"])


def test_unknown_name_lists_the_registered_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"algorithm\.name: unknown algorithm 'nope'; registered: \[.*'cavi'"):
        run_experiment(_gmm(tmp_path, name="nope"))


def test_a_setting_the_algorithm_does_not_take_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"algorithm\.ramp: algorithm 'cavi' does not take it"):
        run_experiment(_gmm(tmp_path, ramp=True))


@pytest.mark.parametrize("name, why", [("prox_svi", "ProxModel"), ("map", "mode")])
def test_a_model_the_algorithm_cannot_use_is_named(tmp_path, name, why):
    """DiagonalGMM is no ProxModel, and its NormalGamma globals have no mode for MAP-EM."""
    with pytest.raises(ConfigError, match=rf"algorithm\.name: '{name}' cannot run here: .*{why}"):
        run_experiment(_gmm(tmp_path, name=name, step_size=0.5))


def test_a_step_size_for_cavi_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"algorithm\.step_size: algorithm 'cavi' does not take it"):
        run_experiment(_gmm(tmp_path, step_size=0.5))


def test_settings_at_their_default_are_left_out_and_schedule_keys_checked():
    defaults = {"name": "svi", "local": "meanfield", "ramp": False, "num_samples": 10, "tau": 1.0}
    model = LDA(3, 20)
    alg = configured_algorithm(dict(defaults, name="cavi"), defaults, model, num_data=5, schedule_keys=("tau",))
    assert isinstance(alg, VIAlgorithm)  # ramp, num_samples at their defaults: not passed to CAVI
    with pytest.raises(ConfigError, match=r"algorithm\.num_samples"):
        configured_algorithm(dict(defaults, num_samples=3), defaults, model, num_data=5)
    with pytest.raises(ConfigError, match=r"algorithm\.tau"):
        configured_algorithm(dict(defaults, name="cavi", tau=2.0), defaults, model, num_data=5, schedule_keys=("tau",))
    assert isinstance(
        configured_algorithm(
            dict(defaults, ramp=True, tau=2.0), defaults, model, num_data=5, schedule=0.5, schedule_keys=("tau",)
        ),
        VIAlgorithm,
    )


@pytest.mark.parametrize("num_steps, chunk_size, eval_every", [(10, 3, 4), (9, 3, 3), (5, 2, None), (4, 4, 10)])
def test_eval_steps_are_the_runners(num_steps, chunk_size, eval_every):
    alg = VIAlgorithm(init=lambda key, batch=None: jnp.zeros(()), step=lambda k, x, b: (x + 1.0, {"elbo": x}))
    res = run(
        alg,
        jax.random.PRNGKey(0),
        batch_fn=lambda k, t: None,
        eval_fn=lambda x: {"x": x},
        num_steps=num_steps,
        chunk_size=chunk_size,
        eval_every=eval_every,
        progress=False,
    )
    rc = {"num_steps": num_steps, "chunk_size": chunk_size, "eval_every": eval_every}
    assert eval_steps(rc) == [e["step"] for e in res.evals]
