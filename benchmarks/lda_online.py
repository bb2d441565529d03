"""Online LDA: vijax SVI (each E-step) against scikit-learn's LatentDirichletAllocation
(``learning_method="online"``) and gensim's LdaModel, on the same corpora in one run.

Every method sees the same training documents in the same minibatches (same K, alpha, eta,
batch size, kappa = 0.7, tau = 64, at most 100 E-step iterations with tolerance 1e-3). vijax's
mean-field rows use LDA's default E-step (safeguarded SQUAREM, the 100 counting every update);
``vijax-meanfield-plain`` is the plain iteration (``accelerate=False``), the peers' algorithm. Each one's topic
parameters lambda (sklearn ``components_``, gensim ``state.get_lambda()``, vijax's Dirichlet) are
scored by one and the same held-out measure: per-word log predictive by document completion
(``vijax.metrics.corpus_document_completion``), at checkpoints outside the timed region.
By default each method runs its updates back to back (``--schedule blocked``), the methods one
after another in an order rotated with the seed: this is how each runs in practice, and on an
idle machine the fair schedule. Interleaving the methods (``--schedule interleaved``: update t of
each before update t + 1 of any) shares a changing background load alike on a busy machine, but
penalizes whatever needs both cores right after another method ran: scikit-learn's OpenBLAS
threads keep spinning after its calls, and a paused process starts with cold caches and sleeping
threads (vijax's two-device step: 9.4 ms back to back, 16.8 ms interleaved with scikit-learn,
13.5 ms with a 0.2 s pause or with scikit-learn's BLAS limited to one thread instead).
Reported: documents/s (training only), held-out score after the same number of documents, and
held-out score at the same wall time (the last checkpoint at or before the fastest method's total
time). vijax compiles each padded minibatch shape once before timing, and its jitted step returns
the new state alone (no per-step ELBO estimate; the peers compute none either).

Every method reports, in one run: ``compile_s`` (vijax: the first calls of each padded shape,
whose updates are discarded; the peers compile nothing), steady-state documents/s (updates only)
and ``end_to_end_s``, the wall time from the first call to the final topics: set-up (the initial
state; the peers' estimator) + compilation + every update, the held-out scoring left out. The
corpus is in memory in each library's format before the clock starts. The headline ratio is the
end-to-end one (peer's time over vijax's), printed with the steady-state one beside it, and with
the end-to-end time of the process's first fit: the first method built is vijax's, and its seed 0
pays the process's one-time costs (JAX's first tracing of the library's code; the recorded runs also
compiled the random start, which LDA now draws on the host), which the medians over seeds, from in-process caches, leave out; a user's single run pays them.
JAX's persistent compilation cache is off unless ``--compile-cache DIR`` is given.

Agreement: in each setting, vijax's mean-field SVI must end with a held-out score per word (mean
over seeds) no more than ``HELDOUT_TOL`` = 0.05 nats below each peer's, after the same documents
(one-sided: the claim is "an equal or better held-out score"; gensim ends 0.05-0.6 nats below
the others). The recorded runs put vijax at most 0.023 nats below scikit-learn (wiki_bnpy,
S = 1000), within the spread over seeds (sd up to 0.07). The checks go into the JSON (``agree``,
``agreement``); after the tables and the JSON, the script exits with status 1 and names each check
that failed.

    python benchmarks/lda_online.py                       # synthetic + wiki_bnpy (if present), S = 256 and 1000
    python benchmarks/lda_online.py --stream-docs 1000000 # also: SVI streaming a 10^6-doc corpus from disk
    python benchmarks/lda_online.py --devices 1 --synthetic-docs 2048 --batch-sizes 256 --locals meanfield \
        --peers sklearn gensim --seeds 3 --no-wiki --out benchmarks/results/lda_online_2k.json   # the README's headline

Writes ``benchmarks/results/lda_online.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings

import jax
import numpy as np
import scipy.sparse as sp

from vijax.data import Corpus, Minibatcher, bucket_length, read_ldac, sample_lda_corpus, shared_data_path
from vijax.expfam import Dirichlet
from vijax.inference import data_parallel, jit_step, schedules, svi
from vijax.metrics import corpus_document_completion
from vijax.models import LDA
from vijax.run import enable_compile_cache

from _device import add_device_argument, use_device  # this folder's --device switch
from _agree import compare, exit_on_disagreement, verdict  # this folder's agreement rule

KAPPA, TAU, MAX_ITERS, TOL = 0.7, 64.0, 100, 1e-3
HELDOUT_TOL = 0.05  # nats per word that vijax's held-out score may fall below a peer's
SLOW = ("vijax-cvb0", "vijax-gibbs")  # run for the first --slow-seeds seeds only


def _heldout(model, lam, obs, held):
    r = corpus_document_completion(model, Dirichlet.from_concentration(np.asarray(lam, np.float32)), obs, held, 200)
    return r.log_prob / r.num_tokens


def _batches(train: Corpus, s: int, seed: int, num_batches: int):
    mb = Minibatcher(train, s, seed, drop_remainder=True)
    return [mb.step_indices(t) for t in range(num_batches)]


def run_vijax(train, obs, held, k, alpha, eta, s, batches, local, parallel=True, seed=0, accelerate=True):
    """A runner for vijax SVI. The step is jitted returning the new state alone, so XLA leaves out
    the per-step ELBO estimate of ``SVIInfo`` (neither peer computes one per minibatch). With
    ``parallel``, the local step is ``data_parallel`` over all (CPU) devices."""
    model = LDA(k, train.vocab_size, alpha=alpha, eta=eta, max_iters=MAX_ITERS, tol=TOL, accelerate=accelerate)
    alg = svi(
        data_parallel(model) if parallel else model,
        num_data=train.num_docs,
        local=local,
        schedule=schedules.robbins_monro(1.0, tau=TAU, kappa=KAPPA),
    )
    return vijax_runner(alg, model, train, obs, held, batches, seed, one_length=local != "gibbs")


def vijax_runner(alg, model, train, obs, held, batches, seed=0, one_length=True):
    """A ``_Runner`` for any vijax LDA algorithm: the step is jitted returning the new state alone,
    compiled by ``vijax.inference.jit_step`` (its batch checks without host callbacks, so that JAX's
    persistent cache can store it), and every minibatch shape is compiled up front (timed apart, ``compile_s``: the first calls of
    each shape, whose updates are discarded; ``programs``: how many shapes). With ``one_length``
    every minibatch is padded to the corpus's longest document's bucket, as ``vijax run``'s LDA
    experiments do (``Minibatcher(length="corpus")``): one shape, one compilation, and the
    tiled E-steps' cost follows the documents' own lengths, not the padding. Otherwise (Gibbs, whose
    cost follows the padded length) each minibatch has its own bucketed length.
    ``setup_s`` is the initial state's."""
    # jit_step: the value checks without host callbacks, so that the persistent cache (--compile-cache) can store it
    step = jit_step(lambda key, st, batch, t: alg.step(jax.random.fold_in(key, t), st, batch)[0])
    length = bucket_length(int(train.doc_unique_words.max())) if one_length else None

    def batch_of(idx):
        return train.batch(idx, length=length)

    t0 = time.perf_counter()
    state = jax.block_until_ready(alg.init(jax.random.PRNGKey(2 * seed)))
    setup_s = time.perf_counter() - t0
    key = jax.random.PRNGKey(2 * seed + 1)
    # compile every padded shape up front, timed separately
    t0 = time.perf_counter()
    first_of_length = {}
    for idx in batches:
        first_of_length.setdefault(length or bucket_length(int(train.doc_unique_words[idx].max())), idx)
    for idx in first_of_length.values():
        # twice: a data_parallel step returns its state replicated over the devices, a new input sharding
        jax.block_until_ready(step(key, step(key, state, batch_of(idx), 0), batch_of(idx), 0))
    runner = _Runner(
        state,
        lambda st, idx, t: step(key, st, batch_of(idx), t),
        lambda st: _heldout(model, st.q_global.concentration, obs, held),
        jax.block_until_ready,
        compile_s=time.perf_counter() - t0,
        setup_s=setup_s,
    )
    runner.programs = len(first_of_length)
    return runner


