"""Bayesian linear regression with automatic relevance determination by CAVI (Blei, Kucukelbir and
McAuliffe 2017, appendix A), beside scikit-learn's ``ARDRegression`` (type-II maximum likelihood).

On ``vijax.data.sample_sparse_regression`` data, the report gives every coefficient's posterior mean and sd,
E[alpha], the noise sd, the held-out RMSE and log predictive (Student-t), the same for scikit-learn's ARD
where installed, and writes ``results.md`` and ``ard_coefficients.png``.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from vijax.data import sample_sparse_regression
from vijax.models import ARDRegression
from vijax.run import ConfigError, configured_algorithm, Experiment, float_bytes, MemoryNeed, register_experiment
from ._common import md_table, train_test_bounds, train_test_need
from ._plotting import figure, optional_plot

_DEFAULTS = {
    "model": {"a0": 1e-6, "b0": 1e-6, "c0": 1e-6, "d0": 1e-6},
    "data": dict(num_train=200, num_test=1000, dim=30, num_relevant=5, noise=1.0, correlation=0.5, seed=0),
    "algorithm": {"name": "cavi"},
    "run": {"num_steps": 500, "chunk_size": 50, "tol": 1e-8, "patience": 2, "eval_every": 50, "x64": True},
}
_BOUNDS = {
    **{f"model.{k}": "> 0" for k in ("a0", "b0", "c0", "d0")},
    **train_test_bounds(dim=">= 1", num_relevant="in [0, data.dim]", noise="> 0", correlation="in [0, 1)"),
}


def _memory(config) -> list[MemoryNeed]:
    d, f = config["data"], float_bytes(config)
    return [
        train_test_need(config),
        MemoryNeed("the posterior's covariances (4 x data.dim x data.dim)", ("data.dim",), 4 * d["dim"] ** 2 * f),
    ]


@register_experiment("ard_regression", defaults=_DEFAULTS, bounds=_BOUNDS, memory=_memory)
def build(sections: dict, seed: int) -> Experiment:
    """Blei et al. 2017, app. A: ARD linear regression by CAVI on sparse synthetic data, vs
    scikit-learn"""
    d, m = sections["data"], sections["model"]
    try:
        sizes = (d["num_train"] + d["num_test"], d["dim"], d["num_relevant"])
        dtype = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
        data = sample_sparse_regression(
            jax.random.PRNGKey(d["seed"]), *sizes, noise=d["noise"], correlation=d["correlation"], dtype=dtype
        )
    except ValueError as e:
        raise ConfigError(f"data: {e}") from None
    try:
        model = ARDRegression(dim=d["dim"], **{k: m[k] for k in ("a0", "b0", "c0", "d0")})
    except ValueError as e:
        raise ConfigError(f"model: {e}") from None
    n = d["num_train"]
    train = (data.x[:n], data.y[:n])
    x_test, y_test = data.x[n:], data.y[n:]
    model.check_data(train)
    alg = configured_algorithm(sections["algorithm"], _DEFAULTS["algorithm"], model, num_data=n)

    @jax.jit
    def heldout(q_alpha):
        mean, _ = model.predict(q_alpha, train, x_test)
        return {
            "heldout_rmse": jnp.sqrt(jnp.mean((y_test - mean) ** 2)),
            "heldout_log_predictive": jnp.mean(model.log_predictive(q_alpha, train, x_test, y_test)),
        }

    def eval_fn(state):
        return {k: float(v) for k, v in heldout(state.q_global).items()}

    def report(result, out_dir, baselines):
        q = result.state.q_global
        post = model.posterior(q, train)
        w_true = np.asarray(data.w)
        w_mean = np.asarray(post.mean)
        w_sd = np.sqrt(
            np.diag(np.asarray(post.cov_scale)) * float(post.tau_rate) / max(float(post.tau_shape) - 1, 1e-12)
        )
        relevant = w_true != 0
        summary = {
            "coef_rmse": float(np.sqrt(np.mean((w_mean - w_true) ** 2))),
            "max_abs_irrelevant_coef": float(np.max(np.abs(w_mean[~relevant]))) if (~relevant).any() else 0.0,
            "noise_sd": float(np.sqrt(post.tau_rate / post.tau_shape)),
            "true_noise_sd": data.noise,
            **eval_fn(result.state),
        }
        cols = {  # table column -> summary key
            "coefficient RMSE": "coef_rmse",
            "held-out RMSE": "heldout_rmse",
            "held-out mean log predictive": "heldout_log_predictive",
            "noise sd": "noise_sd",
        }
        rows = [{"method": "vijax CAVI (VB-ARD)"} | {c: summary[k] for c, k in cols.items()}]
        w_sk = None
        try:
            from sklearn.linear_model import ARDRegression as SkARD  # deferred: optional, slow to import
        except ImportError:
            summary["sklearn"] = "scikit-learn not installed: no comparison"
        else:
            priors = {"alpha_1": m["a0"], "alpha_2": m["b0"], "lambda_1": m["c0"], "lambda_2": m["d0"]}
            sk = SkARD(fit_intercept=False, max_iter=1000, tol=1e-8, **priors)
            sk.fit(np.asarray(train[0]), np.asarray(train[1]))
            w_sk = sk.coef_
            mean_sk, sd_sk = sk.predict(np.asarray(x_test), return_std=True)
            y_np = np.asarray(y_test)
            lp_sk = float(np.mean(-0.5 * np.log(2 * np.pi * sd_sk**2) - 0.5 * (y_np - mean_sk) ** 2 / sd_sk**2))
            summary["sklearn"] = {
                "coef_rmse": float(np.sqrt(np.mean((w_sk - w_true) ** 2))),
                "heldout_rmse": float(np.sqrt(np.mean((y_np - mean_sk) ** 2))),
                "heldout_log_predictive": lp_sk,
                "noise_sd": float(1 / np.sqrt(sk.alpha_)),
                "max_abs_coef_difference": float(np.max(np.abs(w_sk - w_mean))),
            }
            rows.append({"method": "scikit-learn ARDRegression"} | {c: summary["sklearn"][k] for c, k in cols.items()})
        _plot(os.path.join(out_dir, "ard_coefficients.png"), w_true, w_mean, w_sd, w_sk)
        lines = [
            "# ARD linear regression (Blei et al. 2017, appendix A)",
            "",
            f"{n} training and {d['num_test']} test points, D = {d['dim']} inputs of which {d['num_relevant']} "
            f"are relevant, AR(1) design correlation {d['correlation']}, noise sd {d['noise']}; "
            f"{result.num_steps} CAVI steps.",
            "",
            md_table(rows, ["method", *cols], lambda v: f"{v:.4f}"),
            "Figure: ard_coefficients.png (true coefficients, the posterior means with 2 sd, scikit-learn's).",
        ]
        with open(os.path.join(out_dir, "results.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
        return summary

    return Experiment(alg, lambda key: alg.init(key, train), lambda key, t: train, eval_fn, report)


@optional_plot
def _plot(path, w_true, w_mean, w_sd, w_sk):
    with figure(path, (9, 3.6), dpi=110) as (fig, ax):
        idx = np.arange(w_true.size)
        ax.bar(idx, w_true, color="0.85", label="true w")
        ax.errorbar(idx - 0.15, w_mean, yerr=2 * w_sd, fmt="o", ms=4, label="E_q[w] ± 2 sd (vijax CAVI)")
        if w_sk is not None:
            ax.plot(idx + 0.15, w_sk, "x", color="C3", label="scikit-learn ARDRegression")
        ax.axhline(0, color="k", lw=0.5)
        ax.set_xlabel("coefficient")
        ax.legend(fontsize=8)
        ax.set_title("ARD: irrelevant coefficients shrink to zero")
