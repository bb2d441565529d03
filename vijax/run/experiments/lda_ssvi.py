"""SSVI and SSVI-A against mean-field SVI on LDA (Hoffman & Blei 2015, "Structured stochastic
variational inference", §4.1 and appendix D).

``lda_ssvi``: the E-step x M-step matrix of §2.5. Each global update of ``M_STEPS``
(``meanfield`` (SVI), ``ssvi_a`` (SSVI-A, eq. 10), ``ssvi`` (SSVI, eq. 7/11)) runs with each local
step (``meanfield``, ``cvb0``, ``gibbs``) over a grid of alpha and eta (the paper: alpha in
{0.01, 0.1, 0.5}, eta in {0.01, 0.1, 1}), on the synthetic corpus and, where the reference data
are present, on wiki_bnpy. The alpha x eta grid of an (M-step, E-step) pair is one program,
``restarts(hyperparameter_grid(alg, model, alpha=..., eta=...), R)``: every setting from the same
initial state, on the same minibatches with the same keys, with ``algorithm.restarts`` restarts in
lock step. The step size is rho_t = scale (t + tau)^-kappa (the paper: t^-0.75), with the N_t ramp
of Algorithm 1 when ``algorithm.ramp``. Each setting is scored by the held-out per-word log
predictive by document completion (the paper uses a Chib-style estimator instead) against
documents seen and training wall time. Outputs: ``heldout_<corpus>.png`` (one panel per pair, as
the paper's Figure 6), ``hyper_<corpus>.png`` (final score against alpha) and ``grid.json``.

``lda_ssvi_restarts`` (§4.1, "Local optima", Figure 3): do SSVI and SSVI-A score better because
their objective is a better approximation, or because the mean-field ELBO has poor local optima
that they avoid? Each source method (``algorithm.sources``: the paper's SVI, Gibbs-within-SVI,
SSVI-A and SSVI) runs ``run.num_steps - algorithm.restart_steps`` steps; then mean-field SVI starts
from each restart's final q(beta) (``init_from``) and runs ``algorithm.restart_steps`` more steps,
its step sizes continuing the sources' schedule (``algorithm.restart_fresh_schedule`` starts it
again at t = 0). Both phases are one program (:func:`then`). Every restart is scored by the
mean-field ELBO of the training corpus per token (the paper's measure) and the held-out per-word
log predictive; SGRLD (Patterson & Teh 2013) runs beside them, scored by its current sample's
topics. Outputs: ``restarts_<corpus>.png`` and ``restarts.json``.
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

from vijax._validate import ArgumentError
from vijax.data import Minibatcher, bucket_length
from vijax.expfam import tree_mean_params
from vijax.inference import M_STEPS, VIAlgorithm, hyperparameter_grid, init_from, make_algorithm, restarts
from vijax.inference import safe_increment, schedules, sgrld_lda, sgrld_schedule, topics_dirichlet
from vijax.models import LDA, conjugate_elbo
from vijax.run import Baseline, Experiment, eval_steps, register_experiment
from vijax.run.experiments.lda import ALG_BOUNDS, DATA_BOUNDS, DATA_DEFAULTS, MODEL_BOUNDS, MODEL_DEFAULTS
from vijax.run.experiments.lda import SYNTHETIC_BOUNDS, ldac_corpus, make_model, synthetic_corpus, synthetic_memory
from ._plotting import optional_plot

CORPORA = ("synthetic", "wiki_bnpy")
# the data bounds of lda_ssvi and lda_ssvi_restarts (their data defaults: CORPUS_DEFAULTS)
CORPUS_BOUNDS = {
    **DATA_BOUNDS,
    **SYNTHETIC_BOUNDS,
    "data.wiki_max_train_docs": ">= 0",
    "data.wiki_max_test_docs": ">= 1",
}
# the corpora of lda_ssvi and lda_ssvi_restarts: the synthetic corpus's settings and wiki_bnpy's files
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
# the SVI settings of lda_ssvi's and lda_ssvi_restarts' fits: restarts per setting, S, tau, kappa,
# the step's scale and its ramp
SVI_DEFAULTS = {"restarts": 5, "batch_size": 100, "tau": 1.0, "kappa": 0.75, "scale": 1.0, "ramp": True}
_BOUNDS = {
    **{k: v for k, v in MODEL_BOUNDS.items() if k not in ("model.alpha", "model.eta")},
    "model.alphas": "non-empty, each > 0",
    "model.etas": "non-empty, each > 0",
    "algorithm.restarts": ">= 1",
    **ALG_BOUNDS,
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
        # one padded length for the whole run
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
        ax.set(xscale="log", xlabel="α")
        ax.set_title(f"η = {e:g}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("final held-out log pred. / word")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    paths.append(os.path.join(out_dir, f"hyper_{corpus}.png"))
    fig.savefig(paths[1], dpi=100)
    return paths


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


# ---- SVI restarted from each method's solution (Figure 3) -------------------------------------

PAPER_SOURCES = ("meanfield/meanfield", "meanfield/gibbs", "ssvi_a/gibbs", "ssvi/gibbs")
_NAMES = {
    "meanfield/meanfield": "SVI",
    "meanfield/cvb0": "SVI (CVB0)",
    "meanfield/gibbs": "Gibbs-within-SVI",
    "ssvi_a/gibbs": "SSVI-A",
    "ssvi/gibbs": "SSVI",
}


class ThenState(NamedTuple):
    """The state of :func:`then`: ``q_global`` the active phase's q, ``count`` the steps taken, and
    each phase's own state (the second's is its initial state until the switch)."""

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
    """``first`` for ``at`` steps, then ``second`` started from ``first``'s q
    (``init_from(second, key, q)``: count 0, the rest of ``second``'s state fresh), in one program:
    a ``lax.cond`` on the step count runs one phase per step. ``second``'s q must have ``first``'s
    structure, shapes and dtypes (``init_from`` checks at trace time). Keys: each step's key is
    split into the phase's step key and the key of the switch's ``init_from``. Under ``vmap`` the
    ``lax.cond`` would become a select that runs both phases at every step: put ``restarts`` inside,
    ``then(restarts(a, R), restarts(b, R), at)``, as the experiment does."""
    at = int(at)

    def init(key, batch=None):
        k1, k2 = jax.random.split(key)
        s1 = first.init(k1, batch)
        s2 = second.init(k2, batch)
        return ThenState(s1.q_global, jnp.zeros((), jnp.int32), s1, s2)

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
    out = []
    for s in a["sources"]:
        parts = str(s).split("/")
        if len(parts) != 2 or parts[0] not in M_STEPS or parts[1] not in LDA.local_methods:
            raise ValueError(
                f"algorithm.sources: {s!r} is not 'M-step/E-step' with an M-step of {tuple(M_STEPS)} and an "
                f"E-step of {LDA.local_methods}"
            )
        out.append((parts[0], parts[1]))
    if len(set(out)) != len(out):
        raise ValueError(f"algorithm.sources: {a['sources']} repeats a pair")
    return out


class _Scorers(NamedTuple):
    """The evaluation's compiled programs, shared by every run of the experiment (each over the
    restarts): ``heldout(q, observed, heldout)`` the held-out per-word log predictive of a q(beta)
    (``lda_ssvi``'s scorer), ``heldout_sample(theta, observed, heldout)`` that of an SGRLD sample's
    topics, ``train_elbo(q, corpus)`` the mean-field ELBO of the corpus per token; the data are
    arguments."""

    heldout: object
    heldout_sample: object
    train_elbo: object


def _scorers(model, tokens: float) -> _Scorers:
    def elbo(q, batch):
        loc = model.local_step(tree_mean_params(q), batch, None, method="meanfield")
        return conjugate_elbo(model.prior(), q, loc) / tokens

    over_restarts = (0, None, None)
    return _Scorers(
        jax.jit(jax.vmap(lambda q, o, h: _per_word(model, q, o, h, None), over_restarts)),
        jax.jit(jax.vmap(lambda th, o, h: _per_word(model, topics_dirichlet(th), o, h, None), over_restarts)),
        jax.jit(jax.vmap(elbo, in_axes=(0, None))),
    )


class _RestartEval:
    """Per restart: the held-out per-word log predictive and, for a q(beta) (not for a sampler),
    the mean-field ELBO of the training corpus per training token; their mean, minimum and maximum
    over restarts."""

    def __init__(self, scorers: _Scorers, test: tuple, train, batch_size: int, sampler: bool):
        self.scorers, self.test, self.train, self.sampler = scorers, test, train, sampler
        self.batch_size, self.eval_s = batch_size, 0.0

    def __call__(self, state) -> dict:
        t0 = time.perf_counter()
        out = {}
        if self.sampler:
            scores = {"heldout": self.scorers.heldout_sample(state.q_global, *self.test)}
        else:
            scores = {
                "heldout": self.scorers.heldout(state.q_global, *self.test),
                "train_elbo": self.scorers.train_elbo(state.q_global, self.train),
            }
        for name, v in scores.items():
            v = np.asarray(v, np.float64)
            out.update({f"{name}_mean": float(v.mean()), f"{name}_min": float(v.min()), f"{name}_max": float(v.max())})
            out.update({f"{name}_r{i}": float(x) for i, x in enumerate(v)})
        out["docs_seen"] = int(np.ravel(state.count)[0]) * self.batch_size
        out["eval_s_before"] = self.eval_s
        self.eval_s += time.perf_counter() - t0
        return out


def _summary_row(evals, at, num_steps, key):
    """(mean, min, max) of ``key`` at the switch step and at the end."""
    by_step = {e["step"]: e for e in evals}
    out = {}
    for name, t in (("before", at), ("after", num_steps)):
        e = by_step.get(t)
        if e is not None and f"{key}_mean" in e:
            out[name] = [e[f"{key}_mean"], e[f"{key}_min"], e[f"{key}_max"]]
    return out


@optional_plot
def _plot_restarts(runs, at, corpus, out_dir):
    """The two panels (module docstring); returns the path (None without matplotlib)."""
    import matplotlib
    from matplotlib.figure import Figure

    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    fig = Figure(figsize=(11, 3.8))
    ax_e, ax_h = fig.subplots(1, 2)
    sources = [r for r in runs if r["kind"] == "source"]
    for j, r in enumerate(sources):
        rows = _summary_row(r["evals"], at, r["num_steps"], "train_elbo")
        for off, (name, marker) in zip((-0.12, 0.12), (("before", "s"), ("after", "o"))):
            if name not in rows:
                continue
            mean, lo, hi = rows[name]
            ax_e.errorbar(
                [j + off],
                [mean],
                yerr=[[mean - lo], [hi - mean]],
                fmt=marker,
                color=colors[0] if name == "before" else colors[1],
                capsize=4,
                label=("at the source's solution" if name == "before" else "after SVI's restart sweep")
                if j == 0
                else None,
            )
    ax_e.set_xticks(range(len(sources)))
    ax_e.set_xticklabels([r["label"] for r in sources], fontsize=8)
    ax_e.set_ylabel("mean-field ELBO / training token")
    ax_e.set_title("SVI restarted from each method's solution", fontsize=9)
    ax_e.grid(alpha=0.3)
    ax_e.legend(fontsize=7)
    for j, r in enumerate(runs):
        steps = np.array([e["step"] for e in r["evals"]])
        mean = np.array([e["heldout_mean"] for e in r["evals"]])
        lo = np.array([e["heldout_min"] for e in r["evals"]])
        hi = np.array([e["heldout_max"] for e in r["evals"]])
        col = colors[j % len(colors)]
        ax_h.plot(steps, mean, ".-" if r["kind"] == "source" else "x--", color=col, label=r["label"])
        ax_h.fill_between(steps, lo, hi, color=col, alpha=0.15)
    ax_h.axvline(at, color="k", lw=0.8, ls=":")
    ax_h.set(xlabel="steps (dotted: the sources' last step; SVI from there on)", ylabel="held-out log pred. / word")
    ax_h.set_title(f"held-out score, {corpus}", fontsize=9)
    ax_h.grid(alpha=0.3)
    ax_h.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(out_dir, f"restarts_{corpus}.png")
    fig.savefig(path, dpi=100)
    return path


_RESTART_BOUNDS = {
    **MODEL_BOUNDS,
    "algorithm.restarts": ">= 1",
    **ALG_BOUNDS,
    "algorithm.restart_steps": ">= 1",
    "algorithm.sgrld_a": "> 0",
    "algorithm.sgrld_b": "> 0",
    "algorithm.sgrld_c": ">= 0",
    **CORPUS_BOUNDS,
}


@register_experiment(
    "lda_ssvi_restarts",
    defaults={
        "model": dict(
            MODEL_DEFAULTS, num_topics=10, alpha=0.1, eta=0.01, cvb0_iters=50, gibbs_sweeps=6, gibbs_burn_in=3
        ),
        "algorithm": {
            "sources": list(PAPER_SOURCES),
            **SVI_DEFAULTS,
            "restart_steps": 30,
            "restart_fresh_schedule": False,
            "sgrld": True,
            "sgrld_a": 0.5,
            "sgrld_b": 10.0,
            "sgrld_c": 0.6,
        },
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
    train, test = _load(d["corpus"], sections, seed, required=True)
    model = make_model(m, train.vocab_size)
    observed, heldout = test.split_tokens(seed + 1, d["observed_fraction"])
    n_test = observed.num_docs
    test_batches = tuple(
        part.batch(np.arange(n_test), length=bucket_length(int(part.doc_unique_words.max(initial=1))))
        for part in (observed, heldout)
    )
    train_batch = train.batch(
        np.arange(train.num_docs), length=bucket_length(int(train.doc_unique_words.max(initial=1)))
    )
    scorers = _scorers(model, float(np.sum(np.asarray(train_batch.counts))))
    num_data = train.num_docs - train.num_empty
    mb = Minibatcher(train, a["batch_size"], seed)
    length = bucket_length(int(train.doc_unique_words.max(initial=1)))  # one padded length for the whole run
    host_batches = lambda t0, n: mb.host_batches(t0, n, length=length)  # noqa: E731
    schedule = schedules.robbins_monro(a["scale"], tau=a["tau"], kappa=a["kappa"])
    tau2 = a["tau"] if a["restart_fresh_schedule"] else a["tau"] + at
    restart_schedule = schedules.robbins_monro(a["scale"], tau=tau2, kappa=a["kappa"])
    second = restarts(
        make_algorithm("svi", model, num_data=num_data, schedule=restart_schedule, local="meanfield"), a["restarts"]
    )

    runs = []  # (name, label, kind, algorithm, eval)
    for g, l in sources:
        first = restarts(
            make_algorithm(M_STEPS[g], model, num_data=num_data, schedule=schedule, local=l, ramp=a["ramp"]),
            a["restarts"],
        )
        ev = _RestartEval(scorers, test_batches, train_batch, a["batch_size"], sampler=False)
        runs.append(
            (f"{d['corpus']}_{g}_{l}", _NAMES.get(f"{g}/{l}", f"{g}/{l}"), "source", then(first, second, at), ev)
        )
    if a["sgrld"]:
        alg = restarts(
            sgrld_lda(
                model,
                num_data=num_data,
                schedule=sgrld_schedule(a["sgrld_a"], a["sgrld_b"], a["sgrld_c"]),
                ramp=a["ramp"],
            ),
            a["restarts"],
        )
        ev = _RestartEval(scorers, test_batches, train_batch, a["batch_size"], sampler=True)
        runs.append((f"{d['corpus']}_sgrld", "SGRLD", "sampler", alg, ev))
    (_, _, _, alg0, ev0), others = runs[0], runs[1:]
    baselines = tuple(Baseline(name, alg, eval_fn=ev, host_batches=host_batches) for name, _, _, alg, ev in others)

    def report(result, out_dir, done):
        if not result.evals:
            return {}
        evals = [result.evals] + [done[b.name].evals for b in baselines]
        table = [
            {
                "name": name,
                "label": label,
                "kind": kind,
                "num_steps": int(result.num_steps),
                "evals": [dict(e, train_time_s=e["wall_time"] - e["eval_s_before"]) for e in ev],
            }
            for (name, label, kind, _, _), ev in zip(runs, evals)
        ]
        path = _plot_restarts(table, at, d["corpus"], out_dir)
        with open(os.path.join(out_dir, "restarts.json"), "w") as fh:
            json.dump(
                {
                    "restarts": a["restarts"],
                    "switch_step": at,
                    "num_steps": int(result.num_steps),
                    "batch_size": a["batch_size"],
                    "num_train_docs": int(train.num_docs),
                    "device": str(jax.devices()[0]),
                    "runs": table,
                },
                fh,
                indent=1,
            )
        summary = {"switch_step": at, "plot": os.path.basename(path) if path else None}
        for row in table:
            summary[row["label"]] = {
                "train_elbo": _summary_row(row["evals"], at, row["num_steps"], "train_elbo"),
                "heldout": _summary_row(row["evals"], at, row["num_steps"], "heldout"),
            }
        return summary

    return Experiment(
        alg0, lambda key: alg0.init(key), None, ev0, report, host_batches=host_batches, baselines=baselines
    )
