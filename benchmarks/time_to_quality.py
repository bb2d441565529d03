"""Time to quality: the wall time from the first call until a method's model is as good as the
best any method reaches in the run, vijax against the libraries people use, one model at a time.

Each method's clock starts at its first call (its set-up: the model, the initial state, the
peer's estimator; then compilation and every update) and is stopped while its state is scored:
**evaluation time is left out of every method's clock**. Imports are left out too, and reported
apart (``import_s``: in this process, each library after those before it). The quality is scored
by one library-independent function per model, at every evaluation:

- online LDA: held-out log predictive per word by document completion
  (``vijax.metrics.corpus_document_completion``, the scorer of ``lda_online.py``) on a synthetic
  corpus (``vijax.data.sample_lda_corpus``) and, when ``../shared/data/wiki_bnpy`` is present, on
  the wiki_bnpy corpus (the row is skipped otherwise). vijax SVI (LDA's default E-step) against
  scikit-learn's ``LatentDirichletAllocation(learning_method="online")`` and gensim's ``LdaModel``
  (when installed): the same minibatches, K, alpha, eta, kappa = 0.7, tau = 64, and each library's
  default E-step stopping rule (vijax's and scikit-learn's: at most 100 updates, tolerance 1e-3 on
  the mean absolute change of gamma; gensim's: 50, 1e-3). One extra vijax row, "loose E-step"
  (tolerance 1e-2, at most 20 updates), asks whether an E-step that converges less far per
  document reaches the peers' final quality sooner. The synthetic corpus is run from
  ``--lda-starts`` starts (default 5): start s gives every method the random topics of
  scikit-learn's ``random_state=s`` (scikit-learn's and gensim's own random state is s too); the
  table is start 0's, and a summary says in how many starts vijax reaches its start's target
  first and by how much the final qualities differ per start (which local optimum the topics
  reach depends on the start, by more than the tolerance, either way).
- GMM CAVI (diagonal covariances): held-out log predictive per point (``DiagonalGMM.log_predictive``,
  each component's posterior predictive under q), vijax CAVI against scikit-learn's
  ``BayesianGaussianMixture`` with the same priors from the same responsibilities
  (``vijax.testing.matched_sklearn_bgmm``; scikit-learn's fitted q read by
  ``vijax.testing.sklearn_to_q``). scikit-learn's curve is made of separate fits of m
  iterations (``max_iter=m, tol=0``) from that start, each timed whole, as a user's fit of m
  iterations runs (a warm-started fit would add a final E-step to every iteration).
- Baum-Welch (EM for a Gaussian HMM): held-out log-likelihood per observation (vijax's forward
  pass), vijax's ``em`` against hmmlearn's ``GaussianHMM`` (maximum likelihood: no priors, no
  variance floor) and dynamax's ``DiagonalGaussianHMM`` when installed, from the same parameters;
  hmmlearn runs one EM iteration per ``fit`` call (``n_iter=1, init_params=""``: it continues
  from its parameters), dynamax one iteration of its ``fit_em`` body per jitted call (its priors
  as flat as its API allows; its set-up is its ``initialize``).
- BBVI on a Bayesian logistic regression (``bbvi.py``'s data, log-joint and exact ELBO: Gauss-Hermite
  quadrature, float64): vijax ``bbvi`` (mean-field Gaussian, Adam) against NumPyro ``SVI`` with
  ``AutoNormal`` and Adam: the same learning rate, draws per step and start; both stepped by
  ``bbvi.py``'s runner (jitted ``lax.scan`` chunks, compile timed apart) and scored after every chunk.

The target of each model is the best quality any method reaches in the run less a stated
tolerance (``TOLERANCE``); a method's time to the target is its clock at its first evaluation at
or above it. Printed per model: every method's set-up, compile, steady state and end-to-end times,
its final quality and time to the target, and each peer's time over vijax's (> 1: vijax first).
vijax's steps are compiled by ``vijax.inference.jit_step`` (as the runner compiles them); vijax
runs in JAX's default float32, the peers in float64. ``--device cpu`` starts the process with
XLA's fast CPU compile settings (``vijax.run.fast_cpu_compile``, as ``vijax run`` starts) for
every JAX library in it; ``--xla-defaults`` leaves XLA's own settings, as a user's script has them
(``jit_step`` then compiles vijax's steps with its own CPU options; BBVI's chunks, under
``jax.jit`` for both libraries, and dynamax's steps are compiled as XLA's defaults say), and
writes ``time_to_quality_xla_defaults.json`` / ``.md`` / ``.png``.

Agreement (``_agree.py``): vijax's final quality may fall below each peer's by at most
``AGREE`` (one-sided); the checks go into the JSON and the script exits 1 after writing it when
one fails.

    python benchmarks/time_to_quality.py            # the documented run (1-3 minutes on 2 cores, with the LDA starts)
    python benchmarks/time_to_quality.py --quick    # a smoke run (about 20 s)
    python benchmarks/time_to_quality.py --device gpu   # JAX on the GPU (the peers stay on the CPU)
    python benchmarks/time_to_quality.py --render   # the markdown table again from the JSON

Writes ``benchmarks/results/time_to_quality.json``, ``.md`` (the table of the documentation's
Benchmarks page) and ``.png`` (the curves; needs matplotlib).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
import warnings
from typing import Any, Callable, NamedTuple

_t0 = time.perf_counter()
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

IMPORT_S = {"jax": time.perf_counter() - _t0}
_t0 = time.perf_counter()
from vijax.data import Minibatcher, read_ldac, sample_gmm, sample_hmm, sample_lda_corpus, shared_data_path  # noqa: E402
from vijax.expfam import Dirichlet  # noqa: E402
from vijax.inference import CAVIState, EMState, VIAlgorithm, cavi, em, jit_step, schedules, svi  # noqa: E402
from vijax.models import LDA, DiagonalGMM, GaussianEmissions, GaussianHMM, HMMParams  # noqa: E402
from vijax.testing import matched_sklearn_bgmm, sklearn_to_q  # noqa: E402

IMPORT_S["vijax"] = time.perf_counter() - _t0

import bbvi  # noqa: E402  (this folder's BBVI benchmark: its data, log-joint, exact ELBO and runner)
from _device import add_device_argument, use_device  # noqa: E402  (this folder's --device switch)
from _agree import compare, exit_on_disagreement, verdict  # noqa: E402  (this folder's agreement rule)
from lda_online import HELDOUT_TOL, KAPPA, TAU, run_gensim, run_sklearn, vijax_runner  # noqa: E402
from _dynamax import dynamax_em  # noqa: E402  (this folder's dynamax EM step, as hmm.py runs it)

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
# the target: the best quality any method reaches in the run, less this much
TOLERANCE = {"lda": 0.02, "gmm": 0.01, "hmm": 1e-3, "bbvi": 0.5}
# agreement: vijax's final quality may fall at most this much below a peer's
AGREE = {"lda": HELDOUT_TOL, "gmm": 0.01, "hmm": 1e-3, "bbvi": 0.5}
# a peer whose estimate is a posterior mode under its priors (dynamax's M-step) differs from the
# maximum-likelihood EM by O(K / N): 0.0067 nats per observation at the --quick size, 1.1e-5 at the full
AGREE_MAP = 0.01
UNITS = {
    "lda": "held-out log predictive per word",
    "gmm": "held-out log predictive per point",
    "hmm": "held-out log-likelihood per observation",
    "bbvi": "ELBO (nats, exact)",
}
LOOSE = {"tol": 1e-2, "max_iters": 20}  # the extra vijax LDA row's E-step


def _import(name: str):
    """``importlib.import_module(name)``, its first import timed into ``IMPORT_S``."""
    t0 = time.perf_counter()
    module = importlib.import_module(name)
    IMPORT_S.setdefault(name.split(".")[0], time.perf_counter() - t0)
    return module


def _installed(name: str) -> bool:
    try:
        _import(name)
        return True
    except ImportError:
        return False


# ----------------------------------------------------------------------------- one method's curve
class Method(NamedTuple):
    """``start() -> (state, {"compile_s": the part of start() that compiled} or {})``,
    ``step(state, t) -> state``, ``score(state) -> float`` and ``block(state)`` (waits for
    asynchronous work)."""

    name: str
    library: str
    start: Callable[[], tuple]
    step: Callable[[Any, int], Any]
    score: Callable[[Any], float]
    block: Callable[[Any], Any] = jax.block_until_ready
    scores_start: bool = True  # False: the initial state cannot be scored (scikit-learn's LDA has no topics yet)


def trace(method: Method, num_steps: int, eval_at) -> dict:
    """Runs ``method`` for ``num_steps`` updates, scoring its state at the start and after each
    step in ``eval_at``; only set-up and updates count on its clock (each update waited for)."""
    t0 = time.perf_counter()
    state, parts = method.start()
    method.block(state)
    clock = start_s = time.perf_counter() - t0
    curve = [{"step": 0, "time_s": clock, "quality": float(method.score(state))}] if method.scores_start else []
    times = []
    for t in range(num_steps):
        t0 = time.perf_counter()
        state = method.step(state, t)
        method.block(state)
        times.append(time.perf_counter() - t0)
        clock += times[-1]
        if t + 1 in eval_at or t + 1 == num_steps:
            curve.append({"step": t + 1, "time_s": clock, "quality": float(method.score(state))})
    steady = float(np.median(times[1:] if len(times) > 1 else times))
    compile_s = parts.get("compile_s")
    if compile_s is None:  # compiled at the first call: its time beyond a steady step
        compile_s = max(0.0, times[0] - steady)
    setup_s = start_s - (compile_s if "compile_s" in parts else 0.0)
    return row(method.name, method.library, curve, setup_s, compile_s, steady)


def row(name, library, curve, setup_s, compile_s, steady_s, **extra) -> dict:
    return {
        "method": name,
        "library": library,
        "setup_s": setup_s,
        "compile_s": compile_s,
        "steady_s_per_step": steady_s,
        "steps": curve[-1]["step"],
        "end_to_end_s": curve[-1]["time_s"],
        "final_quality": curve[-1]["quality"],
        "best_quality": max(c["quality"] for c in curve),
        "curve": curve,
        **extra,
    }


def time_to(curve: list, target: float):
    """(time_s, step) of the first evaluation whose quality is >= target, or (None, None)."""
    for c in curve:
        if c["quality"] >= target:
            return c["time_s"], c["step"]
    return None, None


def summarize(model: dict) -> dict:
    """Sets the model's target (the best quality of any method less its tolerance), each row's
    time to it, each vijax row's time to every peer's final quality, and each peer's ratio
    (its time to the target over the first vijax row's: > 1, vijax first)."""
    rows = model["rows"]
    model["best"] = max(r["best_quality"] for r in rows)
    model["target"] = model["best"] - model["tolerance"]
    for r in rows:
        r["time_to_target_s"], r["steps_to_target"] = time_to(r["curve"], model["target"])
    peers = [r for r in rows if r["library"] != "vijax"]
    vijax_rows = [r for r in rows if r["library"] == "vijax"]
    for v in vijax_rows:
        v["time_to_peer_final_s"] = {p["method"]: time_to(v["curve"], p["final_quality"])[0] for p in peers}
    ref = vijax_rows[0]
    for p in peers:
        a, b = p["time_to_target_s"], ref["time_to_target_s"]
        p["ratio_to_vijax"] = None if a is None or b is None else a / b
    return model


def _checkpoints(num_steps: int, num: int) -> set:
    return set(np.unique(np.linspace(1, num_steps, num).round().astype(int)).tolist())


# ----------------------------------------------------------------------------- online LDA
def _corpora(args):
    s = args.sizes
    syn = sample_lda_corpus(
        0, s["lda_docs"] + s["lda_test"], s["lda_k"], s["lda_vocab"], alpha=0.1, eta=0.02, doc_length_mean=100
    )
    train, test = syn.corpus.split_documents(0, s["lda_test"] / (s["lda_docs"] + s["lda_test"]))
    out = [("synthetic", train, test, s["lda_docs"])]
    path = shared_data_path("wiki_bnpy", "train.ldac.gz")
    if path is None or args.no_wiki:
        return out, "wiki_bnpy: skipped (" + ("--no-wiki" if args.no_wiki else "../shared/data/wiki_bnpy absent") + ")"
    wiki = read_ldac(path, shared_data_path("wiki_bnpy", "vocab.txt"))
    train, test = wiki.split_documents(0, 0.1)
    out.append(("wiki_bnpy", train, test.subset(np.arange(min(s["lda_test"], test.num_docs))), s["wiki_docs"]))
    return out, None


def _from_runner(name, library, make):
    """A ``Method`` over one of ``lda_online.py``'s runners (built, and for vijax compiled, by ``make``)."""
    holder = {}

    def start():
        r = holder["r"] = make()
        return r.state, {"compile_s": r.compile_s or 0.0}

    return Method(
        name,
        library,
        start,
        lambda st, t: holder["r"].step(st, holder["batches"][t], t),
        lambda st: holder["r"].score(st),
        lambda st: holder["r"].block(st),
        scores_start=library == "vijax",
    ), holder


def _lda_makers(train, obs, held, k, alpha, eta, size, batches, model, seed):
    """The LDA methods of one start: every method from scikit-learn's random topics of
    ``random_state=seed`` (lambda_kv ~ Gamma(100, rate 100), the start ``LDA.init_globals`` draws
    too), so that one run's comparison is not a comparison of random starts; scikit-learn's and
    gensim's own random state (their E-steps' random start per document) from the same seed."""
    sched = schedules.robbins_monro(1.0, tau=TAU, kappa=KAPPA)
    lam0 = Dirichlet.from_concentration(
        jnp.asarray(np.random.RandomState(seed).gamma(100.0, 0.01, (k, train.vocab_size)), jnp.float32)
    )

    def vijax_alg(m):
        alg = svi(m, num_data=train.num_docs, schedule=sched)
        return VIAlgorithm(lambda key, *a: alg.init(key, *a)._replace(q_global=lam0), alg.step)

    loose = LDA(k, train.vocab_size, alpha=alpha, eta=eta, **LOOSE)
    makers = [
        ("vijax SVI", "vijax", lambda: vijax_runner(vijax_alg(model), model, train, obs, held, batches, seed)),
        (
            f"vijax SVI, loose E-step (tol {LOOSE['tol']:g}, {LOOSE['max_iters']} updates)",
            "vijax",
            lambda: vijax_runner(vijax_alg(loose), model, train, obs, held, batches, seed),
        ),
        (
            "scikit-learn online",
            "scikit-learn",
            lambda: run_sklearn(train, obs, held, k, alpha, eta, size, batches, model, seed=seed),
        ),
    ]
    if _installed("gensim"):
        makers.append(
            (
                "gensim LdaModel",
                "gensim",
                lambda: run_gensim(train, obs, held, k, alpha, eta, size, batches, model, seed=seed),
            )
        )
    return makers


def start_summary(seed: int, rows: list, tolerance: float) -> dict:
    """One start's outcome: its target (the best of that start's methods less ``tolerance``) and
    each method's final quality, time to that target and (peers) time over the first vijax row's."""
    model = summarize({"rows": [dict(r) for r in rows], "tolerance": tolerance})
    keep = ("method", "library", "final_quality", "end_to_end_s", "time_to_target_s", "ratio_to_vijax")
    return {"seed": seed, "target": model["target"], "rows": [{k: r.get(k) for k in keep} for r in model["rows"]]}


def bench_lda(args) -> list:
    s, k, alpha, eta = args.sizes, args.sizes["lda_k"], 0.1, 0.02
    corpora, skipped = _corpora(args)
    out = []
    for corpus, train, test, docs in corpora:
        obs, held = test.split_tokens(1, 0.5)
        size = s["lda_batch"]
        num_steps = max(1, s["lda_passes"] * min(docs, train.num_docs) // size)
        mb = Minibatcher(train, size, 0, drop_remainder=True)
        batches = [mb.step_indices(t) for t in range(num_steps)]  # the same minibatches for every method
        model = LDA(k, train.vocab_size, alpha=alpha, eta=eta)  # the library's default E-step; the scorer
        notes = [skipped] if skipped else []
        if not _installed("gensim"):
            notes.append("gensim: not installed, its row skipped")
        _import("sklearn.decomposition")
        # the synthetic corpus from several starts (the first is the table's): a single start's final
        # quality differs between the libraries by more than the tolerance, either way
        starts, rows = [], []
        for seed in range(s["lda_starts"] if corpus == "synthetic" else 1):
            rows_s = []
            for name, library, make in _lda_makers(train, obs, held, k, alpha, eta, size, batches, model, seed):
                method, holder = _from_runner(name, library, make)
                holder["batches"] = batches
                rows_s.append(trace(method, num_steps, _checkpoints(num_steps, s["lda_evals"])))
                _progress(f"lda {corpus}, start {seed}", rows_s[-1])
            rows = rows or rows_s
            starts.append(start_summary(seed, rows_s, TOLERANCE["lda"]))
        out.append(
            {
                "model": f"online LDA ({corpus})",
                "kind": "lda",
                "setting": f"{corpus}: {train.num_docs} training documents (V = {train.vocab_size}), "
                f"{num_steps} minibatches of S = {size} ({num_steps * size} documents), K = {k}, "
                f"{test.num_docs} held-out documents",
                "quality": UNITS["lda"],
                "tolerance": TOLERANCE["lda"],
                "notes": notes,
                "rows": rows,
                **({"starts": starts} if len(starts) > 1 else {}),
            }
        )
    return out


# ----------------------------------------------------------------------------- GMM CAVI
def bench_gmm(args) -> dict:
    s = args.sizes
    n, n_test, k, d = s["gmm_n"], s["gmm_test"], s["gmm_k"], s["gmm_d"]
    x = np.asarray(sample_gmm(jax.random.PRNGKey(0), n + n_test, k, d, spread=3.0).x, np.float64)
    x, x_test = x[:n], x[n:]
    rng = np.random.default_rng(0)  # k-means-style hard start from K random points, shared by both
    centers = x[rng.choice(n, k, replace=False)]
    resp0 = np.eye(k)[((x[:, None, :] - centers[None]) ** 2).sum(-1).argmin(1)]
    scorer = DiagonalGMM.from_data(x, k)
    score_q = jax.jit(lambda q, xt: jnp.mean(scorer.log_predictive(q, xt)))
    xt = jnp.asarray(x_test, jnp.float32)
    iters = s["gmm_iters"]

    def start():
        model = DiagonalGMM.from_data(x, k)
        feats = model.features(jnp.asarray(x, jnp.float32))  # [x, x^2] once, as the runner does
        q0 = model.posterior_from_responsibilities(feats, jnp.asarray(resp0, jnp.float32))
        state = CAVIState(q0, jnp.zeros((), jnp.int32))
        return (state, feats, jit_step(cavi(model).step)), {}

    key = jax.random.PRNGKey(1)

    def step(carry, t):
        state, feats, fn = carry
        return fn(key, state, feats)[0], feats, fn

    vij = trace(
        Method(
            "vijax CAVI",
            "vijax",
            start,
            step,
            lambda c: float(score_q(c[0].q_global, xt)),
            lambda c: jax.block_until_ready(c[0]),
        ),
        iters,
        set(range(1, iters + 1)),
    )
    # scikit-learn: a separate fit of m iterations from the same start for each point of its curve
    _import("sklearn.mixture")
    curve, fits = [], sorted(set(np.unique(np.geomspace(1, iters, s["gmm_sklearn_fits"]).round().astype(int)).tolist()))
    setup = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: the iterations are capped on purpose
        for m in fits:
            t0 = time.perf_counter()
            est = matched_sklearn_bgmm(scorer, resp0=resp0, max_iter=m, tol=0.0)
            setup.append(time.perf_counter() - t0)
            est.fit(x)
            wall = time.perf_counter() - t0
            curve.append({"step": m, "time_s": wall, "quality": float(score_q(sklearn_to_q(est, jnp.float32), xt))})
    steady = (curve[-1]["time_s"] - curve[0]["time_s"]) / max(1, fits[-1] - fits[0])
    sk = row("scikit-learn BayesianGaussianMixture", "scikit-learn", curve, float(np.median(setup)), 0.0, steady)
    _progress("gmm", vij)
    _progress("gmm", sk)
    return {
        "model": "GMM CAVI",
        "kind": "gmm",
        "setting": f"N = {n} training points, {n_test} held out, D = {d}, K = {k} diagonal components, "
        f"{iters} iterations",
        "quality": UNITS["gmm"],
        "tolerance": TOLERANCE["gmm"],
        "notes": [
            "scikit-learn's curve: separate fits of m iterations (max_iter = m, tol = 0), each timed whole "
            "(so its times need not grow with m: the first fit also pays scikit-learn's first-call costs)"
        ],
        "rows": [vij, sk],
    }


# ----------------------------------------------------------------------------- Baum-Welch
def _hmm_params(rng, k, d, sticky):
    trans = rng.dirichlet(np.ones(k), k) + sticky * np.eye(k)
    return HMMParams(
        jnp.asarray(rng.dirichlet(np.ones(k)), jnp.float32),
        jnp.asarray(trans / trans.sum(1, keepdims=True), jnp.float32),
        GaussianEmissions(
            jnp.asarray(rng.normal(size=(k, d)) * 2.0, jnp.float32),
            jnp.asarray(rng.uniform(0.5, 1.5, (k, d)), jnp.float32),
        ),
    )


def bench_hmm(args) -> dict:
    s = args.sizes
    k, d, length, iters = s["hmm_k"], s["hmm_d"], s["hmm_length"], s["hmm_iters"]
    rng = np.random.default_rng(0)
    truth, start_params = _hmm_params(rng, k, d, 2.0), _hmm_params(rng, k, d, 0.0)
    data = sample_hmm(jax.random.PRNGKey(0), truth, num_sequences=s["hmm_sequences"], length=length).data
    test = sample_hmm(jax.random.PRNGKey(1), truth, num_sequences=s["hmm_test"], length=length).data
    scorer = GaussianHMM(k, d, min_variance=0.0)
    n_test = float(np.sum(np.asarray(test.lengths)))
    score_p = jax.jit(lambda p: jnp.sum(scorer.log_likelihood(p, test)) / n_test)
    key = jax.random.PRNGKey(0)

    def start():
        model = GaussianHMM(k, d, min_variance=0.0)
        return (EMState(start_params, jnp.zeros((), jnp.int32)), jit_step(em(model).step)), {}

    def step(carry, t):
        state, fn = carry
        return fn(key, state, data)[0], fn

    rows = [
        trace(
            Method(
                "vijax EM (Baum-Welch)",
                "vijax",
                start,
                step,
                lambda c: float(score_p(c[0].q_global)),
                lambda c: jax.block_until_ready(c[0]),
            ),
            iters,
            set(range(1, iters + 1)),
        )
    ]
    _progress("hmm", rows[-1])
    hmm = _import("hmmlearn.hmm")
    x = np.asarray(data.obs, np.float64).reshape(-1, d)
    lengths = np.asarray(data.lengths)

    def hl_start():
        ref = hmm.GaussianHMM(
            n_components=k,
            covariance_type="diag",
            n_iter=1,
            tol=-np.inf,
            init_params="",
            means_prior=0.0,
            means_weight=0.0,
            covars_prior=0.0,
            covars_weight=1.0,
            min_covar=0.0,
        )
        ref.n_features = d  # set by its first fit; its covariances are read before that
        ref.startprob_ = np.asarray(start_params.initial_probs, np.float64)
        ref.transmat_ = np.asarray(start_params.transition_matrix, np.float64)
        ref.means_ = np.asarray(start_params.emissions.means, np.float64)
        ref.covars_ = np.asarray(start_params.emissions.variances, np.float64)
        return ref, {"compile_s": 0.0}

    def hl_step(ref, t):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ref.fit(x, lengths)  # one EM iteration from its current parameters

    def hl_score(ref):
        cov = np.asarray(ref.covars_)
        var = np.diagonal(cov, axis1=1, axis2=2) if cov.ndim == 3 else cov
        f32 = lambda a: jnp.asarray(a, jnp.float32)
        return float(
            score_p(HMMParams(f32(ref.startprob_), f32(ref.transmat_), GaussianEmissions(f32(ref.means_), f32(var))))
        )

    rows.append(
        trace(
            Method("hmmlearn GaussianHMM", "hmmlearn", hl_start, hl_step, hl_score, lambda r: None),
            iters,
            set(range(1, iters + 1)),
        )
    )
    _progress("hmm", rows[-1])
    notes = []
    if _installed("dynamax"):
        rows.append(trace(dynamax_hmm(start_params, data.obs, score_p), iters, set(range(1, iters + 1))))
        rows[-1]["agree_tol"] = AGREE_MAP
        _progress("hmm", rows[-1])
        notes.append(
            "dynamax's M-step is the mode under its priors, set as flat as its API allows "
            "(Dirichlet concentrations 1, Normal-inverse-Gamma 1e-8): another estimator, O(K / N) from "
            f"maximum likelihood, held to agree within {AGREE_MAP} nats per observation"
        )
    else:
        notes.append("dynamax: not installed, its row skipped")
    return {
        "model": "Baum-Welch (Gaussian HMM)",
        "kind": "hmm",
        "setting": f"{s['hmm_sequences']} sequences of length {length}, K = {k} states, D = {d} (diagonal), "
        f"{s['hmm_test']} held-out sequences, {iters} EM iterations",
        "quality": UNITS["hmm"],
        "tolerance": TOLERANCE["hmm"],
        "notes": notes,
        "rows": rows,
    }


def dynamax_hmm(start_params: HMMParams, obs, score_hmm) -> Method:
    """dynamax's ``DiagonalGaussianHMM`` from the same parameters, scored by ``score_hmm``: one
    iteration of its own ``fit_em`` body per step (``_dynamax.dynamax_em``, as in ``hmm.py``), jitted by the user and compiled
    at the first call (its ``fit_em`` compiles a scan of all iterations, so it has no curve); its
    set-up is its ``initialize``."""
    _import("dynamax.hidden_markov_model")

    def start():
        model, params, props, _, em_step = dynamax_em("gaussian", start_params, obs)
        return (params, model.initialize_m_step_state(params, props)), jax.jit(lambda c: em_step(c)[0])

    def step(carry, t):
        return carry[1](carry[0]), carry[1]

    def score(carry):
        p = carry[0][0]
        emissions = GaussianEmissions(p.emissions.means, p.emissions.scale_diags**2)
        return float(score_hmm(HMMParams(p.initial.probs, p.transitions.transition_matrix, emissions)))

    return Method(
        "dynamax DiagonalGaussianHMM",
        "dynamax",
        lambda: (start(), {}),
        step,
        score,
        lambda c: jax.block_until_ready(c[0]),
    )


# ----------------------------------------------------------------------------- BBVI
def numpyro_autonormal(d: int, lr: float, num_samples: int, xy0) -> bbvi.Method:
    """NumPyro ``SVI`` with ``AutoNormal`` and Adam on ``bbvi.log_joint``, started as vijax's
    (mean 0, scale 0.1)."""
    numpyro = _import("numpyro")
    import numpyro.distributions as dist
    from numpyro.infer import SVI, Trace_ELBO, init_to_value
    from numpyro.infer.autoguide import AutoNormal

    def model(xy):
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([d]).to_event(1))
        numpyro.factor("loglik", jnp.sum(jax.nn.log_sigmoid(xy @ w)))  # with the prior: bbvi.log_joint

    guide = AutoNormal(model, init_loc_fn=init_to_value(values={"w": jnp.zeros(d)}), init_scale=0.1)
    svi_ = SVI(model, guide, numpyro.optim.Adam(lr), Trace_ELBO(num_particles=num_samples))

    def gaussian(state):
        p = svi_.get_params(state)
        return np.asarray(p["w_auto_loc"], np.float64), np.asarray(p["w_auto_scale"], np.float64) ** 2

    return bbvi.Method(
        f"NumPyro SVI AutoNormal (Adam {lr:g})",
        "meanfield",
        lambda: svi_.init(jax.random.PRNGKey(0), xy0),
        lambda key, st, xy: svi_.update(st, xy)[0],
        gaussian,
    )


def bench_bbvi(args) -> dict:
    s = args.sizes
    n, d, steps, chunk, lr, draws = s["bbvi_n"], s["bbvi_d"], s["bbvi_steps"], s["bbvi_chunk"], 0.01, 8
    xy64 = bbvi.make_data(n, d)
    xy = jnp.asarray(xy64, jnp.float32)
    rows = []
    for method, library in (
        (bbvi.vijax_bbvi("meanfield", d, lr, draws), "vijax"),
        (numpyro_autonormal(d, lr, draws, xy), "numpyro"),
    ):
        r, _ = bbvi.run(method, xy, xy64, steps, chunk)
        tr = r["trace"]
        curve = [{"step": a, "time_s": b, "quality": c} for a, b, c in zip(tr["steps"], tr["time_s"], tr["elbo"])]
        rows.append(row(method.name, library, curve, r["init_s"], r["compile_s"], 1.0 / r["steps_per_s_sequential"]))
        _progress("bbvi", rows[-1])
    return {
        "model": "BBVI (logistic regression)",
        "kind": "bbvi",
        "setting": f"N = {n}, D = {d}, mean-field Gaussian q, {draws} draws per step, Adam {lr:g}, {steps} steps "
        f"(scored every {chunk})",
        "quality": UNITS["bbvi"],
        "tolerance": TOLERANCE["bbvi"],
        "notes": [],
        "rows": rows,
    }


# ----------------------------------------------------------------------------- output
def _progress(label, r):
    print(
        f"  {label}: {r['method']}: set-up {r['setup_s']:.2f} s, compile {r['compile_s']:.2f} s, steady "
        f"{1e3 * r['steady_s_per_step']:.3g} ms/step, end to end {r['end_to_end_s']:.2f} s ({r['steps']} steps), "
        f"final {r['final_quality']:.5g}",
        flush=True,
    )


def _s(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}"


def _quality(x, kind):
    return f"{x:.2f}" if kind == "bbvi" else f"{x:.4f}"


def _steady(r):
    ms = 1e3 * r["steady_s_per_step"]
    return f"{ms:.3g}"


def table(model: dict) -> str:
    kind = model["kind"]
    lines = [
        f"**{model['model']}**: {model['setting']}. Quality: {model['quality']}; target = best in the run "
        f"({_quality(model['best'], kind)}) − {model['tolerance']:g} = {_quality(model['target'], kind)}.",
        "",
        "| method | set-up s | compile s | steady ms / step | end to end s (steps) | final quality | time to target s (step) "
        "| peer / vijax |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in model["rows"]:
        reached = (
            f"{r['time_to_target_s']:.2f} ({r['steps_to_target']})"
            if r["time_to_target_s"] is not None
            else "not reached"
        )
        ratio = r.get("ratio_to_vijax")
        ratio_s = "" if r["library"] == "vijax" else ("—" if ratio is None else f"{ratio:.2f}×")
        lines.append(
            f"| {r['method']} | {_s(r['setup_s'])} | {_s(r['compile_s'])} | {_steady(r)} | "
            f"{r['end_to_end_s']:.2f} ({r['steps']}) | {_quality(r['final_quality'], kind)} | {reached} | {ratio_s} |"
        )
    for r in model["rows"]:
        for peer, t in r.get("time_to_peer_final_s", {}).items():
            lines.append(
                f"- {r['method']} reaches {peer}'s final quality "
                + ("not at all" if t is None else f"at {t:.2f} s")
                + f" ({peer}: {next(p['end_to_end_s'] for p in model['rows'] if p['method'] == peer):.2f} s end to end)."
            )
    lines += [why_not_first(model, p) for p in model["rows"] if (p.get("ratio_to_vijax") or 1.0) < 1.0]
    if model.get("starts"):
        lines += starts_lines(model)
    lines += [f"- {note}" for note in model["notes"]]
    return "\n".join(lines)


def _outcome(v: dict, p: dict) -> str:
    """One start's outcome of a peer ``p`` against vijax's row ``v``."""
    if v["time_to_target_s"] is None:
        return "vijax not reached" if p["time_to_target_s"] is not None else "neither reached"
    return "peer not reached" if p["ratio_to_vijax"] is None else f"{p['ratio_to_vijax']:.2f}×"


def vijax_first(start: dict) -> bool:
    """Whether the start's first vijax row reaches its target before every peer (or alone)."""
    v = start["rows"][0]
    peers = [r for r in start["rows"] if r["library"] != "vijax"]
    return v["time_to_target_s"] is not None and all((p["ratio_to_vijax"] or np.inf) >= 1.0 for p in peers)


def starts_lines(model: dict) -> list:
    """The summary of a model run from several starts (``--lda-starts``): how often vijax is
    first, and per peer its time over vijax's and the final quality vijax minus the peer's."""
    starts = model["starts"]
    v_name = starts[0]["rows"][0]["method"]
    first = sum(vijax_first(st) for st in starts)
    lines = [
        f"- **Over {len(starts)} starts** (start s: the topics every method starts from drawn as scikit-learn's "
        f"`random_state=s` draws them; the table above is start 0; each start's target is its best less "
        f"{model['tolerance']:g}): {v_name} reaches the target first in {first} of {len(starts)}."
    ]
    peers = [r["method"] for r in starts[0]["rows"] if r["library"] != "vijax"]
    for peer in peers:
        outcomes, diffs = [], []
        for st in starts:
            v = st["rows"][0]
            p = next(r for r in st["rows"] if r["method"] == peer)
            outcomes.append(_outcome(v, p))
            diffs.append(v["final_quality"] - p["final_quality"])
        lines.append(
            f"- {peer}, per start: peer / vijax {', '.join(outcomes)}; final quality, vijax − peer: "
            f"{', '.join(f'{d:+.3f}' for d in diffs)} (mean {np.mean(diffs):+.3f})."
        )
    return lines


def why_not_first(model: dict, peer: dict) -> str:
    """The line that says why a peer reached the target before vijax: what vijax's time to the
    target is made of (set-up and compilation against its updates) beside the peer's."""
    v = next(r for r in model["rows"] if r["library"] == "vijax")
    fixed = (v["setup_s"] or 0.0) + (v["compile_s"] or 0.0)
    updates = v["time_to_target_s"] - fixed
    return (
        f"- {peer['method']} reaches the target first ({peer['ratio_to_vijax']:.2f}×): {v['method']}'s set-up and "
        f"compilation take {fixed:.2f} s of its {v['time_to_target_s']:.2f} s; its updates to the target take "
        f"{updates:.2f} s against {peer['method']}'s {peer['time_to_target_s']:.2f} s."
    )


def markdown(result: dict) -> str:
    m = result["machine"]
    load = ", ".join(f"{a:.2f}" for a in m["loadavg_1_5_15_min_at_start"])
    load_end = ", ".join(f"{a:.2f}" for a in m["loadavg_1_5_15_min_at_end"])
    imports = ", ".join(f"{k} {v:.2f} s" for k, v in result["import_s"].items())
    parts = [
        "### Time to quality against the peers",
        "",
        f"`python benchmarks/time_to_quality.py{' ' + ' '.join(result['argv']) if result['argv'] else ''}` "
        f"(one run, {result['total_s']:.0f} s). The wall time from each method's first call (set-up, "
        "compilation and every update; the evaluations and the imports left out) until its quality is within "
        "the stated tolerance of the best any method reaches in the run; *peer / vijax* is the peer's time to "
        "the target over vijax's (> 1: vijax gets there first). Machine: "
        f"{m['processor']}, {m['cpus']} CPU cores, JAX {m['jax']} on {m['device']}; load average (1, 5, 15 min) "
        f"{load} at the start, {load_end} at the end. Imports in this process, each after those before it: {imports}. "
        f"Versions: {', '.join(f'{k} {v}' for k, v in m['versions'].items())}.",
    ]
    for model in result["models"]:
        parts += ["", table(model)]
    if result.get("plot"):
        parts += ["", f"Curves: `benchmarks/results/{os.path.basename(result['plot'])}`."]
    return "\n".join(parts) + "\n"


def plot(result: dict, path: str) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    models = result["models"]
    cols = min(3, len(models))
    rows_ = -(-len(models) // cols)
    fig, axes = plt.subplots(rows_, cols, figsize=(4.6 * cols, 3.8 * rows_), squeeze=False)
    for ax in axes.flat[len(models) :]:
        ax.set_visible(False)
    for ax, model in zip(axes.flat, models):
        for r in model["rows"]:
            c = r["curve"]
            ax.plot([p["time_s"] for p in c], [p["quality"] for p in c], marker=".", label=r["method"])
        ax.axhline(model["target"], color="grey", ls="--", lw=0.8, label="target")
        tol, lowest_final = model["tolerance"], min(r["final_quality"] for r in model["rows"])
        ax.set_ylim(min(model["target"] - 20 * tol, lowest_final - 5 * tol), model["best"] + 2 * tol)
        ax.set_xscale("log")
        ax.set_xlim(left=0.05)
        ax.set_xlabel("wall time from the first call, s (evaluation excluded)")
        ax.set_title(model["model"], fontsize=9)
        ax.set_ylabel(model["quality"], fontsize=8)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------- main
SIZES = {
    "lda_docs": 4096,
    "lda_test": 300,
    "lda_k": 50,
    "lda_vocab": 5000,
    "lda_batch": 256,
    "lda_passes": 2,
    "lda_evals": 9,
    "lda_starts": 5,
    "wiki_docs": 2048,
    "gmm_n": 20_000,
    "gmm_test": 5_000,
    "gmm_k": 20,
    "gmm_d": 16,
    "gmm_iters": 50,
    "gmm_sklearn_fits": 10,
    "hmm_sequences": 500,
    "hmm_test": 100,
    "hmm_length": 100,
    "hmm_k": 5,
    "hmm_d": 3,
    "hmm_iters": 40,
    "bbvi_n": 5_000,
    "bbvi_d": 50,
    "bbvi_steps": 2_000,
    "bbvi_chunk": 50,
}
QUICK = dict(
    SIZES,
    lda_docs=512,
    lda_test=100,
    lda_k=10,
    lda_vocab=500,
    lda_batch=128,
    lda_passes=1,
    lda_evals=3,
    lda_starts=2,
    wiki_docs=256,
    gmm_n=2_000,
    gmm_test=500,
    gmm_k=5,
    gmm_d=4,
    gmm_iters=10,
    gmm_sklearn_fits=3,
    hmm_sequences=50,
    hmm_test=20,
    hmm_length=50,
    hmm_k=3,
    hmm_iters=5,
    bbvi_n=500,
    bbvi_d=5,
    bbvi_steps=200,
    bbvi_chunk=50,
)
BENCHES = {"lda": bench_lda, "gmm": bench_gmm, "hmm": bench_hmm, "bbvi": bench_bbvi}


def _machine(device: str, load_start) -> dict:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    versions = {"jax": jax.__version__}
    for name in ("sklearn", "gensim", "hmmlearn", "dynamax", "numpyro"):
        if name in sys.modules:
            versions[name] = getattr(sys.modules[name], "__version__", "?")
    return {
        "platform": platform.platform(),
        "processor": cpu or "unknown CPU",
        "cpus": os.cpu_count(),
        "jax": jax.__version__,
        "device": device,
        "versions": versions,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "compilation_cache": jax.config.jax_compilation_cache_dir or "off",
        "loadavg_1_5_15_min_at_start": load_start,
        "loadavg_1_5_15_min_at_end": os.getloadavg(),
    }


def agreement(models: list) -> list:
    checks = []
    for model in models:
        rows = model["rows"]
        v = rows[0]
        for p in (r for r in rows if r["library"] != "vijax"):
            checks.append(
                compare(
                    f"final {model['quality']} ({model['model']})",
                    v["method"],
                    v["final_quality"],
                    p["method"],
                    p["final_quality"],
                    p.get("agree_tol", AGREE[model["kind"]]),
                    at_least=True,
                )
            )
    return checks


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes, a smoke run of about 20 s")
    add_device_argument(p)
    p.add_argument("--models", nargs="+", choices=list(BENCHES), default=list(BENCHES))
    p.add_argument("--no-wiki", action="store_true", help="leave out the wiki_bnpy LDA row")
    p.add_argument(
        "--lda-starts", type=int, default=None, help="starts of the synthetic LDA comparison (default 5; --quick 2)"
    )
    p.add_argument(
        "--render", action="store_true", help="only write the markdown table (and the plot) again from --out"
    )
    p.add_argument("--xla-defaults", action="store_true", help="XLA's own CPU settings, not vijax run's fast ones")
    p.add_argument("--out", default=None, help="default: results/time_to_quality.json (_xla_defaults.json)")
    p.add_argument("--md", default=None, help="default: --out with .md")
    p.add_argument("--png", default=None, help="default: --out with .png")
    args = p.parse_args(argv)
    if args.out is None:
        args.out = os.path.join(
            RESULTS, "time_to_quality_xla_defaults.json" if args.xla_defaults else "time_to_quality.json"
        )
    md = args.md or os.path.splitext(args.out)[0] + ".md"
    if args.render:
        with open(args.out) as fh:
            result = json.load(fh)
        if result.get("plot"):
            plot(result, args.png or os.path.splitext(args.out)[0] + ".png")
        with open(md, "w") as fh:
            fh.write(markdown(result))
        print(f"wrote {md}" + (" and the plot" if result.get("plot") else ""))
        return
    device = use_device(args.device, fast_cpu=not args.xla_defaults)
    args.sizes = dict(QUICK if args.quick else SIZES)
    if args.lda_starts is not None:
        if args.lda_starts < 1:
            p.error(f"--lda-starts must be >= 1, got {args.lda_starts}")
        args.sizes["lda_starts"] = args.lda_starts
    load_start = os.getloadavg()
    t_all = time.perf_counter()
    models = []
    for name in args.models:
        print(f"{name} ...", flush=True)
        got = BENCHES[name](args)
        models += got if isinstance(got, list) else [got]
    models = [summarize(m) for m in models]
    result = {
        "machine": _machine(device, load_start),
        "argv": list(argv if argv is not None else sys.argv[1:]),
        "sizes": args.sizes,
        "tolerance": TOLERANCE,
        "import_s": IMPORT_S,
        "total_s": time.perf_counter() - t_all,
        "models": models,
    }
    checks = agreement(models)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    result["plot"] = plot(result, args.png or os.path.splitext(args.out)[0] + ".png")
    with open(args.out, "w") as fh:
        json.dump({**result, **verdict(checks)}, fh, indent=1)
    text = markdown(result)
    with open(md, "w") as fh:
        fh.write(text)
    print("\n" + text)
    print(f"wrote {args.out}, {md}" + (f", {result['plot']}" if result["plot"] else " (no matplotlib: no plot)"))
    exit_on_disagreement(checks)


if __name__ == "__main__":
    main()