def run_sklearn(train, obs, held, k, alpha, eta, s, batches, model, n_jobs=None, seed=0):
    from sklearn.decomposition import LatentDirichletAllocation

    x = sp.csr_matrix(
        (np.asarray(train.counts), np.asarray(train.word_ids), np.asarray(train.doc_ptr)),
        shape=(train.num_docs, train.vocab_size),
    )
    t0 = time.perf_counter()
    lda = LatentDirichletAllocation(
        n_components=k,
        doc_topic_prior=alpha,
        topic_word_prior=eta,
        learning_method="online",
        learning_decay=KAPPA,
        learning_offset=TAU,
        batch_size=s,
        total_samples=train.num_docs,
        max_doc_update_iter=MAX_ITERS,
        mean_change_tol=TOL,
        random_state=seed,
        n_jobs=n_jobs,
    )

    def one(st, idx, t):
        st.partial_fit(x[idx])
        return st

    return _Runner(lda, one, lambda st: _heldout(model, st.components_, obs, held), setup_s=time.perf_counter() - t0)


def run_gensim(train, obs, held, k, alpha, eta, s, batches, model, seed=0):
    from gensim.models import LdaModel

    docs = [list(zip(*train.document(d))) for d in range(train.num_docs)]
    docs = [[(int(w), float(c)) for w, c in doc] for doc in docs]
    t0 = time.perf_counter()
    lda = LdaModel(
        num_topics=k,
        id2word={i: str(i) for i in range(train.vocab_size)},
        chunksize=s,
        alpha=alpha,
        eta=eta,
        decay=KAPPA,
        offset=TAU,
        iterations=MAX_ITERS,
        gamma_threshold=TOL,
        eval_every=None,
        random_state=seed,
        dtype=np.float64,
    )

    def one(st, idx, t):
        st.update(
            [docs[i] for i in idx],
            chunksize=s,
            decay=KAPPA,
            offset=TAU,
            passes=1,
            update_every=1,
            eval_every=None,
            iterations=MAX_ITERS,
            gamma_threshold=TOL,
        )
        return st

    return _Runner(
        lda, one, lambda st: _heldout(model, st.state.get_lambda(), obs, held), setup_s=time.perf_counter() - t0
    )


