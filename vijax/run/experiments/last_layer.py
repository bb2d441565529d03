"""A Bayesian last layer on an MLP, trained end to end, against the same network with a point-estimate
head (docs/composition.md, pattern 2).

Model: an MLP feature map phi_theta and a logistic head, y_n ~ Bernoulli(sigmoid(w^T phi_theta(x_n) + b)),
(w, b) ~ N(0, s^2 I), theta ~ N(0, t^2 I) (a MAP weight decay). ``bayes`` fits a Gaussian q(w, b)
(``vijax.inference.bayesian_last_layer``) and theta by Adam on ELBO(theta, q) + log p(theta) (Blei,
Kucukelbir and McAuliffe 2017, §5); the ``point`` baseline fits MAP (w, b) with the same network, start and
optimizer. Evaluations report held-out accuracy, log predictive, Brier score and expected calibration error
(Guo et al. 2017); the report writes ``results.md`` and ``last_layer_<dataset>.png``.
"""

from __future__ import annotations

import math
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from vijax.data import load_binary_dataset
from vijax.inference import VIAlgorithm, bayesian_last_layer, head_log_likelihood, safe_increment
from vijax.metrics import expected_calibration_error, reliability
from vijax.models import mlp
from vijax.run import Baseline, ConfigError, Experiment, float_bytes, MemoryNeed, register_experiment, SEED_BOUND
from ._common import dataset_extras, index_batches, md_table, needs
from ._plotting import figure, optional_plot

DATASETS = ("breast_cancer", "digits_3v5")
# hidden: the MLP's hidden widths, the last one F; activation: one of vijax.models.ACTIVATIONS;
# family: q's Gaussian family (fullrank, meanfield, lowrank); point_baseline: also train the point head.
_ALG = {"family": "fullrank", "num_samples": 4, "learning_rate": 0.01, "predictive_draws": 500, "num_bins": 10}
_ALG |= {"point_baseline": True}
_DEFAULTS = {
    "model": {"hidden": [32, 8], "activation": "tanh", "prior_scale": 1.0, "net_prior_scale": 1.0},
    "data": {"dataset": "breast_cancer", "split_seed": 0, "batch_size": None},
    "algorithm": _ALG,
    "run": {"num_steps": 2000, "chunk_size": 500, "eval_every": 500, "x64": False, "progress": False},
}
_BOUNDS = {"model.hidden": "non-empty, each >= 1", "model.prior_scale": "> 0", "model.net_prior_scale": "null or > 0"}
_BOUNDS |= {"data.split_seed": SEED_BOUND, "data.batch_size": "null or int >= 1", "algorithm.learning_rate": "> 0"}
_BOUNDS |= {f"algorithm.{k}": ">= 1" for k in ("num_samples", "predictive_draws", "num_bins")}
_MAX_DATA = (1000, 256)  # the data sets (vijax.data.DATASETS): at most 767 training points of 256 features


def _memory(config) -> list[MemoryNeed]:
    m, a, f = config["model"], config["algorithm"], float_bytes(config)
    n, d = _MAX_DATA
    sizes = [d] + list(m["hidden"])
    weights = sum(x * y for x, y in zip(sizes[:-1], sizes[1:]))
    width = sizes[-1] + 1
    return [
        MemoryNeed("the network's weights and Adam's moments (model.hidden)", ("model.hidden",), 2 * 3 * weights * f),
        MemoryNeed("the activations (the data x model.hidden)", ("model.hidden",), 3 * n * sum(sizes) * f),
        MemoryNeed(
            "q's covariance and draws (algorithm.num_samples x the head's width)",
            ("algorithm.num_samples", "model.hidden"),
            (3 * width * width + a["num_samples"] * (width + n)) * f,
        ),
        MemoryNeed(
            "the predictive draws (algorithm.predictive_draws x the test data)",
            ("algorithm.predictive_draws",),
            2 * a["predictive_draws"] * (n + width) * f,
        ),
    ]


class TrainState(NamedTuple):
    q_global: Any  # {"net": theta, "head": q's parameters or (w, b)}
    opt_state: Any
    count: jax.Array  # int32 steps taken


class TrainInfo(NamedTuple):
    elbo: jax.Array  # the objective before the step


