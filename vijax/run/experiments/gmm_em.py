"""Gaussian mixtures by maximum-likelihood EM (the tutorial *Raise your ELBO*, §EM and §GMM; Dempster, Laird
and Rubin 1977) with full, diagonal, spherical or tied covariances, on a random axis-aligned mixture, beside
scikit-learn's ``GaussianMixture`` from the same start (where installed and the run did not resume).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from vijax.data import sample_gmm
from vijax.models import GaussianMixtureEM, GMMParams
from vijax.run import configured_algorithm, Experiment, float_bytes, MemoryNeed, register_experiment

from ._common import diag_mixture_log_density, train_test_bounds, train_test_need

_MODEL = {"num_components": 5, "covariance_type": "full", "reg_covar": 1e-6, "init": "kmeans++", "block_size": 8192}
_DEFAULTS = {
    "model": _MODEL,
    "data": {"num_train": 2000, "num_test": 1000, "num_clusters": 5, "dim": 3, "spread": 4.0, "seed": 7},
    "algorithm": {"name": "em"},
    "run": {"num_steps": 50, "chunk_size": 10, "eval_every": 10, "x64": True},
}

_BOUNDS = {
    "model.num_components": ">= 1",
    "model.reg_covar": ">= 0",
    "model.block_size": ">= 1",
    **train_test_bounds(num_clusters=">= 1", dim=">= 1", spread="> 0"),
}


def _memory(config) -> list[MemoryNeed]:
    m, d, f = config["model"], config["data"], float_bytes(config)
    k, dim, n = m["num_components"], d["dim"], d["num_train"] + d["num_test"]
    return [
        train_test_need(config),
        MemoryNeed(
            "the responsibilities of a block (model.block_size x model.num_components x data.dim)",
            ("model.block_size", "model.num_components", "data.dim"),
            3 * min(m["block_size"], n) * k * (dim + 1) * f,
        ),
        MemoryNeed(
            "the covariances (model.num_components x data.dim x data.dim)",
            ("model.num_components", "data.dim"),
            4 * k * dim * dim * f,
        ),
    ]


def sklearn_from_start(model: GaussianMixtureEM, start: GMMParams, x: np.ndarray, iters: int):
    """scikit-learn's ``GaussianMixture`` started at ``start`` (weights, means, precisions) and run for
    ``iters`` EM iterations (tol = 0); None when scikit-learn is not installed."""
    try:
        from sklearn.mixture import GaussianMixture
    except ImportError:
        return None
    cov = np.asarray(start.covariances, np.float64)
    prec = np.linalg.inv(cov) if model.covariance_type in ("full", "tied") else 1.0 / cov
    ref = GaussianMixture(
        model.num_components,
        covariance_type=model.covariance_type,
        reg_covar=model.reg_covar,
        max_iter=iters,
        tol=0.0,
        weights_init=np.asarray(start.weights, np.float64),
        means_init=np.asarray(start.means, np.float64),
        precisions_init=prec,
        init_params="random",
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: tol = 0 runs every iteration
        ref.fit(np.asarray(x, np.float64))
    return ref


@register_experiment("gmm_em", defaults=_DEFAULTS, bounds=_BOUNDS, memory=_memory)
def build(sections: dict, seed: int) -> Experiment:
    """Gaussian mixtures by EM (full, diag, spherical, tied covariances), compared with
    scikit-learn's GaussianMixture from the same start"""
    m, d, a = sections["model"], sections["data"], sections["algorithm"]
    n_tr, n_te = d["num_train"], d["num_test"]
    data = sample_gmm(jax.random.PRNGKey(d["seed"]), n_tr + n_te, d["num_clusters"], d["dim"], spread=d["spread"])
    x_train, x_test = data.x[:n_tr], data.x[n_tr:]
    settings = {k: m[k] for k in ("covariance_type", "reg_covar", "init", "block_size")}
    model = GaussianMixtureEM(m["num_components"], d["dim"], **settings)
    model.check_data(x_train)
    alg = configured_algorithm(a, _DEFAULTS["algorithm"], model)
    truth = (data.weights, data.means, data.scales)
    start = {}
    init = jax.jit(lambda key: alg.init(key, x_train))

    def init_state(key):
        state = init(key)
        start["params"] = state.q_global
        return state

    def per_point(params, x):
        return float(jnp.mean(model.log_prob(params, x)))

    def eval_fn(state) -> dict:
        return {"heldout_ll_per_point": per_point(state.q_global, x_test)}

    def report(result, out_dir, baselines) -> dict:
        params = result.state.q_global
        out = {
            "train_ll_per_point": per_point(params, x_train),
            "heldout_ll_per_point": per_point(params, x_test),
            "true_heldout_ll_per_point": float(jnp.mean(diag_mixture_log_density(*truth, x_test))),
            "num_steps": int(result.state.count),
        }
        ref = sklearn_from_start(model, start["params"], x_train, out["num_steps"]) if "params" in start else None
        if ref is not None:
            out["sklearn_train_ll_per_point"] = float(ref.score(np.asarray(x_train, np.float64)))
            out["sklearn_max_abs_mean_difference"] = float(np.max(np.abs(np.asarray(params.means) - ref.means_)))
        return out

    return Experiment(alg, init_state, lambda key, t: x_train, eval_fn, report)


__all__ = ["build", "sklearn_from_start"]
