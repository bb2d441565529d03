"""SSVI and SSVI-A against mean-field SVI on LDA, with each E-step (Hoffman & Blei 2015, §4.1, appendix D).

The E-step x M-step matrix of Hoffman & Blei 2015, (§2.5): global updates ``meanfield`` (SVI), ``ssvi_a``
(SSVI-A, eq. 10) and ``ssvi`` (SSVI, eq. 7/11), each with the local steps ``meanfield``, ``cvb0``
and ``gibbs`` (``vijax.inference.make_algorithm`` with ``M_STEPS``), over a grid of the hyperparameters
alpha and eta (the paper: alpha in {0.01, 0.1, 0.5}, eta in {0.01, 0.1, 1}), on the synthetic
corpus and, when the reference data are present, on wiki_bnpy. Every setting runs
``algorithm.restarts`` restarts in lock step (``vijax.inference.restarts``, a ``vmap`` over
restarts: one compiled step per setting), all settings from the same keys and on the same
minibatches, with the step size rho_t = scale (t + tau)^-kappa (the paper: t^-0.75) and the N_t
ramp of Algorithm 1 when ``algorithm.ramp``.

Evaluation: the held-out per-word log predictive by document completion (the same measure as
``lda_synthetic``; the paper uses a Chib-style estimator of the marginal likelihood instead), of
every restart, at the evaluation steps, against documents seen and against the training wall time
(compilation included, evaluations excluded). Plots: ``heldout_<corpus>.png``, one panel per
(E-step, M-step) pair as in the paper's Figure 6, a line per (alpha, eta) with the restarts' mean
and a band of one standard deviation; ``hyper_<corpus>.png``, the final score against alpha, a
panel per eta, a line per (E-step, M-step) with error bars of one standard deviation.

One program per (M-step, E-step) pair: the alpha x eta grid of a pair runs as one compiled step,
``restarts(hyperparameter_grid(alg, model, alpha=..., eta=...), R)``
(``vijax.inference.hyperparameter_grid``: alpha and eta held in each grid point's state, every
point from the same initial state, on the same minibatches with the same keys as a run of that
setting alone; state leaves of shape (R, G, ...)). Every global update of ``M_STEPS`` (SVI,
SSVI-A, SSVI, MAP) holds the hyperparameters in its state (its ``hyper`` field) and every E-step of
LDA reads alpha from it, so every pair is one program; a global update whose state had no
``hyper`` field would run one program per setting instead (plain ``restarts`` of the setting's own
model). The training wall time of a setting is its program's, shared by the settings of a pair.

The runner (``vijax run configs/lda_ssvi.yaml``) drives the first pair's grid on the first corpus;
every other pair of every corpus is a ``Baseline`` of the experiment (checkpointed and resumed like
the first), run for the same number of steps with a chunk of the first run's evaluation period, so
that all evaluate at the same steps. The report splits each program's evaluations into one curve
per setting and writes ``grid.json`` (every setting's curve) besides the plots. The whole grid is
81 settings per corpus (9 programs): the config's default is a small part of it that runs in
minutes on two CPU cores.
"""

from __future__ import annotations

import itertools
import json
import os
import time

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vijax.data import Minibatcher, bucket_length
from vijax.inference import M_STEPS, hyperparameter_grid, make_algorithm, restarts, schedules
from vijax.models import LDA
from vijax.run import Baseline, Experiment, eval_steps, register_experiment
from vijax.run.experiments.lda import (
    _ALG_BOUNDS,
    DATA_BOUNDS,
    DATA_DEFAULTS,
    MODEL_BOUNDS,
    MODEL_DEFAULTS,
    SYNTHETIC_BOUNDS,
    ldac_corpus,
    make_model,
    synthetic_corpus,
    synthetic_memory,
)
from ._plotting import optional_plot
from vijax._validate import ArgumentError

CORPORA = ("synthetic", "wiki_bnpy")
# the data bounds of lda_ssvi and lda_ssvi_restarts (their data defaults: CORPUS_DEFAULTS)
CORPUS_BOUNDS = {
    **DATA_BOUNDS,
    **SYNTHETIC_BOUNDS,
    "data.wiki_max_train_docs": ">= 0",
    "data.wiki_max_test_docs": ">= 1",
}
# the SVI settings of lda_ssvi's and lda_ssvi_restarts' fits: restarts per setting, S, tau, kappa,
# the step's scale and its ramp
SVI_DEFAULTS = {"restarts": 5, "batch_size": 100, "tau": 1.0, "kappa": 0.75, "scale": 1.0, "ramp": True}
_BOUNDS = {
    **{k: v for k, v in MODEL_BOUNDS.items() if k not in ("model.alpha", "model.eta")},
    "model.alphas": "non-empty, each > 0",
    "model.etas": "non-empty, each > 0",
    "algorithm.restarts": ">= 1",
    **_ALG_BOUNDS,
    **CORPUS_BOUNDS,
}


