"""The ``vae`` experiment end to end at a tiny size (AEVB and the Bayesian decoder as its baseline),
its configs, and its config errors."""
import os
import pathlib

import numpy as np
import pytest

from vijax.run import ConfigError, load_config, run_experiment

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "configs"
TINY = {"experiment": "vae",
        "model": {"hidden": [16]},
        "data": {"dataset": "synthetic", "num_train": 200, "num_test": 40, "dim": 16, "batch_size": 50},
        "algorithm": {"learning_rate": 0.01, "iw_samples": 64, "iw_chunk": 32, "iw_repeats": 2, "num_images": 3},
        "run": {"num_steps": 300, "chunk_size": 150, "eval_every": 150, "progress": False}}


def test_tiny_run_trains_both_decoders_and_writes_its_results(tmp_path):
    cfg = load_config(dict(TINY, output={"dir": str(tmp_path)}))
    _, metrics = run_experiment(cfg)
    rows = metrics["summary"]["table"]
    assert [(r["method"], r["theta"]) for r in rows] == [
        ("point_decoder", "point"), ("bayesian_decoder", "q(θ) draws"), ("bayesian_decoder", "E_q[θ]")]
    for r in rows:
        for key in ("test ELBO", "ELBO SE", "IW log-lik", "IW SE (test points)", "IW sd over repeats"):
            assert np.isfinite(r[key]), (r["method"], key)
        assert r["IW sd over repeats"] > 0 and r["IW log-lik"] > r["test ELBO"]
    for r in rows[:2]:  # 300 steps (75 passes) raise the test ELBO of both decoders by nats per datum
        assert r["test ELBO"] > r["test ELBO at start"] + 1.0, r
        assert r["rejected steps"] == 0
    assert rows[1]["KL(q(θ)‖p(θ)) / N"] > 0 and rows[0]["KL(q(θ)‖p(θ)) / N"] == 0
    # the generating model's log p(x_test): a fitted model's IW log-likelihood lies below it (in expectation)
    truth = metrics["summary"]["true_model_log_lik"]
    assert np.isfinite(truth["mean"]) and all(r["IW log-lik"] < truth["mean"] + 3 * truth["se"] for r in rows)
    assert [e["step"] for e in metrics["evals"]] == [150, 300] and np.isfinite(metrics["evals"][-1]["test_elbo"])
    for name in ("results.md", "vae_reconstructions.png", "vae_samples.png", "metrics.json", "elbo.png"):
        assert os.path.getsize(tmp_path / name) > 0
    text = (tmp_path / "results.md").read_text()
    assert "IW sd over repeats" in text and "bayesian_decoder" in text


def test_configs_resolve_and_errors_name_the_key(tmp_path):
    for name in ("vae_digits.yaml", "vae_synthetic.yaml"):
        cfg = load_config(CONFIGS / name)
        assert cfg["experiment"] == "vae" and cfg["algorithm"]["compare"]
    bad = [({"data": {"dataset": "mnist"}}, "data.dataset"),
           ({"algorithm": {"iw_samples": 0}}, "algorithm.iw_samples"),
           ({"algorithm": {"name": "nope"}}, "algorithm.name"),
           ({"model": {"likelihood": "poisson"}}, "model: likelihood"),
           ({"data": {"batch_size": 5000}}, "data.batch_size")]
    for override, match in bad:
        cfg = {k: dict(v, **override.get(k, {})) if isinstance(v, dict) else v for k, v in TINY.items()}
        with pytest.raises(ConfigError, match=match):
            run_experiment(load_config(dict(cfg, output={"dir": str(tmp_path)})))
