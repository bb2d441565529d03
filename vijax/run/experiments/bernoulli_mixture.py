"""The Dirichlet-process mixture of Bernoullis of Hoffman & Blei 2015, §4.2 (the default ``vijax run``): mean-field
SVI, SSVI-A, SSVI and collapsed Gibbs sampling in lock step (``vijax.inference.lock_step``) on binary vectors from
a finite DP mixture, compared by the components each uses and by KL(p(y | pi, phi) || p(y | pi_hat, phi_hat))
(Monte Carlo). ``info.elbo`` is the mean-field method's; each method's own is ``<method>.elbo``.
"""

from __future__ import annotations

import os

import jax
import numpy as np

from vijax.data import sample_bernoulli_mixture
from vijax.inference import M_STEPS, VIAlgorithm, lock_step, make_algorithm, schedules
from vijax.metrics import bernoulli_mixture_kl, components_used
from vijax.models import BernoulliMixture, bernoulli_collapsed_gibbs, bernoulli_gibbs_point_estimates
from vijax.run import check_methods, Experiment, float_bytes, MemoryNeed, register_experiment, SEED_BOUND
from ._plotting import figure, optional_plot

METHODS = ("meanfield", "ssvi_a", "ssvi", "gibbs")
LABELS = {"meanfield": "mean-field", "ssvi_a": "SSVI-A", "ssvi": "SSVI", "gibbs": "collapsed Gibbs"}
# Hoffman & Blei (2015, §4.2): components used and KL(p(y|pi,phi) || p(y|pi_hat,phi_hat)); the paper did not run SSVI.
PAPER = {
    "truth": {"components_used": 56},
    "meanfield": {"components_used": 17, "kl": 5.23},
    "ssvi_a": {"components_used": 54, "kl": 1.94},
    "ssvi": {"components_used": None, "kl": None},
    "gibbs": {"components_used": 55, "kl": 1.9},
}

_ALG = dict(methods=list(METHODS), local="exact", rho_scale=1.0, rho_tau=1.0, rho_kappa=0.75, ramp=False)
_ALG |= dict(gibbs_burn_in=100, kl_samples=20000, eval_kl_samples=2000)
_DEFAULTS = {
    "model": {"num_components": 100, "alpha": 20.0, "a": 1.0, "b": 1.0, "init_pseudo_count": 0.01},
    "data": {"num_points": 1000, "dim": 100, "seed": 8},
    "algorithm": _ALG,
    "run": {"num_steps": 500, "chunk_size": 50, "eval_every": 100, "checkpoint_every": 250, "x64": True},
}

_BOUNDS = {"model.num_components": ">= 1", **{f"model.{k}": "> 0" for k in ("alpha", "a", "b", "init_pseudo_count")}}
_BOUNDS |= {"data.num_points": ">= 1", "data.dim": ">= 1", "data.seed": SEED_BOUND, "algorithm.rho_scale": "> 0"}
_BOUNDS |= {"algorithm.rho_tau": "> 0", "algorithm.rho_kappa": "in (0.5, 1]", "algorithm.gibbs_burn_in": ">= 0"}
_BOUNDS |= {"algorithm.kl_samples": ">= 2", "algorithm.eval_kl_samples": ">= 2"}


def _memory(config) -> list[MemoryNeed]:
    m, d, a, f = config["model"], config["data"], config["algorithm"], float_bytes(config)
    n, k, dim, methods = d["num_points"], m["num_components"], d["dim"], max(len(a["methods"]), 1)
    samples = max(a["kl_samples"], a["eval_kl_samples"])
    nk, kd = ("data.num_points", "model.num_components"), ("model.num_components", "data.dim")
    return [
        MemoryNeed("the data (data.num_points x data.dim)", ("data.num_points", "data.dim"), n * dim * f),
        MemoryNeed("each method's responsibilities (data.num_points x model.num_components)", nk, methods * n * k * f),
        MemoryNeed("each method's parameters (model.num_components x data.dim)", kd, methods * 4 * k * dim * f),
        MemoryNeed(
            "the KL's draws (algorithm.kl_samples x (data.dim + model.num_components))",
            ("algorithm.kl_samples", "algorithm.eval_kl_samples", "data.dim", "model.num_components"),
            samples * (dim + 2 * k) * f,
        ),
    ]


