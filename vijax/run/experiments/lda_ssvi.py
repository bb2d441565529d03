"""SSVI and SSVI-A against mean-field SVI on LDA (Hoffman & Blei 2015, "Structured stochastic variational
inference", §4.1 and appendix D).

``lda_ssvi``: each M-step of ``M_STEPS`` (``meanfield``, ``ssvi_a`` (eq. 10), ``ssvi`` (eq. 7/11)) with each
local step (``meanfield``, ``cvb0``, ``gibbs``) over an alpha x eta grid (one program per pair:
``restarts(hyperparameter_grid(...))``), rho_t = scale (t + tau)^-kappa, scored by the held-out per-word
log predictive against training time: ``heldout_<corpus>.png`` (Figure 6), ``hyper_<corpus>.png``, ``grid.json``.

``lda_ssvi_restarts`` (§4.1, Figure 3): mean-field SVI restarted from each source method's q(beta) after
``run.num_steps - algorithm.restart_steps`` steps, scored by the training mean-field ELBO per token and the
held-out score, SGRLD (Patterson & Teh 2013) beside: ``restarts_<corpus>.png``, ``restarts.json``.
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

from vijax import ArgumentError
from vijax.data import Minibatcher, bucket_length
from vijax.expfam import tree_mean_params
from vijax.inference import M_STEPS, VIAlgorithm, hyperparameter_grid, init_from, make_algorithm, restarts
from vijax.inference import safe_increment, schedules, sgrld_lda, sgrld_schedule, topics_dirichlet
from vijax.models import LDA, conjugate_elbo
from vijax.run import Baseline, Experiment, eval_steps, register_experiment
from vijax.run.experiments.lda import ALG_BOUNDS, DATA_BOUNDS, DATA_DEFAULTS, MODEL_BOUNDS, MODEL_DEFAULTS
from vijax.run.experiments.lda import SYNTHETIC_BOUNDS, ldac_corpus, make_model, synthetic_corpus, synthetic_memory
from ._plotting import figure, optional_plot

CORPORA = ("synthetic", "wiki_bnpy")
CORPUS_BOUNDS = DATA_BOUNDS | SYNTHETIC_BOUNDS | {"data.wiki_max_train_docs": ">= 0", "data.wiki_max_test_docs": ">= 1"}
# the corpora of both experiments: the synthetic corpus's settings and wiki_bnpy's files
CORPUS_DEFAULTS = DATA_DEFAULTS | {"num_docs": 3000, "vocab_size": 500, "true_topics": 10, "true_alpha": 0.1}
CORPUS_DEFAULTS |= {"true_eta": 0.05, "doc_length_mean": 60.0, "max_test_docs": 300}
CORPUS_DEFAULTS |= {"wiki_path": "wiki_bnpy/train.ldac.gz", "wiki_vocab": "wiki_bnpy/vocab.txt"}
CORPUS_DEFAULTS |= {"wiki_max_test_docs": 200}
# the SVI settings of both experiments' fits: restarts per setting, S, tau, kappa, the step's scale and its ramp
SVI_DEFAULTS = {"restarts": 5, "batch_size": 100, "tau": 1.0, "kappa": 0.75, "scale": 1.0, "ramp": True}
_BOUNDS = {k: v for k, v in MODEL_BOUNDS.items() if k not in ("model.alpha", "model.eta")}
_BOUNDS |= {"model.alphas": "non-empty, each > 0", "model.etas": "non-empty, each > 0", "algorithm.restarts": ">= 1"}
_BOUNDS |= {**ALG_BOUNDS, **CORPUS_BOUNDS}


def _whole(corpus):
    """All of ``corpus`` as one batch, padded to the bucket of its longest document."""
    return corpus.batch(np.arange(corpus.num_docs), length=_length(corpus))


def _length(corpus) -> int:
    return bucket_length(int(corpus.doc_unique_words.max(initial=1)))


def _per_word(model, q, observed, heldout, hyper):
    """The held-out per-word log predictive by document completion (as ``vijax.metrics.document_completion``),
    each document's gamma fitted with the hyperparameters ``hyper`` (None: the model's)."""
    per_doc = model.log_predictive(q, observed, heldout, hyper=hyper)  # (S,)
    n_held = jnp.sum(heldout.counts, axis=-1).astype(per_doc.dtype)
    keep = (jnp.sum(observed.counts, axis=-1) > 0) & (n_held > 0)
    return jnp.sum(jnp.where(keep, per_doc, 0.0)) / jnp.sum(jnp.where(keep, n_held, 0.0))


def _stats(name: str, v) -> dict:
    """Mean, standard deviation, minimum and maximum over restarts of the scores ``v``, and each restart's."""
    v = np.asarray(v, np.float64)
    out = {f"{name}_mean": float(v.mean()), f"{name}_std": float(v.std())}
    out |= {f"{name}_min": float(v.min()), f"{name}_max": float(v.max())}
    return out | {f"{name}_r{i}": float(x) for i, x in enumerate(v)}


