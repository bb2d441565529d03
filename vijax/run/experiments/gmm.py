"""Gaussian-mixture experiments of Blei, Kucukelbir & McAuliffe (2017), *Variational Inference: A
Review for Statisticians*, §3.4: the 2-D simulation (``gmm_simulation``, the default ``vijax run``),
the image histograms of appendix B, synthetic and 576-dimensional (``gmm_histograms``), and CAVI
against NumPyro's NUTS by held-out log predictive against wall time (``gmm_cavi_vs_nuts``, Figure 6).
"""

from __future__ import annotations

import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax.data import sample_gmm, sample_histogram_mixture
from vijax.inference import restarts, select_restart
from vijax.metrics import cluster_purity, match_components, mean_log_predictive
from vijax.models import DiagonalGMM, FullGMM, conjugate_elbo
from vijax.run import ConfigError, configured_algorithm, Experiment, float_bytes, MemoryNeed, register_experiment
from vijax.run import SEED_BOUND
from vijax._validate import require
from ._common import best_restart, diag_mixture_log_density, needs
from ._plotting import figure, optional_plot

_MODEL_DEFAULTS = {"num_components": 5, "alpha0": 1.0, "kappa0": 1.0, "a0": 1.0, "empirical_bayes": True}
_MODEL_DEFAULTS |= {"covariance": "diag"}
# name: any registered algorithm on the full data at every step; local and ramp reach those that take
# them; step_size (None: the algorithm's default schedule) those with a step size (CAVI has none).
_ALG_DEFAULTS = {"name": "cavi", "local": "meanfield", "ramp": False, "step_size": None, "num_restarts": 5}
# start: "kmeans++", the model's own (greedy k-means++ seeds, one M-step), or "random" (_random_start)
_ALG_DEFAULTS |= {"start": "kmeans++"}
_STARTS = ("kmeans++", "random")
_SIMULATION_DATA = {"num_train": 1000, "num_test": 1000, "num_clusters": 5, "dim": 2, "spread": 8.0}
_BOUNDS = {"model.num_components": ">= 1", **{f"model.{k}": "> 0" for k in ("alpha0", "kappa0", "a0")}}
_BOUNDS |= {"algorithm.step_size": "null or number in (0, 1]", "algorithm.num_restarts": ">= 1"}
_BOUNDS |= {"data.num_train": ">= 1", "data.num_test": ">= 1"}
_SIMULATION_BOUNDS = dict(_BOUNDS, **{"data.num_clusters": ">= 1", "data.dim": ">= 1", "data.spread": "> 0"})
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
    """The configured GMM; with ``empirical_bayes``, its prior from the data (m0: the mean; b0 = a0 var(x))."""
    if cfg["covariance"] not in ("diag", "full"):
        raise ConfigError(f"model.covariance must be 'diag' or 'full', got {cfg['covariance']!r}")
    cls, k = FullGMM if cfg["covariance"] == "full" else DiagonalGMM, cfg["num_components"]
    prior = {"alpha0": cfg["alpha0"], "kappa0": cfg["kappa0"]} | ({} if cls is FullGMM else {"a0": cfg["a0"]})
    return cls.from_data(x, k, **prior) if cfg["empirical_bayes"] else cls(k, x.shape[1], **prior)


def _random_start(model, key, x, features):
    """Blei et al. (2017), §2.5 (their Figure 2's starts): K means drawn from a factorized Gaussian at the data's
    mean and variance; each point assigned to the nearest, then one M-step."""
    x = jnp.asarray(x, features.dtype)
    centers = x.mean(0)[None] + x.std(0)[None] * jax.random.normal(key, (model.num_components, x.shape[1]), x.dtype)
    d2 = jnp.sum(centers**2, axis=1)[None, :] - 2.0 * x @ centers.T  # |x - c|^2 less |x|^2, (N, K)
    resp = jax.nn.one_hot(jnp.argmin(d2, axis=1), model.num_components, dtype=x.dtype)
    return model.posterior_from_responsibilities(features, resp)


