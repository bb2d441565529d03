"""The GaP-KL-NMF experiment (Hoffman & Blei 2015, §4.3) end to end at a small size, and its config errors
(its correlation metric: tests/metrics/test_nmf.py)."""

import numpy as np
import pytest

from vijax.run import load_config, run_experiment

SMALL = {
    "experiment": "gap_nmf",
    "model": {"num_components": 8, "max_iters": 50},
    "data": {"num_freqs": 65, "num_atoms": 4, "num_frames": 120, "peak": 30.0},
    "run": {"num_steps": 20, "chunk_size": 10, "eval_every": 10, "progress": False},
}


def _cfg(tmp_path, **sections):
    cfg = {k: dict(v) if isinstance(v, dict) else v for k, v in SMALL.items()}
    for name, values in sections.items():
        cfg[name] = {**cfg.get(name, {}), **values}
    cfg["output"] = {"dir": str(tmp_path)}
    return load_config(cfg)


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_small_run_recovers_the_dictionary(tmp_path):
    _, metrics = run_experiment(_cfg(tmp_path))
    summary = metrics["summary"]
    for meth in ("meanfield", "ssvi_a"):
        assert 0 <= summary[f"{meth}_recovered"] <= 4
        assert 1 <= summary[f"{meth}_components_used"] <= 8
    # 4 well-separated columns, 120 frames, 20 full-data steps: mean-field finds most of them
    assert summary["meanfield_recovered"] >= 3
    assert summary["meanfield_mean_correlation"] > 0.8
    assert len(summary["table"]) == 2
    assert (tmp_path / "gap_nmf_correlations.png").stat().st_size > 0
    assert (tmp_path / "gap_nmf_dictionary.png").stat().st_size > 0
    assert metrics["evals"][-1]["step"] == 20
    assert np.isfinite(metrics["evals"][-1]["ssvi_a.mean_correlation"])


@pytest.mark.slow
def test_minibatch_run(tmp_path):
    _, metrics = run_experiment(
        _cfg(tmp_path, algorithm={"batch_size": 30, "methods": ["meanfield"]}, run={"num_steps": 10, "eval_every": 10})
    )
    assert "ssvi_a_recovered" not in metrics["summary"]
    assert 0 <= metrics["summary"]["meanfield_recovered"] <= 4


@pytest.mark.parametrize(
    "section, values, match",
    [
        ("algorithm", {"methods": ["meanfield", "gibbs"]}, "methods"),
        ("algorithm", {"methods": []}, "methods"),
        ("algorithm", {"batch_size": 500}, "batch_size"),
        ("algorithm", {"local": "gibbs"}, "local"),
        ("model", {"a": -1.0}, "a must be"),
        ("data", {"peak": 0.0}, "peak"),
    ],
)
def test_bad_config_raises(tmp_path, section, values, match):
    with pytest.raises(ValueError, match=match):
        run_experiment(_cfg(tmp_path, **{section: values}))
