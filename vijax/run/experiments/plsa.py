"""pLSA1 and pLSA2 by EM beside LDA by CAVI on the same synthetic LDA corpus: held-out perplexity by document
completion (the tutorial *Raise your ELBO*, §pLSA and §LDA; Hofmann 1999; Blei, Ng & Jordan 2003).

pLSA folds p(z | d) in on the observed half of each test document, LDA fits q(theta_d); perplexity =
exp(-log p(held-out) / held-out tokens). pLSA1 and pLSA2 parameterize one likelihood (the tutorial's eq.
2.91 = 2.92), so their perplexities coincide. ``model.word_concentration`` > 1 (MAP-EM) keeps every word
possible.
"""

from __future__ import annotations

import os

import jax
import numpy as np

from vijax.inference import cavi, em
from vijax.metrics import corpus_document_completion
from vijax.models import LDA, PLSA, PLSAParams
from vijax.run import Baseline, configured_algorithm, Experiment, float_bytes, MemoryNeed, register_experiment
from vijax.run import SEED_BOUND
from vijax.run.experiments.lda import SYNTHETIC_BOUNDS, synthetic_corpus

# word_concentration: Dirichlet(c) on p(w | z) (MAP-EM; 1 = maximum likelihood); lda_alpha, lda_eta: LDA's priors
_MODEL = dict(num_topics=10, word_concentration=1.05, fold_in_iters=100, lda_alpha=0.1, lda_eta=0.05, lda_max_iters=100)
_DATA = dict(num_docs=2000, vocab_size=500, true_topics=10, true_alpha=0.1, true_eta=0.05, doc_length_mean=80.0)
_DATA |= dict(test_fraction=0.2, observed_fraction=0.5, eval_batch=200, seed=0)
_RUN = {"num_steps": 100, "chunk_size": 25, "eval_every": 50, "x64": True}
_DEFAULTS = {"model": _MODEL, "data": _DATA, "algorithm": {"name": "em"}, "run": _RUN}

_BOUNDS = {"model.num_topics": ">= 1", "model.word_concentration": ">= 1", "model.fold_in_iters": ">= 1"}
_BOUNDS |= {"model.lda_alpha": "> 0", "model.lda_eta": "> 0", "model.lda_max_iters": ">= 1", **SYNTHETIC_BOUNDS}
_BOUNDS |= {"data.test_fraction": "in (0, 1)", "data.observed_fraction": "in (0, 1)", "data.eval_batch": ">= 1"}
_BOUNDS |= {"data.seed": SEED_BOUND}


def _memory(config) -> list[MemoryNeed]:
    """The E-steps run on the whole training corpus at once (EM and CAVI): documents x words x topics."""
    d, k, f = config["data"], config["model"]["num_topics"], float_bytes(config)
    width = min(4.0 * d["doc_length_mean"] + 20.0, d["vocab_size"])
    topics = ("model.num_topics", "data.vocab_size")
    return [
        MemoryNeed(
            "the E-step of the whole corpus (data.num_docs x distinct words x model.num_topics)",
            ("data.num_docs", "data.doc_length_mean", "data.vocab_size", "model.num_topics"),
            3 * 3 * d["num_docs"] * width * k * f,
        ),
        MemoryNeed("the topics (model.num_topics x data.vocab_size)", topics, 3 * 4 * k * d["vocab_size"] * f),
        MemoryNeed(
            "an evaluation batch (data.eval_batch x distinct words x model.num_topics)",
            ("data.eval_batch", "model.num_topics"),
            3 * d["eval_batch"] * width * k * f,  # padded to eval_batch rows
        ),
    ]


@register_experiment("plsa", defaults=_DEFAULTS, bounds=_BOUNDS, memory=_memory)
def build(sections: dict, seed: int) -> Experiment:
    """pLSA1 and pLSA2 by EM beside LDA (CAVI): held-out perplexity on one corpus"""
    m, d, a = sections["model"], sections["data"], sections["algorithm"]
    train, test, topics = synthetic_corpus(d, d["seed"])
    observed, heldout = test.split_tokens(d["seed"] + 1, d["observed_fraction"])
    batch = train.batch(np.arange(train.num_docs))
    k, v = m["num_topics"], train.vocab_size
    em_settings = {"word_concentration": m["word_concentration"], "fold_in_iters": m["fold_in_iters"]}
    models = {name: PLSA(k, v, variant=name, **em_settings) for name in ("plsa1", "plsa2")}
    models["lda_cavi"] = LDA(k, v, alpha=m["lda_alpha"], eta=m["lda_eta"], max_iters=m["lda_max_iters"])
    models["plsa1"].check_data(batch)
    algs = {"plsa1": configured_algorithm(a, _DEFAULTS["algorithm"], models["plsa1"])}
    algs |= {"plsa2": em(models["plsa2"]), "lda_cavi": cavi(models["lda_cavi"])}

    def scores(name, q) -> dict:
        r = corpus_document_completion(models[name], q, observed, heldout, d["eval_batch"])
        per_word = float(r.per_word)
        return {"heldout_per_word": per_word, "perplexity": float(np.exp(-per_word))}

    def init(name):
        return jax.jit(lambda key: algs[name].init(key, batch))

    def evaluate(name):
        return lambda state: scores(name, state.q_global)

    def data(key, t):
        return batch

    def report(result, out_dir, baselines) -> dict:
        runs = {"plsa1": result, **baselines}
        rows = {
            name: dict(
                scores(name, res.state.q_global),
                steps=int(res.num_steps),
                final_objective=float(np.asarray(res.trace["elbo"])[-1]),
                wall_time=res.wall_time,
            )
            for name, res in runs.items()
        }
        if d["true_topics"] == k:  # the same fold-in with the true topics: what the data allow
            truth = PLSAParams(None, None, jax.numpy.asarray(topics))
            rows["true_topics"] = dict(scores("plsa2", truth), steps=0, final_objective=None, wall_time=0.0)
        summary = {"runs": rows, "train_docs": train.num_docs, "test_docs": test.num_docs}
        labels = {"plsa1": "pLSA1 (EM)", "plsa2": "pLSA2 (EM)", "lda_cavi": "LDA (CAVI)"}
        labels["true_topics"] = "the true topics, p(z | d) folded in"
        with open(os.path.join(out_dir, "results.md"), "w") as f:
            f.write(
                f"# Held-out perplexity: pLSA1, pLSA2 and LDA\n\nLDA corpus: {train.num_docs} training and "
                f"{test.num_docs} test documents, V = {v}, {d['true_topics']} true topics; K = {k}; document "
                f"completion on {d['observed_fraction']:.0%} observed tokens of each test document.\n\n"
                "| model | steps | fit time (s) | held-out per-word log p | perplexity |\n|---|---|---|---|---|\n"
            )
            f.writelines(
                f"| {labels[name]} | {row['steps']} | {row['wall_time']:.1f} | {row['heldout_per_word']:.4f} | "
                f"{row['perplexity']:.2f} |\n"
                for name, row in rows.items()
            )
        return summary | {"heldout_tokens": int(heldout.num_tokens)}

    others = tuple(Baseline(name, algs[name], init(name), data, evaluate(name)) for name in ("plsa2", "lda_cavi"))
    return Experiment(algs["plsa1"], init("plsa1"), data, evaluate("plsa1"), report, baselines=others)


__all__ = ["build"]