def trainer(objective, init_params, optimizer: optax.GradientTransformation) -> VIAlgorithm:
    """A ``VIAlgorithm`` ascending ``objective(params, batch, key)`` with ``optimizer``: the plain
    JAX training step of docs/composition.md, in the form the runner drives."""

    def init(key, batch=None):
        params = init_params(key)
        return TrainState(params, optimizer.init(params), jnp.zeros((), jnp.int32))

    def step(key, state, batch):
        value, grads = jax.value_and_grad(objective)(state.q_global, batch, key)
        updates, opt_state = optimizer.update(jax.tree.map(jnp.negative, grads), state.opt_state, state.q_global)
        return (
            TrainState(optax.apply_updates(state.q_global, updates), opt_state, safe_increment(state.count)),
            TrainInfo(value),
        )

    return VIAlgorithm(init, step)


def _load(data: dict):
    name = data["dataset"]
    if name not in DATASETS:
        raise ConfigError(f"data.dataset: one of {DATASETS}, got {name!r}")
    d = load_binary_dataset(name, labels="01", seed=data["split_seed"])
    dtype = jnp.zeros(()).dtype
    return (
        jnp.asarray(d.x_train, dtype),
        jnp.asarray(d.y_train, dtype),
        jnp.asarray(d.x_test, dtype),
        np.asarray(d.y_test),
        name,
    )


def _gaussian_log_prior(tree, scale) -> jax.Array:
    return jnp.sum(jax.scipy.stats.norm.logpdf(ravel_pytree(tree)[0], 0.0, scale))