def _per_word(model, q, observed, heldout, hyper):
    """The held-out per-word log predictive by document completion (as
    ``vijax.metrics.document_completion(...).per_word``), the fit of each document's gamma with the
    hyperparameters ``hyper`` (None: the model's)."""
    per_doc = model.log_predictive(q, observed, heldout, hyper=hyper)  # (S,)
    n_obs = jnp.sum(observed.counts, axis=-1)
    n_held = jnp.sum(heldout.counts, axis=-1).astype(per_doc.dtype)
    keep = (n_obs > 0) & (n_held > 0)
    return jnp.sum(jnp.where(keep, per_doc, 0.0)) / jnp.sum(jnp.where(keep, n_held, 0.0))


class _GridEval:
    """Held-out per-word log predictive of every restart of every setting of a program (document
    completion on fixed test batches, one jitted ``vmap`` over restarts and settings), per setting
    ``j`` under keys ``p<j>|...``: the mean, standard deviation, minimum and maximum over restarts
    and each restart's score; shared: documents seen, and the seconds spent in earlier evaluations
    (so that the training wall time is ``wall_time - eval_s_before``).

    ``grid``: the state is a ``hyperparameter_grid``'s under ``restarts`` (leaves (R, G, ...),
    ``state.hyper`` each setting's alpha and eta); otherwise that of ``restarts`` of one setting's
    own model (leaves (R, ...))."""

    def __init__(self, model, observed, heldout, batch_size, grid):
        n = observed.num_docs
        if not np.any((np.asarray(observed.doc_unique_words) > 0) & (np.asarray(heldout.doc_unique_words) > 0)):
            # checked here: under jit the per-word score of a held-out set without tokens is NaN
            raise ArgumentError(
                "heldout",
                f"heldout has no tokens in a document whose observed part has tokens (of {n} test documents): "
                "there is nothing to score (data.observed_fraction splits each test document's tokens)",
            )
        ob = observed.batch(np.arange(n), length=bucket_length(int(observed.doc_unique_words.max(initial=1))))
        hb = heldout.batch(np.arange(n), length=bucket_length(int(heldout.doc_unique_words.max(initial=1))))
        one = lambda q, hyper: _per_word(model, q, ob, hb, hyper)
        if grid:  # over restarts, then settings
            self._score = jax.jit(lambda st: jax.vmap(jax.vmap(one))(st.q_global, st.hyper))
        else:
            self._score = jax.jit(lambda st: jax.vmap(lambda q: one(q, None))(st.q_global)[:, None])
        self.batch_size, self.eval_s = batch_size, 0.0

    def __call__(self, state) -> dict:
        t0 = time.perf_counter()
        scores = np.asarray(self._score(state), np.float64)  # (restarts, settings)
        out = {}  # in the order of a setting's row: its summaries, the shared entries, its restarts
        for j, per_word in enumerate(scores.T):
            out[f"p{j}|heldout_mean"] = float(np.mean(per_word))
            out[f"p{j}|heldout_std"] = float(np.std(per_word))
            out[f"p{j}|heldout_min"] = float(np.min(per_word))
            out[f"p{j}|heldout_max"] = float(np.max(per_word))
        out["docs_seen"] = int(np.ravel(state.count)[0]) * self.batch_size
        out["eval_s_before"] = self.eval_s
        for j, per_word in enumerate(scores.T):
            out.update({f"p{j}|heldout_r{i}": float(v) for i, v in enumerate(per_word)})
        self.eval_s += time.perf_counter() - t0
        return out


def _point_evals(evals: list, j: int) -> list:
    """Setting ``j``'s evaluations out of its program's (``_GridEval``'s keys): the shared entries
    and that setting's, without its prefix."""
    tag = f"p{j}|"
    return [
        {(k[len(tag) :] if k.startswith(tag) else k): v for k, v in ev.items() if k.startswith(tag) or "|" not in k}
        for ev in evals
    ]


def _holds_hyperparameters(alg) -> bool:
    """Whether ``alg``'s state has a ``hyper`` field (``inject_hyperparameters``), from the shape
    of its initial state (nothing computed)."""
    return "hyper" in getattr(jax.eval_shape(alg.init, jax.random.PRNGKey(0)), "_fields", ())


