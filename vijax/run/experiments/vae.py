"""A variational autoencoder by AEVB (Kingma & Welling 2014) and the fully Bayesian AEVB of the *Raise your
ELBO* tutorial (2019, §Fully Bayesian AEVB): a mean-field Gaussian q(theta) over the decoder.

Tanh MLP encoder and decoder, Bernoulli or Gaussian likelihood, on scikit-learn's digits or synthetic binary
data. With ``algorithm.compare`` the other decoder runs as a ``Baseline`` on the same minibatches and keys.
The report gives each run's test ELBO and importance-weighted log-likelihood (Burda et al. 2016) and writes
``results.md``, ``vae_reconstructions.png`` and ``vae_samples.png``.
"""

from __future__ import annotations

import math
import os
import platform

import jax
import jax.numpy as jnp
import numpy as np

from vijax.data import epoch_batches, latent_bernoulli_log_prob, load_digits_images, sample_latent_bernoulli
from vijax import inference
from vijax.inference import make_algorithm
from vijax.models import VAE, mlp
from vijax.run import Baseline, ConfigError, configured_algorithm, Experiment, float_bytes, MemoryNeed
from vijax.run import register_experiment, SEED_BOUND
from ._common import dataset_extras, md_table, needs, train_test_bounds
from ._plotting import optional_plot

# hidden: the hidden layers' widths; activation: a name in vijax.models.ACTIVATIONS; obs_scale: the Gaussian sd
_MODEL = {"latent_dim": 2, "hidden": [64], "activation": "tanh", "likelihood": "bernoulli", "obs_scale": 1.0}
# binarize .. test_fraction: the digits; num_train .. seed: the synthetic data; batch_size: M (N / M scaling)
_DATA = {"dataset": "digits", "binarize": True, "threshold": 0.5, "split_seed": 0, "test_fraction": 0.2}
_DATA |= {"num_train": 1000, "num_test": 200, "dim": 64, "true_latent_dim": 2, "true_hidden": 16, "logit_scale": 3.0}
_DATA |= {"seed": 0, "batch_size": 100}
# num_samples: z draws per datum and step; compare: also run the other decoder (point <-> Bayesian);
# elbo_samples: z draws per test point; iw_samples: K, in chunks of iw_chunk, iw_repeats times; num_images: per row
_ALG = {"name": "aevb", "optimizer": "adam", "learning_rate": 3e-3, "num_samples": 1, "bayesian_decoder": False}
_ALG |= {"prior_scale": 1.0, "init_scale": 0.01, "compare": True, "elbo_samples": 10, "iw_samples": 1000}
_ALG |= {"iw_chunk": 250, "iw_repeats": 5, "num_images": 10}
_RUN = {"num_steps": 10000, "chunk_size": 1000, "eval_every": 2000, "progress": False}
_DEFAULTS = {"model": _MODEL, "data": _DATA, "algorithm": _ALG, "run": _RUN}

_BOUNDS = {"model.latent_dim": ">= 1", "model.hidden": "each >= 1", "model.obs_scale": "> 0"}
_BOUNDS |= {"data.threshold": "in (0, 1)", "data.split_seed": SEED_BOUND, "data.test_fraction": "in (0, 1)"}
_BOUNDS |= train_test_bounds(dim=">= 1", true_latent_dim=">= 1", true_hidden=">= 1", logit_scale="> 0")
_BOUNDS |= {"data.batch_size": ">= 1", "algorithm.learning_rate": "> 0", "algorithm.num_samples": ">= 1"}
_BOUNDS |= {"algorithm.prior_scale": "> 0", "algorithm.init_scale": "> 0"}
_BOUNDS |= {f"algorithm.{k}": ">= 1" for k in ("elbo_samples", "iw_samples", "iw_chunk", "iw_repeats", "num_images")}
_DIGITS = (1797, 64)  # scikit-learn's digits: 1797 images of 8 x 8 pixels