class _Timed:
    """The evaluation ``scores(state) -> dict`` with ``docs_seen`` and ``eval_s_before``, the seconds spent in
    earlier evaluations (the training wall time is ``wall_time - eval_s_before``)."""

    def __init__(self, scores, batch_size: int):
        self.scores, self.batch_size, self.eval_s = scores, batch_size, 0.0

    def __call__(self, state) -> dict:
        t0 = time.perf_counter()
        out = self.scores(state)
        out |= {"docs_seen": int(np.ravel(state.count)[0]) * self.batch_size, "eval_s_before": self.eval_s}
        self.eval_s += time.perf_counter() - t0
        return out


def _grid_eval(model, observed, heldout, batch_size: int) -> _Timed:
    """The held-out score of every restart of every setting ``j`` of a ``restarts(hyperparameter_grid(...))``
    program (leaves (R, G, ...), ``state.hyper`` each setting's alpha and eta), under keys ``p<j>|heldout_...``."""
    if not np.any((np.asarray(observed.doc_unique_words) > 0) & (np.asarray(heldout.doc_unique_words) > 0)):
        # checked here: under jit the per-word score of a held-out set without tokens is NaN
        raise ArgumentError(
            "heldout",
            f"heldout has no tokens in a document whose observed part has tokens (of {observed.num_docs} test "
            "documents): there is nothing to score (data.observed_fraction splits each test document's tokens)",
        )
    ob, hb = _whole(observed), _whole(heldout)
    one = lambda q, hyper: _per_word(model, q, ob, hb, hyper)  # noqa: E731
    score = jax.jit(lambda st: jax.vmap(jax.vmap(one))(st.q_global, st.hyper))  # over restarts, then settings

    def scores(state) -> dict:
        return {k: v for j, s in enumerate(np.asarray(score(state)).T) for k, v in _stats(f"p{j}|heldout", s).items()}

    return _Timed(scores, batch_size)


def _point_evals(evals: list, j: int) -> list:
    """Setting ``j``'s evaluations out of its program's: the shared entries and that setting's, unprefixed."""
    tag = f"p{j}|"
    return [{k.removeprefix(tag): v for k, v in ev.items() if k.startswith(tag) or "|" not in k} for ev in evals]


class _Program(NamedTuple):
    """One compiled program of a corpus: its baseline name, its settings (indices), algorithm and evaluation."""

    name: str
    indices: tuple
    algorithm: object
    eval_fn: object


def _settings(a: dict, m: dict) -> list[tuple[str, str, float, float]]:
    for key in ("algorithm.global_updates", "algorithm.locals", "model.alphas", "model.etas"):
        where, name = key.split(".")
        if not {"algorithm": a, "model": m}[where][name]:
            raise ValueError(f"{key} must list at least one value")
    for g in a["global_updates"]:
        if g not in M_STEPS:
            raise ValueError(f"algorithm.global_updates: {g!r} is not one of {tuple(M_STEPS)}")
    for l in a["locals"]:
        if l not in LDA.local_methods:
            raise ValueError(f"algorithm.locals: {l!r} is not one of LDA's local steps {LDA.local_methods}")
    grid = itertools.product(m["alphas"], m["etas"], a["locals"], a["global_updates"])
    return [(g, l, float(al), float(e)) for al, e, l, g in grid]


