"""The correlated topic model by proximal-gradient SVI (Khan et al. 2016, §6.2, Figure 3), with a full (PG-SVI)
and a diagonal (PG-SVI-MF) Gaussian q(z_d), beside Laplace and delta-method VI (Wang & Blei 2013) and the
mean-field CTM (Blei & Lafferty 2007): negative held-out per-word log-likelihood against passes and wall time,
on a synthetic CTM corpus and on wiki_bnpy. The baselines are ``CTM(local_method=...)`` with PG-SVI's global
step, each a ``Baseline`` with the same seed and batches.
"""

from __future__ import annotations

import os

import jax
import numpy as np

from vijax.data import Minibatcher, sample_ctm_corpus
from vijax.metrics import corpus_document_completion
from vijax.models import CTM, CTMGlobals
from vijax.run import Baseline, check_memory, check_split, configured_algorithm, data_file, eval_steps, Experiment
from vijax.run import float_bytes, MemoryNeed, register_experiment
from ._plotting import figure, optional_plot
from .lda import read_corpus

_MODEL = {"num_topics": 10, "local_steps": 15, "local_step_size": 0.3, "topic_smoothing": 0.01, "cov_shrinkage": 0.01}
_MODEL |= {"init_mass": 100.0, "eval_local_steps": 30, "eval_samples": 1000, "baseline_iters": 100}
_ALG = {"name": "prox_svi", "covariance": "full", "compare": "diagonal,laplace,delta,meanfield", "step_size": 0.001}
_ALG |= {"batch_size": 2, "num_samples": 10}
_DATA = {"train_fraction": 0.5, "max_test_docs": 200, "eval_batch": 50, "observed_fraction": 0.5}
_LABEL = {"full": "PG-SVI", "diagonal": "PG-SVI-MF", "laplace": "Laplace", "delta": "Delta", "meanfield": "MF"}
_LEGEND = {"laplace": "Laplace (Wang & Blei)", "delta": "Delta (Wang & Blei)", "meanfield": "MF (Blei & Lafferty)"}
# variant -> (CTM covariance, CTM local_method)
_VARIANT = {"full": ("full", "prox"), "diagonal": ("diagonal", "prox"), "laplace": ("full", "laplace")}
_VARIANT |= {"delta": ("full", "delta"), "meanfield": ("diagonal", "meanfield")}
_BOUNDS = {"model.num_topics": ">= 2", "model.local_steps": ">= 1", "model.local_step_size": "> 0"}
_BOUNDS |= {"model.topic_smoothing": "> 0", "model.cov_shrinkage": "in [0, 1]", "model.init_mass": "> 0"}
_BOUNDS |= {"model.eval_local_steps": ">= 1", "model.eval_samples": ">= 1", "model.baseline_iters": ">= 1"}
_BOUNDS |= {"algorithm.step_size": "> 0", "algorithm.batch_size": ">= 1", "algorithm.num_samples": ">= 1"}
_BOUNDS |= {"data.train_fraction": "in (0, 1)", "data.max_test_docs": ">= 1", "data.eval_batch": ">= 1"}
_BOUNDS |= {"data.observed_fraction": "in (0, 1)"}
_SYNTHETIC_BOUNDS = _BOUNDS | {"data.num_docs": ">= 2", "data.vocab_size": ">= 1", "data.true_topics": ">= 2"}
_SYNTHETIC_BOUNDS |= {"data.doc_length": ">= 1", "data.topic_concentration": "> 0", "data.correlation": ">= 0"}
_SYNTHETIC_DATA = {"num_docs": 400, "vocab_size": 500, "true_topics": 10, "doc_length": 100}
_SYNTHETIC_DATA |= {"topic_concentration": 0.05, "correlation": 1.0}
_CORPUS_BOUNDS = {**_BOUNDS, "data.max_docs": ">= 0"}


def _memory_needs(config, vocab_size: int, doc_length: float, num_docs: int, corpus_key: str = "") -> list[MemoryNeed]:
    """The arrays of a CTM run over ``num_docs`` documents of about ``doc_length`` distinct words and
    ``vocab_size`` words (the sizes of the corpus ``corpus_key`` names, when read from a file)."""
    m, a, d, f = config["model"], config["algorithm"], config["data"], float_bytes(config)
    k = m["num_topics"]
    variants = 1 + len([c for c in a["compare"].split(",") if c.strip() not in ("", "none")])
    docs = (corpus_key,) if corpus_key else ("data.num_docs", "data.doc_length")
    topics = ("model.num_topics", corpus_key or "data.vocab_size")
    return [
        MemoryNeed("the corpus (documents x words)", docs, 2 * num_docs * doc_length * 4),
        MemoryNeed("each variant's topics (model.num_topics x vocabulary)", topics, variants * 3 * k * vocab_size * f),
        MemoryNeed(
            "a minibatch's draws (algorithm.batch_size x algorithm.num_samples x model.num_topics)",
            ("algorithm.batch_size", "algorithm.num_samples", "model.num_topics"),
            a["batch_size"] * (a["num_samples"] * k + doc_length * k + k * k) * f,
        ),
        MemoryNeed(
            "an evaluation batch's draws (data.eval_batch x model.eval_samples x model.num_topics)",
            ("data.eval_batch", "model.eval_samples", "model.num_topics"),
            d["eval_batch"] * m["eval_samples"] * (k + doc_length) * f,
        ),
    ]


