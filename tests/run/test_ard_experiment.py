"""The ``ard_regression`` experiment end to end at its config's size, and its config
errors."""

import os
import pathlib

import numpy as np
import pytest
import yaml

from vijax.run import ConfigError, load_config, run_experiment

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "configs"


def test_config_run_shrinks_irrelevant_coefficients_and_matches_scikit_learn(tmp_path):
    import sklearn  # noqa: F401

    raw = yaml.safe_load((CONFIGS / "ard_regression.yaml").read_text())
    raw["output"] = {"dir": str(tmp_path)}
    _, metrics = run_experiment(load_config(raw))
    s = metrics["summary"]
    assert s["max_abs_irrelevant_coef"] < 0.15 and s["coef_rmse"] < 0.06  # 25 zeros, 5 effects of size 1-3
    assert abs(s["noise_sd"] - s["true_noise_sd"]) < 0.1
    sk = s["sklearn"]  # the two ARDs agree here (measured: coefficients within 1e-3, equal held-out scores)
    assert sk["max_abs_coef_difference"] < 0.01
    np.testing.assert_allclose(s["heldout_rmse"], sk["heldout_rmse"], rtol=0.01)
    elbo = np.asarray(metrics["elbo"], np.float64)
    assert elbo.size > 10 and np.all(np.diff(elbo) > -1e-8 * np.abs(elbo[1:]))  # CAVI: never decreases
    for name in ("results.md", "ard_coefficients.png", "metrics.json"):
        assert os.path.getsize(tmp_path / name) > 0


@pytest.mark.parametrize(
    "section, value, pattern",
    [
        ("data", {"num_relevant": 40}, r"^data\.num_relevant must be an integer in \[0, data\.dim = 30\], got 40$"),
        ("data", {"correlation": 1.5}, r"^data\.correlation must be a finite number in \[0, 1\), got 1\.5$"),
        ("model", {"a0": -1.0}, r"^model\.a0 must be a finite number > 0, got -1\.0$"),
    ],
)
def test_config_errors_name_the_key(tmp_path, section, value, pattern):
    raw = {"experiment": "ard_regression", section: value, "output": {"dir": str(tmp_path)}}
    with pytest.raises(ConfigError, match=pattern):  # at load, before anything is built
        load_config(raw)