def _experiment(a: dict, model, x_train, x_test, make_report, keep_start: bool = False) -> Experiment:
    """The configured algorithm (CAVI by default) with ``a["num_restarts"]`` restarts run together by
    ``vmap``, on the full data at every step, evaluated by the held-out mean log predictive of the best
    restart's q. The report is ``make_report(result, out_dir, best(state) -> q, start)``, ``start`` the
    initial state when ``keep_start`` (None after a resume)."""
    model.check_data(x_train)
    model.check_data(x_test)
    if a["start"] not in _STARTS:
        raise ConfigError(f"algorithm.start must be one of {list(_STARTS)}, got {a['start']!r}")
    alg = configured_algorithm(
        a, _ALG_DEFAULTS, model, num_data=x_train.shape[0], schedule=a["step_size"], schedule_keys=("step_size",)
    )
    alg = restarts(alg, a["num_restarts"])
    xj = model.features(jnp.asarray(x_train))  # [x, x^2], computed once for every step

    best_q = best_restart(lambda q: conjugate_elbo(model.prior(), q, model.local_step(expfam.tree_mean_params(q), xj)))
    best = lambda state: best_q(state.q_global)  # the ELBO with the locals at their optimum
    start = {}

    def init(key):
        if a["start"] == "kmeans++":
            state = alg.init(key, xj)
        else:  # the algorithm's state (every one a mixture runs keeps a q_global), its q the random starts
            k_alg, k_start = jax.random.split(key)
            state = alg.init(k_alg, xj)
            starts = jax.vmap(lambda k: _random_start(model, k, x_train, xj))(
                jax.random.split(k_start, a["num_restarts"])
            )
            state = state._replace(q_global=starts)
        if keep_start:
            start["state"] = state
        return state

    evaluate = lambda state: {"heldout_log_predictive": mean_log_predictive(model, best(state), x_test)}  # noqa: E731
    report = lambda result, out_dir, baselines: make_report(result, out_dir, best, start.get("state"))  # noqa: E731
    return Experiment(alg, init, lambda key, t: xj, evaluate, report)


def _summary(model, q, x_test, truth=None) -> dict:
    w, means, var = (np.asarray(a) for a in model.point_estimates(q))
    out = {
        "heldout_log_predictive": mean_log_predictive(model, q, x_test),
        "components_used": int(np.sum(w > 0.01)),
        "weights": np.round(w, 4).tolist(),
    }
    if truth is not None:
        out["max_center_error"] = float(np.max(match_components(truth.means, means, w, min_weight=0.01)[1]))
    return out


def _simulation(d: dict, seed: int):
    """``num_train + num_test`` points of an axis-aligned Gaussian mixture (JAX's draws differ with and
    without ``run.x64``)."""
    key = jax.random.split(jax.random.PRNGKey(seed + 1_000_003))[0]
    n = d["num_train"] + d["num_test"]
    return sample_gmm(key, n, d["num_clusters"], d["dim"], spread=d["spread"], dtype=jnp.float32)


@register_experiment(
    "gmm_simulation",
    defaults={
        "model": _MODEL_DEFAULTS,
        "data": _SIMULATION_DATA,
        "algorithm": _ALG_DEFAULTS,
        "run": {"num_steps": 200, "chunk_size": 5, "tol": 1e-6, "patience": 2, "eval_every": 5},
    },
    bounds=_SIMULATION_BOUNDS,
    memory=lambda config: _memory(config, config["data"]["dim"], ("data.dim",)),
)
def build_simulation(sections: dict, seed: int) -> Experiment:
    """Blei et al. 2017, §3.4: CAVI for a K=5 Gaussian mixture on simulated 2-D data"""
    d, n = sections["data"], sections["data"]["num_train"]
    full = _simulation(d, seed)
    x_train, x_test = np.asarray(full.x[:n]), np.asarray(full.x[n:])
    model = _model(sections["model"], x_train)

    def report(result, out_dir, best, start):
        q = best(result.state)
        if d["dim"] == 2:
            q0 = None  # the initial q of the restart that won
            if start is not None:
                q0 = select_restart(start.q_global, int(jnp.argmax(result.trace["elbo"][-1])))
            method = sections["algorithm"]["name"].upper()
            _plot_ellipses(
                os.path.join(out_dir, "fit.png"), model, x_train, np.asarray(full.z[:n]), q0, q, result, method
            )
        return _summary(model, q, x_test, full)

    return _experiment(sections["algorithm"], model, x_train, x_test, report, keep_start=True)


