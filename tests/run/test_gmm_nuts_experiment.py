"""The ``gmm_cavi_vs_nuts`` experiment (Blei et al. 2017, Fig. 6) at a small size: NUTS on the NumPyro
version of the model and CAVI reach the same held-out log predictive (the two model definitions
agree), and each method's time to the target is reported."""

import json
import pathlib

import numpy as np
import pytest

from vijax.run import import_builtin_experiments, main
from vijax.run.experiments.gmm import first_time_within

CONFIG = pathlib.Path(__file__).resolve().parents[2] / "configs" / "gmm_cavi_vs_nuts.yaml"


@pytest.mark.slow  # `make test-slow`
def test_cavi_and_nuts_agree_on_the_heldout_predictive(tmp_path):
    import_builtin_experiments()
    out = tmp_path / "out"
    sets = ["data.num_train=300", "data.num_test=300", "data.num_clusters=3", "model.num_components=3"]
    sets += ["algorithm.nuts.warmup=150", "algorithm.nuts.samples=150", "run.num_steps=30", "run.checkpoint_every=null"]
    args = ["run", str(CONFIG), "--out", str(out), "--no-progress", "--no-compile-cache"]
    assert main(args + [a for s in sets for a in ("--set", s)]) == 0
    s = json.loads((out / "metrics.json").read_text())["summary"]
    # the same posterior: q's predictive (a Student-t mixture) and the NUTS average within 0.05 nats
    assert abs(s["cavi_heldout_log_predictive"] - s["nuts_heldout_log_predictive"]) < 0.05
    assert s["cavi_time_to_within"] is not None and s["nuts_divergences"] == 0
    assert (out / "cavi_vs_nuts.png").is_file() and (out / "results.md").is_file()


def test_first_time_within():
    assert first_time_within([1.0, 2.0, 3.0], [-5.0, -4.2, -4.0], -4.0, 0.25) == 2.0
    assert first_time_within([1.0, 2.0], [-5.0, -4.5], -4.0, 0.25) is None
    assert np.isclose(first_time_within([0.5], [-4.0], -4.0, 0.0), 0.5)
