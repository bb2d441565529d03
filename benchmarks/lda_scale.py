"""LDA at the papers' scale, streamed: one pass of SVI over a memory-mapped corpus of up to 3.8 million
documents with Wikipedia-like statistics (the size of the Wikipedia corpus of Hoffman et al. 2013,
Stochastic Variational Inference, §4, and of Hoffman & Blei 2015, §4.1), beside gensim's
``LdaMulticore`` and scikit-learn's online ``LatentDirichletAllocation`` on the same stream; and the
same run over several processes (``jax.distributed``) against one.

    PYTHONPATH=. python benchmarks/lda_scale.py                         # 10^5, 10^6, 3.8 * 10^6 documents
    PYTHONPATH=. python benchmarks/lda_scale.py --docs 1e5 --peer-docs 1e5
    PYTHONPATH=. python benchmarks/lda_scale.py --docs 3.8e6 --peers --append   # one size, added to the JSON
    PYTHONPATH=. python benchmarks/lda_scale.py --processes 2           # weak scaling, 2 processes vs 1

The corpus (``write_lda_corpus_npz``): K = 100 topics drawn from the model over V = 7,702 words
(Hoffman's vocabulary size) with a Zipfian Dirichlet base (eta_v proportional to rank^-0.65, the
slope of wiki_bnpy's word frequencies, mean 0.01), alpha = 0.1, document lengths Poisson-lognormal
with mean 357 tokens and log-sd 0.9 (wiki_bnpy's: median 254, 95th percentile 1,025). It is written
once under ``--data-dir`` and reused: documents are drawn in blocks from the key alone, so a larger
file's first documents are a smaller one's. The first ``--heldout-docs`` documents are the held-out
set (half of each one's tokens observed, the other half scored by document completion,
``vijax.metrics.corpus_document_completion``: per-word log predictive); the training stream is the
next D.

Each size runs in a fresh process: SVI on LDA (S = 512, rho_t = (t + 64)^-0.7, the E-step's
defaults) through ``vijax.run.run`` with host batches from ``Minibatcher(packed=True)`` (the documents' entries,
padded to L on the device a step at a time; ``--padded``: chunks of (chunk, S, L) slots) and checkpoints every
``--checkpoint-every`` steps, for one pass (D // S steps). Reported: documents/s steady (chunks after
the first) and end to end (from the call to ``run``, compilation and checkpoints included); the
process's peak RSS (``ru_maxrss``, which counts the mapped file's pages the pass touched: page cache
the kernel may drop) and peak anonymous RSS (the memory the process holds); the held-out score. The
peers run in their own processes on the first ``--peer-docs`` training documents, in the same
minibatches with the same K, alpha, eta, kappa, tau, iteration cap (100) and tolerance (1e-3):
gensim ``LdaMulticore(workers=cores)`` reading the mapped corpus as a stream, scikit-learn
``partial_fit`` per minibatch on the prefix as one in-memory CSR matrix (``n_jobs=cores``).

``--processes N`` (one machine): N processes of one run (``vijax.inference.initialize_processes``,
gloo collectives on localhost), each pinned to its own core (``taskset``, XLA on one
thread), each reading its ``process_shard`` of the stream with S documents a step (a global batch
of N * S), against one process on one core with S documents a step: the weak-scaling ratio of
documents/s. The N-process topics are compared with one process of N CPU devices running the same
global batches (``data_parallel`` over its devices: the same partial sums).

Writes ``benchmarks/results/lda_scale.json`` (``lda_scale_processes.json`` with ``--processes``);
``--docs-table`` rewrites docs/lda.md's table from them.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from _device import add_device_argument, child_env, machine  # this folder's --device switch, machine
from _docs import replace_span  # this folder's docs tables
from _memory import AnonPeak, peak_rss_mib  # this folder's memory probes

HERE = os.path.dirname(os.path.abspath(__file__))
KAPPA, TAU, ALPHA, ETA_MEAN, ZIPF = 0.7, 64.0, 0.1, 0.01, 0.65
ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def _eta(vocab: int) -> np.ndarray:
    w = np.arange(1, vocab + 1, dtype=np.float64) ** -ZIPF
    return ETA_MEAN * vocab * w / w.sum()


def _name(args) -> str:
    return f"wikilike_K{args.topics}_V{args.vocab}_len{args.doc_len:g}_sd{args.doc_log_sd:g}_seed{args.seed}"


def _cached(args, needed: int):
    """The smallest cached corpus file of these settings with at least ``needed`` documents, or None."""
    best = None
    for path in glob.glob(os.path.join(args.data_dir, _name(args) + "_*.npz")):
        if path.endswith(".part.npz"):  # an interrupted write
            continue
        n = int(path.rsplit("_", 1)[1][:-4])
        if n >= needed and (best is None or n < best[0]):
            best = (n, path)
    return None if best is None else best[1]


def _write(args, needed: int) -> dict:
    """Writes the corpus of ``needed`` documents (child process: its own peak RSS), renamed into place
    when complete, so that an interrupted write is never taken for a cached corpus."""
    from vijax.data import write_lda_corpus_npz

    path = os.path.join(args.data_dir, f"{_name(args)}_{needed}.npz")
    part = path[:-4] + ".part.npz"
    t = time.perf_counter()
    write_lda_corpus_npz(
        part,
        args.seed,
        needed,
        args.topics,
        args.vocab,
        alpha=ALPHA,
        eta=_eta(args.vocab),
        doc_length_mean=args.doc_len,
        doc_length_log_sd=args.doc_log_sd,
        save_doc_topics=False,
    )
    os.replace(part, path)
    return {
        "write_s": time.perf_counter() - t,
        "write_peak_rss_mib": peak_rss_mib(),
        "file_gib": os.path.getsize(path) / 2**30,
    }


def _open(args, path, docs):
    """(train, observed, held) for D = ``docs``: the mapped training stream and the held-out halves."""
    from vijax.data import Corpus

    full = Corpus.load_npz(path, mmap=True, validate=False)
    h = args.heldout_docs
    obs, held = full.subset(np.arange(h)).split_tokens(0, 0.5)  # in memory
    return full.subset(range(h, h + docs)), obs, held  # views: the stream stays mapped


def _heldout(args, lam, obs, held) -> float:
    from vijax.expfam import Dirichlet
    from vijax.metrics import corpus_document_completion
    from vijax.models import LDA

    model = LDA(args.topics, args.vocab, alpha=ALPHA, eta=ETA_MEAN)
    q = Dirichlet.from_concentration(np.asarray(lam, np.float32))
    r = corpus_document_completion(model, q, obs, held, 200)
    return r.log_prob / r.num_tokens


def _steady(evals, chunk: int, docs_per_step: int) -> tuple[float, float]:
    """(documents/s over the chunks after the first, the first chunk's seconds: compilation included) from the
    runner's per-chunk evaluations (the runner syncs at each chunk's end, so their wall times time the chunks)."""
    done = [e for e in evals if e["step"] >= chunk]
    if len(done) < 2:
        return float("nan"), done[0]["wall_time"]
    a, b = done[0], done[-1]
    return (b["step"] - a["step"]) * docs_per_step / (b["wall_time"] - a["wall_time"]), a["wall_time"]


def _fit_vijax(args, path, docs) -> dict:
    anon = AnonPeak()
    import jax

    from vijax.data import Minibatcher, bucket_length
    from vijax.inference import schedules, svi
    from vijax.models import LDA
    from vijax.run import run

    train, obs, held = _open(args, path, docs)
    length = bucket_length(int(train.doc_unique_words.max()))
    mb = Minibatcher(train, args.batch, seed=1, drop_remainder=True, packed=not args.padded)
    steps = docs // args.batch
    chunk = min(args.chunk, steps)
    alg = svi(
        LDA(args.topics, args.vocab, alpha=ALPHA, eta=ETA_MEAN),
        num_data=docs,
        schedule=schedules.robbins_monro(1.0, tau=TAU, kappa=KAPPA),
    )
    # a fresh folder: one pass from the start (the runner resumes from a folder's checkpoints)
    ckpt = tempfile.mkdtemp(prefix=f"ckpt_{docs}_", dir=args.data_dir)
    t0 = time.perf_counter()
    r = run(
        alg,
        jax.random.PRNGKey(args.seed),
        host_batches=lambda a, n: mb.host_batches(a, n, length),  # one L for the run, as the padded layout
        num_steps=steps,
        chunk_size=chunk,
        checkpoint_dir=ckpt,
        checkpoint_every=args.checkpoint_every,
        eval_fn=lambda state: {},
        eval_every=chunk,
        progress=False,
    )
    jax.block_until_ready(r.state)
    e2e = time.perf_counter() - t0
    shutil.rmtree(ckpt, ignore_errors=True)
    steady, first = _steady(r.evals, chunk, args.batch)
    res = {
        "docs_trained": steps * args.batch,
        "steps": steps,
        "padded_length": length,
        "host_chunks": "padded" if args.padded else "packed",
        "docs_per_s": steady,
        "docs_per_s_e2e": steps * args.batch / e2e,
        "e2e_s": e2e,
        "first_chunk_s": first,
        "peak_rss_mib": peak_rss_mib(),
        "peak_anon_mib": anon.stop(),
    }
    res["heldout"] = _heldout(args, r.state.q_global.concentration, obs, held)
    return res


def _fit_peer(args, path, docs, peer) -> dict:
    anon = AnonPeak()
    import scipy.sparse as sp

    from vijax.data import Minibatcher

    train, obs, held = _open(args, path, docs)
    mb = Minibatcher(train, args.batch, seed=1, drop_remainder=True)
    steps = docs // args.batch
    cores = len(os.sched_getaffinity(0))
    t0 = time.perf_counter()
    if peer == "sklearn":
        from sklearn.decomposition import LatentDirichletAllocation

        x = sp.csr_matrix(
            (np.asarray(train.counts), np.asarray(train.word_ids), np.asarray(train.doc_ptr)),
            shape=(train.num_docs, train.vocab_size),
        )
        lda = LatentDirichletAllocation(
            n_components=args.topics,
            doc_topic_prior=ALPHA,
            topic_word_prior=ETA_MEAN,
            learning_method="online",
            learning_decay=KAPPA,
            learning_offset=TAU,
            batch_size=args.batch,
            total_samples=docs,
            max_doc_update_iter=100,
            mean_change_tol=1e-3,
            random_state=args.seed,
            n_jobs=cores,
        )
        t0 = time.perf_counter()  # the matrix is the peer's input format, built before the clock
        for t in range(steps):
            lda.partial_fit(x[mb.step_indices(t)])
        lam = lda.components_
    else:
        from gensim.models import LdaMulticore

        class Stream:  # the documents in the minibatches' order, read from the mapped file, re-iterable
            def __len__(self):
                return steps * args.batch

            def __iter__(self):
                for t in range(steps):
                    for d in mb.step_indices(t):
                        w, c = train.document(int(d))
                        yield list(zip(w.tolist(), c.tolist()))

        lda = LdaMulticore(
            corpus=Stream(),
            num_topics=args.topics,
            id2word={i: str(i) for i in range(args.vocab)},
            workers=cores,
            chunksize=args.batch,
            passes=1,
            alpha=np.full(args.topics, ALPHA),
            eta=ETA_MEAN,
            decay=KAPPA,
            offset=TAU,
            iterations=100,
            gamma_threshold=1e-3,
            eval_every=None,
            random_state=args.seed,
            dtype=np.float32,
        )
        lam = lda.state.get_lambda()
    e2e = time.perf_counter() - t0
    return {
        "docs_trained": steps * args.batch,
        "docs_per_s_e2e": steps * args.batch / e2e,
        "e2e_s": e2e,
        "workers": cores,
        "peak_rss_mib": peak_rss_mib(),
        "peak_anon_mib": anon.stop(),
        "heldout": _heldout(args, lam, obs, held),
    }


def _worker(args) -> dict:
    """One process of a run of ``args.num_processes`` (``--phase worker``), or one process reading every
    shard (``--phase concat``: the same global batches as the N-process run)."""
    n, pid = args.num_processes, args.process_id
    if args.phase == "worker" and n > 1:
        from vijax.inference import initialize_processes

        initialize_processes(f"localhost:{args.port}", n, pid)  # first thing, before any JAX computation
    import jax

    if args.phase == "concat":
        jax.config.update("jax_num_cpu_devices", n)  # before JAX starts its backends

    from vijax.data import Minibatcher, bucket_length
    from vijax.inference import data_parallel, global_host_batches, process_shard, schedules, svi
    from vijax.models import LDA
    from vijax.run import run

    docs = args.docs[0]
    train, _, _ = _open(args, args.path, docs)
    length = bucket_length(int(train.doc_unique_words.max()))
    shards = [process_shard(docs, p, n) for p in range(n)]
    mbs = [Minibatcher(train.subset(s), args.batch, seed=1, drop_remainder=True) for s in shards]
    model = LDA(args.topics, args.vocab, alpha=ALPHA, eta=ETA_MEAN)
    if args.phase == "worker":
        mine = mbs[pid]
        local = lambda a, k: mine.host_batches(a, k, length)  # noqa: E731
        model = data_parallel(model) if n > 1 else model
        host = global_host_batches(model, local) if n > 1 else local
    else:  # one process of N CPU devices, the N shards' rows side by side: the N-process run's global batch
        model = data_parallel(model)
        host = lambda a, k: jax.tree.map(  # noqa: E731
            lambda *xs: np.concatenate(xs, axis=1), *[m.host_batches(a, k, length) for m in mbs]
        )
    alg = svi(model, num_data=docs, schedule=schedules.robbins_monro(1.0, tau=TAU, kappa=KAPPA))
    r = run(
        alg,
        jax.random.PRNGKey(args.seed),
        host_batches=host,
        num_steps=args.steps,
        chunk_size=args.chunk,
        eval_fn=lambda state: {},
        eval_every=args.chunk,
        progress=False,
    )
    steady, first = _steady(r.evals, args.chunk, args.batch * n)
    res = {"docs_per_s": steady, "first_chunk_s": first, "devices": len(jax.devices())}
    if args.out_npz:
        np.save(args.out_npz, np.asarray(jax.device_get(r.state.q_global.concentration)))
    return res


def _child(args):
    if args.phase == "write":
        res = _write(args, args.docs[0])
    elif args.phase == "vijax":
        res = _fit_vijax(args, args.path, args.docs[0])
    elif args.phase in ("sklearn", "gensim"):
        res = _fit_peer(args, args.path, args.docs[0], args.phase)
    else:
        res = _worker(args)
    print("RESULT " + json.dumps(res), flush=True)


def _command(args, phase, docs, path="", **extra) -> list:
    cmd = [sys.executable, os.path.abspath(__file__), "--phase", phase, "--docs", str(docs), "--path", path]
    for k in ("topics", "vocab", "doc_len", "doc_log_sd", "seed", "batch", "chunk", "checkpoint_every"):
        cmd += ["--" + k.replace("_", "-"), str(getattr(args, k))]
    cmd += ["--heldout-docs", str(args.heldout_docs), "--data-dir", args.data_dir, "--steps", str(args.steps)]
    cmd += ["--padded"] if args.padded else []
    for k, v in extra.items():
        cmd += ["--" + k.replace("_", "-"), str(v)]
    return cmd


def _result(proc_out: str, what: str) -> dict:
    line = [ln for ln in proc_out.splitlines() if ln.startswith("RESULT ")]
    if not line:
        raise SystemExit(f"{what} failed:\n{proc_out}")
    return json.loads(line[-1][7:])


def _spawn(args, phase, docs, path="", env=None) -> dict:
    out = subprocess.run(
        _command(args, phase, docs, path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(child_env(args.device), **(env or {})),
    )
    return _result(out.stdout, f"{phase} on {docs} documents")


def _corpus(args, docs) -> tuple[str, dict]:
    """The cached corpus holding the held-out set and ``docs`` training documents; else the one of the
    largest size asked for, written now."""
    needed = args.heldout_docs + docs
    path = _cached(args, needed)
    if path:
        return path, {"cached": True}
    needed = args.heldout_docs + max(docs, *args.docs)
    info = _spawn(args, "write", needed)
    return _cached(args, needed), {"cached": False, **info}


def _sizes(args, save):
    rows = []
    for docs in args.docs:
        path, write = _corpus(args, docs)
        row = {"docs": docs, "corpus": os.path.basename(path), "write": write}
        row["vijax"] = _spawn(args, "vijax", docs, path)
        for peer in args.peers:
            if docs <= args.peer_docs:
                row[peer] = _spawn(args, peer, docs, path)
        rows.append(row)
        print(json.dumps(row), flush=True)
        save({"rows": rows})  # after each size: a long run's finished sizes are kept
    print(
        f"{'documents':>10} {'method':>8} {'docs/s':>8} {'docs/s e2e':>10} {'peak RSS MiB':>12} "
        f"{'anon MiB':>9} {'held-out':>9}"
    )
    for r in rows:
        for m in ["vijax", *args.peers]:
            if m in r:
                x = r[m]
                print(
                    f"{r['docs']:>10} {m:>8} {x.get('docs_per_s', float('nan')):>8.0f} {x['docs_per_s_e2e']:>10.0f} "
                    f"{x['peak_rss_mib']:>12.0f} {x['peak_anon_mib']:>9.0f} {x['heldout']:>9.4f}"
                )
    return {"rows": rows}


def _processes(args):
    """Weak scaling: N pinned processes of one run against one pinned process, the same S per process."""
    import socket

    docs = args.docs[0]
    path, _ = _corpus(args, docs)
    cores = sorted(os.sched_getaffinity(0))
    n = args.processes
    if len(cores) < n:
        raise SystemExit(f"--processes {n}: this process may run on {len(cores)} cores only")
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=ONE_THREAD)

    def launch(phase, num, pid, port, out_npz=""):
        cmd = _command(args, phase, docs, path, num_processes=num, process_id=pid, port=port, out_npz=out_npz)
        return subprocess.Popen(
            ["taskset", "-c", str(cores[pid]), *cmd],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )

    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    tmp = tempfile.mkdtemp(dir=args.data_dir)
    one = _result(launch("worker", 1, 0, port).communicate()[0], "one process")
    procs = [launch("worker", n, p, port, os.path.join(tmp, f"q_{p}.npy")) for p in range(n)]
    many = [_result(p.communicate()[0], f"process {i} of {n}") for i, p in enumerate(procs)]
    same = _result(
        launch("concat", n, 0, port, os.path.join(tmp, "q_one.npy")).communicate()[0], "one process, N shards"
    )
    q = [np.load(os.path.join(tmp, f"q_{p}.npy")) for p in range(n)]
    ref = np.load(os.path.join(tmp, "q_one.npy"))
    res = {
        "processes": n,
        "cores": cores[:n],
        "docs_per_s_one_process": one["docs_per_s"],
        "docs_per_s_n_processes": many[0]["docs_per_s"],
        "weak_scaling_ratio": many[0]["docs_per_s"] / one["docs_per_s"],
        "processes_agree_bitwise": all(np.array_equal(q[0], x) for x in q),
        "bitwise_equal_to_one_process_same_batches": bool(np.array_equal(q[0], ref)),
        "max_rel_diff_vs_one_process_same_batches": float(np.max(np.abs(q[0] - ref) / np.abs(ref))),
        "one_process_same_batches_docs_per_s": same["docs_per_s"],
        "one_process_same_batches_devices": same["devices"],
    }
    print(json.dumps(res, indent=1))
    return res


def _fmt(x, spec) -> str:
    return "–" if x is None or x != x else format(x, spec)


def markdown(sizes: dict, procs: list | None = None, padded: dict | None = None) -> str:
    """docs/lda.md's table, from the JSON of a run of this script (and of runs of ``--processes`` and ``--padded``)."""
    st = sizes["settings"]
    lines = [
        "| training documents | method | docs/s (steady) | docs/s (end to end) | peak RSS | peak anonymous RSS "
        "| held-out log p / word |",
        "|---|---|---|---|---|---|---|",
    ]
    names = {"vijax": "vijax SVI", "gensim": "gensim LdaMulticore", "sklearn": "scikit-learn online"}
    rows = [(r, m, names[m]) for r in sizes["rows"] for m in names if m in r]
    rows += [(r, "vijax", "vijax SVI, padded chunks") for r in (padded or {}).get("rows", [])]
    for r, m, name in sorted(rows, key=lambda row: row[0]["docs"]):  # stable: the padded row after its size's
        x = r[m]
        lines.append(
            f"| {x['docs_trained']:,} | {name} | {_fmt(x.get('docs_per_s'), ',.0f')} | "
            f"{_fmt(x['docs_per_s_e2e'], ',.0f')} | {x['peak_rss_mib']:,.0f} MiB | "
            f"{x['peak_anon_mib']:,.0f} MiB | {x['heldout']:.4f} |".replace("| -", "| −")
        )
    mach = sizes["machine"]
    last = sizes["rows"][-1]["vijax"]
    by_docs = {r["docs"]: r for r in sizes["rows"]}
    if 10**5 in by_docs and sizes["rows"][-1]["docs"] > 10**5:
        base, top = by_docs[10**5]["vijax"], sizes["rows"][-1]  # top: the largest size's row
        lines.append("")
        lines.append(
            f"Peak RSS at {top['vijax']['docs_trained']:,} training documents is "
            f"{top['vijax']['peak_rss_mib'] / base['peak_rss_mib']:.2f}× that at {base['docs_trained']:,} "
            f"(anonymous: {top['vijax']['peak_anon_mib'] / base['peak_anon_mib']:.2f}×); padded length "
            f"{top['vijax']['padded_length']:,} against {base['padded_length']:,}."
        )
    peer = next((r for r in sizes["rows"] if "gensim" in r), None)
    if peer is not None:
        v, g = peer["vijax"], peer["gensim"]
        lines.append(
            f"At {v['docs_trained']:,} documents vijax's documents/s are {v['docs_per_s_e2e'] / g['docs_per_s_e2e']:.1f}× "
            f"gensim LdaMulticore's end to end ({g['workers']} workers; compilation included) and "
            f"{last['docs_per_s_e2e'] / g['docs_per_s_e2e']:.1f}× at the largest run's end-to-end rate."
        )
    rest = [d for d in (10**5, 10**6, 3_800_000) if d > sizes["rows"][-1]["docs"]]
    if rest:
        lines.append("")
        lines.append(
            "Not run here: one pass over "
            + " and over ".join(f"{d:,} documents would take {d / last['docs_per_s'] / 3600:.1f} h" for d in rest)
            + " at the largest run's steady rate."
        )
    own = ", ".join(  # rows run on their own (--append), with their own load
        f"{r['vijax']['docs_trained']:,} documents at {r['machine']['loadavg_1_5_15_min_at_start'][0]:.1f}"
        for r in sizes["rows"]
        if "machine" in r
    )
    lines.append("")
    lines.append(
        f"K = {st['topics']}, V = {st['vocab']:,}, S = {st['batch']}, chunks of {st['chunk']} steps, one pass; "
        f"the peers on the first {st['peer_docs']:,} documents of the stream (their minibatches); {mach['cpus']} "
        f"cores shared with other jobs, load average {mach['loadavg_1_5_15_min_at_start'][0]:.1f} at the start"
        + (f" (run on its own: {own})" if own else "")
        + " (`benchmarks/results/lda_scale.json`)."
    )
    if procs:
        st, first = procs[0]["settings"], procs[0]
        runs = "; ".join(
            f"{p['weak_scaling_ratio']:.3f} on a {p['machine']['cpus']}-core machine at load average "
            f"{p['machine']['loadavg_1_5_15_min_at_start'][0]:.1f}"
            + (
                " (no core left for the system and other jobs)"
                if p["machine"]["cpus"] <= p["processes"]
                else f" ({p['machine']['cpus'] - p['processes']} cores left idle)"
            )
            for p in procs
        )
        same = all(p["bitwise_equal_to_one_process_same_batches"] for p in procs)
        lines.append(
            f"Two processes of one run (one core each, S = {st['batch']} documents a step each, {st['steps']} steps) "
            f"against one process on one core (S = {st['batch']}): {first['docs_per_s_n_processes']:,.0f} against "
            f"{first['docs_per_s_one_process']:,.0f} documents/s on the first machine; weak-scaling ratios, one run "
            f"each: {runs}; the topics equal, bit for bit, one process of two CPU devices on the same batches: "
            f"{'yes' if same else 'no'} (`benchmarks/results/lda_scale_processes*.json`)."
        )
    return "\n".join(lines)