class _Corpus:
    """One corpus's data, minibatches and per-(M-step, E-step) programs."""

    def __init__(self, name, train, test, sections, seed):
        m, a, d = sections["model"], sections["algorithm"], sections["data"]
        self.name, self.train, self.m, self.a = name, train, m, a
        self.observed, self.heldout = test.split_tokens(seed + 1, d["observed_fraction"])
        mb, length = Minibatcher(train, a["batch_size"], seed), _length(train)  # one padded length for the run
        self.host_batches = lambda t0, n: mb.host_batches(t0, n, length=length)
        schedule = schedules.robbins_monro(a["scale"], tau=a["tau"], kappa=a["kappa"])
        self.settings = dict(num_data=train.num_docs - train.num_empty, schedule=schedule, ramp=a["ramp"])

    def algorithm(self, g: str, l: str, model):
        """The M-step ``g`` with the E-step ``l`` on ``model``, with the experiment's step sizes."""
        return make_algorithm(M_STEPS[g], model, local=l, **self.settings)

    def programs(self, settings) -> list:
        """One ``_Program`` per (M-step, E-step) pair, in the order of ``settings``: its alpha x eta grid."""
        out = []
        for p_i, (g, l) in enumerate(dict.fromkeys(s[:2] for s in settings)):
            idx = [i for i, s in enumerate(settings) if s[:2] == (g, l)]
            model = make_model(self.m, self.train.vocab_size, alpha=settings[idx[0]][2], eta=settings[idx[0]][3])
            values = {"alpha": [settings[i][2] for i in idx], "eta": [settings[i][3] for i in idx]}
            alg = restarts(hyperparameter_grid(self.algorithm(g, l, model), model, **values), self.a["restarts"])
            ev = _grid_eval(model, self.observed, self.heldout, self.a["batch_size"])
            out.append(_Program(f"{self.name}_{p_i}_{g}_{l}", tuple(idx), alg, ev))
        return out


def _load(name, sections, seed, required=False):
    """``(train, test)`` of the corpus ``name`` (one of ``CORPORA``); None where the wiki_bnpy file is absent
    and not ``required`` (a ValueError naming ``data.wiki_path`` where it is)."""
    d = sections["data"]
    if name == "synthetic":
        return synthetic_corpus(d, seed)[:2]
    wiki = dict(d, path=d["wiki_path"], vocab=d["wiki_vocab"], max_test_docs=d["wiki_max_test_docs"])
    got = ldac_corpus(wiki, seed, required=required, keys=("data.wiki_path", "data.wiki_vocab"), sections=sections)
    if got is None:
        return None
    train, test, _ = got
    if d["wiki_max_train_docs"] and train.num_docs > d["wiki_max_train_docs"]:
        train = train.subset(np.arange(d["wiki_max_train_docs"]))
    return train, test


def _with_train_time(evals) -> list:
    return [dict(ev, train_time_s=ev["wall_time"] - ev["eval_s_before"]) for ev in evals]


def _curve(setting, evals, corpus) -> dict:
    g, l, al, e = setting
    rows = _with_train_time(evals)
    return {
        "corpus": corpus,
        "global_update": g,
        "local": l,
        "alpha": al,
        "eta": e,
        "label": f"{g}/{l}/alpha={al:g}/eta={e:g}",
        "evals": rows,
        "final_mean": rows[-1]["heldout_mean"] if rows else None,
        "final_std": rows[-1]["heldout_std"] if rows else None,
    }


