"""Gaussian-mixture experiments of Blei et al. 2017: the 2-D simulation of §3.4 (the default ``vijax run``)
and the image-histogram study of §3.4 / appendix B on synthetic 576-dimensional histograms."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from vijax.data import sample_gmm, sample_histogram_mixture
from vijax import expfam
from vijax.inference import restarts, select_restart
from vijax.models import conjugate_elbo
from vijax.metrics import cluster_purity, match_components, mean_log_predictive
from vijax.models import DiagonalGMM, FullGMM
from vijax.run import ConfigError, configured_algorithm, Experiment, float_bytes, MemoryNeed, register_experiment
from ._plotting import optional_plot

# covariance: "diag" (DiagonalGMM, Normal-Gamma components; a0 their Gamma shape) or "full" (FullGMM,
# Normal-Wishart components with scikit-learn's empirical-Bayes priors: nu0 = D, W0^-1 = cov(x); a0 unused).
_MODEL_DEFAULTS = {
    "num_components": 5,
    "alpha0": 1.0,
    "kappa0": 1.0,
    "a0": 1.0,
    "empirical_bayes": True,
    "covariance": "diag",
}
# name: any registered algorithm (vijax.inference.ALGORITHMS) on the full data at every step;
# local and ramp reach those that take them; step_size (a constant step, None: the algorithm's
# default schedule) those with a step size (CAVI has none).
_ALG_DEFAULTS = {"name": "cavi", "local": "meanfield", "ramp": False, "step_size": None, "num_restarts": 5}


_BOUNDS = {
    "model.num_components": ">= 1",
    **{f"model.{k}": "> 0" for k in ("alpha0", "kappa0", "a0")},
    "algorithm.step_size": "null or number in (0, 1]",
    "algorithm.num_restarts": ">= 1",
    "data.num_train": ">= 1",
    "data.num_test": ">= 1",
}
_HISTOGRAM_DIM = 3 * 192  # sample_histogram_mixture's channels x bins


def _memory(config, dim: int, dim_keys: tuple) -> list[MemoryNeed]:
    m, d, a, f = config["model"], config["data"], config["algorithm"], float_bytes(config)
    n, k, r = d["num_train"] + d["num_test"], m["num_components"], a["num_restarts"]
    cov = dim * dim if m["covariance"] == "full" else dim
    return [
        MemoryNeed(
            "the data and its features ((data.num_train + data.num_test) x the dimension)",
            ("data.num_train", "data.num_test") + dim_keys,
            3 * n * dim * f,
        ),
        MemoryNeed(
            "the restarts' responsibilities (algorithm.num_restarts x data.num_train x model.num_components)",
            ("algorithm.num_restarts", "data.num_train", "model.num_components"),
            3 * r * d["num_train"] * k * f,
        ),
        MemoryNeed(
            "the restarts' components (algorithm.num_restarts x model.num_components x the dimension)",
            ("algorithm.num_restarts", "model.num_components") + dim_keys,
            4 * r * k * (dim + cov) * f,
        ),
    ]


def _model(cfg: dict, x):
    k = cfg["num_components"]
    if cfg["covariance"] not in ("diag", "full"):
        raise ConfigError(f"model.covariance must be 'diag' or 'full', got {cfg['covariance']!r}")
    if cfg["covariance"] == "full":
        if cfg["empirical_bayes"]:
            return FullGMM.from_data(x, k, alpha0=cfg["alpha0"], kappa0=cfg["kappa0"])
        return FullGMM(k, x.shape[1], alpha0=cfg["alpha0"], kappa0=cfg["kappa0"])
    if cfg["empirical_bayes"]:
        # m0 = data mean; b0 = a0 var(x): the prior mean precision is 1 / var(x).
        return DiagonalGMM.from_data(x, k, alpha0=cfg["alpha0"], kappa0=cfg["kappa0"], a0=cfg["a0"])
    return DiagonalGMM(k, x.shape[1], alpha0=cfg["alpha0"], kappa0=cfg["kappa0"], a0=cfg["a0"])


def _algorithm(cfg: dict, model, num_data: int):
    """The configured algorithm (CAVI by default) on the full data, with ``num_restarts``
    independent restarts run together by ``vmap``."""
    alg = configured_algorithm(
        cfg, _ALG_DEFAULTS, model, num_data=num_data, schedule=cfg["step_size"], schedule_keys=("step_size",)
    )
    return restarts(alg, cfg["num_restarts"])


def _best_fn(model, feats):
    """A jitted ``state -> q`` of the restart with the highest ELBO (locals at their optimum)."""

    def elbo(q):
        return conjugate_elbo(model.prior(), q, model.local_step(expfam.tree_mean_params(q), feats))

    @jax.jit
    def best(state):
        return select_restart(state.q_global, jnp.argmax(jax.vmap(elbo)(state.q_global)))

    return best


def _build(sections: dict, seed: int, data) -> tuple:
    x_train, x_test = np.asarray(data[0]), np.asarray(data[1])
    model = _model(sections["model"], x_train)
    model.check_data(x_train)
    model.check_data(x_test)
    alg = _algorithm(sections["algorithm"], model, x_train.shape[0])
    xj = model.features(jnp.asarray(x_train))  # [x, x^2], computed once for every CAVI step
    return model, alg, xj


def _heldout_experiment(alg, model, xj, x_test, best, report, init=None) -> Experiment:
    """``alg`` on the full features ``xj`` at every step (from ``init(key)``, by default
    ``alg.init(key, xj)``), evaluated by the held-out mean log predictive of the best restart's q."""
    return Experiment(
        alg,
        init or (lambda key: alg.init(key, xj)),
        lambda key, t: xj,
        lambda state: {"heldout_log_predictive": mean_log_predictive(model, best(state), x_test)},
        report,
    )