def _synthetic_memory(config) -> list[MemoryNeed]:
    d = config["data"]
    return _memory_needs(config, d["vocab_size"], min(d["doc_length"], d["vocab_size"]), d["num_docs"])


def _model(m, vocab_size, variant):
    """The CTM of a variant; a baseline iterates its local fixed point at most ``model.baseline_iters`` times."""
    covariance, method = _VARIANT[variant]
    iters = {"local_steps": m["local_steps"], "eval_local_steps": m["eval_local_steps"]}
    if method != "prox":
        iters = dict.fromkeys(iters, m["baseline_iters"])
    shared = {k: m[k] for k in ("local_step_size", "topic_smoothing", "cov_shrinkage", "init_mass", "eval_samples")}
    return CTM(m["num_topics"], vocab_size, covariance=covariance, local_method=method, **iters, **shared)


def _variants(a) -> list[str]:
    """The variants to run, checked before any data are made (the numbers: the config's bounds)."""
    names = [a["covariance"]] + [c.strip() for c in a["compare"].split(",") if c.strip() not in ("", "none")]
    for n in names:
        if n not in _LABEL:
            raise ValueError(f"algorithm.covariance/compare: {n!r} is not one of {tuple(_LABEL)}")
    return list(dict.fromkeys(names))


def _build(sections, seed, train, test, reference=None):
    m, a, d = sections["model"], sections["algorithm"], sections["data"]
    variants = _variants(a)
    observed, heldout = test.split_tokens(seed + 1, d["observed_fraction"])
    mb = Minibatcher(train, a["batch_size"], seed)

    def make(variant):
        model = _model(m, train.vocab_size, variant)
        alg = configured_algorithm(
            a, _ALG, model, num_data=train.num_docs, schedule=a["step_size"], schedule_keys=("step_size",)
        )

        def evaluate(state) -> dict:  # held-out per-word log-likelihood by document completion
            r = corpus_document_completion(model, state.q_global, observed, heldout, d["eval_batch"])
            return {"heldout_per_word": float(r.per_word)}

        return alg, evaluate

    alg, evaluator = make(variants[0])
    # the other variants evaluate at the steps of the first: chunks of its shortest evaluation period
    steps = eval_steps(sections["run"])
    every = int(np.min(np.diff(steps))) if len(steps) > 1 else max(sections["run"]["num_steps"], 1)
    settings = {"chunk_size": every, "eval_every": every, "tol": None}
    others = []
    for v in variants[1:]:
        alg2, eval2 = make(v)
        others.append(Baseline(v, alg2, eval_fn=eval2, host_batches=mb.host_batches, settings=settings))

    def report(result, out_dir, baselines):
        curves = {variants[0]: result.evals} | {cov: baselines[cov].evals for cov in variants[1:]}
        summary = {"num_train_docs": train.num_docs, "num_test_docs": test.num_docs, "batch_size": a["batch_size"]}
        for cov, ev in curves.items():
            if ev:
                summary[f"{_LABEL[cov]}_heldout_per_word"] = ev[-1]["heldout_per_word"]
                summary[f"{_LABEL[cov]}_wall_time"] = ev[-1]["wall_time"]
                best = max(ev, key=lambda e: e["heldout_per_word"])  # the curve's peak (a drift shows as best > final)
                summary[f"{_LABEL[cov]}_best_heldout_per_word"] = best["heldout_per_word"]
                summary[f"{_LABEL[cov]}_best_step"] = best["step"]
        if reference is not None:
            summary["true_params_heldout_per_word"] = reference
        passes = a["batch_size"] / train.num_docs
        _plot(os.path.join(out_dir, "fig3_ctm.png"), curves, reference, m["num_topics"], passes)
        return summary

    return Experiment(alg, alg.init, None, evaluator, report, host_batches=mb.host_batches, baselines=tuple(others))