@optional_plot
def _plot(curves, corpus, out_dir):
    """The two figures of one corpus (module docstring); returns their paths."""
    import matplotlib

    curves = [c for c in curves if c["corpus"] == corpus and c["evals"]]
    if not curves:
        return []
    locs = list(dict.fromkeys(c["local"] for c in curves))
    gus = list(dict.fromkeys(c["global_update"] for c in curves))
    hyper = list(dict.fromkeys((c["alpha"], c["eta"]) for c in curves))
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    paths = [os.path.join(out_dir, f"heldout_{corpus}.png"), os.path.join(out_dir, f"hyper_{corpus}.png")]
    size = (4.2 * len(gus), 3.2 * len(locs))
    with figure(paths[0], size, len(locs), len(gus), squeeze=False, sharex=True, sharey=True) as (_, axes):
        for c in curves:
            ax = axes[locs.index(c["local"]), gus.index(c["global_update"])]
            t, mu, sd = (
                np.array([ev[k] for ev in c["evals"]]) for k in ("train_time_s", "heldout_mean", "heldout_std")
            )
            col = colors[hyper.index((c["alpha"], c["eta"])) % len(colors)]
            ax.plot(t, mu, ".-", color=col, label=f"α={c['alpha']:g}, η={c['eta']:g}")
            ax.fill_between(t, mu - sd, mu + sd, color=col, alpha=0.2)
        for (i, l), (j, g) in itertools.product(enumerate(locs), enumerate(gus)):
            axes[i, j].set_title(f"M-step {g}, E-step {l}", fontsize=9)
            axes[i, j].grid(alpha=0.3)
            if i == len(locs) - 1:
                axes[i, j].set_xlabel("training wall time (s)")
            if j == 0:
                axes[i, j].set_ylabel("held-out log pred. / word")
        axes[0, 0].legend(fontsize=7)

    etas = sorted({c["eta"] for c in curves})
    with figure(paths[1], (4.5 * len(etas), 3.4), 1, len(etas), squeeze=False, sharey=True) as (_, axes):
        pairs = list(dict.fromkeys((c["global_update"], c["local"]) for c in curves))
        for ax, e in zip(axes[0], etas):
            for p_i, (g, l) in enumerate(pairs):
                sel = [c for c in curves if c["eta"] == e and (c["global_update"], c["local"]) == (g, l)]
                if sel:
                    sel.sort(key=lambda c: c["alpha"])
                    x, y, err = ([c[k] for c in sel] for k in ("alpha", "final_mean", "final_std"))
                    ax.errorbar(
                        x, y, yerr=err, fmt="o-", capsize=3, color=colors[p_i % len(colors)], label=f"{g} / {l}"
                    )
            ax.set(xscale="log", xlabel="α")
            ax.set_title(f"η = {e:g}", fontsize=9)
            ax.grid(alpha=0.3)
        axes[0, 0].set_ylabel("final held-out log pred. / word")
        axes[0, 0].legend(fontsize=7)
    return paths


def _write_json(path, content: dict, a: dict, num_steps: int) -> None:
    head = {"restarts": a["restarts"], "num_steps": num_steps, "batch_size": a["batch_size"]}
    with open(path, "w") as fh:
        json.dump(head | content, fh, indent=1)


# both experiments' model sections: lda_ssvi grids alpha and eta
_SMALL_MODEL = MODEL_DEFAULTS | {"num_topics": 10, "alpha": 0.1, "eta": 0.01, "cvb0_iters": 50, "gibbs_sweeps": 6}
_SMALL_MODEL |= {"gibbs_burn_in": 3}
_GRID_MODEL = {k: v for k, v in _SMALL_MODEL.items() if k not in ("alpha", "eta")} | {"alphas": [0.1], "etas": [0.01]}
_GRID_ALG = {"global_updates": ["meanfield", "ssvi_a", "ssvi"], "locals": ["meanfield", "cvb0", "gibbs"]}


