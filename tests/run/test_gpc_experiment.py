"""The GP-classification experiments (Khan et al. 2016, Fig. 1 and 2) end to end at a tiny size on
scikit-learn's digits 3-vs-5 (which every user has), plus their helpers and config errors."""

import os

import numpy as np
import pytest

from vijax.run import load_config, run_experiment
from vijax.run.experiments.gp_classification import PAPER, examples_to_converge, passes_to_within


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_compare_small(tmp_path):
    cfg = load_config(
        {
            "experiment": "gpc_compare",
            "data": {"dataset": "digits_3v5"},
            "algorithm": {"methods": ["adam", "sgd"], "num_samples": 20},
            "run": {"num_steps": 116, "chunk_size": 58, "eval_every": 58, "progress": False},
            "output": {"dir": str(tmp_path)},
        }
    )
    _, metrics = run_experiment(cfg)
    s = metrics["summary"]
    rows = {r["method"]: r for r in s["table"]}
    assert set(rows) == {"PG-SVI", "Adam", "SGD"} and s["passes"] == 2
    # two passes: PG-SVI is already far above the baselines, and predicts well above chance
    assert rows["PG-SVI"]["final ELBO"] > rows["Adam"]["final ELBO"] > rows["SGD"]["final ELBO"]
    assert rows["PG-SVI"]["final test log-loss"] < 0.3
    assert len(s["curves"]["pg_svi"]["passes"]) == 2 and s["curves"]["adam"]["passes"] == [1.0, 2.0]
    for name in ("fig2_digits_3v5.png", "results.md", "metrics.json"):
        assert os.path.getsize(tmp_path / name) > 0
    assert "PG-SVI" in (tmp_path / "results.md").read_text()


@pytest.mark.slow
def test_step_size_small(tmp_path):
    cfg = load_config(
        {
            "experiment": "gpc_step_size",
            "data": {"dataset": "digits_3v5"},
            "algorithm": {
                "gd_rates": [3e-3],
                "pg_betas": [1.0],
                "pg_mc_betas": [1.0],
                "pg_svi_betas": [0.01],
                "pg_mc_samples": 20,
                "num_samples": 20,
                "max_passes_batch": 40,
                "max_passes_svi": 2,
                "tol": 1e-3,
                "optimum_steps": 100,
            },
            "run": {"num_steps": 10, "chunk_size": 5, "progress": False},
            "output": {"dir": str(tmp_path)},
        }
    )
    _, metrics = run_experiment(cfg)
    rows = {r["method"]: r for r in metrics["summary"]["table"]}
    assert set(rows) == {"GD", "PG", "PG-MC", "PG-SVI"}
    # batch PG with exact gradients converges within the budget (to L*), and sooner than GD
    assert rows["PG"]["examples to converge"] is not None
    assert abs(rows["PG"]["final ELBO"] - metrics["summary"]["optimum_elbo"]) < 1e-3 * abs(rows["PG"]["final ELBO"])
    assert (
        rows["GD"]["examples to converge"] is None
        or rows["GD"]["examples to converge"] > rows["PG"]["examples to converge"]
    )
    assert os.path.getsize(tmp_path / "fig1_digits_3v5.png") > 0


def test_helpers():
    curve = {"passes": [1.0, 2.0, 3.0, 4.0], "elbo": [-200.0, -101.5, -99.0, -99.5]}
    assert passes_to_within(curve, -99.0, 0.01) == 3.0
    assert passes_to_within(curve, -99.0, 0.03) == 2.0
    assert passes_to_within({"passes": [1.0], "elbo": [-300.0]}, -99.0, 0.01) is None
    assert examples_to_converge([-100.0, -50.0, -49.999, -49.0], -49.0, 0.05, 10) == 10
    assert examples_to_converge([-100.0, -50.0, -49.999, -49.0], -49.0, 1e-4, 10) == 30
    assert examples_to_converge([-100.0, np.nan, -49.0], -49.0, 1e-4, 10) is None
    assert examples_to_converge([-49.0, -60.0], -49.0, 1e-4, 10) is None
    assert PAPER["sonar"]["beta_n"] == 0.2 and PAPER["usps_3v5"]["batch_size"] == 20


def test_config_errors(tmp_path):
    bad = load_config({"experiment": "gpc_compare", "data": {"dataset": "iris"}, "output": {"dir": str(tmp_path)}})
    with pytest.raises(ValueError, match="iris"):
        run_experiment(bad)
    bad = load_config(
        {
            "experiment": "gpc_compare",
            "data": {"dataset": "digits_3v5"},
            "algorithm": {"methods": ["lbfgs"]},
            "output": {"dir": str(tmp_path)},
        }
    )
    with pytest.raises(ValueError, match="lbfgs"):
        run_experiment(bad)
