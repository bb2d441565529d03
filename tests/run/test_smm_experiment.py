"""The ``smm`` experiment (the tutorial's simple mixture model by EM) end to end at a small size: EM's
fit has the training frequencies as its marginal and their held-out score, and different starts
give different components at equal likelihood."""

import json
import pathlib

import pytest

from vijax.run import import_builtin_experiments, main

CONFIG = pathlib.Path(__file__).resolve().parents[2] / "configs" / "smm.yaml"


def test_smm_reaches_the_frequencies_and_reports_unidentified_components(tmp_path):
    import_builtin_experiments()
    out = tmp_path / "out"
    sets = ["data.num_train=400", "data.num_test=400", "data.num_symbols=8", "algorithm.num_restarts=3"]
    sets += ["run.num_steps=10", "run.chunk_size=5", "run.eval_every=5", "run.checkpoint_every=null"]
    args = ["run", str(CONFIG), "--out", str(out), "--no-progress", "--no-compile-cache"]
    assert main(args + [a for s in sets for a in ("--set", s)]) == 0
    s = json.loads((out / "metrics.json").read_text())["summary"]
    assert abs(s["heldout_log_prob"] - s["frequencies_heldout_log_prob"]) < 1e-9
    assert abs(s["train_log_likelihood"] - s["train_log_likelihood_frequencies"]) < 1e-6
    assert s["marginal_l1_to_frequencies"] < 1e-9 and s["train_log_likelihood_spread_over_starts"] < 1e-6
    assert len(s["max_l1_eta_error_per_start"]) == 3
    assert (out / "results.md").is_file() and (out / "smm_components.png").is_file()


@pytest.mark.slow
def test_smm_at_the_configs_size_gives_the_documented_scores(tmp_path):
    """The config as shipped (5,000 training and 5,000 test symbols, 8 starts, 300 EM steps): the
    figures of docs/papers.md's §SMM row."""
    import_builtin_experiments()
    out = tmp_path / "out"
    assert main(["run", str(CONFIG), "--out", str(out), "--no-progress", "--no-compile-cache"]) == 0
    s = json.loads((out / "metrics.json").read_text())["summary"]
    assert abs(s["heldout_log_prob"] - s["frequencies_heldout_log_prob"]) < 1e-9
    assert abs(s["heldout_log_prob"] - (-3.24743)) < 5e-6
    assert abs(s["true_heldout_log_prob"] - (-3.24558)) < 5e-6
    assert len(s["max_l1_eta_error_per_start"]) == 8 and s["train_log_likelihood_spread_over_starts"] < 1e-6