def _memory(config) -> list[MemoryNeed]:
    m, d, a, f = config["model"], config["data"], config["algorithm"], float_bytes(config)
    n, dim = (d["num_train"] + d["num_test"], d["dim"]) if d["dataset"] == "synthetic" else _DIGITS
    test = d["num_test"] if d["dataset"] == "synthetic" else math.ceil(d["test_fraction"] * n)
    width = dim + sum(m["hidden"]) + 2 * m["latent_dim"]
    sizes = [dim] + list(m["hidden"]) + [2 * m["latent_dim"]]
    weights = 2 * sum(x * y for x, y in zip(sizes[:-1], sizes[1:]))
    layers = ("model.hidden", "model.latent_dim", "data.dim")
    return [
        MemoryNeed(
            "the data (data.num_train + data.num_test) x data.dim",
            ("data.num_train", "data.num_test", "data.dim"),
            2 * n * dim * f,
        ),
        MemoryNeed(
            "the networks' weights (model.hidden)", ("model.hidden", "data.dim", "model.latent_dim"), 8 * weights * f
        ),
        MemoryNeed(
            "a step's activations (data.batch_size x algorithm.num_samples x the layers)",
            ("data.batch_size", "algorithm.num_samples", *layers),
            3 * d["batch_size"] * a["num_samples"] * width * f,
        ),
        MemoryNeed(
            "the importance-weighted estimate's chunk (algorithm.iw_chunk x the test data x the layers)",
            ("algorithm.iw_chunk", "data.num_test", *layers),
            2 * min(a["iw_chunk"], a["iw_samples"]) * test * width * f,
        ),
        MemoryNeed(
            "the test ELBO's draws (algorithm.elbo_samples x the test data x the layers)",
            ("algorithm.elbo_samples", "data.num_test", *layers),
            2 * a["elbo_samples"] * test * width * f,
        ),
    ]


REFERENCE_SAMPLES = 20000  # prior draws of the synthetic data's log p(x) under its own decoder


def load(data: dict):
    """(x_train (N, D), x_test (P, D), image shape, name, the generating decoder's weights or None)
    of the configured data (NumPy)."""
    name = data["dataset"]
    try:
        if name == "digits":
            d = load_digits_images(data["split_seed"], data["test_fraction"], data["binarize"], data["threshold"])
            return d.x_train, d.x_test, d.image_shape, d.name, None
        if name == "synthetic":
            n, p = data["num_train"], data["num_test"]
            sizes = (n + p, data["dim"], data["true_latent_dim"], data["true_hidden"])
            s = sample_latent_bernoulli(jax.random.PRNGKey(data["seed"]), *sizes, logit_scale=data["logit_scale"])
            x = np.asarray(s.x, np.float64)
            side = int(round(np.sqrt(data["dim"])))
            shape = (side, side) if side * side == data["dim"] else (1, data["dim"])
            return x[:n], x[n:], shape, "synthetic", s.decoder
    except ValueError as e:
        raise ConfigError(f"data: {e}") from None
    raise ConfigError(f"data.dataset: 'digits' or 'synthetic', got {name!r}")


def _model(model: dict, dim: int, seed: int) -> VAE:
    d, hidden = model["latent_dim"], list(model["hidden"])
    k_enc, k_dec = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), 11))
    try:
        encoder = mlp(k_enc, [dim] + hidden + [2 * d], model["activation"])
        decoder = mlp(k_dec, [d] + hidden + [dim], model["activation"])
        return VAE(
            encoder, decoder, latent_dim=d, data_dim=dim, likelihood=model["likelihood"], obs_scale=model["obs_scale"]
        )
    except ValueError as e:
        raise ConfigError(f"model: {e}") from None


def _estimates(alg, state, x_test, section: dict, key, theta: str = "sample") -> dict:
    """Test ELBO and IW log-likelihood (mean over test points, SE over them, sd over repeats)."""
    p = x_test.shape[0]
    elbo = np.asarray(
        inference.elbo(alg, key, state.q_global, x_test, num_samples=section["elbo_samples"], theta=theta)
    )
    k, chunk = section["iw_samples"], section["iw_chunk"]
    iw = lambda r: inference.iwae_log_likelihood(alg, jax.random.fold_in(key, r), state, x_test, k, chunk, theta=theta)
    reps = np.stack([np.asarray(iw(r)) for r in range(section["iw_repeats"])])  # (R, P)
    per_point = reps.mean(0)
    return {
        "test ELBO": float(elbo.mean()),
        "ELBO SE": float(elbo.std() / np.sqrt(p)),
        "IW log-lik": float(per_point.mean()),
        "IW SE (test points)": float(per_point.std() / np.sqrt(p)),
        "IW sd over repeats": float(reps.mean(1).std(ddof=1)) if len(reps) > 1 else float("nan"),
        "IW mean per-point sd": float(reps.std(0, ddof=1).mean()) if len(reps) > 1 else float("nan"),
    }


