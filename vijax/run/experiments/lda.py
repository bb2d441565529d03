"""Online LDA by natural-gradient SVI (Blei et al. 2017, §4.3, appendix C; Hoffman et al. 2010/2013) on a
synthetic corpus with known topics and on a real lda-c corpus (wiki_bnpy by default).

``algorithm.name`` picks any registered algorithm that takes minibatches (``svi`` by default; ``ssvi``,
``ssvi_a`` and ``map`` are the other M-steps of Hoffman & Blei 2015, §2.5), with the Robbins-Monro step
size rho_t = scale (t + tau)^-kappa. ``MODEL_DEFAULTS`` and ``DATA_DEFAULTS`` are shared with ``lda_ssvi``.
"""

from __future__ import annotations

import os
import time
from typing import Optional

import jax
import numpy as np

from vijax import ArgumentError
from vijax.data import Minibatcher, read_ldac, sample_lda_corpus
from vijax.inference import data_parallel, schedules
from vijax.metrics import corpus_document_completion, top_words, topic_recovery
from vijax.models import LDA
from vijax.run import check_memory, check_split, configured_algorithm, data_file, Experiment, float_bytes, MemoryNeed
from vijax.run import register_experiment
from ._plotting import figure, optional_plot

MODEL_DEFAULTS = {"num_topics": 50, "alpha": 0.02, "eta": 0.02, "max_iters": 100, "tol": 1e-3, "cvb0_iters": 100}
MODEL_DEFAULTS |= {"gibbs_sweeps": 10, "gibbs_burn_in": 5}
# data_parallel: the local step split over all devices
_ALG = {"name": "svi", "local": "meanfield", "batch_size": 256, "tau": 64.0, "kappa": 0.7, "scale": 1.0}
_ALG |= {"ramp": False, "data_parallel": False}
_CORPUS_ALG = dict(_ALG, batch_size=64, tau=1024.0)
# the data keys of every LDA experiment: the test split and document completion's evaluation
DATA_DEFAULTS = {"test_fraction": 0.1, "max_test_docs": 1000, "eval_batch": 100, "observed_fraction": 0.5}

MODEL_BOUNDS = {"model.num_topics": ">= 1", "model.alpha": "> 0", "model.eta": "> 0", "model.max_iters": ">= 1"}
MODEL_BOUNDS |= {"model.tol": ">= 0", "model.cvb0_iters": ">= 1", "model.gibbs_sweeps": ">= 1"}
MODEL_BOUNDS |= {"model.gibbs_burn_in": "in [0, model.gibbs_sweeps)"}
DATA_BOUNDS = {"data.test_fraction": "in (0, 1)", "data.max_test_docs": ">= 1", "data.eval_batch": ">= 1"}
DATA_BOUNDS |= {"data.observed_fraction": "in (0, 1)"}
SYNTHETIC_BOUNDS = {"data.num_docs": ">= 2", "data.vocab_size": ">= 1", "data.true_topics": ">= 1"}
SYNTHETIC_BOUNDS |= {"data.true_alpha": "> 0", "data.true_eta": "> 0", "data.doc_length_mean": "> 0"}
ALG_BOUNDS = {"algorithm.batch_size": ">= 1", "algorithm.tau": "> 0", "algorithm.kappa": "in (0.5, 1]"}
ALG_BOUNDS |= {"algorithm.scale": "> 0"}


def memory_needs(
    config, num_docs: float, num_entries: float, width: float, vocab_size: float, corpus_keys=None, copies: int = 1
) -> list[MemoryNeed]:
    """The arrays of an LDA run on ``num_docs`` documents with ``num_entries`` (document, word) entries, padded
    to ``width`` distinct words, over ``vocab_size`` words (``corpus_keys``: the config keys that set them;
    ``copies``: the fits held at once, e.g. restarts)."""
    m, a, d, f = config["model"], config["algorithm"], config["data"], float_bytes(config)
    k = m["num_topics"]
    docs_keys, vocab_keys = corpus_keys or (("data.num_docs", "data.doc_length_mean"), ("data.vocab_size",))
    topics = ("model.num_topics",) + vocab_keys
    return [
        MemoryNeed("the corpus (its (document, word) entries)", docs_keys, 3 * num_entries * 4),
        MemoryNeed("the topics (model.num_topics x the vocabulary)", topics, copies * 4 * k * vocab_size * f),
        MemoryNeed(  # padded to batch_size rows
            "a minibatch's E-step (algorithm.batch_size x distinct words x model.num_topics)",
            ("algorithm.batch_size", "model.num_topics") + docs_keys[1:],
            copies * 3 * a["batch_size"] * width * k * f,
        ),
        MemoryNeed(  # padded to eval_batch rows
            "an evaluation batch (data.eval_batch x distinct words x model.num_topics)",
            ("data.eval_batch", "model.num_topics") + docs_keys[1:],
            copies * 3 * d["eval_batch"] * width * k * f,
        ),
    ]


