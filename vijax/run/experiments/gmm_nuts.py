"""CAVI against Hamiltonian Monte Carlo on a Gaussian mixture: Blei, Kucukelbir & McAuliffe (2017),
*Variational Inference: A Review for Statisticians*, §3.4 and Figure 6 (the held-out log predictive
against wall time; the paper runs Stan's NUTS on image histograms, here NumPyro's NUTS on the 2-D
simulation of ``gmm_simulation``).

The model is the one CAVI fits, ``DiagonalGMM.from_data`` (Dirichlet weights, Normal-Gamma
components, the same hyperparameters), written as a NumPyro model with the assignments summed out,
so both target the same posterior. CAVI runs through the runner (its evaluations give the held-out
log predictive under q, Bishop 2006, eq. 10.81, at their wall time, compilation included). NUTS
runs in the report (``algorithm.nuts``: warmup, samples, one chain, target acceptance): its held-out
log predictive after s draws is the mean over test points of log (1/s) sum_{j <= s} p(x* | theta_j),
placed at the warmup's wall time (compilation included) plus s / S of the sampling time. NUTS starts
at the point estimates of a CAVI start (k-means++ seeding and one M-step): from NumPyro's default
start (uniform in (-2, 2) on the unconstrained space, all means near the middle) it settles in a mode
with merged clusters, a multimodality that the posterior of a mixture has and that a start fixes. The summary
gives each method's final score and the wall time at which each first comes within
``algorithm.within`` nats of the better final score; ``cavi_vs_nuts.png`` draws both curves.
"""

from __future__ import annotations

import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from vijax.data import sample_gmm
from vijax.inference import select_restart
from vijax.models import DiagonalGMM
from vijax.run import Experiment, float_bytes, MemoryNeed, register_experiment, SEED_BOUND

from .gmm import _algorithm, _best_fn, _heldout_experiment
from ._plotting import optional_plot

_DEFAULTS = {
    "model": {"num_components": 5, "alpha0": 1.0, "kappa0": 1.0, "a0": 1.0},
    "data": {"num_train": 1000, "num_test": 1000, "num_clusters": 5, "dim": 2, "spread": 8.0},
    "algorithm": {
        "name": "cavi",
        "local": "meanfield",
        "ramp": False,
        "step_size": None,
        "num_restarts": 1,
        "within": 0.01,
        "nuts": {"warmup": 500, "samples": 1000, "target_accept": 0.8, "seed": 1},
    },
    "run": {"num_steps": 100, "chunk_size": 1, "eval_every": 1, "tol": 1e-8, "patience": 3},
}
_BOUNDS = {
    "model.num_components": ">= 1",
    **{f"model.{k}": "> 0" for k in ("alpha0", "kappa0", "a0")},
    "data.num_train": ">= 1",
    "data.num_test": ">= 1",
    "data.num_clusters": ">= 1",
    "data.dim": ">= 1",
    "data.spread": "> 0",
    "algorithm.step_size": "null or number in (0, 1]",
    "algorithm.num_restarts": ">= 1",
    "algorithm.within": "> 0",
    "algorithm.nuts.warmup": ">= 1",
    "algorithm.nuts.samples": ">= 1",
    "algorithm.nuts.target_accept": "in (0, 1)",
    "algorithm.nuts.seed": SEED_BOUND,
}


def _memory(config) -> list[MemoryNeed]:
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


def _mixture_log_density(w, mu, tau, x):
    """(N,) log sum_k w_k prod_d N(x_d | mu_kd, 1 / tau_kd)."""
    lp = 0.5 * jnp.sum(jnp.log(tau) - jnp.log(2 * jnp.pi), -1)[None, :] - 0.5 * jnp.sum(
        tau[None] * (x[:, None, :] - mu[None]) ** 2, -1
    )
    return jax.scipy.special.logsumexp(jnp.log(w)[None, :] + lp, axis=-1)


