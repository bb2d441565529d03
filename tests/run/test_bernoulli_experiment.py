"""The DP mixture of Bernoullis experiment (Hoffman & Blei 2015, §4.2, the default ``vijax run``), shortened."""

import json
import os
import pathlib

import numpy as np
import pytest

from vijax.run import default_config, load_config, run_experiment
from vijax.run.experiments.bernoulli_mixture import LABELS, METHODS, PAPER, format_table

ROOT = pathlib.Path(__file__).resolve().parents[2]
SMALL = [
    "model.num_components=12",
    "model.alpha=4.0",
    "data.num_points=150",
    "data.dim=24",
    "data.seed=1",
    "run.num_steps=20",
    "run.chunk_size=10",
    "run.eval_every=10",
    "run.checkpoint_every=null",
    "algorithm.gibbs_burn_in=5",
    "algorithm.kl_samples=2000",
    "algorithm.eval_kl_samples=200",
    "run.progress=false",
]


def test_default_config_is_the_dp_bernoulli_config():
    assert load_config(default_config()) == load_config(str(ROOT / "configs" / "dp_bernoulli.yaml"))
    cfg = load_config(default_config())
    assert cfg["experiment"] == "dp_bernoulli"
    assert cfg["algorithm"]["methods"] == list(METHODS)
    assert (cfg["model"]["num_components"], cfg["model"]["alpha"], cfg["data"]["num_points"], cfg["data"]["dim"]) == (
        100,
        20.0,
        1000,
        100,
    )  # the paper's sizes
    assert cfg["run"]["num_steps"] == 100  # the quick default; the paper-length run is dp_bernoulli_full
    full = load_config(str(ROOT / "configs" / "dp_bernoulli_full.yaml"))
    registered = load_config({"experiment": "dp_bernoulli"})
    assert full["output"]["dir"] == "results/dp_bernoulli_full" and full["run"]["num_steps"] == 500
    assert {k: v for k, v in full.items() if k != "output"} == {k: v for k, v in registered.items() if k != "output"}
    assert {k: v for k, v in full.items() if k not in ("run", "algorithm", "output")} == {
        k: v for k, v in cfg.items() if k not in ("run", "algorithm", "output")
    }


def _short_run(tmp_path, methods):
    cfg = load_config(
        default_config(), overrides=SMALL + [f"output.dir={tmp_path}", f"algorithm.methods=[{','.join(methods)}]"]
    )
    result, metrics = run_experiment(cfg)
    s = metrics["summary"]
    assert 1 <= s["truth_components"] <= 12
    for m in methods:
        assert 1 <= s[f"{m}_components"] <= 12
        assert s[f"{m}_kl"] > 0 and 0 < s[f"{m}_kl_stderr"] < 0.2 * s[f"{m}_kl"] + 0.05
        assert np.all(np.isfinite(result.trace[f"{m}.elbo"]))
    # collapsed Gibbs on this easy problem: near the truth
    assert abs(s["gibbs_components"] - s["truth_components"]) <= 2 and s["gibbs_kl"] < 1.0
    assert s["ranking_by_kl"].count(" < ") == len(methods) - 1
    assert [e["step"] for e in metrics["evals"]] == [10, 20]
    rows = s["table"]
    assert [r["method"] for r in rows] == ["truth"] + [LABELS[m] for m in methods]
    table = format_table(rows)
    assert "| collapsed Gibbs | " in table and "(55)" in table and "(1.9)" in table
    for name in ("dp_bernoulli.png", "elbo.png", "metrics.json"):
        assert os.path.getsize(tmp_path / name) > 0
    assert json.loads((tmp_path / "metrics.json").read_text())["summary"]["gibbs_kl"] == s["gibbs_kl"]
    return s


@pytest.mark.slow
def test_short_run_meanfield_and_gibbs(tmp_path):
    """The wiring, with two of the methods."""
    s = _short_run(tmp_path, ["meanfield", "gibbs"])
    assert s["table"][1]["paper_kl"] == PAPER["meanfield"]["kl"] == 5.23


@pytest.mark.slow
def test_short_run_every_method(tmp_path):
    s = _short_run(tmp_path, list(METHODS))
    assert "not run" in format_table(s["table"])  # the paper did not run SSVI


def test_bad_methods_are_rejected(tmp_path):
    cfg = load_config(default_config(), overrides=SMALL + [f"output.dir={tmp_path}", "algorithm.methods=[svi]"])
    with pytest.raises(ValueError, match="algorithm.methods"):
        run_experiment(cfg)


@pytest.mark.slow
def test_quick_default_runs_and_shows_the_ranking(tmp_path):
    """``vijax run`` with no config (the quick default): the paper's ranking,
    mean-field's KL well above the structured methods' and Gibbs's, and the plots."""
    from vijax.run import main

    assert main(["run", "--out", str(tmp_path), "--no-progress"]) == 0
    s = json.loads((tmp_path / "metrics.json").read_text())["summary"]
    assert s["meanfield_kl"] > 1.5 * max(s["ssvi_a_kl"], s["ssvi_kl"], s["gibbs_kl"])
    assert s["meanfield_components"] < s["truth_components"] - 20
    assert s["ranking_by_kl"].split(" < ")[-1].startswith("mean-field ")  # printed by the command
    for name in ("dp_bernoulli.png", "elbo.png"):
        assert os.path.getsize(tmp_path / name) > 0
