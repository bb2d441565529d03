"""Hidden Markov models (the tutorial *Raise your ELBO*, §HMM; Rabiner 1989) with categorical or diagonal-Gaussian
emissions, fitted by Baum–Welch (``em``), CAVI or SVI, and scored on held-out sequences by the log-likelihood
per step against the true parameters' and the Viterbi accuracy after matching states (Hungarian matching).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from vijax.data import sample_hmm, subsample
from vijax.models import CategoricalEmissions, CategoricalHMM, GaussianEmissions, GaussianHMM, HMMParams
from vijax.run import ConfigError, configured_algorithm, Experiment, float_bytes, MemoryNeed, register_experiment

from ._common import train_test_bounds

_DATA = dict(num_train=500, num_test=200, length=60, min_length=20, stickiness=5.0, spread=3.0, seed=3)
_MODEL = {"emissions": "categorical", "num_states": 5, "num_symbols": 10, "dim": 2, "concentration": 1.0}
_DEFAULTS = {
    "model": _MODEL | {"forward_backward": "sequential"},
    "data": _DATA,
    # name: em, cavi (the full data at every step) or svi, ssvi, ssvi_a, map (minibatches of batch_size
    # sequences); step_size: a constant step (None: the algorithm's default)
    "algorithm": {"name": "em", "batch_size": 50, "step_size": None, "local": "meanfield"},
    "run": {"num_steps": 100, "chunk_size": 10, "eval_every": 10, "checkpoint_every": 50, "x64": True},
}

_BOUNDS = {"model.num_states": ">= 1", "model.num_symbols": ">= 1", "model.dim": ">= 1", "model.concentration": "> 0"}
_BOUNDS |= train_test_bounds(length=">= 1", min_length="in [1, data.length]", stickiness=">= 0", spread="> 0")
_BOUNDS |= {"algorithm.batch_size": ">= 1", "algorithm.step_size": "null or number in (0, 1]"}


def _memory(config) -> list[MemoryNeed]:
    m, d, f = config["model"], config["data"], float_bytes(config)
    k, t = m["num_states"], d["length"]
    obs = m["dim"] if m["emissions"] == "gaussian" else 1
    return [
        MemoryNeed(
            "the sequences ((data.num_train + data.num_test) x data.length)",
            ("data.num_train", "data.num_test", "data.length", "model.dim"),
            2 * (d["num_train"] + d["num_test"]) * t * (obs + 1) * f,
        ),
        MemoryNeed(
            "the forward-backward messages (data.num_train x data.length x model.num_states^2)",
            ("data.num_train", "data.length", "model.num_states"),
            3 * d["num_train"] * t * k * (k + 2) * f,
        ),
        MemoryNeed(
            "the emission parameters (model.num_states x model.num_symbols)",
            ("model.num_states", "model.num_symbols"),
            4 * k * (m["num_symbols"] if m["emissions"] == "categorical" else 2 * m["dim"]) * f,
        ),
    ]


def true_params(key, cfg_model: dict, cfg_data: dict) -> HMMParams:
    """A random HMM: Dirichlet(1) initial probabilities, transition rows Dirichlet(1 + stickiness e_i),
    sparse categorical emissions (Dirichlet(0.3)) or Gaussian means spread by ``spread``."""
    k, dim = cfg_model["num_states"], cfg_model["dim"]
    k1, k2, k3 = jax.random.split(key, 3)
    pi = jax.random.dirichlet(k1, jnp.ones(k))
    trans = jax.random.dirichlet(k2, jnp.ones((k, k)) + cfg_data["stickiness"] * jnp.eye(k))
    if cfg_model["emissions"] == "categorical":
        em = CategoricalEmissions(jax.random.dirichlet(k3, jnp.full((k, cfg_model["num_symbols"]), 0.3)))
    else:
        em = GaussianEmissions(cfg_data["spread"] * jax.random.normal(k3, (k, dim)), jnp.ones((k, dim)))
    return HMMParams(pi, trans, em)


def _model(cfg: dict):
    c = cfg["concentration"]
    common = dict(initial_concentration=c, transition_concentration=c, forward_backward=cfg["forward_backward"])
    if cfg["emissions"] == "categorical":
        return CategoricalHMM(cfg["num_states"], cfg["num_symbols"], emission_concentration=c, **common)
    if cfg["emissions"] == "gaussian":
        return GaussianHMM(cfg["num_states"], cfg["dim"], **common)
    raise ConfigError(f"model.emissions must be 'categorical' or 'gaussian', got {cfg['emissions']!r}")


def state_accuracy(true_states: np.ndarray, paths: np.ndarray, k: int) -> float:
    """Fraction of unpadded steps whose Viterbi state, after the best one-to-one relabelling, is the true one."""
    from scipy.optimize import linear_sum_assignment

    keep = true_states >= 0
    conf = np.zeros((k, k))
    np.add.at(conf, (true_states[keep], paths[keep]), 1)
    rows, cols = linear_sum_assignment(-conf)
    return float(conf[rows, cols].sum() / keep.sum())


@register_experiment("hmm", defaults=_DEFAULTS, bounds=_BOUNDS, memory=_memory)
def build(sections: dict, seed: int) -> Experiment:
    """HMMs (Rabiner 1989): Baum-Welch, CAVI or SVI on sequences of unequal length"""
    m, d, a = sections["model"], sections["data"], sections["algorithm"]
    n = d["num_train"]
    full = a["name"] in ("em", "cavi")
    if not full and a["batch_size"] > n:
        raise ConfigError(
            f"algorithm.batch_size must be at most data.num_train ({n}) for {a['name']!r}, which draws minibatches "
            f"without replacement; got {a['batch_size']}"
        )
    model = _model(m)
    k_truth, k_train, k_test = jax.random.split(jax.random.PRNGKey(d["seed"]), 3)
    truth = true_params(k_truth, m, d)
    lengths = {"length": d["length"], "min_length": d["min_length"]}
    train = sample_hmm(k_train, truth, num_sequences=d["num_train"], **lengths)
    test = sample_hmm(k_test, truth, num_sequences=d["num_test"], **lengths)
    model.check_data(train.data)
    schedule, keys = a["step_size"], ("step_size", "batch_size")
    alg = configured_algorithm(
        a, _DEFAULTS["algorithm"], model, num_data=None if full else n, schedule=schedule, schedule_keys=keys
    )
    steps_test = float(np.sum(np.asarray(test.data.lengths)))

    def per_step(params) -> float:  # the held-out log-likelihood per step
        return float(jnp.sum(model.log_likelihood(params, test.data))) / steps_test

    def accuracy(params) -> float:
        return state_accuracy(np.asarray(test.states), np.asarray(model.viterbi(params, test.data)[0]), m["num_states"])

    @jax.jit
    def _estimate(state):  # EM fits the parameters themselves; the Bayesian fits a q over them
        return state.q_global if a["name"] == "em" else model.expected_params(state.q_global)

    def eval_fn(state) -> dict:
        return {"heldout_ll_per_step": per_step(_estimate(state))}

    def report(result, out_dir, baselines) -> dict:
        est = _estimate(result.state)
        out = {"heldout_ll_per_step": per_step(est), "true_heldout_ll_per_step": per_step(truth)}
        return out | {"viterbi_state_accuracy": accuracy(est), "true_path_accuracy": accuracy(truth)}

    def batch_fn(key, step):
        if full:
            return train.data
        idx = subsample(key, n, a["batch_size"])
        return jax.tree_util.tree_map(lambda x: x[idx], train.data)

    init = jax.jit(lambda key: alg.init(key, train.data))
    return Experiment(alg, init, batch_fn, eval_fn, report)


__all__ = ["build", "state_accuracy", "true_params"]
