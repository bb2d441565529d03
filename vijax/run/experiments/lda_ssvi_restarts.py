"""Mean-field SVI restarted from each method's solution on LDA (Hoffman & Blei 2015, §4.1, "Local
optima", Figure 3), with SGRLD (Patterson & Teh 2013) beside them on the held-out score.

The question of the paper's Figure 3: do SSVI and SSVI-A score better than mean-field SVI because
their objective is a better approximation, or because the mean-field ELBO has poor local optima
that they avoid? The paper initialises mean-field SVI with the variational parameters each method
found (SVI, Gibbs-within-SVI, SSVI, SSVI-A), runs another sweep over the corpus, and plots the
mean-field ELBO on the training set that SVI reaches from each start (points the average over five
runs, error bars their range).

Here each source method, an (M-step, E-step) pair of ``vijax.inference.make_algorithm`` with
``M_STEPS`` (``algorithm.sources``: the paper's four are ``meanfield/meanfield`` (SVI),
``meanfield/gibbs`` (Gibbs-within-SVI), ``ssvi_a/gibbs`` and ``ssvi/gibbs``), runs
``algorithm.restarts`` restarts in lock step (``vijax.inference.restarts``) for
``run.num_steps - algorithm.restart_steps`` steps; then, in the same program, mean-field SVI with
the mean-field E-step starts from each restart's final q(beta) (``vijax.inference.init_from``:
the same lambda, bit for bit) and runs ``algorithm.restart_steps`` more steps on the next
minibatches, its step sizes continuing the sources' schedule (rho_t = scale (t + tau)^-kappa with t
counting the source's steps too; ``algorithm.restart_fresh_schedule`` starts it again at t = 0).
The switch is a ``lax.cond`` on the step count (:func:`then`), so the runner drives, checkpoints
and resumes each two-phase program as one run. All programs see the same minibatches and keys.

Evaluation at every evaluation step, of every restart: the mean-field ELBO of the training corpus
per training token (the mean-field E-step on every training document at E_q[log beta], the
paper's measure), and the held-out per-word log predictive by document completion (the scorer of
``lda_ssvi``). SGRLD (``vijax.inference.sgrld_lda``, its own restarts, all ``run.num_steps``
steps, no restart phase: it has no q(beta) to restart SVI from) is scored on the held-out set with
its current sample's topics as the point estimate (one sample, no average over samples), when
``algorithm.sgrld``.

Outputs: ``restarts_<corpus>.png`` (left: the paper's Figure 3, the training ELBO per token at each
source's solution and after SVI's restart sweep, mean over restarts and their range; right: the
held-out score against steps, the switch marked), ``restarts.json`` (every evaluation of every
restart) and a summary of both scores before and after the restart sweep.
"""

from __future__ import annotations

import json
import os
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vijax.data import Minibatcher, bucket_length
from vijax.expfam import tree_mean_params
from vijax.inference import (
    M_STEPS,
    VIAlgorithm,
    init_from,
    make_algorithm,
    restarts,
    safe_increment,
    schedules,
    sgrld_lda,
    sgrld_schedule,
    topics_dirichlet,
)
from vijax.models import LDA, conjugate_elbo
from vijax.run import Baseline, Experiment, eval_steps, register_experiment
from vijax.run.experiments.lda import _ALG_BOUNDS, MODEL_BOUNDS, MODEL_DEFAULTS, make_model, synthetic_memory
from vijax.run.experiments.lda_ssvi import CORPORA, CORPUS_BOUNDS, CORPUS_DEFAULTS, SVI_DEFAULTS, _load, _per_word

from ._plotting import optional_plot

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
    topics, ``train_elbo(q, corpus)`` the mean-field ELBO of the corpus per token. The data are
    arguments, not constants of the programs (XLA would fold a constant corpus at compile time)."""

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


class _Eval:
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
def _plot(runs, at, corpus, out_dir):
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
    ax_h.set_xlabel("steps (dotted: the sources' last step; SVI from there on)")
    ax_h.set_ylabel("held-out log pred. / word")
    ax_h.set_title(f"held-out score, {corpus}", fontsize=9)
    ax_h.grid(alpha=0.3)
    ax_h.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(out_dir, f"restarts_{corpus}.png")
    fig.savefig(path, dpi=100)
    return path


_BOUNDS = {
    **MODEL_BOUNDS,
    "algorithm.restarts": ">= 1",
    **_ALG_BOUNDS,
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
    bounds=_BOUNDS,
    memory=lambda config: synthetic_memory(config, copies=2 * config["algorithm"]["restarts"]),
)
def build(sections: dict, seed: int) -> Experiment:
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
    length = bucket_length(int(train.doc_unique_words.max(initial=1)))  # one padded length: one compiled step
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
        ev = _Eval(scorers, test_batches, train_batch, a["batch_size"], sampler=False)
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
        ev = _Eval(scorers, test_batches, train_batch, a["batch_size"], sampler=True)
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
        path = _plot(table, at, d["corpus"], out_dir)
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