@register_experiment("bayes_last_layer", defaults=_DEFAULTS, bounds=_BOUNDS, memory=_memory)
@needs(lambda sections: dataset_extras(sections["data"]["dataset"]))
def build(sections: dict, seed: int) -> Experiment:
    """a Bayesian last layer (full-rank q) on an MLP trained end to end, against a point-estimate
    head"""
    model, data, section = sections["model"], sections["data"], sections["algorithm"]
    x, y, x_test, y_test, name = _load(data)
    n, d = x.shape
    sizes = [d] + list(model["hidden"])
    try:
        net = mlp(jax.random.PRNGKey(seed), sizes, model["activation"])
    except ValueError as e:
        raise ConfigError(f"model.{str(e).split()[0]}: {e}") from None
    try:
        head = bayesian_last_layer(
            net,
            x[0],
            likelihood="bernoulli",
            prior_scale=model["prior_scale"],
            num_data=n,
            family=section["family"],
            num_samples=section["num_samples"],
        )
    except ValueError as e:
        raise ConfigError(f"algorithm.{str(e).split()[0]}: {e}") from None
    f = sizes[-1]
    t = model["net_prior_scale"]
    log_lik = head_log_likelihood("bernoulli")
    net_prior = (lambda theta: 0.0) if t is None else (lambda theta: _gaussian_log_prior(theta, t))
    batch_fn = index_batches(n, data["batch_size"], jax.random.PRNGKey(seed + 7))

    def init_net(key):  # both methods start from the same network (the run's init key)
        return mlp(key, sizes, model["activation"]).params

    def init_bayes(key):
        k_net, k_head = jax.random.split(key)
        return {"net": init_net(k_net), "head": head.init(k_head)}

    def init_point(key):
        k_net, k_head = jax.random.split(key)
        w = jax.random.normal(k_head, (f + 1,), x.dtype) / math.sqrt(f)
        return {"net": init_net(k_net), "head": {"b": w[0], "w": w[1:]}}

    def bayes_objective(params, idx, key):
        return head.elbo(params["net"], params["head"], (x[idx], y[idx]), key) + net_prior(params["net"])

    def point_objective(params, idx, key):
        feats = head.features(params["net"], x[idx])
        scale = n / idx.shape[0]
        return (
            scale * jnp.sum(log_lik(params["head"], feats, y[idx]))
            + _gaussian_log_prior(params["head"], model["prior_scale"])
            + net_prior(params["net"])
        )

    adam = optax.adam(section["learning_rate"])
    bayes, point = trainer(bayes_objective, init_bayes, adam), trainer(point_objective, init_point, adam)
    eval_key = jax.random.fold_in(jax.random.PRNGKey(seed), 8)
    draws = section["predictive_draws"]

    @jax.jit
    def bayes_probs(params):
        return head.predict(params["net"], params["head"], x_test, eval_key, draws)

    @jax.jit
    def point_probs(params):  # P(y = 1) = exp log p(y = 1 | theta, w, b)
        feats = head.features(params["net"], x_test)
        return jnp.exp(log_lik(params["head"], feats, jnp.ones(feats.shape[0], feats.dtype)))

    def scores(probs) -> dict:
        p = np.clip(np.asarray(probs, np.float64), 1e-12, 1 - 1e-12)
        return {
            "accuracy": float(np.mean((p > 0.5) == (y_test == 1))),
            "log_predictive": float(np.mean(np.where(y_test == 1, np.log(p), np.log1p(-p)))),
            "ece": expected_calibration_error(p, y_test, section["num_bins"]),
            "brier": float(np.mean((p - y_test) ** 2)),
        }

    def bayes_eval(state):
        return scores(bayes_probs(state.q_global))

    def point_eval(state):
        return scores(point_probs(state.q_global))

    def make_report(result, out_dir, results):
        runs = {"bayes": (result, bayes_probs)}
        if "point" in results:
            runs["point"] = (results["point"], point_probs)
        start = jax.random.PRNGKey(seed)  # the runs' init key is split from the run key
        init_key = jax.random.split(start)[0]
        probs = {m: np.asarray(fn(r.state.q_global)) for m, (r, fn) in runs.items()}
        start_probs = np.asarray(bayes_probs(init_bayes(init_key)))
        rows = [dict(method="untrained (bayes head)", **scores(start_probs))]
        rows += [dict(method=m, **scores(p), wall_time=runs[m][0].wall_time) for m, p in probs.items()]
        mb = "the whole training set" if data["batch_size"] is None else f"minibatches of {data['batch_size']}"
        prior = "none" if t is None else f"N(0, {t:g}^2 I)"
        notes = (
            f"{name}: N = {n} training / {len(y_test)} test cases, {d} features; MLP {sizes} "
            f"({model['activation']}), head (w, b) ~ N(0, {model['prior_scale']:g}^2 I), network prior {prior}; "
            f"{result.num_steps} Adam steps at rate {section['learning_rate']:g} on {mb}; bayes: "
            f"{section['family']} q, S = {section['num_samples']} draws per step, predictive from {draws} "
            f"draws; ECE with {section['num_bins']} equal-width bins."
        )
        with open(os.path.join(out_dir, "results.md"), "w", encoding="utf-8") as fh:
            fh.write(f"# Bayesian last layer vs point-estimate head on {name}\n\n{notes}\n\n")
            fh.write(
                md_table(rows, ["method", "accuracy", "log_predictive", "ece", "brier", "wall_time"], "{:.4f}".format)
            )
            fh.write(
                "\nHeld-out scores. log_predictive: the mean over test cases of log p(y | x) (higher is better); "
                "ECE and Brier: lower is better. The test set is small: differences of a few test cases are noise.\n"
            )
        _plot(os.path.join(out_dir, f"last_layer_{name}.png"), probs, y_test, section["num_bins"], name)
        return {"dataset": name, "table": rows}

    baselines = (Baseline("point", point, batch_fn=batch_fn, eval_fn=point_eval),) if section["point_baseline"] else ()
    return Experiment(bayes, lambda key: bayes.init(key), batch_fn, bayes_eval, make_report, baselines=baselines)


@optional_plot
def _plot(path: str, probs: dict, y_test: np.ndarray, num_bins: int, name: str) -> None:
    with figure(path, (10, 4.2), 1, 2) as (fig, (ax1, ax2)):
        ax1.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="perfect calibration")
        for (m, p), c in zip(probs.items(), ("C0", "C1")):
            r = reliability(p, y_test, num_bins)
            full, ece = r.count > 0, expected_calibration_error(p, y_test, num_bins)
            ax1.plot(r.confidence[full], r.accuracy[full], "-", color=c, label=f"{m} (ECE {ece:.3f})")
            ax1.scatter(r.confidence[full], r.accuracy[full], s=8 + 2 * r.count[full], color=c, alpha=0.6)
            ax2.hist(p, bins=np.linspace(0, 1, 26), histtype="step", color=c, lw=1.5, label=m)
        ax1.set(
            xlabel="confidence (probability of the predicted class)",
            ylabel="accuracy",
            title=f"reliability, {name} test set (marker area: cases)",
            xlim=(0.45, 1.01),
        )
        ax1.legend(fontsize=8)
        ax2.set(xlabel="predictive P(y = 1)", ylabel="test cases", yscale="log", title="predictive probabilities")
        ax2.legend(fontsize=8)