class _Runner:
    """One method's state, its update ``step(state, doc_indices, t)``, its held-out ``score(state)``
    and ``block(state)`` (waits for asynchronous work)."""

    def __init__(self, state, step, score, block=lambda st: None, compile_s=None, setup_s=0.0):
        self.state, self.step, self.score, self.block, self.compile_s = state, step, score, block, compile_s
        self.setup_s = setup_s
        self.programs = 0  # compiled shapes (vijax)
        self.elapsed, self.curve = 0.0, []


def _run_schedule(runners: dict, batches: dict, checkpoints: dict, interleaved: bool) -> dict:
    """Runs every method's updates, timing only the updates (each waited for: JAX dispatches
    asynchronously, and no work may spill into another method's timing) and scoring at each
    method's checkpoint batch counts.

    ``interleaved=False`` (blocked): each method's updates back to back, the methods in the order
    of ``runners``, as each would run in practice: the fair schedule on an idle machine.
    ``interleaved=True``: update t of every method before update t + 1 of any, so that all of
    them see the same background load over time (see the module docstring for its bias)."""
    if interleaved:
        order = [
            (name, t)
            for t in range(max(len(b) for b in batches.values()))
            for name in runners
            if t < len(batches[name])
        ]
    else:
        order = [(name, t) for name in runners for t in range(len(batches[name]))]
    for name, t in order:
        r = runners[name]
        t0 = time.perf_counter()
        r.state = r.step(r.state, batches[name][t], t)
        r.block(r.state)
        r.elapsed += time.perf_counter() - t0
        if t + 1 in checkpoints[name]:
            r.curve.append({"batches": t + 1, "time_s": r.elapsed, "heldout_per_word": float(r.score(r.state))})
    return {
        name: {
            "time_s": r.elapsed,
            "curve": r.curve,
            "setup_s": r.setup_s,
            "compile_s": r.compile_s or 0.0,
            "programs": r.programs,
            "end_to_end_s": r.setup_s + (r.compile_s or 0.0) + r.elapsed,
        }
        for name, r in runners.items()
    }