class _Program(NamedTuple):
    """One compiled program of a corpus: the settings it runs (indices into the experiment's
    settings), its algorithm and evaluation, and its baseline name."""

    name: str
    indices: tuple
    algorithm: object
    eval_fn: object


def _settings(a: dict, m: dict) -> list[tuple[str, str, float, float]]:
    for name in ("global_updates", "locals", "alphas", "etas"):
        where = "algorithm" if name in ("global_updates", "locals") else "model"
        if not (a if where == "algorithm" else m)[name]:
            raise ValueError(f"{where}.{name} must list at least one value")
    for g in a["global_updates"]:
        if g not in M_STEPS:
            raise ValueError(f"algorithm.global_updates: {g!r} is not one of {tuple(M_STEPS)}")
    for l in a["locals"]:
        if l not in LDA.local_methods:
            raise ValueError(f"algorithm.locals: {l!r} is not one of LDA's local steps {LDA.local_methods}")
    return [
        (g, l, float(al), float(e))
        for al, e in itertools.product(m["alphas"], m["etas"])
        for l in a["locals"]
        for g in a["global_updates"]
    ]


def _label(setting) -> str:
    g, l, al, e = setting
    return f"{g}/{l}/alpha={al:g}/eta={e:g}"


def _baseline_name(corpus: str, index: int, setting) -> str:
    """A setting's baseline (and checkpoint folder) name: unique, also where a grid repeats a value."""
    g, l, al, e = setting
    return f"{corpus}_{index}_{g}_{l}_alpha{al:g}_eta{e:g}"


class _Corpus:
    """One corpus's data, minibatches and per-setting algorithm builder."""

    def __init__(self, name, train, test, sections, seed):
        m, a, d = sections["model"], sections["algorithm"], sections["data"]
        self.name, self.train, self.m, self.a = name, train, m, a
        self.observed, self.heldout = test.split_tokens(seed + 1, d["observed_fraction"])
        mb = Minibatcher(train, a["batch_size"], seed)
        # one padded length for the whole run: one compiled step per setting
        length = bucket_length(int(train.doc_unique_words.max(initial=1)))
        self.host_batches = lambda t0, n: mb.host_batches(t0, n, length=length)
        self.schedule = schedules.robbins_monro(a["scale"], tau=a["tau"], kappa=a["kappa"])

    def _base(self, g, l, model):
        return make_algorithm(
            M_STEPS[g],
            model,
            num_data=self.train.num_docs - self.train.num_empty,
            schedule=self.schedule,
            local=l,
            ramp=self.a["ramp"],
        )

    def programs(self, settings) -> list:
        """One ``_Program`` per (M-step, E-step) pair, in the order of ``settings``: its alpha x eta
        grid (``hyperparameter_grid`` under ``restarts``), or one per setting where the M-step's
        state cannot hold the hyperparameters (no ``hyper`` field)."""
        pairs = list(dict.fromkeys((g, l) for g, l, _, _ in settings))
        out = []
        for p_i, (g, l) in enumerate(pairs):
            idx = [i for i, (g2, l2, _, _) in enumerate(settings) if (g2, l2) == (g, l)]
            model = make_model(self.m, self.train.vocab_size, alpha=settings[idx[0]][2], eta=settings[idx[0]][3])
            base = self._base(g, l, model)
            if _holds_hyperparameters(base):
                alphas = [settings[i][2] for i in idx]
                etas = [settings[i][3] for i in idx]
                alg = restarts(hyperparameter_grid(base, model, alpha=alphas, eta=etas), self.a["restarts"])
                ev = _GridEval(model, self.observed, self.heldout, self.a["batch_size"], grid=True)
                out.append(_Program(f"{self.name}_{p_i}_{g}_{l}", tuple(idx), alg, ev))
                continue
            for i in idx:  # one program per setting
                _, _, al, e = settings[i]
                own = make_model(self.m, self.train.vocab_size, alpha=al, eta=e)
                alg = restarts(self._base(g, l, own), self.a["restarts"])
                ev = _GridEval(own, self.observed, self.heldout, self.a["batch_size"], grid=False)
                out.append(_Program(_baseline_name(self.name, i, settings[i]), (i,), alg, ev))
        return out


