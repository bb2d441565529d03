"""How many clusters a truncated DP mixture finds as the truncation level T grows, for both truncations
of the tutorial *Raise your ELBO* (Blei and Jordan 2006: v_T = 1; Kurihara, Welling and Vlassis 2007:
q tied to the prior beyond T).

One run of the configured algorithm on ``vijax.models.DPMixture`` per truncation and T (the first the
experiment's own, the others baselines), on Gaussian or Bernoulli mixture data. The report counts the
clusters holding at least ``min_fraction`` of the data, with each run's ELBO and held-out log predictive
(``results.md``, ``dp_truncation.png``), beside scikit-learn's DP ``BayesianGaussianMixture`` where present.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax.data import sample_bernoulli_mixture, sample_gmm
from vijax.models import DPMixture, conjugate_elbo
from vijax.run import Baseline, ConfigError, configured_algorithm, Experiment, float_bytes, MemoryNeed
from vijax.run import register_experiment
from ._common import md_table, train_test_bounds, train_test_need
from ._plotting import figure, optional_plot

_MODEL = {"components": "gaussian", "truncations": ["blei_jordan", "kurihara"], "truncation_levels": [2, 4, 8, 16, 32]}
_MODEL |= {"alpha": 1.0, "kappa0": 1.0, "a": 1.0, "b": 1.0, "min_fraction": 0.01}
_DEFAULTS = {
    "model": _MODEL,
    "data": {"num_train": 500, "num_test": 500, "num_clusters": 6, "dim": 2, "spread": 8.0, "seed": 0},
    "algorithm": {"name": "cavi", "local": "meanfield", "step_size": None},
    "run": {"num_steps": 300, "chunk_size": 25, "tol": 1e-7, "patience": 2, "eval_every": 100, "x64": True},
}
_BOUNDS = {
    "model.truncation_levels": "non-empty, each >= 1",
    **{f"model.{k}": "> 0" for k in ("alpha", "kappa0", "a", "b")},
}
_BOUNDS |= {"model.min_fraction": "in (0, 1)", **train_test_bounds(num_clusters=">= 1", dim=">= 1", spread="> 0")}
_BOUNDS |= {"algorithm.step_size": "null or number in (0, 1]"}


def _memory(config) -> list[MemoryNeed]:
    m, d, f = config["model"], config["data"], float_bytes(config)
    t = max(m["truncation_levels"], default=1)
    runs = len(m["truncations"]) * len(m["truncation_levels"])
    return [
        train_test_need(config),
        MemoryNeed(
            "the responsibilities (data.num_train x the largest of model.truncation_levels)",
            ("data.num_train", "model.truncation_levels"),
            4 * d["num_train"] * t * f,
        ),
        MemoryNeed(
            "the runs' components (model.truncation_levels x data.dim x data.dim)",
            ("model.truncation_levels", "data.dim"),
            runs * t * (d["dim"] + 2) ** 2 * f,
        ),
    ]


def _data(d: dict, components: str):
    n = d["num_train"] + d["num_test"]
    key = jax.random.PRNGKey(d["seed"])
    dt = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    if components == "gaussian":
        full = sample_gmm(key, n, d["num_clusters"], d["dim"], spread=d["spread"], dtype=dt)
        return full.x, full.z
    full = sample_bernoulli_mixture(key, n, d["num_clusters"], d["dim"], dtype=dt)
    return full.y, full.z


@register_experiment("dp_mixture_truncation", defaults=_DEFAULTS, bounds=_BOUNDS, memory=_memory)
def build(sections: dict, seed: int) -> Experiment:
    """Raise your ELBO, DPMM: clusters found vs truncation T, Blei-Jordan (v_T = 1) vs Kurihara et
    al. tails"""
    m, d, a = sections["model"], sections["data"], sections["algorithm"]
    if m["components"] not in ("gaussian", "bernoulli"):
        raise ConfigError(f"model.components must be 'gaussian' or 'bernoulli', got {m['components']!r}")
    levels, truncs = list(m["truncation_levels"]), list(m["truncations"])
    if not truncs:
        raise ConfigError("model.truncations must be a non-empty list")
    for trunc in truncs:  # the cheap checks before the data are drawn (the numbers: the bounds)
        try:
            DPMixture.bernoulli(1, 1, truncation=trunc)
        except ValueError as e:
            raise ConfigError(f"model.truncations: {e}") from None
    try:
        x, z = _data(d, m["components"])
    except ValueError as e:
        raise ConfigError(f"data: {e}") from None
    n = d["num_train"]
    x_train, x_test = x[:n], x[n:]
    runs = []
    for trunc in truncs:
        for t in levels:
            try:
                if m["components"] == "gaussian":
                    model = DPMixture.gaussian_from_data(
                        np.asarray(x_train), t, alpha=m["alpha"], truncation=trunc, kappa0=m["kappa0"]
                    )
                else:
                    model = DPMixture.bernoulli(t, x.shape[1], alpha=m["alpha"], truncation=trunc, a=m["a"], b=m["b"])
            except ValueError as e:
                raise ConfigError(f"model: {e}") from None
            model.check_data(x_train)
            alg = configured_algorithm(
                a, _DEFAULTS["algorithm"], model, num_data=n, schedule=a["step_size"], schedule_keys=("step_size",)
            )
            runs.append((f"{trunc}_T{t}", trunc, t, model, alg))

    def make_eval(model):
        lp = jax.jit(lambda q: jnp.mean(model.log_predictive(q, x_test)))
        return lambda state: {"heldout_log_predictive": float(lp(state.q_global))}

    def report(result, out_dir, baselines):
        rows = []
        for name, trunc, t, model, _ in runs:
            res = result if name == runs[0][0] else baselines[name]
            q = res.state.q_global
            loc = model.local_step(expfam.tree_mean_params(q), x_train)
            rows.append(
                {
                    "run": name,
                    "truncation": trunc,
                    "T": t,
                    "steps": int(res.num_steps),
                    "clusters_found": model.clusters_found(loc.local_params, m["min_fraction"] * n),
                    # sum_n q(z_n > T): the data the Kurihara et al. tail holds
                    "tail_mass": float(jnp.sum(loc.local_params[:, -1])) if model.truncation == "kurihara" else 0.0,
                    "elbo": float(conjugate_elbo(model.prior(), q, loc)),
                    "heldout_log_predictive": float(jnp.mean(model.log_predictive(q, x_test))),
                }
            )
        summary = {"true_clusters": int(np.unique(np.asarray(z[:n])).size), "runs": rows}
        if m["components"] == "gaussian":
            summary["sklearn"] = _sklearn_counts(m, levels, np.asarray(x_train), np.asarray(x_test), seed)
        _plot(os.path.join(out_dir, "dp_truncation.png"), summary, truncs, levels)
        with open(os.path.join(out_dir, "results.md"), "w") as f:
            f.write(_table(summary, m, d, a) + "\n")
        return summary

    batch_fn = lambda key, t: x_train
    baselines = tuple(
        Baseline(name, alg, lambda key, alg=alg: alg.init(key, x_train), batch_fn, eval_fn=make_eval(model))
        for name, _, _, model, alg in runs[1:]
    )
    _, _, _, model, alg = runs[0]
    return Experiment(alg, lambda key: alg.init(key, x_train), batch_fn, make_eval(model), report, baselines=baselines)


def _sklearn_counts(m, levels, x_train, x_test, seed):
    """scikit-learn's DP Gaussian mixture at each T with the same priors (its own k-means start)."""
    try:
        from sklearn.mixture import BayesianGaussianMixture  # deferred: optional, slow to import
    except ImportError:
        return "scikit-learn not installed: no comparison"
    out = []
    for t in levels:
        comps = DPMixture.gaussian_from_data(x_train, t, alpha=m["alpha"], kappa0=m["kappa0"]).components
        est = BayesianGaussianMixture(
            n_components=t,
            covariance_type="diag",
            weight_concentration_prior_type="dirichlet_process",
            weight_concentration_prior=m["alpha"],
            mean_prior=np.broadcast_to(comps.loc0, (comps.dim,)).copy(),
            mean_precision_prior=comps.kappa0,
            degrees_of_freedom_prior=2 * comps.a0,
            covariance_prior=2 * np.broadcast_to(comps.b0, (comps.dim,)).copy(),
            max_iter=500,
            random_state=seed,
        )
        est.fit(x_train)
        n_k = est.predict_proba(x_train).sum(0)
        out.append(
            {
                "T": t,
                "clusters_found": int(np.sum(n_k >= m["min_fraction"] * x_train.shape[0])),
                "heldout_log_likelihood": float(est.score(x_test)),
            }
        )
    return out