def _summary(model, q, x_test, truth=None) -> dict:
    w, means, var = (np.asarray(a) for a in model.point_estimates(q))
    out = {
        "heldout_log_predictive": mean_log_predictive(model, q, x_test),
        "components_used": int(np.sum(w > 0.01)),
        "weights": np.round(w, 4).tolist(),
    }
    if truth is not None:
        _, dist = match_components(truth.means, means, w, min_weight=0.01)
        out["max_center_error"] = float(np.max(dist))
    return out


@register_experiment(
    "gmm_simulation",
    defaults={
        "model": dict(_MODEL_DEFAULTS),
        "data": {"num_train": 1000, "num_test": 1000, "num_clusters": 5, "dim": 2, "spread": 8.0},
        "algorithm": dict(_ALG_DEFAULTS),
        "run": {"num_steps": 200, "chunk_size": 5, "tol": 1e-6, "patience": 2, "eval_every": 5},
    },
    bounds=dict(_BOUNDS, **{"data.num_clusters": ">= 1", "data.dim": ">= 1", "data.spread": "> 0"}),
    memory=lambda config: _memory(config, config["data"]["dim"], ("data.dim",)),
)
def build_simulation(sections: dict, seed: int) -> Experiment:
    """Blei et al. 2017, §3.4: CAVI for a K=5 Gaussian mixture on simulated 2-D data"""
    dcfg = sections["data"]
    key_data = jax.random.split(jax.random.PRNGKey(seed + 1_000_003))[0]  # same draw as before
    n_tr, n_te = dcfg["num_train"], dcfg["num_test"]
    full = sample_gmm(
        key_data, n_tr + n_te, dcfg["num_clusters"], dcfg["dim"], spread=dcfg["spread"], dtype=jnp.float32
    )  # note: JAX draws differ with and without x64 (run.x64)
    x_train, x_test = full.x[:n_tr], full.x[n_tr:]
    model, alg, xj = _build(sections, seed, (x_train, x_test))
    best = _best_fn(model, xj)
    init_q = {}

    def init_state(key):
        state = alg.init(key, xj)
        init_q["state"] = state
        return state

    def report(result, out_dir, baselines):
        q = best(result.state)
        summary = _summary(model, q, x_test, full)
        if dcfg["dim"] == 2:
            # the initial q of the restart that won
            q0 = None
            if "state" in init_q:
                idx = int(jnp.argmax(result.trace["elbo"][-1]))
                q0 = select_restart(init_q["state"].q_global, idx)
            _plot_ellipses(
                os.path.join(out_dir, "fit.png"),
                model,
                np.asarray(x_train),
                np.asarray(full.z[:n_tr]),
                q0,
                q,
                result,
                sections["algorithm"]["name"].upper(),
            )
        return summary

    return _heldout_experiment(alg, model, xj, x_test, best, report, init_state)