@register_experiment(
    "gmm_histograms",
    defaults={
        "model": dict(_MODEL_DEFAULTS, num_components=30, alpha0=1.0),
        "data": {"num_train": 10000, "num_test": 10000, "num_types": 30, "pixels": 1024, "concentration": 0.1},
        "algorithm": _ALG_DEFAULTS,
        "run": {"num_steps": 300, "chunk_size": 10, "tol": 1e-6, "patience": 2, "eval_every": 10},
    },
    bounds=dict(_BOUNDS, **{"data.num_types": ">= 1", "data.pixels": ">= 1", "data.concentration": "> 0"}),
    memory=lambda config: _memory(config, _HISTOGRAM_DIM, ()),
)
def build_histograms(sections: dict, seed: int) -> Experiment:
    """Blei et al. 2017, §3.4 / app. B: CAVI, K=30 diagonal GMM on synthetic 576-dim colour
    histograms"""
    d, n = sections["data"], sections["data"]["num_train"]
    key = jax.random.PRNGKey(seed + 1_000_003)
    full = sample_histogram_mixture(
        key, n + d["num_test"], d["num_types"], pixels=d["pixels"], concentration=d["concentration"], dtype=jnp.float32
    )
    x_train, x_test = np.asarray(full.x[:n]), np.asarray(full.x[n:])
    model = _model(sections["model"], x_train)

    def report(result, out_dir, best, start):
        q = best(result.state)
        summary = _summary(model, q, x_test)
        z_hat = np.asarray(jnp.argmax(model.log_resp(expfam.tree_mean_params(q), jnp.asarray(x_test)), axis=1))
        summary["test_purity"] = cluster_purity(np.asarray(full.z[n:]), z_hat)
        elbos = np.asarray(result.trace["elbo"], np.float64)
        if elbos.ndim == 2:  # (steps, restarts): Blei et al. 2017, Figure 2
            summary.update(_restart_optima(elbos[-1]))
            _plot_restarts(os.path.join(out_dir, "elbo_restarts.png"), np.asarray(result.trace["step"]), elbos)
        return summary

    return _experiment(sections["algorithm"], model, x_train, x_test, report)


def _restart_optima(final: np.ndarray, rtol: float = 1e-6) -> dict:
    """The final ELBO of each restart, and how many distinct local optima they reached: final values
    that differ by more than ``rtol`` relatively are different optima (Blei et al. 2017, Figure 2)."""
    ordered = np.sort(final)
    distinct = 1 + int(np.sum(np.diff(ordered) > rtol * np.abs(ordered[1:])))
    return {"final_elbo_per_restart": final.tolist(), "distinct_local_optima": distinct}