def synthetic_memory(config, copies: int = 1) -> list[MemoryNeed]:
    """``memory_needs`` of a synthetic corpus (``sample_lda_corpus``: Poisson document lengths)."""
    d = config["data"]
    width = min(4.0 * d["doc_length_mean"] + 20.0, d["vocab_size"])  # the padded width: a long document's
    entries = d["num_docs"] * d["doc_length_mean"]
    true = MemoryNeed(
        "the true topics (data.true_topics x data.vocab_size)",
        ("data.true_topics", "data.vocab_size"),
        2 * d["true_topics"] * d["vocab_size"] * 8,
    )
    return memory_needs(config, d["num_docs"], entries, width, d["vocab_size"], copies=copies) + [true]


class _Eval:
    """Held-out per-word log predictive by document completion, and documents/s since the last evaluation."""

    def __init__(self, model, test, batch_size, eval_batch, seed, observed_fraction):
        self.observed, self.heldout = test.split_tokens(seed, observed_fraction)
        self.model, self.batch_size, self.eval_batch = model, batch_size, eval_batch
        self.last = None

    def __call__(self, state) -> dict:
        r = corpus_document_completion(self.model, state.q_global, self.observed, self.heldout, self.eval_batch)
        steps, now = int(state.count), time.perf_counter()
        out = {"heldout_per_word": float(r.per_word), "docs_seen": steps * self.batch_size}
        if self.last is not None and steps > self.last[0]:
            out["docs_per_s"] = (steps - self.last[0]) * self.batch_size / (now - self.last[1])
        self.last = (steps, now)
        return out


def make_model(m: dict, vocab_size: int, **override) -> LDA:
    """The LDA of a config's model section (keys of ``MODEL_DEFAULTS``), with ``override`` replacing keys."""
    m = dict(m, **override)
    keys = ("alpha", "eta", "max_iters", "tol", "cvb0_iters", "gibbs_sweeps", "gibbs_burn_in")
    return LDA(m["num_topics"], vocab_size, **{k: m[k] for k in keys})


def synthetic_corpus(d: dict, seed: int):
    """``(train, test, true_topics)`` for a data section with the keys of ``lda_synthetic``: a corpus drawn
    from LDA, split into training and test documents (at most ``max_test_docs``, where the section has it)."""
    shape = {"alpha": d["true_alpha"], "eta": d["true_eta"], "doc_length_mean": d["doc_length_mean"]}
    sample = sample_lda_corpus(seed, d["num_docs"], d["true_topics"], d["vocab_size"], **shape)
    train, test = sample.corpus.split_documents(seed, d["test_fraction"])
    check_split("data.test_fraction", d["test_fraction"], d["num_docs"], train.num_docs, test.num_docs)
    if "max_test_docs" in d:
        test = test.subset(np.arange(min(test.num_docs, d["max_test_docs"])))
    return train, test, np.asarray(sample.topics)


def read_corpus(path, vocab, keys: tuple[str, str] = ("data.path", "data.vocab")):
    """``read_ldac(path, vocab)``, an ``ArgumentError`` about either file naming the config key of that file
    (``keys``) instead of the reader's argument (``path``, ``vocab_path``)."""
    try:
        return read_ldac(path, vocab)
    except ArgumentError as e:
        key = dict(zip(("path", "vocab_path"), keys)).get(e.argument)
        if key is None:
            raise
        raise ArgumentError(key, f"{key}: {e}") from e


def ldac_corpus(
    d: dict,
    seed: int,
    required: bool = True,
    keys: tuple[str, str] = ("data.path", "data.vocab"),
    sections: Optional[dict] = None,
):
    """``(train, test, vocab)`` for a data section with the keys of ``lda_corpus`` (``path`` and ``vocab``:
    paths or names under the shared data folder; an empty ``vocab``: none).

    An absent corpus file is a ValueError naming ``keys[0]`` when ``required``, else None; a named vocabulary
    that is absent, a folder or a device is a ValueError naming ``keys[1]``. With the config's ``sections``,
    the run's arrays on this corpus are checked against the machine's memory."""
    path = data_file(keys[0], d["path"], required=required)
    if path is None:
        return None
    corpus = read_corpus(path, data_file(keys[1], d["vocab"]) if d["vocab"] else None, keys)
    if sections is not None:
        width = float(np.max(corpus.doc_unique_words, initial=1))
        needs = memory_needs(sections, corpus.num_docs, corpus.nnz, width, corpus.vocab_size, ((keys[0],), (keys[0],)))
        check_memory(needs, sections)
    train, test = corpus.split_documents(seed, d["test_fraction"])
    check_split("data.test_fraction", d["test_fraction"], corpus.num_docs, train.num_docs, test.num_docs)
    return train, test.subset(np.arange(min(test.num_docs, d["max_test_docs"]))), corpus.vocab