def appended(recorded: dict, new: dict) -> dict:
    """``recorded`` (this script's JSON) with ``new``'s rows in place of its rows of the same sizes, each new row
    with its own machine (``--append``: a size run on its own, as the longest is)."""
    rows = {r["docs"]: r for r in recorded["rows"]}
    rows.update({r["docs"]: {**r, "machine": new["machine"]} for r in new["rows"]})
    return {**recorded, "rows": [rows[d] for d in sorted(rows)]}


def recorded() -> tuple:
    """(sizes, procs, padded): the JSON of the recorded runs, ``markdown``'s arguments."""
    with open(os.path.join(HERE, "results", "lda_scale.json")) as f:
        sizes = json.load(f)
    procs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(HERE, "results", "lda_scale_processes*.json")))]
    padded_path = os.path.join(HERE, "results", "lda_scale_padded.json")
    padded = json.load(open(padded_path)) if os.path.exists(padded_path) else None
    return sizes, procs, padded


def write_docs_table(page=os.path.join(os.path.dirname(HERE), "docs", "lda.md")) -> None:
    """Rewrites the span of ``page`` between ``<!-- lda_scale.table -->`` and ``<!-- /lda_scale -->``."""
    replace_span(page, "lda_scale", markdown(*recorded()))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=float, nargs="+", default=[1e5, 1e6, 3.8e6], help="training documents per run")
    p.add_argument("--peer-docs", type=float, default=1e5, help="the peers run on sizes up to this")
    p.add_argument("--peers", nargs="*", default=["gensim", "sklearn"], choices=["gensim", "sklearn"])
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--vocab", type=int, default=7702)
    p.add_argument("--doc-len", type=float, default=357.0)
    p.add_argument("--doc-log-sd", type=float, default=0.9)
    p.add_argument("--heldout-docs", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=512, help="S, documents per step (per process with --processes)")
    p.add_argument("--chunk", type=int, default=10, help="steps per runner chunk")
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--processes", type=int, default=0, help="N > 1: the weak-scaling comparison on the first size")
    p.add_argument("--steps", type=int, default=30, help="steps of each --processes run")
    p.add_argument("--data-dir", default=os.path.join(os.path.expanduser("~"), ".cache", "vijax", "lda_scale"))
    p.add_argument("--padded", action="store_true", help="host chunks padded to (chunk, S, L), not packed")
    p.add_argument("--out", default=None)
    p.add_argument("--append", action="store_true", help="add the sizes run to --out's, replacing those of equal size")
    p.add_argument("--docs-table", action="store_true", help="rewrite docs/lda.md's table from the JSON, run nothing")
    p.add_argument("--phase", help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    for name in ("--num-processes", "--process-id", "--port"):
        p.add_argument(name, type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--out-npz", default="", help=argparse.SUPPRESS)
    add_device_argument(p)  # vijax's runs (the --processes comparison pins one CPU core per process)
    args = p.parse_args()
    args.docs = [int(d) for d in args.docs]
    args.peer_docs = int(args.peer_docs)
    if args.phase:
        return _child(args)
    if args.docs_table:
        return write_docs_table()
    os.makedirs(args.data_dir, exist_ok=True)
    load = os.getloadavg()
    name = "lda_scale_processes.json" if args.processes > 1 else "lda_scale.json"
    out = args.out or os.path.join(HERE, "results", name)
    drop = ("phase", "path", "out", "data_dir", "out_npz", "num_processes", "process_id", "port")
    settings = {k: v for k, v in vars(args).items() if k not in drop}

    def save(res):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        res = {"machine": machine("cpu", load), "settings": settings, **res}
        if args.append and os.path.exists(out):
            with open(out) as f:
                res = appended(json.load(f), res)
        with open(out, "w") as f:
            json.dump(res, f, indent=1)

    if args.processes > 1:
        save(_processes(args))
    else:
        _sizes(args, save)


if __name__ == "__main__":
    main()