def _table(summary, m, d, a) -> str:
    cols = ["truncation", "T", "steps", "clusters_found", "tail_mass", "elbo", "heldout_log_predictive"]
    lines = [
        "# Clusters found by a truncated DP mixture as T grows",
        "",
        f"{m['components']} components, {d['num_train']} training points from {summary['true_clusters']} "
        f"clusters (dim {d['dim']}), alpha = {m['alpha']}, algorithm {a['name']}; a cluster is found when it "
        f"holds at least {m['min_fraction']:.0%} of the training data in expectation; tail_mass is "
        "sum_n q(z_n > T); heldout_log_predictive the held-out mean log predictive.",
        "",
        md_table(summary["runs"], cols),
    ]
    if isinstance(summary.get("sklearn"), list):
        lines += [
            "scikit-learn `BayesianGaussianMixture(weight_concentration_prior_type=\"dirichlet_process\")`, "
            "same priors, its own k-means start (its score is the plug-in log-likelihood, not a predictive):",
            "",
            md_table(summary["sklearn"], ["T", "clusters_found", "heldout_log_likelihood"]),
        ]
    lines += ["Figure: dp_truncation.png."]
    return "\n".join(lines)


@optional_plot
def _plot(path, summary, truncs, levels):
    with figure(path, (11, 4.2), 1, 2, dpi=110) as (fig, ax):
        for i, trunc in enumerate(truncs):
            rows = [r for r in summary["runs"] if r["truncation"] == trunc]
            ax[0].plot([r["T"] for r in rows], [r["clusters_found"] for r in rows], "o-", color=f"C{i}", label=trunc)
            ax[1].plot(
                [r["T"] for r in rows], [r["heldout_log_predictive"] for r in rows], "o-", color=f"C{i}", label=trunc
            )
        if isinstance(summary.get("sklearn"), list):
            sk = summary["sklearn"]
            ax[0].plot(
                [r["T"] for r in sk], [r["clusters_found"] for r in sk], "x--", color="C3", label="scikit-learn DP"
            )
        ax[0].axhline(summary["true_clusters"], color="k", lw=0.8, ls=":", label="true clusters")
        ax[0].plot(levels, levels, color="0.7", lw=0.8, label="T")
        ax[0].set_ylim(0, max(summary["true_clusters"] * 2, 3))
        for a_ in ax:
            a_.set_xscale("log", base=2)
            a_.set_xlabel("truncation level T")
            a_.legend(fontsize=8)
        ax[0].set_ylabel("clusters found")
        ax[1].set_ylabel("held-out mean log predictive")