@register_experiment(
    "lda_ssvi",
    defaults={
        "model": _GRID_MODEL,
        "algorithm": _GRID_ALG | SVI_DEFAULTS,
        "data": dict(CORPUS_DEFAULTS, corpora=["synthetic", "wiki_bnpy"], wiki_max_train_docs=0),
        "run": {"num_steps": 30, "chunk_size": 10, "eval_every": 10},
    },
    bounds=_BOUNDS,
    # every (alpha, eta) setting of a pair's program holds its restarts' states
    memory=lambda c: synthetic_memory(
        c, copies=c["algorithm"]["restarts"] * len(c["model"]["alphas"]) * len(c["model"]["etas"])
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
    loaded = {name: _load(name, sections, seed) for name in dict.fromkeys(d["corpora"])}
    skipped = [name for name in d["corpora"] if loaded[name] is None]
    corpora = [_Corpus(name, *loaded[name], sections, seed) for name in d["corpora"] if loaded[name] is not None]
    if not corpora:
        raise ValueError(f"data.corpora: none of {d['corpora']} is available (wiki_bnpy needs the reference data)")
    (first, own), *others = [(c, prog) for c in corpora for prog in c.programs(settings)]
    every = max(eval_steps(sections["run"])[0], 1)
    run_settings = {"chunk_size": every, "eval_every": every, "tol": None}
    baselines = [
        Baseline(p.name, p.algorithm, eval_fn=p.eval_fn, host_batches=c.host_batches, settings=run_settings)
        for c, p in others
    ]

    def report(result, out_dir, done):
        if not result.evals:
            return {"skipped_corpora": skipped}
        runs = [(first, own, result.evals)] + [(c, p, done[p.name].evals) for c, p in others]
        curves = [
            (corpora.index(c), i, _curve(settings[i], _point_evals(evals, j), c.name))
            for c, prog, evals in runs
            for j, i in enumerate(prog.indices)
        ]
        curves = [cv for _, _, cv in sorted(curves, key=lambda t: t[:2])]  # each corpus's settings in order
        plots = [p for corpus in corpora for p in _plot(curves, corpus.name, out_dir) or ()]  # () without matplotlib
        content = {"device": str(jax.devices()[0]), "curves": curves}
        _write_json(os.path.join(out_dir, "grid.json"), content, a, int(result.num_steps))
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

    alg = own.algorithm
    return Experiment(
        alg, alg.init, None, own.eval_fn, report, host_batches=first.host_batches, baselines=tuple(baselines)
    )


# ---- SVI restarted from each method's solution (Figure 3) -------------------------------------

PAPER_SOURCES = ("meanfield/meanfield", "meanfield/gibbs", "ssvi_a/gibbs", "ssvi/gibbs")
_NAMES = {"meanfield/meanfield": "SVI", "meanfield/cvb0": "SVI (CVB0)", "meanfield/gibbs": "Gibbs-within-SVI"}
_NAMES |= {"ssvi_a/gibbs": "SSVI-A", "ssvi/gibbs": "SSVI"}


class ThenState(NamedTuple):
    """The state of :func:`then`: the active phase's ``q_global``, the steps taken and each phase's state."""

    q_global: object
    count: jax.Array
    first: object
    second: object


class ThenInfo(NamedTuple):
    """A step of :func:`then`: the active phase's ``elbo`` and ``accepted``, and ``phase`` (0 or 1)."""

    elbo: jax.Array
    phase: jax.Array
    accepted: jax.Array = None


def then(first: VIAlgorithm, second: VIAlgorithm, at: int) -> VIAlgorithm:
    """``first`` for ``at`` steps, then ``second`` from ``init_from(second, key, first's q)``, in one program.

    A ``lax.cond`` on the step count runs one phase per step; each step's key is split into the phase's step
    key and the switch's ``init_from`` key. Under ``vmap`` the cond would run both phases: put ``restarts``
    inside, ``then(restarts(a, R), restarts(b, R), at)``."""
    at = int(at)

    def init(key, batch=None):
        k1, k2 = jax.random.split(key)
        s1 = first.init(k1, batch)
        return ThenState(s1.q_global, jnp.zeros((), jnp.int32), s1, second.init(k2, batch))

    def step(key, state, batch):
        k_step, k_init = jax.random.split(key)

        def run_first(st):
            s1, info = first.step(k_step, st.first, batch)
            return st._replace(q_global=s1.q_global, first=s1), ThenInfo(info.elbo, jnp.int32(0), info.accepted)

        def run_second(st):
            start = jax.lax.cond(
                st.count == at, lambda: init_from(second, k_init, st.first.q_global), lambda: st.second
            )
            s2, info = second.step(k_step, start, batch)
            return st._replace(q_global=s2.q_global, second=s2), ThenInfo(info.elbo, jnp.int32(1), info.accepted)

        new, info = jax.lax.cond(state.count < at, run_first, run_second, state)
        return new._replace(count=safe_increment(state.count)), info

    return VIAlgorithm(init, step)


def _parse_sources(a: dict) -> list[tuple[str, str]]:
    if not a["sources"]:
        raise ValueError("algorithm.sources must list at least one M-step/E-step pair")
    out = [tuple(str(s).split("/")) for s in a["sources"]]
    for s, parts in zip(a["sources"], out):
        if len(parts) != 2 or parts[0] not in M_STEPS or parts[1] not in LDA.local_methods:
            raise ValueError(
                f"algorithm.sources: {s!r} is not 'M-step/E-step' with an M-step of {tuple(M_STEPS)} and an "
                f"E-step of {LDA.local_methods}"
            )
    if len(set(out)) != len(out):
        raise ValueError(f"algorithm.sources: {a['sources']} repeats a pair")
    return out


def _summary_row(evals, at, num_steps, key):
    """(mean, min, max) of ``key`` at the switch step and at the end."""
    by_step = {e["step"]: e for e in evals}
    rows = {name: by_step.get(t) for name, t in (("before", at), ("after", num_steps))}
    return {
        name: [e[f"{key}_{s}"] for s in ("mean", "min", "max")] for name, e in rows.items() if e and f"{key}_mean" in e
    }


@optional_plot
def _plot_restarts(runs, at, corpus, out_dir):
    """The two panels (module docstring); returns the path (None without matplotlib)."""
    import matplotlib

    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    path = os.path.join(out_dir, f"restarts_{corpus}.png")
    with figure(path, (11, 3.8), 1, 2) as (fig, (ax_e, ax_h)):
        sources = [r for r in runs if r["kind"] == "source"]
        labels = {"before": "at the source's solution", "after": "after SVI's restart sweep"}
        for j, r in enumerate(sources):
            rows = _summary_row(r["evals"], at, r["num_steps"], "train_elbo")
            for c, (off, name, marker) in enumerate(((-0.12, "before", "s"), (0.12, "after", "o"))):
                if name in rows:
                    mean, lo, hi = rows[name]
                    style = dict(fmt=marker, color=colors[c], capsize=4, label=labels[name] if j == 0 else None)
                    ax_e.errorbar([j + off], [mean], yerr=[[mean - lo], [hi - mean]], **style)
        ax_e.set_xticks(range(len(sources)))
        ax_e.set_xticklabels([r["label"] for r in sources], fontsize=8)
        ax_e.set_ylabel("mean-field ELBO / training token")
        ax_e.set_title("SVI restarted from each method's solution", fontsize=9)
        for j, r in enumerate(runs):
            steps, mean, lo, hi = (
                np.array([e[k] for e in r["evals"]]) for k in ("step", "heldout_mean", "heldout_min", "heldout_max")
            )
            col = colors[j % len(colors)]
            ax_h.plot(steps, mean, ".-" if r["kind"] == "source" else "x--", color=col, label=r["label"])
            ax_h.fill_between(steps, lo, hi, color=col, alpha=0.15)
        ax_h.axvline(at, color="k", lw=0.8, ls=":")
        ax_h.set(xlabel="steps (dotted: the sources' last step; SVI from there on)", ylabel="held-out log pred. / word")
        ax_h.set_title(f"held-out score, {corpus}", fontsize=9)
        for ax in (ax_e, ax_h):
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    return path


_RESTART_BOUNDS = {**MODEL_BOUNDS, "algorithm.restarts": ">= 1", **ALG_BOUNDS, "algorithm.restart_steps": ">= 1"}
_RESTART_BOUNDS |= {"algorithm.sgrld_a": "> 0", "algorithm.sgrld_b": "> 0", "algorithm.sgrld_c": ">= 0"}
_RESTART_BOUNDS |= CORPUS_BOUNDS
_RESTART_ALG = {"sources": list(PAPER_SOURCES), **SVI_DEFAULTS, "restart_steps": 30, "restart_fresh_schedule": False}
_RESTART_ALG |= {"sgrld": True, "sgrld_a": 0.5, "sgrld_b": 10.0, "sgrld_c": 0.6}


@register_experiment(
    "lda_ssvi_restarts",
    defaults={
        "model": _SMALL_MODEL,
        "algorithm": _RESTART_ALG,
        "data": dict(CORPUS_DEFAULTS, corpus="synthetic", wiki_max_train_docs=2000),
        "run": {"num_steps": 90, "chunk_size": 10, "eval_every": 10},
    },
    bounds=_RESTART_BOUNDS,
    memory=lambda config: synthetic_memory(config, copies=2 * config["algorithm"]["restarts"]),
)
def build_restarts(sections: dict, seed: int) -> Experiment:
    """SVI restarted from SVI / Gibbs-within-SVI / SSVI-A / SSVI solutions on LDA, SGRLD beside
    (Hoffman & Blei 2015, Fig. 3)"""
    m, a, d, r = sections["model"], sections["algorithm"], sections["data"], sections["run"]
    sources = _parse_sources(a)
    if d["corpus"] not in CORPORA:
        raise ValueError(f"data.corpus: {d['corpus']!r} is not one of {CORPORA}")
    num_steps, t2 = int(r["num_steps"]), int(a["restart_steps"])
    at = num_steps - t2
    if at < 1:
        raise ValueError(
            f"algorithm.restart_steps must be < run.num_steps ({num_steps}) so that the sources take a step, got {t2}"
        )
    if at not in eval_steps(r):
        raise ValueError(
            f"algorithm.restart_steps: the sources' last step {at} (run.num_steps - restart_steps) must be an "
            f"evaluation step of the run ({eval_steps(r)}): make it a multiple of run.chunk_size and run.eval_every"
        )
    corpus = _Corpus(d["corpus"], *_load(d["corpus"], sections, seed, required=True), sections, seed)
    train, model = corpus.train, make_model(m, corpus.train.vocab_size)
    test_batches = (_whole(corpus.observed), _whole(corpus.heldout))
    train_batch = _whole(train)
    tokens = float(np.sum(np.asarray(train_batch.counts)))

    def train_elbo(q, batch):  # the mean-field ELBO of the training corpus per token
        loc = model.local_step(tree_mean_params(q), batch, None, method="meanfield")
        return conjugate_elbo(model.prior(), q, loc) / tokens

    # compiled once, shared by every run (each over the restarts); the data are arguments
    over_restarts = (0, None, None)
    heldout = jax.jit(jax.vmap(lambda q, o, h: _per_word(model, q, o, h, None), over_restarts))
    heldout_sample = jax.jit(
        jax.vmap(lambda th, o, h: _per_word(model, topics_dirichlet(th), o, h, None), over_restarts)
    )
    train_elbo = jax.jit(jax.vmap(train_elbo, in_axes=(0, None)))

    def source_scores(state):
        scores = _stats("heldout", heldout(state.q_global, *test_batches))
        return scores | _stats("train_elbo", train_elbo(state.q_global, train_batch))

    def sampler_scores(state):  # an SGRLD sample's topics
        return _stats("heldout", heldout_sample(state.q_global, *test_batches))

    num_data, host_batches = corpus.settings["num_data"], corpus.host_batches
    tau2 = a["tau"] if a["restart_fresh_schedule"] else a["tau"] + at
    restart_schedule = schedules.robbins_monro(a["scale"], tau=tau2, kappa=a["kappa"])
    svi = make_algorithm("svi", model, num_data=num_data, schedule=restart_schedule, local="meanfield")
    second = restarts(svi, a["restarts"])

    runs = []  # (name, label, kind, algorithm, eval)
    for g, l in sources:
        alg = then(restarts(corpus.algorithm(g, l, model), a["restarts"]), second, at)
        label = _NAMES.get(f"{g}/{l}", f"{g}/{l}")
        runs.append((f"{d['corpus']}_{g}_{l}", label, "source", alg, _Timed(source_scores, a["batch_size"])))
    if a["sgrld"]:
        schedule = sgrld_schedule(a["sgrld_a"], a["sgrld_b"], a["sgrld_c"])
        alg = restarts(sgrld_lda(model, num_data=num_data, schedule=schedule, ramp=a["ramp"]), a["restarts"])
        runs.append((f"{d['corpus']}_sgrld", "SGRLD", "sampler", alg, _Timed(sampler_scores, a["batch_size"])))
    (_, _, _, alg0, ev0), others = runs[0], runs[1:]
    baselines = tuple(Baseline(name, alg, eval_fn=ev, host_batches=host_batches) for name, _, _, alg, ev in others)

    def report(result, out_dir, done):
        if not result.evals:
            return {}
        evals = [result.evals] + [done[b.name].evals for b in baselines]
        n = int(result.num_steps)
        table = [
            {"name": name, "label": label, "kind": kind, "num_steps": n, "evals": _with_train_time(ev)}
            for (name, label, kind, _, _), ev in zip(runs, evals)
        ]
        path = _plot_restarts(table, at, d["corpus"], out_dir)
        content = {"switch_step": at, "num_train_docs": int(train.num_docs), "device": str(jax.devices()[0])}
        _write_json(os.path.join(out_dir, "restarts.json"), content | {"runs": table}, a, n)
        summary = {"switch_step": at, "plot": os.path.basename(path) if path else None}
        for row in table:
            summary[row["label"]] = {k: _summary_row(row["evals"], at, n, k) for k in ("train_elbo", "heldout")}
        return summary

    return Experiment(alg0, alg0.init, None, ev0, report, host_batches=host_batches, baselines=baselines)
