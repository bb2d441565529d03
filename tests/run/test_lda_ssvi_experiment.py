"""The lda_ssvi experiment (SSVI / SSVI-A / SVI x E-steps on LDA, Hoffman & Blei 2015, §4.1) end to end at a
tiny size: every setting of the grid runs with its restarts, the curves and plots are written,
the held-out score of each restart is finite and improves on the random start, and bad grids are
refused before anything compiles."""

import json

import numpy as np
import pytest

from vijax.run import load_config, run_experiment

TINY = {
    "experiment": "lda_ssvi",
    "model": {
        "num_topics": 3,
        "alphas": [0.1],
        "etas": [0.1],
        "max_iters": 20,
        "cvb0_iters": 10,
        "gibbs_sweeps": 2,
        "gibbs_burn_in": 1,
    },
    "algorithm": {
        "global_updates": ["meanfield", "ssvi"],
        "locals": ["cvb0"],
        "restarts": 2,
        "batch_size": 20,
        "tau": 4.0,
    },
    "data": {
        "corpora": ["synthetic"],
        "num_docs": 200,
        "vocab_size": 30,
        "true_topics": 3,
        "doc_length_mean": 15.0,
        "max_test_docs": 20,
        "test_fraction": 0.1,
    },
    "run": {"num_steps": 6, "chunk_size": 3, "eval_every": 3, "progress": False},
}


def _check_grid(tmp_path, metrics, labels):
    grid = json.loads((tmp_path / "grid.json").read_text())
    curves = grid["curves"]
    assert {c["label"] for c in curves} == set(labels) and metrics["summary"]["num_settings"] == len(labels)
    for c in curves:
        assert [e["step"] for e in c["evals"]] == [3, 6]
        last = c["evals"][-1]
        per_restart = [last[f"heldout_r{i}"] for i in range(2)]
        assert np.all(np.isfinite(per_restart))
        np.testing.assert_allclose(last["heldout_mean"], np.mean(per_restart), rtol=1e-12)
        np.testing.assert_allclose(last["heldout_std"], np.std(per_restart), rtol=1e-9, atol=1e-12)
        assert last["heldout_mean"] > -np.log(30)  # better than uniform topics over V = 30 words
        assert all(e2["train_time_s"] >= e1["train_time_s"] for e1, e2 in zip(c["evals"], c["evals"][1:]))
    assert metrics["summary"]["skipped_corpora"] == []
    for name in ("heldout_synthetic.png", "hyper_synthetic.png"):
        assert (tmp_path / name).stat().st_size > 0


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_grid_runs_every_setting_with_restarts(tmp_path):
    """Two settings (SVI and SSVI with the CVB0 E-step), two restarts each, 6 steps."""
    _, metrics = run_experiment(load_config(dict(TINY, output={"dir": str(tmp_path)})))
    _check_grid(tmp_path, metrics, ["meanfield/cvb0/alpha=0.1/eta=0.1", "ssvi/cvb0/alpha=0.1/eta=0.1"])


@pytest.mark.slow
def test_grid_of_every_m_step_and_e_step(tmp_path):
    """3 M-steps x 3 E-steps x 2 values of alpha (18 settings, each compiled: minutes on 2 CPUs)."""
    raw = dict(TINY, output={"dir": str(tmp_path)})
    raw["model"] = dict(TINY["model"], alphas=[0.1, 0.5])
    raw["algorithm"] = dict(
        TINY["algorithm"], global_updates=["meanfield", "ssvi_a", "ssvi"], locals=["meanfield", "cvb0", "gibbs"]
    )
    _, metrics = run_experiment(load_config(raw))
    _check_grid(
        tmp_path,
        metrics,
        [
            f"{g}/{l}/alpha={a}/eta=0.1"
            for g in ("meanfield", "ssvi_a", "ssvi")
            for l in ("meanfield", "cvb0", "gibbs")
            for a in (0.1, 0.5)
        ],
    )


@pytest.mark.parametrize(
    "override, match",
    [
        ({"algorithm": {"global_updates": ["svi"]}}, "global_updates"),
        ({"algorithm": {"locals": ["exact"]}}, "exact"),
        ({"model": {"alphas": [0.0]}}, "alphas"),
        ({"model": {"etas": []}}, "etas"),
        ({"data": {"corpora": ["nips"]}}, "corpora"),
        ({"algorithm": {"restarts": 0}}, "restarts"),
    ],
)
def test_bad_grid_is_refused(tmp_path, override, match):
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in TINY.items()}
    for section, values in override.items():
        raw[section] = dict(raw[section], **values)
    with pytest.raises(ValueError, match=match):  # the numbers at load, the names when the experiment is built
        run_experiment(load_config(dict(raw, output={"dir": str(tmp_path)})))


@pytest.mark.slow
def test_each_grid_setting_follows_its_own_run(tmp_path):
    """A pair's alpha x eta grid as one program (hyperparameter_grid under restarts) gives each setting the
    held-out curve of that setting's own run: the same initial state, minibatches and keys, and the setting's
    alpha in training and in the document-completion score (the grid's model has the first setting's alpha).
    Float32: the batched program rounds differently, so the scores agree to rtol 1e-4."""
    algorithm = dict(TINY["algorithm"], global_updates=["ssvi"])
    runs = {}
    for name, alphas in (("grid", [0.1, 0.5]), ("one", [0.5])):
        raw = dict(TINY, model=dict(TINY["model"], alphas=alphas), algorithm=algorithm)
        _, runs[name] = run_experiment(load_config(dict(raw, output={"dir": str(tmp_path / name)})))
    grid, one = (json.loads((tmp_path / d / "grid.json").read_text())["curves"] for d in ("grid", "one"))
    labels = ["ssvi/cvb0/alpha=0.1/eta=0.1", "ssvi/cvb0/alpha=0.5/eta=0.1"]
    assert [c["label"] for c in grid] == labels and [c["label"] for c in one] == labels[1:]
    for ea, eb in zip(grid[1]["evals"], one[0]["evals"], strict=True):
        assert ea["step"] == eb["step"] and ea["docs_seen"] == eb["docs_seen"]
        for k in ("heldout_mean", "heldout_r0", "heldout_r1"):
            np.testing.assert_allclose(ea[k], eb[k], rtol=1e-4)
    assert grid[0]["final_mean"] != grid[1]["final_mean"]  # the settings do differ
    assert runs["grid"]["summary"]["num_settings"] == 2
