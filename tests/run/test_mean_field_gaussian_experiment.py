"""The ``mean_field_gaussian`` experiment (Blei et al. 2017, Fig. 1) at a small size: the mean-field q's
(bbvi, ngvi) keep the means and shrink the sds to the closed form sd_i sqrt(1 - rho^2); full-rank bbvi
recovers the exact sds and correlation."""

import json
import math
import pathlib

import numpy as np
import pytest

from vijax.run import import_builtin_experiments, main

CONFIG = pathlib.Path(__file__).resolve().parents[2] / "configs" / "mean_field_gaussian.yaml"


@pytest.mark.slow
def test_mean_field_is_under_dispersed_as_the_closed_form_says(tmp_path):
    import_builtin_experiments()
    out = tmp_path / "out"
    sets = ["model.correlation=0.8", "run.num_steps=1500", "run.chunk_size=500", "run.eval_every=1500"]
    sets += ["algorithm.moment_draws=8000", "algorithm.psis_draws=1000", "run.checkpoint_every=null"]
    args = ["run", str(CONFIG), "--out", str(out), "--no-progress", "--no-compile-cache"]
    assert main(args + [a for s in sets for a in ("--set", s)]) == 0
    s = json.loads((out / "metrics.json").read_text())["summary"]
    ratio = math.sqrt(1 - 0.8**2)  # 0.6
    assert abs(s["mean_field_sd_ratio_closed_form"] - ratio) < 1e-12
    moments = s["moments"]
    np.testing.assert_allclose(moments["mean-field optimum"]["sd"], [ratio, ratio], rtol=1e-12)
    # Monte Carlo moments of 8000 draws of q (sd error ~1%) after a stochastic fit: 5% on the sds
    for label in ("bbvi-meanfield", "ngvi-meanfield"):
        np.testing.assert_allclose(moments[label]["sd"], [ratio, ratio], rtol=0.05, err_msg=label)
        np.testing.assert_allclose(moments[label]["mean"], [0.0, 0.0], atol=0.05, err_msg=label)
        assert abs(s["correlation_of_q"][label]) < 0.05
    np.testing.assert_allclose(moments["bbvi-fullrank"]["sd"], [1.0, 1.0], rtol=0.05)
    assert abs(s["correlation_of_q"]["bbvi-fullrank"] - 0.8) < 0.03
    assert (out / "mean_field_gaussian.png").is_file() and (out / "results.md").is_file()


@pytest.mark.slow
def test_the_configs_size_gives_the_documented_figure(tmp_path):
    """The config as shipped (rho = 0.9, 3,000 steps, 20,000 draws for q's moments): the figures of
    docs/papers.md's Blei et al. Fig. 1 row. sd of q's Monte Carlo sd about 0.5%: 3% on the sds."""
    import_builtin_experiments()
    out = tmp_path / "out"
    assert main(["run", str(CONFIG), "--out", str(out), "--no-progress", "--no-compile-cache"]) == 0
    s = json.loads((out / "metrics.json").read_text())["summary"]
    ratio = math.sqrt(1 - 0.9**2)  # 0.436
    moments = s["moments"]
    for label in ("bbvi-meanfield", "ngvi-meanfield"):
        np.testing.assert_allclose(moments[label]["sd"], [ratio, ratio], rtol=0.03, err_msg=label)
        assert abs(s["correlation_of_q"][label]) < 0.03
    np.testing.assert_allclose(moments["bbvi-fullrank"]["sd"], [1.0, 1.0], rtol=0.03)
    assert abs(s["correlation_of_q"]["bbvi-fullrank"] - 0.9) < 0.02
    khat = {row["method"]: row["k-hat"] for row in s["table"]}
    assert khat["bbvi-meanfield"] > 0.7 and khat["ngvi-meanfield"] > 0.7 and khat["bbvi-fullrank"] < 0.7