def _summary(corpus: str, s: int, method: str, runs: list) -> dict:
    """One table row from a method's runs over seeds: docs/s of the median seed (total documents
    over training time), the held-out scores' mean and sd over seeds (each seed its own start), the
    other fields and the curve from seed 0, every seed's figures under ``seeds``."""
    rates = [r["docs"] / r["time_s"] for r in runs]
    ends = [r["heldout_end"] for r in runs]
    med = lambda key: float(np.median([r[key] for r in runs]))
    row = dict(
        runs[0],
        corpus=corpus,
        batch_size=s,
        method=method,
        docs_per_s=float(np.median(rates)),
        compile_s=med("compile_s"),
        setup_s=med("setup_s"),
        end_to_end_s=med("end_to_end_s"),
        heldout_end=float(np.mean(ends)),
        heldout_end_sd=float(np.std(ends, ddof=1)) if len(ends) > 1 else 0.0,
        seeds=[
            {
                "docs_per_s": rate,
                "heldout_end": end,
                "time_s": r["time_s"],
                "compile_s": r["compile_s"],
                "setup_s": r["setup_s"],
                "end_to_end_s": r["end_to_end_s"],
                "heldout_at_equal_time": r["heldout_at_equal_time"],
            }
            for rate, end, r in zip(rates, ends, runs)
        ],
    )
    row["docs_per_s_end_to_end"] = row["docs"] / row["end_to_end_s"]
    return row


def headline(rows: list, vijax: str = "vijax-meanfield") -> list:
    """For each (corpus, S) and each peer: the peer's end-to-end time over vijax's (first call to the
    final topics, compilation included; > 1: vijax is faster) and the steady-state docs/s ratio
    (vijax over the peer), for the same documents."""
    out = []
    for r in rows:
        if r["method"].startswith("vijax"):
            continue
        v = next(
            (
                x
                for x in rows
                if x["method"] == vijax and x["corpus"] == r["corpus"] and x["batch_size"] == r["batch_size"]
            ),
            None,
        )
        if v is None or v["docs"] != r["docs"]:
            continue
        out.append(
            {
                "corpus": r["corpus"],
                "batch_size": r["batch_size"],
                "docs": r["docs"],
                "peer": r["method"],
                "vijax": vijax,
                "end_to_end_ratio": r["end_to_end_s"] / v["end_to_end_s"],
                "steady_state_ratio": v["docs_per_s"] / r["docs_per_s"],
                "vijax_end_to_end_s": v["end_to_end_s"],
                "peer_end_to_end_s": r["end_to_end_s"],
                # seed 0 of the first method built: the process's one-time costs included
                "vijax_first_fit_s": v["seeds"][0]["end_to_end_s"],
                "end_to_end_ratio_first_fit": r["end_to_end_s"] / v["seeds"][0]["end_to_end_s"],
            }
        )
    return out


def agreement(rows: list, vijax: str = "vijax-meanfield") -> list:
    """For each (corpus, S) and each peer: vijax's held-out score per word at the end (mean over
    seeds) against the peer's, after the same documents; vijax may fall at most ``HELDOUT_TOL``
    below."""
    setting = lambda x: (x["corpus"], x["batch_size"], x["docs"])
    checks = []
    for r in rows:
        if r["method"].startswith("vijax"):
            continue
        for v in rows:
            if v["method"] == vijax and setting(v) == setting(r):
                checks.append(
                    compare(
                        f"held-out log predictive per word ({r['corpus']}, S = {r['batch_size']}, "
                        f"{r['docs']} documents, mean over seeds)",
                        vijax,
                        v["heldout_end"],
                        r["method"],
                        r["heldout_end"],
                        HELDOUT_TOL,
                        at_least=True,
                    )
                )
    return checks


