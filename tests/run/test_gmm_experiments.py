"""The GMM experiments end to end through the config machinery, at a small size."""

import json
import os
import pathlib

import numpy as np
import pytest

from vijax.run import load_config, run_experiment

CONFIG = pathlib.Path(__file__).resolve().parents[2] / "configs" / "gmm_simulation.yaml"


@pytest.mark.slow
def test_simulation_config_recovers_the_clusters(tmp_path):
    cfg = load_config(str(CONFIG), overrides=[f"output.dir={tmp_path}", "run.progress=false"])
    assert cfg["experiment"] == "gmm_simulation"
    result, metrics = run_experiment(cfg)
    s = metrics["summary"]
    assert s["components_used"] == 5
    assert s["max_center_error"] < 0.5  # every true center has a fitted mean within 0.5
    assert metrics["converged"]
    elbo = np.asarray(metrics["elbo"])
    assert elbo.shape[1] == 5  # restarts
    assert np.all(np.diff(elbo, axis=0) >= -1e-9 * np.abs(elbo[1:]))  # every restart climbs
    for name in ("metrics.json", "fit.png", "elbo.png", "config.yaml"):
        assert os.path.getsize(tmp_path / name) > 0
    assert json.loads((tmp_path / "metrics.json").read_text())["summary"] == s


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_histogram_experiment_small(tmp_path):
    cfg = load_config(
        {
            "experiment": "gmm_histograms",
            "model": {"num_components": 6},
            "data": {"num_train": 400, "num_test": 200, "num_types": 4},
            "run": {"num_steps": 60, "chunk_size": 10, "progress": False},
            "output": {"dir": str(tmp_path)},
        }
    )
    _, metrics = run_experiment(cfg)
    assert metrics["summary"]["test_purity"] > 0.95
    assert np.isfinite(metrics["summary"]["heldout_log_predictive"])
    # Blei et al. 2017, Figure 2: every start's final ELBO (the default 5 starts) and their figure
    finals = metrics["summary"]["final_elbo_per_restart"]
    assert len(finals) == 5 and 1 <= metrics["summary"]["distinct_local_optima"] <= 5
    assert (tmp_path / "elbo_restarts.png").is_file()


def test_distinct_local_optima_count_values_apart_by_more_than_the_tolerance():
    from vijax.run.experiments.gmm import _restart_optima

    out = _restart_optima(np.array([-100.0, -100.0 * (1 + 1e-9), -90.0, -80.0, -90.00001]))
    assert out["distinct_local_optima"] == 3  # -100 twice (within 1e-6), -90 twice, -80
    assert out["final_elbo_per_restart"][2] == -90.0


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_full_covariance_run_writes_rotated_ellipses_and_a_bad_choice_is_named(tmp_path):
    import pytest

    from vijax.run import ConfigError

    cfg = load_config(
        {
            "experiment": "gmm_simulation",
            "model": {"num_components": 3, "covariance": "full"},
            "data": {"num_train": 300, "num_test": 100, "num_clusters": 3},
            "algorithm": {"num_restarts": 2},
            "run": {"num_steps": 20, "chunk_size": 10, "progress": False},
            "output": {"dir": str(tmp_path)},
        }
    )
    _, metrics = run_experiment(cfg)
    elbo = np.asarray(metrics["elbo"])
    assert np.all(np.diff(elbo, axis=0) >= -1e-6 * np.abs(elbo[1:]))
    assert np.isfinite(metrics["summary"]["heldout_log_predictive"])
    assert os.path.getsize(tmp_path / "fit.png") > 0
    with pytest.raises(ConfigError, match="model.covariance"):
        run_experiment(
            load_config(
                {
                    "experiment": "gmm_simulation",
                    "model": {"covariance": "tied"},
                    "output": {"dir": str(tmp_path / "bad")},
                }
            )
        )