@optional_plot
def _plot_restarts(path, steps: np.ndarray, elbos: np.ndarray) -> None:
    """The ELBO of each restart against the iteration (Blei et al. 2017, Figure 2)."""
    with figure(path, (6.5, 4.0)) as (fig, ax):
        for r in range(elbos.shape[1]):
            ax.plot(steps, elbos[:, r], lw=1.2)
        top = elbos[-1].max()
        span = top - np.median(elbos[max(0, len(steps) // 10)])
        ax.set(
            ylim=(top - 3 * max(span, 1e-9), top + 0.1 * max(span, 1e-9)),
            xlabel="CAVI iteration",
            ylabel="ELBO",
            title=f"{elbos.shape[1]} starts: different local optima",
        )


@optional_plot
def _plot_ellipses(path, model, x, z, q_init, q_fit, result, method="CAVI"):
    """Data coloured by true cluster with the 2-sigma contours of the fitted components, at the
    start and at the end (Blei et al. 2017, figure 3), and the ELBO and held-out traces."""
    from matplotlib.patches import Ellipse

    with figure(path, (15, 4.6), 1, 3, dpi=110) as (fig, axes):
        for ax, q, title in (
            (axes[0], q_init, "initial q"),
            (axes[1], q_fit, f"after {result.num_steps} {method} steps"),
        ):
            ax.scatter(x[:, 0], x[:, 1], c=z, s=4, cmap="tab10", alpha=0.6)
            if q is not None:
                w, means, var = (np.asarray(a) for a in model.point_estimates(q))
                for wk, m, v in zip(w, means, var):
                    if wk >= 0.01:  # the ellipse of the covariance's eigenvectors (a diagonal one: axis-aligned)
                        evals, evecs = np.linalg.eigh(v[:2, :2] if np.ndim(v) == 2 else np.diag(v[:2]))
                        angle = float(np.degrees(np.arctan2(evecs[1, 1], evecs[0, 1])))
                        size = 4 * np.sqrt(evals[::-1])
                        ax.add_patch(Ellipse(m[:2], *size, angle=angle, fill=False, lw=2, color="k"))
                        ax.annotate(f"{wk:.2f}", m[:2], fontsize=8)
            ax.set_title(title)
            ax.set_aspect("equal", "datalim")
        elbo = np.asarray(result.trace["elbo"])
        elbo = elbo.max(axis=1) if elbo.ndim == 2 else elbo  # best restart at each step
        axes[2].plot(np.arange(1, len(elbo) + 1), elbo, label="ELBO")
        axes[2].set(xlabel=f"{method} step", ylabel="ELBO (best restart)")
        if result.evals:
            ax2 = axes[2].twinx()
            ax2.plot([e["step"] for e in result.evals], [e["heldout_log_predictive"] for e in result.evals], "C1.-")
            ax2.set_ylabel("held-out mean log predictive", color="C1")
        axes[2].set_title("ELBO and held-out log predictive")


# ---- CAVI against NUTS (Figure 6) --------------------------------------------------------------
# NUTS samples ``DiagonalGMM.from_data``'s posterior written as a NumPyro model with the assignments
# summed out. Its held-out log predictive after s draws, the mean over test points of
# log (1/s) sum_{j <= s} p(x* | theta_j), is placed at the warmup's wall time plus s / S of the
# sampling time; CAVI's is q's (Bishop 2006, eq. 10.81). NUTS starts at the point estimates of a CAVI
# start (k-means++ seeding, one M-step): from NumPyro's default start it settles in merged clusters.

_NUTS = {"warmup": 500, "samples": 1000, "target_accept": 0.8, "seed": 1}
_NUTS_DEFAULTS = {
    "model": {"num_components": 5, "alpha0": 1.0, "kappa0": 1.0, "a0": 1.0},
    "data": _SIMULATION_DATA,
    "algorithm": dict(_ALG_DEFAULTS, num_restarts=1, within=0.01, nuts=_NUTS),
    "run": {"num_steps": 100, "chunk_size": 1, "eval_every": 1, "tol": 1e-8, "patience": 3},
}
_NUTS_BOUNDS = _SIMULATION_BOUNDS | {"algorithm.within": "> 0", "algorithm.nuts.warmup": ">= 1"}
_NUTS_BOUNDS |= {"algorithm.nuts.samples": ">= 1", "algorithm.nuts.target_accept": "in (0, 1)"}
_NUTS_BOUNDS |= {"algorithm.nuts.seed": SEED_BOUND}


def _nuts_memory(config) -> list[MemoryNeed]:
    m, d, a, f = config["model"], config["data"], config["algorithm"], float_bytes(config)
    n, k, s = d["num_train"] + d["num_test"], m["num_components"], a["nuts"]["samples"]
    return [
        MemoryNeed(
            "the NUTS draws' test densities (algorithm.nuts.samples x data.num_test x model.num_components)",
            ("algorithm.nuts.samples", "data.num_test", "model.num_components"),
            2 * s * d["num_test"] * k * f,
        ),
        MemoryNeed(
            "the data and the responsibilities ((data.num_train + data.num_test) x model.num_components)",
            ("data.num_train", "data.num_test", "model.num_components"),
            4 * n * (k + d["dim"]) * f,
        ),
    ]


def nuts_curve(model: DiagonalGMM, x_train, x_test, nuts: dict, start: dict) -> dict:
    """NumPyro NUTS on ``model``'s posterior (assignments summed out), started at ``start``
    (``{"w", "mu", "tau"}``): the held-out log predictive after s draws at log-spaced s, with the
    wall time of each (see the module docstring)."""
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS, init_to_value

    shape = (model.num_components, model.dim)
    alpha = jnp.broadcast_to(jnp.asarray(model.alpha0), shape[:1])
    loc0, a0, b0 = (jnp.broadcast_to(jnp.asarray(v), shape) for v in (model.loc0, model.a0, model.b0))
    kappa0 = jnp.asarray(model.kappa0)

    def gmm(x):
        w = numpyro.sample("w", dist.Dirichlet(alpha))
        tau = numpyro.sample("tau", dist.Gamma(a0, b0).to_event(2))
        mu = numpyro.sample("mu", dist.Normal(loc0, 1.0 / jnp.sqrt(kappa0 * tau)).to_event(2))
        numpyro.factor("x", jnp.sum(diag_mixture_log_density(w, mu, tau**-0.5, x)))

    kernel = NUTS(gmm, target_accept_prob=nuts["target_accept"], init_strategy=init_to_value(values=start))
    mcmc = MCMC(kernel, num_warmup=nuts["warmup"], num_samples=nuts["samples"], num_chains=1, progress_bar=False)
    key = jax.random.PRNGKey(nuts["seed"])
    t0 = time.perf_counter()
    mcmc.warmup(key, x_train, collect_warmup=False)
    jax.block_until_ready(mcmc.post_warmup_state)
    t1 = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key, x_train)
    draws = jax.block_until_ready(mcmc.get_samples())
    t2 = time.perf_counter()
    per_draw = jax.jit(jax.vmap(lambda w, mu, tau: diag_mixture_log_density(w, mu, tau**-0.5, x_test)))(
        draws["w"], draws["mu"], draws["tau"]
    )  # (S, N_test)
    cum = jax.lax.cumlogsumexp(per_draw, axis=0)  # log sum_{j <= s} p(x* | theta_j)
    s_all = np.arange(1, per_draw.shape[0] + 1)
    at = np.unique(np.geomspace(1, len(s_all), 40).astype(int))
    scores = np.asarray(jnp.mean(cum[at - 1] - jnp.log(jnp.asarray(at, cum.dtype))[:, None], axis=1))
    extra = mcmc.get_extra_fields()
    return {
        "draws": at.tolist(),
        "wall_time": (t1 - t0 + (t2 - t1) * at / len(s_all)).tolist(),
        "heldout_log_predictive": scores.tolist(),
        "warmup_s": t1 - t0,
        "sampling_s": t2 - t1,
        "divergences": int(np.sum(np.asarray(extra["diverging"]))) if "diverging" in extra else None,
    }


def first_time_within(times, scores, target: float, within: float):
    """The first wall time at which ``scores`` come within ``within`` of ``target`` (None: never)."""
    return next((float(t) for t, v in zip(times, scores) if v >= target - within), None)


def _seconds(t) -> str:
    return "never" if t is None else f"{t:.2f}"


@optional_plot
def _plot_nuts(path, cavi: tuple, nuts: dict) -> None:
    with figure(path, (6.5, 4.0)) as (fig, ax):
        ax.plot(cavi[0], cavi[1], ".-", label="CAVI")
        ax.plot(nuts["wall_time"], nuts["heldout_log_predictive"], ".-", label="NUTS (NumPyro)")
        ax.axvline(nuts["warmup_s"], color="grey", lw=0.8, ls=":", label="NUTS warmup ends")
        ax.set_xscale("log")
        top = max(max(cavi[1]), max(nuts["heldout_log_predictive"]))
        ax.set(
            ylim=(top - 1.0, top + 0.1),
            xlabel="wall time (s, compilation included)",
            ylabel="mean held-out log predictive",
            title="CAVI against NUTS on a Gaussian mixture",
        )
        ax.legend(fontsize=8)


@register_experiment("gmm_cavi_vs_nuts", defaults=_NUTS_DEFAULTS, bounds=_NUTS_BOUNDS, memory=_nuts_memory)
@needs({"numpyro": "its NUTS baseline"})
def build_cavi_vs_nuts(sections: dict, seed: int) -> Experiment:
    """Blei et al. 2017, Fig. 6: CAVI against NUTS (NumPyro) on a Gaussian mixture, held-out log
    predictive against wall time"""
    require("numpyro", "numpyro", "gmm_cavi_vs_nuts (its NUTS baseline)")  # NUTS runs after CAVI: checked first
    m, d, a = sections["model"], sections["data"], sections["algorithm"]
    n_tr, n_te = d["num_train"], d["num_test"]
    full = _simulation(d, seed)
    x_train, x_test = np.asarray(full.x[:n_tr]), np.asarray(full.x[n_tr:])
    model = DiagonalGMM.from_data(x_train, m["num_components"], alpha0=m["alpha0"], kappa0=m["kappa0"], a0=m["a0"])
    cavi = {k: v for k, v in a.items() if k not in ("within", "nuts")}

    def report(result, out_dir, best, start) -> dict:
        cavi_t = [ev["wall_time"] for ev in result.evals]
        cavi_s = [ev["heldout_log_predictive"] for ev in result.evals]
        # NUTS starts where a CAVI start does (k-means++ seeding, one M-step): its point estimates
        q0 = select_restart(experiment.init_state(jax.random.PRNGKey(a["nuts"]["seed"])).q_global, 0)
        w0, mu0, var0 = model.point_estimates(q0)
        start = {"w": jnp.asarray(w0), "mu": jnp.asarray(mu0), "tau": 1.0 / jnp.asarray(var0)}
        nuts = nuts_curve(model, jnp.asarray(x_train), jnp.asarray(x_test), a["nuts"], start)
        target = max(cavi_s[-1], nuts["heldout_log_predictive"][-1])
        summary = {
            "cavi_heldout_log_predictive": float(cavi_s[-1]),
            "nuts_heldout_log_predictive": float(nuts["heldout_log_predictive"][-1]),
            "cavi_wall_time": float(result.wall_time),
            "nuts_wall_time": float(nuts["warmup_s"] + nuts["sampling_s"]),
            "cavi_time_to_within": first_time_within(cavi_t, cavi_s, target, a["within"]),
            "nuts_time_to_within": first_time_within(
                nuts["wall_time"], nuts["heldout_log_predictive"], target, a["within"]
            ),
            "within": a["within"],
            "nuts_divergences": nuts["divergences"],
        }
        _plot_nuts(os.path.join(out_dir, "cavi_vs_nuts.png"), (cavi_t, cavi_s), nuts)
        with open(os.path.join(out_dir, "results.md"), "w") as f:
            f.write(
                f"# CAVI against NUTS on a Gaussian mixture\n\n{n_tr} training and {n_te} test points, "
                f"{d['num_clusters']} clusters in {d['dim']} dimensions; K = {m['num_components']}. NUTS: "
                f"{a['nuts']['warmup']} warmup and {a['nuts']['samples']} draws, one chain, "
                f"{summary['nuts_divergences']} divergences. Wall times include compilation.\n\n"
                f"| method | held-out mean log predictive | wall time (s) | time to within {a['within']} nats of the "
                "better (s) |\n|---|---|---|---|\n"
                f"| CAVI | {summary['cavi_heldout_log_predictive']:.4f} | {summary['cavi_wall_time']:.2f} | "
                f"{_seconds(summary['cavi_time_to_within'])} |\n"
                f"| NUTS | {summary['nuts_heldout_log_predictive']:.4f} | {summary['nuts_wall_time']:.2f} | "
                f"{_seconds(summary['nuts_time_to_within'])} |\n"
            )
        return summary

    experiment = _experiment(cavi, model, x_train, x_test, report)  # NUTS starts from its init_state
    return experiment


__all__ = ["build_cavi_vs_nuts", "build_histograms", "build_simulation", "first_time_within", "nuts_curve"]
