"""The GMM experiments end to end through the config machinery, at a small size."""

import json
import os
import pathlib

import numpy as np
import pytest

from vijax.run import load_config, run_experiment

CONFIG = pathlib.Path(__file__).resolve().parents[2] / "configs" / "gmm_simulation.yaml"


@pytest.mark.slow
def test_simulation_config_recovers_the_clusters(tmp_path):
    cfg = load_config(str(CONFIG), overrides=[f"output.dir={tmp_path}", "run.progress=false"])
    assert cfg["experiment"] == "gmm_simulation"
    result, metrics = run_experiment(cfg)
    s = metrics["summary"]
    assert s["components_used"] == 5
    assert s["max_center_error"] < 0.5  # every true center has a fitted mean within 0.5
    assert metrics["converged"]
    elbo = np.asarray(metrics["elbo"])
    assert elbo.shape[1] == 5  # restarts
    assert np.all(np.diff(elbo, axis=0) >= -1e-9 * np.abs(elbo[1:]))  # every restart climbs
    for name in ("metrics.json", "fit.png", "elbo.png", "config.yaml"):
        assert os.path.getsize(tmp_path / name) > 0
    assert json.loads((tmp_path / "metrics.json").read_text())["summary"] == s


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_histogram_experiment_small(tmp_path):
    cfg = load_config(
        {
            "experiment": "gmm_histograms",
            "model": {"num_components": 6},
            "data": {"num_train": 400, "num_test": 200, "num_types": 4},
            "run": {"num_steps": 60, "chunk_size": 10, "progress": False},
            "output": {"dir": str(tmp_path)},
        }
    )
    _, metrics = run_experiment(cfg)
    assert metrics["summary"]["test_purity"] > 0.95
    assert np.isfinite(metrics["summary"]["heldout_log_predictive"])
    # Blei et al. 2017, Figure 2: every start's final ELBO (the default 5 starts) and their figure
    finals = metrics["summary"]["final_elbo_per_restart"]
    assert len(finals) == 5 and 1 <= metrics["summary"]["distinct_local_optima"] <= 5
    assert (tmp_path / "elbo_restarts.png").is_file()


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_histogram_experiment_from_the_papers_random_starts_ends_at_several_optima(tmp_path):
    """``algorithm.start: random`` (Blei et al. 2017, §2.5, Figure 2): the five starts end at more than one optimum,
    each start climbing."""
    cfg = load_config(
        {
            "experiment": "gmm_histograms",
            "model": {"num_components": 6},
            "data": {"num_train": 400, "num_test": 200, "num_types": 4},
            "algorithm": {"start": "random"},
            "run": {"num_steps": 60, "chunk_size": 10, "progress": False},
            "output": {"dir": str(tmp_path)},
        }
    )
    _, metrics = run_experiment(cfg)
    assert metrics["summary"]["distinct_local_optima"] >= 2
    elbo = np.asarray(metrics["elbo"])
    assert np.all(np.diff(elbo, axis=0) >= -1e-6 * np.abs(elbo[1:]))


def test_random_start_is_one_m_step_from_the_nearest_of_means_drawn_at_the_datas_mean_and_variance():
    """Blei et al. 2017, §2.5: the start of ``algorithm.start: random`` against the same draws, each point assigned to
    its nearest mean by brute force, and the model's own M-step."""
    import jax
    import jax.numpy as jnp

    from vijax.models import DiagonalGMM
    from vijax.run.experiments.gmm import _random_start

    x = np.random.default_rng(0).normal(3.0, 2.0, size=(300, 4))
    model = DiagonalGMM.from_data(x, 5)
    feats = model.features(jnp.asarray(x, jnp.float32))
    key = jax.random.PRNGKey(7)
    q = _random_start(model, key, x, feats)
    xf = np.asarray(x, np.float32)
    centers = xf.mean(0)[None] + xf.std(0)[None] * np.asarray(jax.random.normal(key, (5, 4), jnp.float32))
    nearest = np.argmin(((xf[:, None, :] - centers[None]) ** 2).sum(-1), axis=1)
    want = model.posterior_from_responsibilities(feats, jnp.asarray(np.eye(5, dtype=np.float32)[nearest]))
    for a, b in zip(jax.tree_util.tree_leaves(q), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    other = _random_start(model, jax.random.PRNGKey(8), x, feats)
    assert not np.allclose(jax.tree_util.tree_leaves(other)[-1], jax.tree_util.tree_leaves(q)[-1])


def test_an_unknown_start_is_refused_naming_the_key(tmp_path):
    from vijax.run import ConfigError

    cfg = load_config(
        {
            "experiment": "gmm_simulation",
            "algorithm": {"start": "kmeans"},
            "data": {"num_train": 20, "num_test": 10},
            "output": {"dir": str(tmp_path)},
        }
    )
    with pytest.raises(ConfigError, match="algorithm.start"):
        run_experiment(cfg)


def test_distinct_local_optima_count_values_apart_by_more_than_the_tolerance():
    from vijax.run.experiments.gmm import _restart_optima

    out = _restart_optima(np.array([-100.0, -100.0 * (1 + 1e-9), -90.0, -80.0, -90.00001]))
    assert out["distinct_local_optima"] == 3  # -100 twice (within 1e-6), -90 twice, -80
    assert out["final_elbo_per_restart"][2] == -90.0


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_full_covariance_run_writes_rotated_ellipses_and_a_bad_choice_is_named(tmp_path):
    import pytest

    from vijax.run import ConfigError

    cfg = load_config(
        {
            "experiment": "gmm_simulation",
            "model": {"num_components": 3, "covariance": "full"},
            "data": {"num_train": 300, "num_test": 100, "num_clusters": 3},
            "algorithm": {"num_restarts": 2},
            "run": {"num_steps": 20, "chunk_size": 10, "progress": False},
            "output": {"dir": str(tmp_path)},
        }
    )
    _, metrics = run_experiment(cfg)
    elbo = np.asarray(metrics["elbo"])
    assert np.all(np.diff(elbo, axis=0) >= -1e-6 * np.abs(elbo[1:]))
    assert np.isfinite(metrics["summary"]["heldout_log_predictive"])
    assert os.path.getsize(tmp_path / "fit.png") > 0
    with pytest.raises(ConfigError, match="model.covariance"):
        run_experiment(
            load_config(
                {
                    "experiment": "gmm_simulation",
                    "model": {"covariance": "tied"},
                    "output": {"dir": str(tmp_path / "bad")},
                }
            )
        )
