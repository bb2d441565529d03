"""The HMM experiment end to end through the config machinery, at a small size."""

import pathlib

import numpy as np
import pytest

from vijax.run import ConfigError, load_config, run_experiment

CONFIG = pathlib.Path(__file__).resolve().parents[2] / "configs" / "hmm_categorical.yaml"


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_baum_welch_config_approaches_the_true_parameters(tmp_path):
    bad = load_config(str(CONFIG), overrides=[f"output.dir={tmp_path}", "algorithm.batch_size=10"])
    with pytest.raises(ConfigError, match="algorithm.batch_size"):  # em takes the whole data set
        run_experiment(bad)
    cfg = load_config(
        str(CONFIG),
        overrides=[
            f"output.dir={tmp_path}",
            "run.progress=false",
            "run.num_steps=30",
            "data.num_train=150",
            "data.num_test=60",
            "data.length=40",
            "data.min_length=15",
        ],
    )
    _, metrics = run_experiment(cfg)
    s = metrics["summary"]
    elbo = np.asarray(metrics["elbo"])
    assert np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[1:]))  # EM: the log-likelihood never decreases
    # within 0.1 nats per step of the true parameters on held-out sequences (30 EM steps, 150 sequences)
    assert s["heldout_ll_per_step"] > s["true_heldout_ll_per_step"] - 0.1
    # EM may stop in a local optimum: only above chance (1/K = 0.2) is asserted for the relabelled paths
    assert 0.3 < s["viterbi_state_accuracy"] <= 1.0 and s["true_path_accuracy"] > 0.5


@pytest.mark.slow
def test_bayesian_fit_by_svi(tmp_path):
    cfg = load_config(
        str(CONFIG),
        overrides=[
            f"output.dir={tmp_path}",
            "run.progress=false",
            "run.num_steps=30",
            "algorithm.name=svi",
            "model.emissions=gaussian",
            "data.num_train=60",
            "data.num_test=30",
            "data.length=30",
            "algorithm.batch_size=20",
            "algorithm.step_size=0.3",
        ],
    )
    _, metrics = run_experiment(cfg)
    assert np.isfinite(metrics["summary"]["heldout_ll_per_step"])