def _build(sections, seed, train, test, alg_defaults, true_topics=None, vocab=None):
    m, a, d = sections["model"], sections["algorithm"], sections["data"]
    model = make_model(m, train.vocab_size)
    s, devices = a["batch_size"], len(jax.devices())
    if a["data_parallel"] and s % devices:
        raise ValueError(
            f"algorithm.batch_size: {s} must be a multiple of the {devices} devices for algorithm.data_parallel"
        )
    fitted = data_parallel(model) if a["data_parallel"] else model
    num_data = train.num_docs - train.num_empty  # LDA counts the documents with a token (present_rows)
    schedule, keys = schedules.robbins_monro(a["scale"], tau=a["tau"], kappa=a["kappa"]), ("scale", "tau", "kappa")
    alg = configured_algorithm(a, alg_defaults, fitted, num_data=num_data, schedule=schedule, schedule_keys=keys)
    # one padded length for the whole run, host chunks of the entries alone (padded on the device; a data-parallel
    # step shards padded batches); Gibbs computes over the padded length, so it pads per batch
    gibbs = a.get("local") == "gibbs"
    mb = Minibatcher(train, s, seed, length=None if gibbs else "corpus", packed=not (gibbs or a["data_parallel"]))
    evaluator = _Eval(model, test, s, d["eval_batch"], seed + 1, d["observed_fraction"])

    def report(result, out_dir, baselines):
        topics = np.asarray(model.expected_topics(result.state.q_global))
        summary = {
            "heldout_per_word": result.evals[-1]["heldout_per_word"] if result.evals else None,
            "docs_seen": int(result.num_steps) * s,
            "docs_per_s": int(result.num_steps) * s / max(result.wall_time, 1e-9),
        }
        if true_topics is not None:
            summary["topic_recovery_mean_cosine"] = float(topic_recovery(true_topics, topics).mean_cosine)
        if vocab is not None:
            words = top_words(topics, vocab, n=8)
            summary["top_words"] = [" ".join(w) for w in words[:10]]
            with open(os.path.join(out_dir, "topics.txt"), "w") as fh:
                fh.writelines(f"{k:3d}: {' '.join(w)}\n" for k, w in enumerate(words))
        _plot_heldout(os.path.join(out_dir, "heldout.png"), result.evals)
        return summary

    init = (lambda key: fitted.replicate(alg.init(key))) if a["data_parallel"] else alg.init
    return Experiment(alg, init, None, evaluator, report, host_batches=mb.host_batches)


@optional_plot
def _plot_heldout(path, evals):
    if not evals:
        return
    y = [e["heldout_per_word"] for e in evals]
    with figure(path, (10, 3.8), 1, 2, dpi=110) as (fig, axes):
        for ax, x, label in zip(axes, ("wall_time", "docs_seen"), ("wall time (s)", "documents seen")):
            ax.plot([e[x] for e in evals], y, ".-")
            ax.set(xlabel=label, ylabel="held-out per-word log predictive")


_SYNTHETIC_DATA = dict(DATA_DEFAULTS, num_docs=50000, vocab_size=5000, true_topics=50, true_alpha=0.1, true_eta=0.02)


@register_experiment(
    "lda_synthetic",
    defaults={
        "model": dict(MODEL_DEFAULTS),
        "algorithm": dict(_ALG),
        "data": dict(_SYNTHETIC_DATA, doc_length_mean=100.0),
        "run": {"num_steps": 2000, "chunk_size": 50, "eval_every": 200},
    },
    bounds={**MODEL_BOUNDS, **DATA_BOUNDS, **SYNTHETIC_BOUNDS, **ALG_BOUNDS},
    memory=synthetic_memory,
)
def build_synthetic(sections: dict, seed: int) -> Experiment:
    """online LDA (SVI) on a synthetic LDA corpus with known topics (topic recovery)"""
    train, test, topics = synthetic_corpus(sections["data"], seed)
    return _build(sections, seed, train, test, _ALG, true_topics=topics)


@register_experiment(
    "lda_corpus",
    defaults={
        "model": dict(MODEL_DEFAULTS, num_topics=100, alpha=0.01, eta=0.01),
        "algorithm": dict(_CORPUS_ALG),
        "data": dict(DATA_DEFAULTS, path="wiki_bnpy/train.ldac.gz", vocab="wiki_bnpy/vocab.txt"),
        "run": {"num_steps": 1000, "chunk_size": 25, "eval_every": 100},
    },
    bounds={**MODEL_BOUNDS, **DATA_BOUNDS, **ALG_BOUNDS},
)
def build_corpus(sections: dict, seed: int) -> Experiment:
    """online LDA (SVI) on an lda-c corpus (default: wiki_bnpy from ../shared/data)"""
    train, test, vocab = ldac_corpus(sections["data"], seed, sections=sections)
    return _build(sections, seed, train, test, _CORPUS_ALG, vocab=vocab)


__all__ = [
    "ALG_BOUNDS",
    "DATA_BOUNDS",
    "DATA_DEFAULTS",
    "MODEL_BOUNDS",
    "MODEL_DEFAULTS",
    "SYNTHETIC_BOUNDS",
    "build_corpus",
    "build_synthetic",
    "ldac_corpus",
    "make_model",
    "memory_needs",
    "read_corpus",
    "synthetic_corpus",
    "synthetic_memory",
]
