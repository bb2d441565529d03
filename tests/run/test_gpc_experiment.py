"""The GP-classification experiments (Khan et al. 2016, Fig. 1 and 2) end to end at a tiny size on
scikit-learn's digits 3-vs-5 (which every user has), plus their helpers and config errors."""

import os

import numpy as np
import pytest

from vijax.run import load_config, run_experiment
from vijax.run.experiments.gp_classification import PAPER, examples_to_converge, optimum_elbo, passes_to_within


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_compare_small(tmp_path):
    cfg = load_config(
        {
            "experiment": "gpc_compare",
            "data": {"dataset": "digits_3v5"},
            "algorithm": {"methods": ["adam", "sgd"], "num_samples": 20},
            "run": {"num_steps": 116, "chunk_size": 58, "eval_every": 58, "progress": False},
            "output": {"dir": str(tmp_path)},
        }
    )
    _, metrics = run_experiment(cfg)
    s = metrics["summary"]
    rows = {r["method"]: r for r in s["table"]}
    assert set(rows) == {"PG-SVI", "Adam", "SGD"} and s["passes"] == 2
    # two passes: PG-SVI is already far above the baselines, and predicts well above chance
    assert rows["PG-SVI"]["final ELBO"] > rows["Adam"]["final ELBO"] > rows["SGD"]["final ELBO"]
    assert rows["PG-SVI"]["final test log-loss"] < 0.3
    assert len(s["curves"]["pg_svi"]["passes"]) == 2 and s["curves"]["adam"]["passes"] == [1.0, 2.0]
    for name in ("fig2_digits_3v5.png", "results.md", "metrics.json"):
        assert os.path.getsize(tmp_path / name) > 0
    assert "PG-SVI" in (tmp_path / "results.md").read_text()
    # L*, batch PG with exact gradients, lies above every method's ELBO; passes are counted to it too
    assert s["optimum_elbo"] >= max(max(c["elbo"]) for c in s["curves"].values()) - 1e-9
    assert "passes to within 1% of L*" in rows["PG-SVI"] and "L* = " in (tmp_path / "results.md").read_text()


@pytest.mark.slow
def test_step_size_small(tmp_path):
    cfg = load_config(
        {
            "experiment": "gpc_step_size",
            "data": {"dataset": "digits_3v5"},
            "algorithm": {
                "gd_rates": [3e-3],
                "pg_betas": [1.0],
                "pg_mc_betas": [1.0],
                "pg_svi_betas": [0.01],
                "pg_mc_samples": 20,
                "num_samples": 20,
                "max_passes_batch": 40,
                "max_passes_svi": 2,
                "tol": 1e-3,
                "optimum_steps": 100,
            },
            "run": {"num_steps": 10, "chunk_size": 5, "progress": False},
            "output": {"dir": str(tmp_path)},
        }
    )
    _, metrics = run_experiment(cfg)
    rows = {r["method"]: r for r in metrics["summary"]["table"]}
    assert set(rows) == {"GD", "PG", "PG-MC", "PG-SVI"}
    # batch PG with exact gradients converges within the budget (to L*), and sooner than GD
    assert rows["PG"]["examples to converge"] is not None
    assert abs(rows["PG"]["final ELBO"] - metrics["summary"]["optimum_elbo"]) < 1e-3 * abs(rows["PG"]["final ELBO"])
    assert (
        rows["GD"]["examples to converge"] is None
        or rows["GD"]["examples to converge"] > rows["PG"]["examples to converge"]
    )
    assert os.path.getsize(tmp_path / "fig1_digits_3v5.png") > 0


def test_helpers():
    curve = {"passes": [1.0, 2.0, 3.0, 4.0], "elbo": [-200.0, -101.5, -99.0, -99.5]}
    assert passes_to_within(curve, -99.0, 0.01) == 3.0
    assert passes_to_within(curve, -99.0, 0.03) == 2.0
    assert passes_to_within({"passes": [1.0], "elbo": [-300.0]}, -99.0, 0.01) is None
    assert examples_to_converge([-100.0, -50.0, -49.999, -49.0], -49.0, 0.05, 10) == 10
    assert examples_to_converge([-100.0, -50.0, -49.999, -49.0], -49.0, 1e-4, 10) == 30
    assert examples_to_converge([-100.0, np.nan, -49.0], -49.0, 1e-4, 10) is None
    assert examples_to_converge([-49.0, -60.0], -49.0, 1e-4, 10) is None
    opt = optimum_elbo(np.array([[-90.0], [-50.0], [np.nan], [-49.5]] + [[-49.0]] * 16))
    assert opt["elbo"] == -49.0 and opt["last_change"] == 0.0
    assert optimum_elbo([-60.0, -50.0])["last_change"] == 10.0