def _load(name, sections, seed, required=False):
    """``(train, test)`` of the corpus ``name`` (one of ``CORPORA``); None where the wiki_bnpy
    file is absent and not ``required`` (a ValueError naming ``data.wiki_path`` where it is)."""
    d = sections["data"]
    if name == "synthetic":
        train, test, _ = synthetic_corpus(d, seed)
        return train, test
    got = ldac_corpus(
        dict(d, path=d["wiki_path"], vocab=d["wiki_vocab"], max_test_docs=d["wiki_max_test_docs"]),
        seed,
        required=required,
        keys=("data.wiki_path", "data.wiki_vocab"),
        sections=sections,
    )
    if got is None:
        return None
    train, test, _ = got
    if d["wiki_max_train_docs"] and train.num_docs > d["wiki_max_train_docs"]:
        train = train.subset(np.arange(d["wiki_max_train_docs"]))
    return train, test


def _curve(setting, evals, corpus) -> dict:
    g, l, al, e = setting
    rows = [{k: v for k, v in ev.items()} | {"train_time_s": ev["wall_time"] - ev["eval_s_before"]} for ev in evals]
    return {
        "corpus": corpus,
        "global_update": g,
        "local": l,
        "alpha": al,
        "eta": e,
        "label": _label(setting),
        "evals": rows,
        "final_mean": rows[-1]["heldout_mean"] if rows else None,
        "final_std": rows[-1]["heldout_std"] if rows else None,
    }