def _combined(model, methods, acfg, num_data) -> VIAlgorithm:
    """The methods in lock step (``vijax.inference.lock_step``): every VI method starts from the same q(beta)
    (init group 0), Gibbs from its own key (group 1); ``info["elbo"]`` is the first VI method's."""
    schedule = schedules.robbins_monro(acfg["rho_scale"], tau=acfg["rho_tau"], kappa=acfg["rho_kappa"])
    settings = dict(num_data=num_data, schedule=schedule, local=acfg["local"], ramp=acfg["ramp"])
    algs = {  # the E-step x M-step matrix: the same local step with three global updates
        m: bernoulli_collapsed_gibbs(model, burn_in=acfg["gibbs_burn_in"])
        if m == "gibbs"
        else make_algorithm(M_STEPS[m], model, **settings)
        for m in methods
    }
    first_vi = next((m for m in methods if m != "gibbs"), methods[0])
    groups = {m: int(m == "gibbs") for m in methods} if "gibbs" in methods and len(methods) > 1 else None
    return lock_step(algs, primary=first_vi, info_fields=("elbo",), init_groups=groups)


def point_estimates(model, method: str, state) -> tuple[jax.Array, jax.Array]:
    """(pi_hat, phi_hat) of one method's state: posterior means under q, or Gibbs's averages."""
    if method == "gibbs":
        return bernoulli_gibbs_point_estimates(model, state)
    return model.point_estimates(state.q_global)


@register_experiment("dp_bernoulli", defaults=_DEFAULTS, bounds=_BOUNDS, memory=_memory)
def build(sections: dict, seed: int) -> Experiment:
    """Hoffman & Blei 2015, §4.2: DP mixture of Bernoullis; mean-field vs SSVI-A vs SSVI vs
    collapsed Gibbs"""
    m, d, a = sections["model"], sections["data"], sections["algorithm"]
    methods = check_methods(a["methods"], METHODS)
    prior = {k: m[k] for k in ("alpha", "a", "b")}  # the model's prior, from which the data are drawn
    model = BernoulliMixture(m["num_components"], d["dim"], **prior, init_pseudo_count=m["init_pseudo_count"])
    data = sample_bernoulli_mixture(
        jax.random.PRNGKey(d["seed"]), d["num_points"], m["num_components"], d["dim"], **prior
    )
    y = data.y
    model.check_data(y)
    alg = _combined(model, methods, a, d["num_points"])
    kl_key = jax.random.PRNGKey(d["seed"] + 7_000_003)  # the same draws of y for every method and evaluation

    @jax.jit
    def _estimates(state):
        return {meth: point_estimates(model, meth, state[meth]) for meth in methods}

    def evaluate(state, num_samples) -> dict:
        out, est = {}, _estimates(state)
        for meth in methods:  # the jitted dict comes back with sorted keys
            w, p = est[meth]
            kl = bernoulli_mixture_kl(kl_key, data.weights, data.probs, w, p, num_samples)
            out[meth] = {
                "components_used": components_used(w, p, y),
                "kl": float(kl.value),
                "kl_stderr": float(kl.stderr),
            }
        return out

    def eval_fn(state) -> dict:
        res = evaluate(state, a["eval_kl_samples"])
        return {f"{meth}.{k}": v for meth, r in res.items() for k, v in r.items() if k != "kl_stderr"}

    def report(result, out_dir, baselines) -> dict:
        res = evaluate(result.state, a["kl_samples"])
        summary = {"truth_components": data.components_used}
        for meth, r in res.items():
            summary[f"{meth}_components"] = r["components_used"]
            summary[f"{meth}_kl"] = round(r["kl"], 4)
            summary[f"{meth}_kl_stderr"] = round(r["kl_stderr"], 4)
        by_kl = sorted(res, key=lambda m: res[m]["kl"])  # the methods' ranking, printed by the command
        summary["ranking_by_kl"] = " < ".join(f"{LABELS[m]} {res[m]['kl']:.2f}" for m in by_kl)
        summary["table"] = table_rows(res, data.components_used)
        summary["kl_samples"] = a["kl_samples"]
        _plot(os.path.join(out_dir, "dp_bernoulli.png"), result, res, data, _estimates(result.state), methods)
        return summary

    init = jax.jit(alg.init)
    return Experiment(alg, lambda key: init(key, y), lambda key, t: y, eval_fn, report)