@pytest.mark.slow
def test_optimum_baseline_reaches_a_stationary_point():
    """L* of both experiments: the "optimum" baseline is batch PG with exact gradients whose
    info.elbo is the exact ELBO; 100 steps of beta = 0.3 on 12 points end where the (m, L) ELBO
    gradient vanishes."""
    import types

    import jax
    import jax.numpy as jnp

    from vijax.models.gp_classification import params_from_cholesky
    from vijax.run.experiments.gp_classification import _model, _optimum_baseline

    r = np.random.default_rng(0)
    x = r.normal(size=(12, 2))
    data = types.SimpleNamespace(x_train=x, y_train=(x[:, 0] + 0.3 * r.normal(size=12) > 0).astype(int))
    s = {"log_lengthscale": 0.2, "log_scale": 1.0, "jitter": 1e-2, "mean_update": "paper"}
    model = _model(s, data, quadrature=True)
    base = _optimum_baseline(model, 0.3, 100)
    assert base.name == "optimum" and base.settings["num_steps"] == 100
    alg = base.algorithm

    def body(st, t):
        st, info = alg.step(jax.random.PRNGKey(0), st, base.batch_fn(None, t))
        return st, info.elbo

    st, elbos = jax.jit(lambda st: jax.lax.scan(body, st, jnp.arange(100)))(alg.init(jax.random.PRNGKey(0)))
    np.testing.assert_allclose(elbos[-1], model.elbo(st.q_global), rtol=1e-12)
    params = params_from_cholesky(st.q_global.mean, jnp.linalg.cholesky(model.covariance(st.q_global)))
    g = jax.grad(model.elbo_params)(params)
    assert np.max(np.abs(g["m"])) < 1e-5 and np.max(np.abs(jnp.tril(g["L"]))) < 1e-5
    assert PAPER["sonar"]["beta_n"] == 0.2 and PAPER["usps_3v5"]["batch_size"] == 20


def test_config_errors(tmp_path):
    bad = load_config({"experiment": "gpc_compare", "data": {"dataset": "iris"}, "output": {"dir": str(tmp_path)}})
    with pytest.raises(ValueError, match="iris"):
        run_experiment(bad)
    bad = load_config(
        {
            "experiment": "gpc_compare",
            "data": {"dataset": "digits_3v5"},
            "algorithm": {"methods": ["lbfgs"]},
            "output": {"dir": str(tmp_path)},
        }
    )
    with pytest.raises(ValueError, match="lbfgs"):
        run_experiment(bad)


@pytest.mark.slow
def test_step_size_grids_equal_runs_one_by_one():
    """Figure 1's sweeps run one program per method (``factory_grid``, the step size in the state):
    a step size of the grid follows its own run (GD by the named optimizer, PG-SVI on minibatches
    with Monte Carlo draws) on the same batches with the same keys. Float64; rtol 1e-9 (the
    batched program rounds differently)."""
    import jax

    from vijax.data import epoch_batches
    from vijax.inference import optax_vi, prox_svi
    from vijax.run.experiments.gp_classification import _model, _resolve, _step_size_points

    with jax.enable_x64(True):
        a = {"gd_rates": [3e-3, 1e-2], "pg_betas": [1.0], "pg_mc_betas": [1.0], "pg_svi_betas": [0.01, 0.03]}
        a |= {"pg_mc_samples": 5, "num_samples": 5, "max_passes_batch": 3, "max_passes_svi": 1}
        a |= {"optimum_steps": 3, "optimum_beta": 0.3}
        sections = {
            "model": {"mean_update": "paper"},
            "algorithm": dict(a),
            "data": {"dataset": "digits_3v5", "split_seed": 0},
        }
        s, data = _resolve(sections)
        exact, mc = _model(s, data, quadrature=True), _model(s, data)
        n = exact.num_data
        full = np.arange(n)
        svi_batches, spp = epoch_batches(n, s["batch_size"], jax.random.PRNGKey(7))
        points = {p.method: p for p in _step_size_points(s, a, exact, mc, svi_batches, spp)}
        own = {
            "gd": optax_vi(exact, optimizer="gd", schedule=1e-2),
            "pg_svi": prox_svi(mc, num_data=n, schedule=0.03, num_samples=5),
        }
        key = jax.random.PRNGKey(0)
        for method, alg in own.items():
            grid = points[method].baseline.algorithm
            gs, st = grid.init(key), alg.init(key)
            grid_step, own_step = jax.jit(grid.step), jax.jit(alg.step)
            for t in range(3):
                k, b = jax.random.fold_in(key, t), (full if method == "gd" else svi_batches(key, t))
                gs, _ = grid_step(k, gs, b)
                st, _ = own_step(k, st, b)
            for u, v in zip(jax.tree_util.tree_leaves(gs.state.q_global), jax.tree_util.tree_leaves(st.q_global)):
                np.testing.assert_allclose(np.asarray(u)[1], v, rtol=1e-9, atol=1e-12)
            assert not np.allclose(
                jax.tree_util.tree_leaves(gs.state.q_global)[0][0], jax.tree_util.tree_leaves(st.q_global)[0]
            )
