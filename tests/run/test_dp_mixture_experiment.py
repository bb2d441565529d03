"""The ``dp_mixture_truncation`` experiment end to end at a tiny size, and its config errors."""

import os
import pathlib

import pytest
import yaml

from vijax.run import ConfigError, load_config, run_experiment

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_tiny_run_counts_clusters_for_both_truncations(tmp_path):
    raw = yaml.safe_load((CONFIGS / "dp_mixture_truncation.yaml").read_text())
    raw["output"] = {"dir": str(tmp_path)}
    raw["model"].update(components="bernoulli", truncation_levels=[4])
    raw["data"].update(num_train=60, num_test=20, num_clusters=2, dim=12)
    raw["run"].update(num_steps=10, eval_every=10)
    _, metrics = run_experiment(load_config(raw))
    s = metrics["summary"]
    assert [r["truncation"] for r in s["runs"]] == ["blei_jordan", "kurihara"]
    for r in s["runs"]:
        assert 1 <= r["clusters_found"] <= 4 and r["steps"] >= 1
    assert "sklearn" not in s  # Bernoulli components: no scikit-learn counterpart
    for name in ("results.md", "dp_truncation.png", "metrics.json"):
        assert os.path.getsize(tmp_path / name) > 0


@pytest.mark.parametrize(
    "section, value, pattern",
    [
        ("model", {"components": "poisson"}, "model.components must be 'gaussian' or 'bernoulli'"),
        ("model", {"truncation_levels": [0]}, "truncation_level"),
        ("model", {"truncations": ["sethuraman"]}, "truncation"),
        ("model", {"alpha": -1.0}, "alpha"),
        ("model", {"min_fraction": 1.5}, "min_fraction"),
    ],
)
def test_config_errors_name_the_key(tmp_path, section, value, pattern):
    raw = {"experiment": "dp_mixture_truncation", section: value, "output": {"dir": str(tmp_path)}}
    with pytest.raises(ConfigError, match=pattern):
        run_experiment(load_config(raw))
