"""Bayesian logistic regression by black-box VI (Blei, Kucukelbir and McAuliffe 2017, §5), checked with
PSIS (Yao, Vehtari, Simpson and Gelman 2018) and a long NUTS run.

Model: p(y_n | x_n, w) = sigmoid(y_n w^T x_n), y_n in {-1, +1}, w ~ N(0, s^2 I), on ``"synthetic"`` data
drawn from the model or a data set of ``vijax.data.load_binary_dataset``. The report compares every
coefficient's posterior mean and sd under each q with NumPyro's NUTS, and writes ``results.md`` and
``logistic_<dataset>.png``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from vijax.data import DATASETS, dataset_available, load_binary_dataset
from vijax.run import ConfigError, Experiment, MemoryNeed, register_experiment, SEED_BOUND

from ._common import index_batches, needs
from ._posterior import ALG_BOUNDS, ALG_DEFAULTS, RUN_DEFAULTS, Target, experiment, memory_needs, nuts_reference, report

# dataset: "synthetic" or one of vijax.data.DATASETS; num_data, num_features, seed: the synthetic data;
# split_seed: the scikit-learn sets' train/test split; batch_size: None for the full data at every step.
_DATA = {"dataset": "breast_cancer", "num_data": 500, "num_features": 5, "seed": 0, "split_seed": 0, "batch_size": None}
_DEFAULTS = {
    "model": {"prior_scale": 1.0, "intercept": True},
    "data": _DATA,
    "algorithm": ALG_DEFAULTS | {"baselines": ["bbvi-meanfield", "ngvi-fullrank", "ngvi-meanfield"]},
    "run": RUN_DEFAULTS,
}
_DEFAULTS["algorithm"]["nuts"] = dict(ALG_DEFAULTS["nuts"], samples=2500)
_BOUNDS = {"model.prior_scale": "> 0", "data.num_data": ">= 2", "data.num_features": ">= 1", "data.seed": SEED_BOUND}
_BOUNDS |= {"data.split_seed": SEED_BOUND, "data.batch_size": "null or int >= 1", **ALG_BOUNDS}
_REFERENCE_SIZE = (1000, 257)  # the reference data sets: at most 767 training points, 256 features + intercept


def _memory(config) -> list[MemoryNeed]:
    d = config["data"]
    n, p = (d["num_data"], d["num_features"] + 1) if d["dataset"] == "synthetic" else _REFERENCE_SIZE
    data = MemoryNeed(
        "the data (data.num_data x data.num_features)", ("data.num_data", "data.num_features"), 2 * n * p * 8
    )
    return memory_needs(config, n, p, "data.num_features") + [data]


def synthetic(num_data: int, num_features: int, seed: int, intercept: bool = True):
    """(x (N, D), y in {-1, +1} (N,), w_true): standard-normal features, w_true ~ N(0, I) (with
    the intercept first when ``intercept``), y drawn from the model."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((num_data, num_features))
    w = rng.standard_normal(num_features + int(intercept))
    logits = x @ w[int(intercept) :] + (w[0] if intercept else 0.0)
    y = np.where(rng.uniform(size=num_data) < 1.0 / (1.0 + np.exp(-logits)), 1.0, -1.0)
    return x, y, w


def load(data: dict, intercept: bool):
    """(design matrix (N, D'), labels +-1 (N,), name) of the configured data set."""
    name = data["dataset"]
    if name == "synthetic":
        x, y, _ = synthetic(data["num_data"], data["num_features"], data["seed"], intercept)
    elif name in DATASETS:
        if not dataset_available(name):
            raise ConfigError(f"data.dataset: {name!r} needs the reference data in ../shared/data")
        d = load_binary_dataset(name, seed=data["split_seed"])
        x, y = d.x_train, d.y_train
    else:
        raise ConfigError(f"data.dataset: 'synthetic' or one of {DATASETS}, got {name!r}")
    if intercept:
        x = np.concatenate([np.ones((x.shape[0], 1)), x], axis=1)
    return np.asarray(x, np.float64), np.asarray(y, np.float64), name


def target(model: dict, x, y) -> Target:
    """The posterior of w as a ``Target``; a batch is an index vector into the data."""
    s = model["prior_scale"]
    n, d = x.shape
    dtype = jnp.zeros(()).dtype
    xs, ys = jnp.asarray(x, dtype), jnp.asarray(y, dtype)

    def log_lik(p, idx):
        return jnp.sum(jax.nn.log_sigmoid(ys[idx] * (xs[idx] @ p["w"])))

    def log_prior(p):
        return jnp.sum(jax.scipy.stats.norm.logpdf(p["w"], 0.0, s))

    names = (("b",) if model["intercept"] else ()) + tuple(f"w{i + 1}" for i in range(d - int(model["intercept"])))
    fingerprint = x.tobytes() + y.tobytes() + repr(sorted(model.items())).encode()
    return Target(
        log_lik, log_prior, {"w": jnp.zeros(d, dtype)}, None, jnp.arange(n), n, lambda p: p["w"], names, fingerprint
    )


@register_experiment("bbvi_logistic", defaults=_DEFAULTS, bounds=_BOUNDS, memory=_memory)
@needs({"arviz": "the PSIS k-hat of each fit"})
def build(sections: dict, seed: int) -> Experiment:
    """Bayesian logistic regression: bbvi full-rank / mean-field and ngvi against NUTS, with PSIS
    k-hat"""
    model, data, section = sections["model"], sections["data"], sections["algorithm"]
    x, y, name = load(data, model["intercept"])
    tgt = target(model, x, y)
    n = x.shape[0]
    batch_fn = index_batches(n, data["batch_size"], jax.random.PRNGKey(seed + 7))

    def make_report(result, out_dir, runs, draws):
        nuts = nuts_reference(tgt, section["nuts"], out_dir)
        refs = {} if "error" in nuts else {"NUTS": (nuts["mean"], nuts["sd"])}
        mb = "the full data" if data["batch_size"] is None else f"minibatches of {data['batch_size']} (N/M scaling)"
        notes = (
            f"{name}: N = {n}, {x.shape[1]} coefficients{' (b: intercept)' if model['intercept'] else ''}, "
            f"w ~ N(0, {model['prior_scale']:g}^2 I). {result.num_steps} steps on {mb}, "
            f"S = {section['num_samples']}, bbvi: Adam rate {section['learning_rate']:g}, estimator "
            f"{section['estimator']}; ngvi: rho {section['ngvi_step_size']:g}; both decaying to "
            f"{section['step_decay']:g} x along a cosine; ELBO and moments of q from "
            f"{section['moment_draws']} draws, k-hat from the first {section['psis_draws']}.\n"
        )
        title, ref_name = f"Bayesian logistic regression on {name}", "NUTS" if refs else None
        summary = report(title, tgt, runs, draws, refs, ref_name, nuts, out_dir, f"logistic_{name}.png", notes)
        return summary | {"dataset": name, "num_data": n, "num_coefficients": int(x.shape[1])}

    key = jax.random.fold_in(jax.random.PRNGKey(seed), 8)
    return experiment(tgt, section, _DEFAULTS["algorithm"], sections["run"]["num_steps"], key, make_report, batch_fn)
