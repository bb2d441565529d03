"""Hidden Markov models (the tutorial *Raise your ELBO*, §HMM; Rabiner 1989): sequences of unequal length
sampled from a random HMM with categorical or diagonal-Gaussian emissions, fitted by Baum–Welch
(``em``, the default), CAVI on the Bayesian HMM (``cavi``) or SVI over minibatches of sequences
(``svi``, ``ssvi``, ...: any registered algorithm the model meets).

Evaluated on held-out sequences from the same HMM: the log-likelihood per step of the point estimate
(EM's parameters, or the posterior means under q for the Bayesian fits) against the true parameters',
and the accuracy of the Viterbi path after matching fitted states to true ones (Hungarian matching
on the confusion counts).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from vijax.data import sample_hmm
from vijax.models import CategoricalEmissions, CategoricalHMM, GaussianEmissions, GaussianHMM, HMMParams
from vijax.run import ConfigError, configured_algorithm, Experiment, float_bytes, MemoryNeed, register_experiment

from ._common import train_test_bounds

_DEFAULTS = {
    "model": {
        "emissions": "categorical",
        "num_states": 5,
        "num_symbols": 10,
        "dim": 2,
        "concentration": 1.0,
        "forward_backward": "sequential",
    },
    "data": {
        "num_train": 500,
        "num_test": 200,
        "length": 60,
        "min_length": 20,
        "stickiness": 5.0,
        "spread": 3.0,
        "seed": 3,
    },
    # name: any registered algorithm the model meets (em, cavi: the full data at every step; svi, ssvi, ssvi_a,
    # map: minibatches of batch_size sequences); step_size: a constant step (None: the algorithm's default)
    "algorithm": {"name": "em", "batch_size": 50, "step_size": None, "local": "meanfield"},
    "run": {"num_steps": 100, "chunk_size": 10, "eval_every": 10, "checkpoint_every": 50, "x64": True},
}

_BOUNDS = {
    "model.num_states": ">= 1",
    "model.num_symbols": ">= 1",
    "model.dim": ">= 1",
    "model.concentration": "> 0",
    **train_test_bounds(length=">= 1", min_length="in [1, data.length]", stickiness=">= 0", spread="> 0"),
    "algorithm.batch_size": ">= 1",
    "algorithm.step_size": "null or number in (0, 1]",
}


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
    k = cfg_model["num_states"]
    k1, k2, k3 = jax.random.split(key, 3)
    pi = jax.random.dirichlet(k1, jnp.ones(k))
    trans = jax.random.dirichlet(k2, jnp.ones((k, k)) + cfg_data["stickiness"] * jnp.eye(k))
    if cfg_model["emissions"] == "categorical":
        em = CategoricalEmissions(jax.random.dirichlet(k3, jnp.full((k, cfg_model["num_symbols"]), 0.3)))
    else:
        em = GaussianEmissions(
            cfg_data["spread"] * jax.random.normal(k3, (k, cfg_model["dim"])), jnp.ones((k, cfg_model["dim"]))
        )
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
    train = sample_hmm(k_train, truth, num_sequences=d["num_train"], length=d["length"], min_length=d["min_length"])
    test = sample_hmm(k_test, truth, num_sequences=d["num_test"], length=d["length"], min_length=d["min_length"])
    model.check_data(train.data)
    alg = configured_algorithm(
        a,
        _DEFAULTS["algorithm"],
        model,
        num_data=None if full else n,
        schedule=a["step_size"],
        schedule_keys=("step_size", "batch_size"),
    )
    steps_test = float(np.sum(np.asarray(test.data.lengths)))
    truth_ll = float(jnp.sum(model.log_likelihood(truth, test.data))) / steps_test

    @jax.jit
    def _estimate(state):  # EM fits the parameters themselves; the Bayesian fits a q over them
        return state.q_global if a["name"] == "em" else model.expected_params(state.q_global)

    def eval_fn(state) -> dict:
        est = _estimate(state)
        return {"heldout_ll_per_step": float(jnp.sum(model.log_likelihood(est, test.data))) / steps_test}

    def report(result, out_dir, baselines) -> dict:
        est = _estimate(result.state)
        paths, _ = model.viterbi(est, test.data)
        out = eval_fn(result.state)
        out.update(
            true_heldout_ll_per_step=truth_ll,
            viterbi_state_accuracy=state_accuracy(np.asarray(test.states), np.asarray(paths), m["num_states"]),
            true_path_accuracy=state_accuracy(
                np.asarray(test.states), np.asarray(model.viterbi(truth, test.data)[0]), m["num_states"]
            ),
        )
        return out

    def batch_fn(key, step):
        if full:
            return train.data
        idx = jax.random.choice(key, n, (a["batch_size"],), replace=False)
        return jax.tree_util.tree_map(lambda x: x[idx], train.data)

    init = jax.jit(lambda key: alg.init(key, train.data))
    return Experiment(alg, init, batch_fn, eval_fn, report)


__all__ = ["build", "state_accuracy", "true_params"]