def table_rows(res: dict, truth_components: int) -> list[dict]:
    """One row per method (and the truth) with ours and the paper's numbers side by side."""
    truth = {"method": "truth", "components_used": truth_components}
    rows = [truth | {"paper_components_used": PAPER["truth"]["components_used"]}]
    for meth, r in res.items():
        ours = {"method": LABELS[meth], "components_used": r["components_used"], "kl": round(r["kl"], 3)}
        ours["kl_stderr"] = round(r["kl_stderr"], 3)
        rows.append(ours | {"paper_components_used": PAPER[meth]["components_used"], "paper_kl": PAPER[meth]["kl"]})
    return rows


def format_table(rows: list[dict]) -> str:
    """A Markdown table of :func:`table_rows`."""
    lines = ["| method | components used (paper) | KL ± s.e. (paper) |", "|---|---|---|"]
    for r in rows:
        pc = r["paper_components_used"]
        comp = f"{r['components_used']} ({pc if pc is not None else '—'})"
        if "kl" in r:
            pk = r["paper_kl"]
            kl = f"{r['kl']:.2f} ± {r['kl_stderr']:.2f} ({pk if pk is not None else 'not run'})"
        else:
            kl = "0"
        lines.append(f"| {r['method']} | {comp} | {kl} |")
    return "\n".join(lines)


@optional_plot
def _plot(path, result, res, data, estimates, methods):
    """KL and components used against steps for each method (paper's final values dotted), and the
    sorted fitted weights against the true ones."""
    with figure(path, (16, 4.4), 1, 3, dpi=110) as (fig, axes):
        evals = result.evals
        steps = [e["step"] for e in evals]
        for i, meth in enumerate(methods):
            c = f"C{i}"
            if evals:
                axes[0].plot(steps, [e[f"{meth}.kl"] for e in evals], ".-", color=c, label=LABELS[meth])
                axes[1].plot(steps, [e[f"{meth}.components_used"] for e in evals], ".-", color=c, label=LABELS[meth])
            if PAPER[meth]["kl"] is not None:
                axes[0].axhline(PAPER[meth]["kl"], color=c, ls=":", lw=1)
                axes[1].axhline(PAPER[meth]["components_used"], color=c, ls=":", lw=1)
            w = np.sort(np.asarray(estimates[meth][0]))[::-1]
            axes[2].semilogy(np.arange(1, len(w) + 1), w, color=c, label=LABELS[meth])
        axes[1].axhline(data.components_used, color="k", lw=1, label="truth")
        w = np.sort(np.asarray(data.weights))[::-1]
        axes[2].semilogy(np.arange(1, len(w) + 1), w, "k", lw=1, label="truth")
        axes[0].set(xlabel="step (one update or Gibbs sweep)", ylabel="KL(truth || fit), nats")
        axes[0].set_title("KL to the data distribution (paper: dotted)")
        axes[1].set(xlabel="step", ylabel="components used", title="components with a datum (MAP assignment)")
        axes[2].set(xlabel="rank", ylabel="weight", title="sorted mixture weights", ylim=(1e-6, 1))
        for ax in axes:
            ax.grid(alpha=0.3)
            ax.legend(fontsize="small")


__all__ = ["LABELS", "METHODS", "PAPER", "build", "format_table", "point_estimates", "table_rows"]