def _corpora(args):
    out = []
    syn = sample_lda_corpus(0, args.synthetic_docs + 1000, 50, 5000, alpha=0.1, eta=0.02, doc_length_mean=100)
    train, test = syn.corpus.split_documents(0, 1000 / (args.synthetic_docs + 1000))
    out.append(("synthetic", train, test))
    path = shared_data_path("wiki_bnpy", "train.ldac.gz")
    if path is not None and not args.no_wiki:
        wiki = read_ldac(path, shared_data_path("wiki_bnpy", "vocab.txt"))
        train, test = wiki.split_documents(0, 0.1)
        out.append(("wiki_bnpy", train, test.subset(np.arange(min(500, test.num_docs)))))
    return out


def _child(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def stream_test(num_docs: int) -> dict:
    """Writes a synthetic corpus of ``num_docs`` documents to disk in one child process, then runs
    SVI over it memory-mapped in another, so that each peak resident memory is its own."""
    path = os.path.join(tempfile.mkdtemp(), "corpus.npz")
    wrote = _child(f"""
import json, resource, time
from vijax.data import write_lda_corpus_npz
t0 = time.perf_counter()
write_lda_corpus_npz({path!r}, 0, {num_docs}, 50, 5000, alpha=0.1, eta=0.02, doc_length_mean=100, save_doc_topics=False)
print(json.dumps(dict(write_s=time.perf_counter() - t0, write_peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))
""")
    ran = _child(f"""
import json, os, resource, time, jax
from vijax.data import Corpus, Minibatcher
from vijax.inference import data_parallel, schedules, svi
from vijax.models import LDA
from vijax.run import enable_compile_cache
from vijax.run import run
corpus = Corpus.load_npz({path!r}, mmap=True)  # validation reads the file once, in blocks
model = LDA(50, 5000, alpha=0.1, eta=0.02)
alg = svi(model, num_data=corpus.num_docs, schedule=schedules.robbins_monro(1.0, tau=64.0, kappa=0.7))
mb = Minibatcher(corpus, 256, 0)
t0 = time.perf_counter()
res = run(alg, jax.random.PRNGKey(0), host_batches=mb.host_batches, num_steps=200, chunk_size=20, progress=False)
status = dict(line.split(":", 1) for line in open("/proc/self/status") if line.startswith(("RssAnon", "RssFile")))
print(json.dumps(dict(num_docs=corpus.num_docs, file_mb=os.path.getsize({path!r}) / 2**20, run_s=time.perf_counter() - t0,
    steps=200, batch_size=256, peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    anon_rss_mb=int(status["RssAnon"].split()[0]) / 1024, file_rss_mb=int(status["RssFile"].split()[0]) / 1024)))
""")
    os.remove(path)
    return wrote | ran


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--synthetic-docs", type=int, default=20000)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 1000])
    p.add_argument("--k", type=int, default=50)
    p.add_argument("--alpha", type=float, default=0.1)
    p.add_argument("--eta", type=float, default=0.02)
    p.add_argument("--locals", nargs="+", default=["meanfield", "cvb0", "gibbs"])
    p.add_argument("--gibbs-docs", type=int, default=4000, help="documents for the (slow) Gibbs E-step")
    p.add_argument(
        "--peers",
        nargs="+",
        default=["sklearn", "sklearn-njobs2", "gensim"],
        help="sklearn (its default n_jobs=None: one process), sklearn-njobs2 (n_jobs=2), gensim",
    )
    p.add_argument(
        "--devices",
        type=int,
        default=os.cpu_count(),
        help="CPU devices JAX simulates (one per core); vijax's local step runs data_parallel over "
        "them, and with more than one a single-device row (vijax-meanfield-1dev) is added",
    )
    p.add_argument(
        "--schedule",
        choices=["blocked", "interleaved"],
        default="blocked",
        help="blocked: each method's updates back to back (idle machine); interleaved: update t of "
        "every method before update t + 1 of any (a machine shared with other jobs)",
    )
    p.add_argument("--seeds", type=int, default=5, help="runs per setting, each method started from its own seed")
    p.add_argument("--slow-seeds", type=int, default=3, help="runs per setting of the slow E-steps (CVB0, Gibbs)")
    p.add_argument(
        "--passes",
        type=int,
        default=1,
        help="passes over the training documents (each pass a new random order; the issue's scenario: 8)",
    )
    p.add_argument("--no-wiki", action="store_true")
    p.add_argument("--wiki-docs", type=int, default=4000, help="training documents processed on wiki_bnpy")
    p.add_argument(
        "--wiki-locals", nargs="+", default=["meanfield", "cvb0", "gibbs"], help="vijax E-steps on wiki_bnpy"
    )
    p.add_argument(
        "--compile-cache",
        default=None,
        metavar="DIR",
        help="use JAX's persistent compilation cache in DIR (vijax.run.enable_compile_cache): a second "
        "run, or the seeds after the first, load vijax's compiled steps instead of compiling them. "
        "Default: off, every vijax compile_s is a cold compile",
    )
    p.add_argument(
        "--no-fast-cpu-compile",
        action="store_true",
        help="XLA's default CPU compile settings instead of vijax.run.fast_cpu_compile's (as vijax run starts)",
    )
    p.add_argument("--stream-docs", type=int, default=0)
    p.add_argument("--stream-only", action="store_true", help="only the streaming test (keeps the JSON's other rows)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "lda_online.json"))
    add_device_argument(p)
    args = p.parse_args(argv)
    if "gensim" in args.peers and importlib.util.find_spec("gensim") is None:
        print("gensim: not installed, its rows skipped (pip install gensim)")
        args.peers = [peer for peer in args.peers if peer != "gensim"]
    use_device(args.device, fast_cpu=not args.no_fast_cpu_compile)  # before anything runs on the backend
    jax.config.update("jax_num_cpu_devices", args.devices)  # before anything runs on the backend
    enable_compile_cache(args.compile_cache if args.compile_cache is not None else False)
    warnings.simplefilter("ignore")
    load_start = os.getloadavg()
    rows = []
    print(
        f"{'corpus':>10} {'S':>5} {'method':>21} | {'docs':>6} {'programs':>8} {'compile s':>9} {'steady docs/s':>13} "
        f"{'end-to-end s':>12} | held-out/word at end (mean ± sd over seeds) | at equal time (seed 0)"
    )
    for name, train, test in [] if args.stream_only else _corpora(args):
        obs, held = test.split_tokens(1, 0.5)
        model = LDA(args.k, train.vocab_size, alpha=args.alpha, eta=args.eta, max_iters=MAX_ITERS, tol=TOL)
        for s in args.batch_sizes:
            locals_ = args.wiki_locals if name == "wiki_bnpy" else args.locals
            methods = (
                [f"vijax-{l}" for l in locals_]
                + (["vijax-meanfield-1dev"] if args.devices > 1 else [])
                + (["vijax-meanfield-plain"] if "meanfield" in locals_ else [])
                + args.peers
            )
            per_seed = []
            for seed in range(args.seeds):
                runners, batches, checkpoints = {}, {}, {}
                for method in methods:
                    if method in SLOW and seed >= args.slow_seeds:
                        continue
                    docs = args.gibbs_docs if method == "vijax-gibbs" else train.num_docs
                    if name == "wiki_bnpy":
                        docs = min(docs, args.wiki_docs)
                    n_batches = max(1, args.passes * min(docs, train.num_docs) // s)
                    batches[method] = _batches(train, s, 0, n_batches)  # the same sequence for every method and seed
                    checkpoints[method] = set(np.unique(np.linspace(1, n_batches, 6).round().astype(int)).tolist())
                    common = (train, obs, held, args.k, args.alpha, args.eta, s, batches[method])
                    if method == "vijax-meanfield-1dev":
                        runners[method] = run_vijax(*common, "meanfield", parallel=False, seed=seed)
                    elif method == "vijax-meanfield-plain":  # without SQUAREM (LDA(accelerate=False))
                        runners[method] = run_vijax(
                            *common, "meanfield", seed=seed, accelerate=False, parallel=args.devices > 1
                        )
                    elif method.startswith("vijax-"):
                        runners[method] = run_vijax(
                            *common, method.split("-", 1)[1], seed=seed, parallel=args.devices > 1
                        )
                    elif method.startswith("sklearn"):
                        runners[method] = run_sklearn(
                            *common, model, n_jobs=2 if method == "sklearn-njobs2" else None, seed=seed
                        )
                    else:
                        runners[method] = run_gensim(*common, model, seed=seed)
                names = list(runners)  # a different method order for every seed
                names = names[seed % len(names) :] + names[: seed % len(names)]
                results = _run_schedule(
                    {m: runners[m] for m in names}, batches, checkpoints, interleaved=args.schedule == "interleaved"
                )
                t_equal = min(r["time_s"] for m, r in results.items() if m != "vijax-gibbs")
                for m, r in results.items():
                    before = [c for c in r["curve"] if c["time_s"] <= t_equal + 1e-9]
                    r.update(
                        docs=len(batches[m]) * s,
                        heldout_end=r["curve"][-1]["heldout_per_word"],
                        heldout_at_equal_time=before[-1]["heldout_per_word"] if before else None,
                        equal_time_s=t_equal,
                    )
                per_seed.append(results)
            group = [
                _summary(name, s, method, [res[method] for res in per_seed if method in res]) for method in methods
            ]
            for r in group:
                eq = "   n/a" if r["heldout_at_equal_time"] is None else f"{r['heldout_at_equal_time']:8.4f}"
                print(
                    f"{name:>10} {s:>5} {r['method']:>21} | {r['docs']:>6} {r['programs']:>8} {r['compile_s']:9.2f} "
                    f"{r['docs_per_s']:13.0f} {r['end_to_end_s']:12.2f} | "
                    f"{r['heldout_end']:8.4f} ± {r['heldout_end_sd']:.4f}   | {eq} (t = {r['equal_time_s']:.1f} s)",
                    flush=True,
                )
            rows += group
    ratios = headline(rows)
    for h in ratios:
        print(
            f"{h['corpus']}, S = {h['batch_size']}, {h['docs']} documents: {h['vijax']} vs {h['peer']}: end to end "
            f"{h['end_to_end_ratio']:.2f}x ({h['vijax_end_to_end_s']:.2f} s vs {h['peer_end_to_end_s']:.2f} s; "
            f"{'vijax faster' if h['end_to_end_ratio'] > 1 else 'vijax slower'}), steady state "
            f"{h['steady_state_ratio']:.2f}x; the process's first fit {h['vijax_first_fit_s']:.2f} s "
            f"({h['end_to_end_ratio_first_fit']:.2f}x)"
        )
    stream = stream_test(args.stream_docs) if args.stream_docs else None
    if stream:
        print(
            f"streaming: {stream['num_docs']} docs, {stream['file_mb']:.0f} MiB on disk, "
            f"{stream['steps']} SVI steps of {stream['batch_size']} in {stream['run_s']:.1f} s, "
            f"peak RSS {stream['peak_rss_mb']:.0f} MiB, at the end {stream['anon_rss_mb']:.0f} MiB anonymous + "
            f"{stream['file_rss_mb']:.0f} MiB file-backed (writing it: {stream['write_s']:.0f} s, "
            f"peak RSS {stream['write_peak_rss_mb']:.0f} MiB)"
        )
    machine = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "jax_devices": len(jax.devices()),
        "jax": jax.__version__,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "schedule": args.schedule,
        "seeds": args.seeds,
        "slow_seeds": args.slow_seeds,
        "loadavg_1_5_15_min_at_start": load_start,
        "loadavg_1_5_15_min_at_end": os.getloadavg(),
    }
    checks = agreement(rows)  # this run's rows (none with --stream-only)
    agreed = verdict(checks)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    if os.path.exists(args.out):
        with open(args.out) as fh:
            previous = json.load(fh)
        if args.stream_only:
            rows = previous.get("rows", [])
            agreed = verdict(agreement(rows))  # the kept rows' checks
        if stream is None and previous.get("stream"):  # keep the last streaming figures (from an earlier run)
            stream = dict(previous["stream"], from_earlier_run=True)
    with open(args.out, "w") as fh:
        json.dump(
            {"machine": machine, "settings": vars(args), "rows": rows, "headline": ratios, "stream": stream, **agreed},
            fh,
            indent=1,
        )
    print(f"wrote {args.out}")
    exit_on_disagreement(checks)


if __name__ == "__main__":
    main()