@optional_plot
def _figure(path: str, rows: dict, shape, n: int, title: str) -> None:
    """One row of ``n`` images per entry of ``rows`` (label -> (n, D) array in [0, 1])."""
    from matplotlib.figure import Figure  # deferred: importing matplotlib is slow

    aspect = shape[1] / shape[0]
    fig = Figure(figsize=(1.6 + 0.7 * n * min(aspect, 4.0), 0.35 + 0.75 * len(rows)), layout="constrained")
    axes = fig.subplots(len(rows), n, squeeze=False)
    for i, (label, imgs) in enumerate(rows.items()):
        for j in range(n):
            axes[i, j].imshow(
                np.asarray(imgs[j]).reshape(shape), cmap="gray_r", vmin=0.0, vmax=1.0, interpolation="nearest"
            )
            axes[i, j].set(xticks=[], yticks=[])
        axes[i, 0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.savefig(path, dpi=100)


@register_experiment("vae", defaults=_DEFAULTS, bounds=_BOUNDS, memory=_memory)
@needs(lambda sections: dataset_extras(sections["data"]["dataset"]))
def build(sections: dict, seed: int) -> Experiment:
    """a VAE by AEVB and a fully Bayesian decoder beside it: test ELBO, IW log-likelihood, images"""
    data, section, num_images = sections["data"], sections["algorithm"], sections["algorithm"]["num_images"]
    x_train, x_test, shape, name, truth = load(data)
    n, dim = x_train.shape
    model = _model(sections["model"], dim, seed)
    lr = section["learning_rate"]
    main = configured_algorithm(section, _ALG, model, num_data=n, schedule=lr, schedule_keys=("learning_rate",))
    xtr = jnp.asarray(x_train, jnp.result_type(float))
    xte = jnp.asarray(x_test, jnp.result_type(float))
    try:
        idx_fn, _ = epoch_batches(n, data["batch_size"], jax.random.PRNGKey(seed + 7))
    except ValueError as e:
        raise ConfigError(f"data.batch_size: {e}") from None

    def batch_fn(key, t):
        return xtr[idx_fn(key, t)]

    eval_key = jax.random.fold_in(jax.random.PRNGKey(seed), 8)

    def test_elbo(alg, q) -> float:
        return float(jnp.mean(inference.elbo(alg, eval_key, q, xte, num_samples=section["elbo_samples"])))

    bayes = section["bayesian_decoder"]
    labels = {True: "bayesian_decoder", False: "point_decoder"}
    algs = {labels[bayes]: main}
    baselines = ()
    if section["compare"]:
        settings = {k: section[k] for k in ("optimizer", "num_samples", "prior_scale", "init_scale")}
        other = make_algorithm("aevb", model, num_data=n, schedule=lr, bayesian_decoder=not bayes, **settings)
        algs[labels[not bayes]] = other
        init = lambda key: other.init(key, x_train[:1])  # noqa: E731
        evaluate = lambda state: {"test_elbo": test_elbo(other, state.q_global)}  # noqa: E731
        baselines = (Baseline(labels[not bayes], other, init, batch_fn, evaluate),)

    def report(result, out_dir, results):
        runs = {labels[bayes]: result} | {b.name: results[b.name] for b in baselines}
        rows, recs, samples = [], {"data": x_test[:num_images]}, {}
        for label, res in runs.items():
            alg = algs[label]
            elbo = np.asarray(res.trace.get("elbo", np.zeros(0)))
            tail = elbo[-min(len(elbo), 100) :] / n
            rows.append(
                {
                    "method": label,
                    "theta": "q(θ) draws" if "bayes" in label else "point",
                    "steps": res.num_steps,
                    "test ELBO at start": test_elbo(alg, alg.init(jax.random.PRNGKey(seed)).q_global),
                    **_estimates(alg, res.state, xte, section, eval_key),
                    "train ELBO / N (last 100 steps)": float(tail.mean()) if len(tail) else float("nan"),
                    "KL(q(θ)‖p(θ)) / N": float(inference.decoder_kl(alg, res.state)) / n,
                    "rejected steps": int(res.state.num_rejected),
                    "wall time (s)": res.wall_time,
                }
            )
            if "bayes" in label:
                mean = _estimates(alg, res.state, xte, section, eval_key, theta="mean")
                rows.append({"method": label, "theta": "E_q[θ]", "steps": res.num_steps, **mean})
            recs[label] = np.asarray(inference.reconstruct(alg, res.state, xte[:num_images]))
            samples[label] = np.asarray(inference.sample(alg, jax.random.fold_in(eval_key, 99), res.state, num_images))
        title = f"{name}: test images and their reconstructions E[x | z = μ(x)]"
        _figure(os.path.join(out_dir, "vae_reconstructions.png"), recs, shape, num_images, title)
        title = f"{name}: E[x | z] for z ~ N(0, I) (θ ~ q(θ) for the Bayesian decoder)"
        _figure(os.path.join(out_dir, "vae_samples.png"), samples, shape, num_images, title)
        summary = {"table": rows, "dataset": name, "num_train": int(n), "num_test": int(x_test.shape[0])}
        if truth is not None:  # log p(x_test) under the decoder that generated the data
            ref = np.asarray(latent_bernoulli_log_prob(truth, xte, jax.random.fold_in(eval_key, 7), REFERENCE_SAMPLES))
            summary["true_model_log_lik"] = {"mean": float(ref.mean()), "se": float(ref.std() / np.sqrt(len(ref)))}
        _write(out_dir, name, rows, sections, x_train.shape, x_test.shape, summary.get("true_model_log_lik"))
        return summary

    init = lambda key: main.init(key, x_train[:1])  # noqa: E731
    return Experiment(
        main, init, batch_fn, lambda state: {"test_elbo": test_elbo(main, state.q_global)}, report, baselines=baselines
    )


def _write(out_dir, name, rows, sections, train_shape, test_shape, truth) -> None:
    model, data, section, run = (sections[k] for k in ("model", "data", "algorithm", "run"))
    cols = list(rows[0])  # the first run's row has every column
    lines = [
        f"# A VAE on {name}: AEVB and fully Bayesian AEVB\n",
        f"{train_shape[0]} training and {test_shape[0]} test points of {train_shape[1]} pixels; "
        f"d = {model['latent_dim']} latents, {model['activation']} MLPs with hidden widths {list(model['hidden'])}, "
        f"{model['likelihood']} likelihood; {run['num_steps']} {section['optimizer']} steps at rate "
        f"{section['learning_rate']:g} on minibatches of {data['batch_size']} (N/M scaling), S = "
        f"{section['num_samples']} draws of z per datum; Bayesian decoder: q(θ) mean-field Gaussian, "
        f"p(θ) = N(0, {section['prior_scale']:g}² I), initial sd {section['init_scale']:g}, one θ per step.\n",
        f"Per test point (nats): the test ELBO from {section['elbo_samples']} draws of z; the importance-weighted "
        f"log-likelihood (Burda et al. 2016) with K = {section['iw_samples']} and the encoder as proposal, "
        f"repeated {section['iw_repeats']} times: its mean over test points (averaged over the repeats), the "
        "standard error over test points, the sd of the test mean over the repeats and the mean over test "
        "points of each point's sd over the repeats. For the Bayesian decoder θ ~ q(θ) per draw (a bound on "
        "the log predictive density under q(θ)), and in the row 'E_q[θ]' at q's mean.\n",
        f"Machine: {platform.machine()} {platform.system()}, {os.cpu_count()} CPU(s), JAX on "
        f"{jax.default_backend()}; wall time is the training run's own.\n",
        md_table(rows, cols, lambda v: f"{v:.3f}"),
    ]
    if truth is not None:
        lines.append(
            f"\nThe generating model's own log p(x) on the test points (simple Monte Carlo over the prior, "
            f"{REFERENCE_SAMPLES} draws): {truth['mean']:.3f} ± {truth['se']:.3f} (SE over test points)."
        )
    lines.append(
        "\nFigures: vae_reconstructions.png (test images, then each decoder's reconstruction), "
        "vae_samples.png (each decoder's means for prior draws).\n"
    )
    with open(os.path.join(out_dir, "results.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