def nuts_curve(model: DiagonalGMM, x_train, x_test, nuts: dict, start: dict) -> dict:
    """NumPyro NUTS on ``model``'s posterior (assignments summed out), started at ``start``
    (``{"w", "mu", "tau"}``): the held-out log predictive after s draws at log-spaced s, with the
    wall time of each (see the module docstring)."""
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS, init_to_value

    k, dim = model.num_components, model.dim
    alpha, loc0, kappa0 = jnp.asarray(model.alpha0), jnp.asarray(model.loc0), jnp.asarray(model.kappa0)
    a0, b0 = jnp.asarray(model.a0), jnp.asarray(model.b0)

    def gmm(x):
        w = numpyro.sample("w", dist.Dirichlet(jnp.broadcast_to(alpha, (k,))))
        tau = numpyro.sample(
            "tau", dist.Gamma(jnp.broadcast_to(a0, (k, dim)), jnp.broadcast_to(b0, (k, dim))).to_event(2)
        )
        mu = numpyro.sample(
            "mu", dist.Normal(jnp.broadcast_to(loc0, (k, dim)), 1.0 / jnp.sqrt(kappa0 * tau)).to_event(2)
        )
        numpyro.factor("x", jnp.sum(_mixture_log_density(w, mu, tau, x)))

    mcmc = MCMC(
        NUTS(gmm, target_accept_prob=nuts["target_accept"], init_strategy=init_to_value(values=start)),
        num_warmup=nuts["warmup"],
        num_samples=nuts["samples"],
        num_chains=1,
        progress_bar=False,
    )
    key = jax.random.PRNGKey(nuts["seed"])
    t0 = time.perf_counter()
    mcmc.warmup(key, x_train, collect_warmup=False)
    jax.block_until_ready(mcmc.post_warmup_state)
    t1 = time.perf_counter()
    mcmc.run(mcmc.post_warmup_state.rng_key, x_train)
    draws = jax.block_until_ready(mcmc.get_samples())
    t2 = time.perf_counter()
    per_draw = jax.jit(jax.vmap(lambda w, mu, tau: _mixture_log_density(w, mu, tau, x_test)))(
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
    for t, v in zip(times, scores):
        if v >= target - within:
            return float(t)
    return None


def _seconds(t) -> str:
    return "never" if t is None else f"{t:.2f}"


@optional_plot
def _plot(path, cavi: tuple, nuts: dict) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.0))
    ax = fig.subplots()
    ax.plot(cavi[0], cavi[1], ".-", label="CAVI")
    ax.plot(nuts["wall_time"], nuts["heldout_log_predictive"], ".-", label="NUTS (NumPyro)")
    ax.axvline(nuts["warmup_s"], color="grey", lw=0.8, ls=":", label="NUTS warmup ends")
    ax.set_xscale("log")
    top = max(max(cavi[1]), max(nuts["heldout_log_predictive"]))
    ax.set_ylim(top - 1.0, top + 0.1)
    ax.set_xlabel("wall time (s, compilation included)")
    ax.set_ylabel("mean held-out log predictive")
    ax.set_title("CAVI against NUTS on a Gaussian mixture")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


@register_experiment("gmm_cavi_vs_nuts", defaults=_DEFAULTS, bounds=_BOUNDS, memory=_memory)
def build(sections: dict, seed: int) -> Experiment:
    """Blei et al. 2017, Fig. 6: CAVI against NUTS (NumPyro) on a Gaussian mixture, held-out log
    predictive against wall time"""
    m, d, a = sections["model"], sections["data"], sections["algorithm"]
    n_tr, n_te = d["num_train"], d["num_test"]
    key_data = jax.random.split(jax.random.PRNGKey(seed + 1_000_003))[0]  # gmm_simulation's draw
    full = sample_gmm(key_data, n_tr + n_te, d["num_clusters"], d["dim"], spread=d["spread"], dtype=jnp.float32)
    x_train, x_test = np.asarray(full.x[:n_tr]), np.asarray(full.x[n_tr:])
    model = DiagonalGMM.from_data(x_train, m["num_components"], alpha0=m["alpha0"], kappa0=m["kappa0"], a0=m["a0"])
    model.check_data(x_train)
    alg = _algorithm({k: v for k, v in a.items() if k not in ("within", "nuts")}, model, n_tr)
    xj = model.features(jnp.asarray(x_train))
    best = _best_fn(model, xj)

    def report(result, out_dir, baselines) -> dict:
        cavi_t = [ev["wall_time"] for ev in result.evals]
        cavi_s = [ev["heldout_log_predictive"] for ev in result.evals]
        # NUTS starts where a CAVI start does (k-means++ seeding, one M-step): its point estimates
        q0 = select_restart(alg.init(jax.random.PRNGKey(a["nuts"]["seed"]), xj).q_global, 0)
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
        _plot(os.path.join(out_dir, "cavi_vs_nuts.png"), (cavi_t, cavi_s), nuts)
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

    return _heldout_experiment(alg, model, xj, x_test, best, report)


__all__ = ["build", "first_time_within", "nuts_curve"]
