"""The ``plsa`` experiment end to end at a tiny size: pLSA1, pLSA2 and LDA scored on the same halves of
the same test documents."""

import os
import pathlib

import numpy as np
import pytest

from vijax.run import load_config, run_experiment

CONFIG = pathlib.Path(__file__).resolve().parents[2] / "configs" / "plsa.yaml"


@pytest.mark.slow
def test_tiny_plsa_run_reports_three_perplexities(tmp_path):
    cfg = load_config(
        str(CONFIG),
        overrides=[
            f"output.dir={tmp_path}",
            "run.progress=false",
            "run.num_steps=20",
            "run.eval_every=20",
            "data.num_docs=120",
            "data.vocab_size=40",
            "data.true_topics=3",
            "model.num_topics=3",
            "model.lda_max_iters=20",
            "model.fold_in_iters=20",
            "data.eval_batch=24",
        ],
    )
    _, metrics = run_experiment(cfg)
    elbo = np.asarray(metrics["elbo"])
    assert np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[1:]))  # EM (pLSA1): the objective never decreases
    runs = metrics["summary"]["runs"]
    assert set(runs) == {"plsa1", "plsa2", "lda_cavi", "true_topics"}
    # every perplexity finite and below the vocabulary size (40: a uniform guess)
    assert all(1.0 < r["perplexity"] < 40.0 for r in runs.values())
    # one likelihood, two parameterizations: the same steps, the same perplexity (float64)
    np.testing.assert_allclose(runs["plsa1"]["perplexity"], runs["plsa2"]["perplexity"], rtol=1e-9)
    assert os.path.getsize(tmp_path / "results.md") > 0
