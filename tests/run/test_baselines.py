"""Experiment baselines: run by ``run_experiment`` after the experiment's own run, each with its own
checkpoints, resumed with ``--resume`` exactly as an uninterrupted run, handed to ``report``."""

import os
import shutil

import jax
import numpy as np
import pytest

from tests.run.test_runner import assert_results_identical, toy_algorithm, toy_batch_fn
from vijax.run import Baseline, Experiment, load_config, register_experiment, run, run_experiment

NAME = "toy_with_baselines"
SEEN = {}


@register_experiment(
    NAME,
    {"model": {}, "data": {}, "algorithm": {"names": ["slow", "noisy"]}},
    description="toy quadratic with two baselines",
)
def _build(sections, seed):
    main = toy_algorithm()
    others = {"slow": toy_algorithm(lr=0.02), "noisy": toy_algorithm(noise=0.3)}
    baselines = tuple(
        Baseline(n, others[n], batch_fn=toy_batch_fn(), settings={"chunk_size": 5} if n == "slow" else {})
        for n in sections["algorithm"]["names"]
    )

    def report(result, out_dir, results):
        SEEN.update(results)
        return {name: float(r.trace["elbo"][-1]) for name, r in results.items()}

    return Experiment(main, main.init, toy_batch_fn(), report=report, baselines=baselines)


def _config(tmp_path, num_steps, names=("slow", "noisy")):
    return load_config(
        {
            "experiment": NAME,
            "seed": 3,
            "algorithm": {"names": list(names)},
            "run": {"num_steps": num_steps, "chunk_size": 10, "checkpoint_every": 10, "progress": False},
            "output": {"dir": str(tmp_path)},
        }
    )


@pytest.mark.slow
def test_baselines_run_checkpointed_and_resume_identically(tmp_path):
    _, metrics = run_experiment(_config(tmp_path / "full", 40))
    full = dict(SEEN)
    assert set(metrics["summary"]) == {"slow", "noisy"}
    for name in ("slow", "noisy"):
        assert max(os.listdir(tmp_path / "full" / "checkpoints" / name)) == "ckpt_0000000040.npz"
        # the baseline is the run it describes: its own algorithm, the experiment's key, its settings
        alone = run(
            toy_algorithm(lr=0.02) if name == "slow" else toy_algorithm(noise=0.3),
            jax.random.PRNGKey(3),
            batch_fn=toy_batch_fn(),
            num_steps=40,
            chunk_size=5 if name == "slow" else 10,
            progress=False,
        )
        assert_results_identical(full[name], alone)
    run_experiment(_config(tmp_path / "resumed", 20))  # a run stopped half way...
    ck = tmp_path / "resumed" / "checkpoints"
    # plant slow's step-20 state as noisy's checkpoint: if the resume reads it, noisy must change
    shutil.copy(ck / "slow" / "ckpt_0000000020.npz", ck / "noisy" / "ckpt_0000000020.npz")
    run_experiment(_config(tmp_path / "resumed", 40), resume=True, allow_changes=True)  # ...and continued
    assert_results_identical(SEEN["slow"], full["slow"])
    assert not np.array_equal(SEEN["noisy"].state.x, full["noisy"].state.x)


def test_baseline_names_and_settings_are_checked(tmp_path):
    with pytest.raises(ValueError, match="unique"):
        run_experiment(_config(tmp_path, 10, names=("slow", "slow")))
    bad = Experiment(
        toy_algorithm(),
        toy_algorithm().init,
        toy_batch_fn(),
        baselines=(Baseline("b", toy_algorithm(), batch_fn=toy_batch_fn(), settings={"chunks": 3}),),
    )
    register_experiment(  # described: the registry's every entry has a description (test_config.py)
        "toy_bad_baseline", {"model": {}, "data": {}, "algorithm": {}}, description="toy with a bad baseline setting"
    )(lambda s, seed: bad)
    with pytest.raises(ValueError, match="unknown run setting"):
        run_experiment(
            load_config(
                {
                    "experiment": "toy_bad_baseline",
                    "run": {"num_steps": 5, "progress": False},
                    "output": {"dir": str(tmp_path / "bad")},
                }
            )
        )