@register_experiment(
    "gmm_histograms",
    defaults={
        "model": dict(_MODEL_DEFAULTS, num_components=30, alpha0=1.0),
        "data": {"num_train": 10000, "num_test": 10000, "num_types": 30, "pixels": 1024, "concentration": 0.1},
        "algorithm": dict(_ALG_DEFAULTS),
        "run": {"num_steps": 300, "chunk_size": 10, "tol": 1e-6, "patience": 2, "eval_every": 10},
    },
    bounds=dict(_BOUNDS, **{"data.num_types": ">= 1", "data.pixels": ">= 1", "data.concentration": "> 0"}),
    memory=lambda config: _memory(config, _HISTOGRAM_DIM, ()),
)
def build_histograms(sections: dict, seed: int) -> Experiment:
    """Blei et al. 2017, §3.4 / app. B: CAVI, K=30 diagonal GMM on synthetic 576-dim colour
    histograms"""
    dcfg = sections["data"]
    n_tr, n_te = dcfg["num_train"], dcfg["num_test"]
    full = sample_histogram_mixture(
        jax.random.PRNGKey(seed + 1_000_003),
        n_tr + n_te,
        dcfg["num_types"],
        pixels=dcfg["pixels"],
        concentration=dcfg["concentration"],
        dtype=jnp.float32,
    )
    x_train, x_test = full.x[:n_tr], full.x[n_tr:]
    model, alg, xj = _build(sections, seed, (x_train, x_test))
    best = _best_fn(model, xj)

    def report(result, out_dir, baselines):
        q = best(result.state)
        summary = _summary(model, q, x_test)
        z_hat = np.asarray(jnp.argmax(model.log_resp(expfam.tree_mean_params(q), jnp.asarray(x_test)), axis=1))
        summary["test_purity"] = cluster_purity(np.asarray(full.z[n_tr:]), z_hat)
        elbos = np.asarray(result.trace["elbo"], np.float64)
        if elbos.ndim == 2:  # (steps, restarts): Blei et al. 2017, Figure 2
            summary.update(_restart_optima(elbos[-1]))
            _plot_restarts(os.path.join(out_dir, "elbo_restarts.png"), np.asarray(result.trace["step"]), elbos)
        return summary

    return _heldout_experiment(alg, model, xj, x_test, best, report)


def _restart_optima(final: np.ndarray, rtol: float = 1e-6) -> dict:
    """The final ELBO of each restart, and how many distinct local optima they reached: final values
    that differ by more than ``rtol`` relatively are different optima (Blei et al. 2017, Figure 2)."""
    ordered = np.sort(final)
    distinct = 1 + int(np.sum(np.diff(ordered) > rtol * np.abs(ordered[1:])))
    return {"final_elbo_per_restart": final.tolist(), "distinct_local_optima": distinct}


@optional_plot
def _plot_restarts(path, steps: np.ndarray, elbos: np.ndarray) -> None:
    """The ELBO of each restart against the iteration (Blei et al. 2017, Figure 2)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.0))
    ax = fig.subplots()
    for r in range(elbos.shape[1]):
        ax.plot(steps, elbos[:, r], lw=1.2)
    top = elbos[-1].max()
    span = top - np.median(elbos[max(0, len(steps) // 10)])
    ax.set_ylim(top - 3 * max(span, 1e-9), top + 0.1 * max(span, 1e-9))
    ax.set_xlabel("CAVI iteration")
    ax.set_ylabel("ELBO")
    ax.set_title(f"{elbos.shape[1]} starts: different local optima")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


@optional_plot
def _plot_ellipses(path, model, x, z, q_init, q_fit, result, method="CAVI"):
    """Data coloured by true cluster with the 2-sigma contours of the fitted components, at the
    start and at the end (Blei et al. 2017, figure 3), and the ELBO and held-out traces."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Ellipse

    fig = Figure(figsize=(15, 4.6))
    axes = fig.subplots(1, 3)
    for ax, q, title in ((axes[0], q_init, "initial q"), (axes[1], q_fit, f"after {result.num_steps} {method} steps")):
        ax.scatter(x[:, 0], x[:, 1], c=z, s=4, cmap="tab10", alpha=0.6)
        if q is not None:
            w, means, var = (np.asarray(a) for a in model.point_estimates(q))
            for wk, m, v in zip(w, means, var):
                if wk < 0.01:
                    continue
                if np.ndim(v) == 2:  # a full covariance: the ellipse of its eigenvectors
                    evals, evecs = np.linalg.eigh(v[:2, :2])
                    angle = float(np.degrees(np.arctan2(evecs[1, 1], evecs[0, 1])))
                    ax.add_patch(
                        Ellipse(
                            m[:2],
                            4 * np.sqrt(evals[1]),
                            4 * np.sqrt(evals[0]),
                            angle=angle,
                            fill=False,
                            lw=2,
                            color="k",
                        )
                    )
                else:
                    ax.add_patch(Ellipse(m, 4 * np.sqrt(v[0]), 4 * np.sqrt(v[1]), fill=False, lw=2, color="k"))
                ax.annotate(f"{wk:.2f}", m, fontsize=8)
        ax.set_title(title)
        ax.set_aspect("equal", "datalim")
    elbo = np.asarray(result.trace["elbo"])
    elbo = elbo.max(axis=1) if elbo.ndim == 2 else elbo  # best restart at each step
    axes[2].plot(np.arange(1, len(elbo) + 1), elbo, label="ELBO")
    axes[2].set_xlabel(f"{method} step")
    axes[2].set_ylabel("ELBO (best restart)")
    if result.evals:
        ax2 = axes[2].twinx()
        ax2.plot([e["step"] for e in result.evals], [e["heldout_log_predictive"] for e in result.evals], "C1.-")
        ax2.set_ylabel("held-out mean log predictive", color="C1")
    axes[2].set_title("ELBO and held-out log predictive")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
