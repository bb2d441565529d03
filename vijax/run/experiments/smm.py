"""The simple mixture model (SMM) of the tutorial *Raise your ELBO* (2019, §SMM) by EM on symbols drawn
from a known mixture of categoricals, the best of ``algorithm.num_restarts`` starts run in lock step, scored
by the mean held-out log p(x) per symbol beside the true mixture's and the training frequencies'.

With one symbol per datum the SMM is not identifiable: its likelihood depends only on the marginal
p(w) = sum_k pi_k eta_kw, which one M-step sets to the frequencies n_w / N, the maximum. The report shows
equal likelihoods with different components (``smm_components.png``); pLSA and LDA, with several symbols
per datum, are identifiable.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from vijax.data import sample_categorical_mixture
from vijax.inference import restarts
from vijax.metrics import match_components
from vijax.models import SMM, SMMParams
from vijax.run import Experiment, MemoryNeed, configured_algorithm, float_bytes, register_experiment
from ._common import best_restart, train_test_bounds
from ._plotting import optional_plot

_DEFAULTS = {
    "model": {"num_components": 4, "concentration": 1.0},
    "data": dict(num_train=5000, num_test=5000, num_clusters=4, num_symbols=30, concentration=0.3, seed=0),
    "algorithm": {"name": "em", "num_restarts": 8},
    "run": {"num_steps": 300, "chunk_size": 50, "eval_every": 50, "x64": True},
}

_BOUNDS = {"model.num_components": ">= 1", "model.concentration": ">= 1"}
_BOUNDS |= train_test_bounds(num_clusters=">= 1", num_symbols=">= 1", concentration="> 0")
_BOUNDS |= {"algorithm.num_restarts": ">= 1"}


def _memory(config) -> list[MemoryNeed]:
    m, d, a, f = config["model"], config["data"], config["algorithm"], float_bytes(config)
    k, r = m["num_components"], a["num_restarts"]
    return [
        MemoryNeed(
            "the responsibilities (algorithm.num_restarts x data.num_train x model.num_components)",
            ("algorithm.num_restarts", "data.num_train", "model.num_components"),
            4 * r * d["num_train"] * k * f,
        ),
        MemoryNeed(
            "the parameters (algorithm.num_restarts x model.num_components x data.num_symbols)",
            ("algorithm.num_restarts", "model.num_components", "data.num_symbols"),
            4 * r * k * d["num_symbols"] * f,
        ),
    ]


def _matched(fitted: np.ndarray, true: np.ndarray) -> np.ndarray:
    """The fitted eta rows in the order of the true ones (the Hungarian matching by Euclidean distance)."""
    idx, _ = match_components(true, fitted)
    return fitted[idx]


@optional_plot
def _plot(path, true: np.ndarray, fitted: list) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(13, 3.2))
    axes = fig.subplots(1, 1 + len(fitted), sharey=True)
    vmax = max(true.max(), *(f.max() for f in fitted))
    panels = [(true, "true η (rows: components)")] + [
        (f, f"EM's η, start {i}, matched rows") for i, f in enumerate(fitted)
    ]
    for ax, (eta, title) in zip(axes, panels):
        im = ax.imshow(eta, aspect="auto", cmap="viridis", vmin=0.0, vmax=vmax)
        ax.set(title=title, xlabel="symbol w", yticks=range(eta.shape[0]))
    axes[0].set_ylabel("component k")
    fig.colorbar(im, ax=axes, shrink=0.8, label="P(x = w | z = k)")
    fig.savefig(path, dpi=100, bbox_inches="tight")


@register_experiment("smm", defaults=_DEFAULTS, bounds=_BOUNDS, memory=_memory)
def build(sections: dict, seed: int) -> Experiment:
    """Raise your ELBO, §SMM: the simple mixture model (a mixture of categoricals) by EM, against
    the true mixture"""
    m, d, a = sections["model"], sections["data"], sections["algorithm"]
    sample = sample_categorical_mixture(
        d["seed"], d["num_train"] + d["num_test"], d["num_clusters"], d["num_symbols"], concentration=d["concentration"]
    )
    x_train, x_test = jnp.asarray(sample.x[: d["num_train"]]), jnp.asarray(sample.x[d["num_train"] :])
    model = SMM(m["num_components"], d["num_symbols"], concentration=m["concentration"])
    model.check_data(x_train, "data")
    r = a["num_restarts"]
    alg = restarts(configured_algorithm({"name": a["name"]}, {"name": "em"}, model), r)

    best = best_restart(lambda q: model.e_step(q, x_train)[1])
    heldout = jax.jit(lambda p: jnp.mean(model.log_predictive(best(p), x_test)))
    truth = SMMParams(jnp.asarray(sample.weights), jnp.asarray(sample.probs))
    true_heldout = float(jnp.mean(SMM(d["num_clusters"], d["num_symbols"]).log_predictive(truth, x_test)))

    counts = np.bincount(sample.x[: d["num_train"]], minlength=d["num_symbols"])
    freqs = counts / counts.sum()
    empirical_heldout = float(np.mean(np.log(np.maximum(freqs, 1e-300))[sample.x[d["num_train"] :]]))
    train_ll = jax.jit(jax.vmap(lambda q: model.e_step(q, x_train)[1]))

    def report(result, out_dir, baselines) -> dict:
        q = result.state.q_global
        p = best(q)
        lls = np.asarray(train_ll(q))
        marginal = np.asarray(p.weights) @ np.asarray(p.probs)
        summary = {
            "heldout_log_prob": float(heldout(q)),
            "true_heldout_log_prob": true_heldout,
            "frequencies_heldout_log_prob": empirical_heldout,
            "train_log_likelihood": float(lls.max()),
            "train_log_likelihood_frequencies": float(np.sum(counts[counts > 0] * np.log(freqs[counts > 0]))),
            "train_log_likelihood_spread_over_starts": float(lls.max() - lls.min()),
            "marginal_l1_to_frequencies": float(np.abs(marginal - freqs).sum()),
            "steps": int(result.num_steps),
        }
        lines = [
            f"# The simple mixture model by EM\n\n{d['num_train']} training and {d['num_test']} test symbols "
            f"of an alphabet of {d['num_symbols']}, from {d['num_clusters']} components; K = "
            f"{m['num_components']}, {r} starts, concentration {m['concentration']}.\n\n",
            "| | held-out mean log p(x) |\n|---|---|\n",
            f"| SMM by EM, best start ({summary['steps']} steps) | {summary['heldout_log_prob']:.5f} |\n",
            f"| one categorical, the training frequencies | {empirical_heldout:.5f} |\n",
            f"| the true mixture | {true_heldout:.5f} |\n",
            f"\nTraining log-likelihood: best start {summary['train_log_likelihood']:.4f}, the frequencies' "
            f"{summary['train_log_likelihood_frequencies']:.4f}, spread over the starts "
            f"{summary['train_log_likelihood_spread_over_starts']:.2e}; L1 distance of the fitted marginal "
            f"to the frequencies {summary['marginal_l1_to_frequencies']:.2e}.\n",
        ]
        if m["num_components"] == d["num_clusters"]:
            errors = []
            for i in range(r):
                fitted = _matched(np.asarray(q.probs[i]), sample.probs)
                errors.append(float(np.abs(fitted - sample.probs).sum(-1).max()))
            summary["max_l1_eta_error_per_start"] = errors
            lines.append(
                "\nLargest L1 distance of a matched eta row to the true one, per start: "
                + ", ".join(f"{e:.3f}" for e in errors)
                + " (equal likelihoods, different components: the model is not identifiable from one "
                "symbol per datum).\n"
            )
            shown = [_matched(np.asarray(q.probs[i]), sample.probs) for i in (0, min(1, r - 1))]
            _plot(os.path.join(out_dir, "smm_components.png"), sample.probs, shown)
        with open(os.path.join(out_dir, "results.md"), "w") as f:
            f.write("".join(lines))
        return summary

    evaluate = lambda s: {"heldout_log_prob": float(heldout(s.q_global))}  # noqa: E731
    return Experiment(alg, jax.jit(lambda key: alg.init(key, x_train)), lambda key, t: x_train, evaluate, report)


__all__ = ["build"]
