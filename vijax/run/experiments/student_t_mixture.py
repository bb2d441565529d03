"""The Student-t mixture by EM against a Gaussian mixture on heavy-tailed data (Peel and McLachlan
2000, *Robust mixture modelling using the t distribution*; the EM of the tutorial *Raise your ELBO*).

The run fits ``StudentTMixture`` by EM (degrees of freedom learned unless ``model.learn_dof`` is false); its
baseline fits ``FullGMM`` by CAVI. Each keeps the best of ``algorithm.num_restarts`` starts run in lock step,
and is scored by the mean held-out log density: the t mixture's plug-in, the Gaussian mixture's posterior
predictive (Bishop 2006, eq. 10.81).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax.data import sample_student_t_mixture
from vijax.inference import cavi, restarts
from vijax.models import FullGMM, StudentTMixture, StudentTMixtureParams, conjugate_elbo
from vijax.run import Baseline, configured_algorithm, Experiment, float_bytes, MemoryNeed, register_experiment

from ._common import best_restart, train_test_bounds, train_test_need

_DEFAULTS = {
    "model": {"num_components": 3, "dof": 10.0, "learn_dof": True, "reg_covar": 1e-6},
    "data": {"num_train": 1000, "num_test": 2000, "num_clusters": 3, "dim": 2, "dof": 2.0, "spread": 6.0, "seed": 0},
    # each fit runs num_restarts starts together (vmap) and keeps the one with the best training objective
    "algorithm": {"name": "em", "num_restarts": 4},
    "run": {"num_steps": 200, "chunk_size": 25, "eval_every": 50, "x64": True},
}

_BOUNDS = {"model.num_components": ">= 1", "model.dof": "> 0", "model.reg_covar": ">= 0"}
_BOUNDS |= train_test_bounds(num_clusters=">= 1", dim=">= 1", dof="> 0", spread="> 0")
_BOUNDS |= {"algorithm.num_restarts": ">= 1"}


def _memory(config) -> list[MemoryNeed]:
    m, d, a, f = config["model"], config["data"], config["algorithm"], float_bytes(config)
    k, dim, r = m["num_components"], d["dim"], a["num_restarts"]
    return [
        train_test_need(config, 2),
        MemoryNeed(
            "both fits' responsibilities (algorithm.num_restarts x data.num_train x model.num_components)",
            ("algorithm.num_restarts", "data.num_train", "model.num_components"),
            2 * 4 * r * d["num_train"] * k * f,
        ),
        MemoryNeed(
            "both fits' components (algorithm.num_restarts x model.num_components x data.dim^2)",
            ("algorithm.num_restarts", "model.num_components", "data.dim"),
            2 * 4 * r * k * dim * (dim + 1) * f,
        ),
    ]


@register_experiment("student_t_mixture", defaults=_DEFAULTS, bounds=_BOUNDS, memory=_memory)
def build(sections: dict, seed: int) -> Experiment:
    """Student-t mixture by EM vs a Gaussian mixture (CAVI) on heavy-tailed data"""
    m, d, a = sections["model"], sections["data"], sections["algorithm"]
    sample = sample_student_t_mixture(
        d["seed"], d["num_train"] + d["num_test"], d["num_clusters"], d["dim"], dof=d["dof"], spread=d["spread"]
    )
    x_train, x_test = jnp.asarray(sample.x[: d["num_train"]]), jnp.asarray(sample.x[d["num_train"] :])
    model = StudentTMixture(
        m["num_components"], d["dim"], dof=m["dof"], learn_dof=m["learn_dof"], reg_covar=m["reg_covar"]
    )
    model.check_data(x_train)
    r = a["num_restarts"]
    alg = restarts(configured_algorithm({"name": a["name"]}, {"name": "em"}, model), r)
    gmm = FullGMM.from_data(np.asarray(x_train), m["num_components"])
    gmm_alg = restarts(cavi(gmm), r)

    best_tmix = best_restart(lambda q: jnp.sum(model.log_likelihood(q, x_train)))
    best_gmm = best_restart(
        lambda q: conjugate_elbo(gmm.prior(), q, gmm.local_step(expfam.tree_mean_params(q), x_train))
    )
    tmix_ll = jax.jit(lambda p: jnp.mean(model.log_likelihood(best_tmix(p), x_test)))
    gmm_ll = jax.jit(lambda q: jnp.mean(gmm.log_predictive(best_gmm(q), x_test)))

    truth = None  # the true mixture, scored when the model has as many components
    if d["num_clusters"] == m["num_components"]:
        truth = StudentTMixtureParams(
            jnp.asarray(sample.weights),
            jnp.asarray(sample.means),
            jnp.asarray(sample.scales),
            jnp.full((d["num_clusters"],), d["dof"]),
        )

    def report(result, out_dir, baselines) -> dict:
        p = best_tmix(result.state.q_global)
        order = np.argsort(-np.asarray(p.weights))
        summary = {
            "t_mixture_heldout_log_density": float(tmix_ll(result.state.q_global)),
            "gmm_heldout_log_density": float(gmm_ll(baselines["gmm_cavi"].state.q_global)),
            "true_heldout_log_density": (
                None if truth is None else float(jnp.mean(model.log_likelihood(truth, x_test)))
            ),
            "learned_dofs": np.round(np.asarray(p.dofs)[order], 3).tolist(),
            "weights": np.round(np.asarray(p.weights)[order], 3).tolist(),
            "true_dof": d["dof"],
            "t_mixture_steps": int(result.num_steps),
            "gmm_steps": int(baselines["gmm_cavi"].num_steps),
        }
        with open(os.path.join(out_dir, "results.md"), "w") as f:
            f.write(
                f"# Student-t mixture (EM) vs Gaussian mixture (CAVI)\n\n{d['num_train']} training and "
                f"{d['num_test']} test points from {d['num_clusters']} t components with {d['dof']} degrees of "
                f"freedom (dim {d['dim']}); K = {m['num_components']}, best of {r} starts each.\n\n"
                "| model | steps | held-out mean log density |\n|---|---|---|\n"
                f"| Student-t mixture, EM (dofs {summary['learned_dofs']}) | {summary['t_mixture_steps']} | "
                f"{summary['t_mixture_heldout_log_density']:.4f} |\n"
                f"| Bayesian Gaussian mixture, CAVI (posterior predictive) | {summary['gmm_steps']} | "
                f"{summary['gmm_heldout_log_density']:.4f} |\n"
                + ("" if truth is None else f"| the true t mixture | - | {summary['true_heldout_log_density']:.4f} |\n")
            )
        return summary

    full = lambda key, t: x_train  # noqa: E731
    gmm_eval = lambda s: {"heldout_log_density": float(gmm_ll(s.q_global))}  # noqa: E731
    baseline = Baseline("gmm_cavi", gmm_alg, jax.jit(lambda key: gmm_alg.init(key, x_train)), full, gmm_eval)
    t_eval = lambda s: {"heldout_log_density": float(tmix_ll(s.q_global))}  # noqa: E731
    return Experiment(alg, jax.jit(lambda key: alg.init(key, x_train)), full, t_eval, report, baselines=(baseline,))


__all__ = ["build"]