@optional_plot
def _plot(curves, corpus, out_dir):
    """The two figures of one corpus (module docstring); returns their paths."""
    import matplotlib
    from matplotlib.figure import Figure

    curves = [c for c in curves if c["corpus"] == corpus and c["evals"]]
    if not curves:
        return []
    locs = list(dict.fromkeys(c["local"] for c in curves))
    gus = list(dict.fromkeys(c["global_update"] for c in curves))
    hyper = list(dict.fromkeys((c["alpha"], c["eta"]) for c in curves))
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    fig = Figure(figsize=(4.2 * len(gus), 3.2 * len(locs)))
    axes = fig.subplots(len(locs), len(gus), squeeze=False, sharex=True, sharey=True)
    for c in curves:
        ax = axes[locs.index(c["local"]), gus.index(c["global_update"])]
        t = np.array([ev["train_time_s"] for ev in c["evals"]])
        mu = np.array([ev["heldout_mean"] for ev in c["evals"]])
        sd = np.array([ev["heldout_std"] for ev in c["evals"]])
        col = colors[hyper.index((c["alpha"], c["eta"])) % len(colors)]
        ax.plot(t, mu, ".-", color=col, label=f"α={c['alpha']:g}, η={c['eta']:g}")
        ax.fill_between(t, mu - sd, mu + sd, color=col, alpha=0.2)
    for i, l in enumerate(locs):
        for j, g in enumerate(gus):
            ax = axes[i, j]
            ax.set_title(f"M-step {g}, E-step {l}", fontsize=9)
            ax.grid(alpha=0.3)
            if i == len(locs) - 1:
                ax.set_xlabel("training wall time (s)")
            if j == 0:
                ax.set_ylabel("held-out log pred. / word")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    paths = [os.path.join(out_dir, f"heldout_{corpus}.png")]
    fig.savefig(paths[0], dpi=100)

    etas = sorted({c["eta"] for c in curves})
    fig = Figure(figsize=(4.5 * len(etas), 3.4))
    axes = fig.subplots(1, len(etas), squeeze=False, sharey=True)
    pairs = list(dict.fromkeys((c["global_update"], c["local"]) for c in curves))
    for j, e in enumerate(etas):
        ax = axes[0, j]
        for p_i, (g, l) in enumerate(pairs):
            sel = sorted(
                (c for c in curves if c["eta"] == e and (c["global_update"], c["local"]) == (g, l)),
                key=lambda c: c["alpha"],
            )
            if sel:
                ax.errorbar(
                    [c["alpha"] for c in sel],
                    [c["final_mean"] for c in sel],
                    yerr=[c["final_std"] for c in sel],
                    fmt="o-",
                    capsize=3,
                    color=colors[p_i % len(colors)],
                    label=f"{g} / {l}",
                )
        ax.set_xscale("log")
        ax.set_xlabel("α")
        ax.set_title(f"η = {e:g}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("final held-out log pred. / word")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    paths.append(os.path.join(out_dir, f"hyper_{corpus}.png"))
    fig.savefig(paths[1], dpi=100)
    return paths


# the corpora of the SSVI experiments (this one and lda_ssvi_restarts): the synthetic corpus's
# settings and wiki_bnpy's files
CORPUS_DEFAULTS = dict(
    DATA_DEFAULTS,
    num_docs=3000,
    vocab_size=500,
    true_topics=10,
    true_alpha=0.1,
    true_eta=0.05,
    doc_length_mean=60.0,
    max_test_docs=300,
    wiki_path="wiki_bnpy/train.ldac.gz",
    wiki_vocab="wiki_bnpy/vocab.txt",
    wiki_max_test_docs=200,
)


@register_experiment(
    "lda_ssvi",
    defaults={
        "model": {k: v for k, v in MODEL_DEFAULTS.items() if k not in ("alpha", "eta")}
        | {"num_topics": 10, "alphas": [0.1], "etas": [0.01], "cvb0_iters": 50, "gibbs_sweeps": 6, "gibbs_burn_in": 3},
        "algorithm": {
            "global_updates": ["meanfield", "ssvi_a", "ssvi"],
            "locals": ["meanfield", "cvb0", "gibbs"],
            **SVI_DEFAULTS,
        },
        "data": dict(CORPUS_DEFAULTS, corpora=["synthetic", "wiki_bnpy"], wiki_max_train_docs=0),
        "run": {"num_steps": 30, "chunk_size": 10, "eval_every": 10},
    },
    bounds=_BOUNDS,
    # every (alpha, eta) setting of a pair's program holds its restarts' states
    memory=lambda config: synthetic_memory(
        config, copies=config["algorithm"]["restarts"] * len(config["model"]["alphas"]) * len(config["model"]["etas"])
    ),
)
def build(sections: dict, seed: int) -> Experiment:
    """SSVI / SSVI-A / SVI x mean-field / CVB0 / Gibbs E-steps on LDA over alpha, eta (Hoffman &
    Blei 2015, §4.1, app. D)"""
    m, a, d = sections["model"], sections["algorithm"], sections["data"]
    settings = _settings(a, m)
    for c in d["corpora"]:
        if c not in CORPORA:
            raise ValueError(f"data.corpora: {c!r} is not one of {CORPORA}")
    skipped, corpora = [], []
    for name in d["corpora"]:
        got = _load(name, sections, seed)
        if got is None:
            skipped.append(name)
        else:
            corpora.append(_Corpus(name, *got, sections, seed))
    if not corpora:
        raise ValueError(f"data.corpora: none of {d['corpora']} is available (wiki_bnpy needs the reference data)")
    first = corpora[0]
    programs = [(c, prog) for c in corpora for prog in c.programs(settings)]
    (_, own), others = programs[0], programs[1:]
    every = max(eval_steps(sections["run"])[0], 1)
    run_settings = {"chunk_size": every, "eval_every": every, "tol": None}
    grid = [
        (
            c,
            prog,
            Baseline(
                prog.name, prog.algorithm, eval_fn=prog.eval_fn, host_batches=c.host_batches, settings=run_settings
            ),
        )
        for c, prog in others
    ]

    def report(result, out_dir, baselines):
        if not result.evals:
            return {"skipped_corpora": skipped}
        num_steps = int(result.num_steps)
        runs = [(first, own, result.evals)] + [(c, prog, baselines[b.name].evals) for c, prog, b in grid]
        curves = [
            (corpora.index(c), i, _curve(settings[i], _point_evals(evals, j), c.name))
            for c, prog, evals in runs
            for j, i in enumerate(prog.indices)
        ]
        curves = [cv for _, _, cv in sorted(curves, key=lambda t: t[:2])]  # each corpus's settings in order
        plots = [p for corpus in corpora for p in _plot(curves, corpus.name, out_dir) or ()]  # () without matplotlib
        with open(os.path.join(out_dir, "grid.json"), "w") as fh:
            json.dump(
                {
                    "restarts": a["restarts"],
                    "num_steps": num_steps,
                    "batch_size": a["batch_size"],
                    "device": str(jax.devices()[0]),
                    "curves": curves,
                },
                fh,
                indent=1,
            )
        best = {
            c.name: max((cv for cv in curves if cv["corpus"] == c.name), key=lambda cv: cv["final_mean"])["label"]
            for c in corpora
        }
        return {
            "skipped_corpora": skipped,
            "num_settings": len(curves),
            "best": best,
            "final": {f"{cv['corpus']}/{cv['label']}": [cv["final_mean"], cv["final_std"]] for cv in curves},
            "plots": [os.path.basename(p) for p in plots],
        }

    return Experiment(
        own.algorithm,
        lambda key: own.algorithm.init(key),
        None,
        own.eval_fn,
        report,
        host_batches=first.host_batches,
        baselines=tuple(b for _, _, b in grid),
    )