@optional_plot
def _plot(path, curves, reference, num_topics, passes_per_step):
    with figure(path, (10, 4), 1, 2, sharey=True, dpi=110) as (fig, axes):
        for cov, ev in curves.items():
            if ev:
                y = [-e["heldout_per_word"] for e in ev]
                label = _LEGEND.get(cov, _LABEL[cov])
                axes[0].plot([e["step"] * passes_per_step for e in ev], y, ".-", label=label)
                axes[1].plot([e["wall_time"] for e in ev], y, ".-", label=label)
        for ax in axes if reference is not None else ():
            ax.axhline(-reference, color="k", ls=":", label="true parameters")
        axes[0].set_xlabel("passes over the training documents")
        axes[1].set_xlabel("wall time (s)")
        axes[0].set_ylabel("negative held-out log-likelihood per word")
        fig.suptitle(f"CTM, {num_topics} topics (Khan et al. 2016, Fig. 3)")
        axes[1].legend(fontsize=8)


def _true_params_score(truth, observed, heldout, model, eval_batch):
    """The held-out score of the generating parameters (the synthetic corpus's ceiling) under ``model``: statistics
    whose M-step returns the true parameters (topic smoothing negligible against a mass of 1e12)."""
    kappa = model.cov_shrinkage
    mu, sigma = np.asarray(truth["mu"]), np.asarray(truth["sigma"])
    second = (sigma - kappa * np.eye(mu.shape[0])) / (1.0 - kappa) + np.outer(mu, mu)
    g = CTMGlobals(jax.numpy.asarray(1e12 * truth["topics"]), jax.numpy.asarray(mu), jax.numpy.asarray(second))
    r = corpus_document_completion(model, g, observed, heldout, eval_batch)
    return float(r.per_word)


@register_experiment(
    "ctm_synthetic",
    defaults={
        "model": dict(_MODEL),
        "algorithm": dict(_ALG),
        "data": _DATA | _SYNTHETIC_DATA,
        "run": {"num_steps": 2000, "chunk_size": 100, "eval_every": 200},
    },
    bounds=_SYNTHETIC_BOUNDS,
    memory=_synthetic_memory,
)
def build_synthetic(sections: dict, seed: int) -> Experiment:
    """CTM by PG-SVI, PG-SVI-MF and the Laplace, delta-method and mean-field baselines on a
    synthetic CTM corpus (Khan et al. 2016, Fig. 3)"""
    _variants(sections["algorithm"])
    d = sections["data"]
    shape = {k: d[k] for k in ("doc_length", "topic_concentration", "correlation")}
    corpus, truth = sample_ctm_corpus(seed, d["num_docs"], d["true_topics"], d["vocab_size"], **shape)
    train, test = _split(corpus, seed, d)
    reference = None
    if d["true_topics"] == sections["model"]["num_topics"]:
        observed, heldout = test.split_tokens(seed + 1, d["observed_fraction"])
        model = _model(sections["model"], corpus.vocab_size, sections["algorithm"]["covariance"])
        reference = _true_params_score(truth, observed, heldout, model, d["eval_batch"])
    return _build(sections, seed, train, test, reference=reference)


def _split(corpus, seed, d):
    train, test = corpus.split_documents(seed, 1.0 - d["train_fraction"])
    check_split("data.train_fraction", d["train_fraction"], corpus.num_docs, train.num_docs, test.num_docs)
    return train, test.subset(np.arange(min(test.num_docs, d["max_test_docs"])))


@register_experiment(
    "ctm_corpus",
    defaults={
        "model": dict(_MODEL),
        "algorithm": dict(_ALG),
        "data": dict(_DATA, path="wiki_bnpy/train.ldac.gz", vocab="wiki_bnpy/vocab.txt", max_docs=1000),
        "run": {"num_steps": 2000, "chunk_size": 100, "eval_every": 200},
    },
    bounds=_CORPUS_BOUNDS,  # the memory its arrays need: checked when the corpus is read (build_corpus)
)
def build_corpus(sections: dict, seed: int) -> Experiment:
    """CTM by PG-SVI, PG-SVI-MF and the Laplace, delta-method and mean-field baselines on an lda-c
    corpus (default: wiki_bnpy, 50% training documents)"""
    _variants(sections["algorithm"])
    d = sections["data"]
    path, vocab = data_file("data.path", d["path"]), data_file("data.vocab", d["vocab"], required=bool(d["vocab"]))
    corpus = read_corpus(path, vocab)  # its errors named by data.path and data.vocab
    if d["max_docs"] and d["max_docs"] < corpus.num_docs:
        idx = np.random.default_rng(seed).choice(corpus.num_docs, d["max_docs"], replace=False)
        corpus = corpus.subset(np.sort(idx))
    longest = float(np.max(corpus.doc_unique_words, initial=1))
    check_memory(_memory_needs(sections, corpus.vocab_size, longest, corpus.num_docs, "data.path"), sections)
    train, test = _split(corpus, seed, d)
    return _build(sections, seed, train, test)


__all__ = ["build_corpus", "build_synthetic"]
