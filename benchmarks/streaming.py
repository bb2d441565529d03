"""Corpora larger than memory: a synthetic LDA corpus streamed to disk (``write_lda_corpus_npz``,
a ``CorpusWriter`` underneath), memory-mapped (``Corpus.load_npz(mmap=True)``) and streamed through
SVI on LDA by ``vijax.run.run`` with host batches, with and without the background prefetch
(``run.prefetch``). Each corpus size runs in a fresh process, so that its peak RSS
(``resource.getrusage``: the whole process, JAX and the compiled program included) is its own.

    PYTHONPATH=. python benchmarks/streaming.py                  # 10^5 and 10^6 documents
    PYTHONPATH=. python benchmarks/streaming.py --docs 20000 100000 --steps 60

Prints a table and writes benchmarks/results/streaming.json. Reported per size: the time to write
the corpus and the peak RSS of the writing process; the file size; for SVI (prefetch 0 and 2, in
that order, each a full ``run`` from the same key, compiled afresh): the first chunk's time
(compile included), steady-state milliseconds per step (the remaining chunks) and end-to-end
wall time; the peak RSS of the SVI
process (``ru_maxrss``: it counts the mapped corpus's pages that the batches touched, which are
file pages the kernel can drop) and its peak anonymous RSS (``RssAnon`` sampled every 20 ms: the
memory the process itself holds); the host time to build one step's batch (``host_batches``
alone); and whether the two runs' final topics are bit-identical.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

from _device import add_device_argument, child_env  # this folder's --device switch
from _memory import AnonPeak, peak_rss_mib, status_mib  # this folder's memory probes

HERE = os.path.dirname(os.path.abspath(__file__))


def _write(path, docs, topics, vocab, doc_len):
    from vijax.data import write_lda_corpus_npz

    t = time.perf_counter()
    write_lda_corpus_npz(path, 0, docs, topics, vocab, doc_length_mean=doc_len, save_doc_topics=False)
    return {
        "write_s": time.perf_counter() - t,
        "write_peak_rss_mib": peak_rss_mib(),
        "file_mib": os.path.getsize(path) / 2**20,
    }


def _child(args):
    path = args.path
    if args.phase == "write":
        res = _write(path, args.docs[0], args.topics, args.vocab, args.doc_len)
    else:
        res = _stream_timed(path, args)
    print("RESULT " + json.dumps(res), flush=True)


def _stream_timed(path, args):
    """SVI over the memory-mapped corpus, without and with prefetch: first chunk (compile
    included), steady-state ms per step over the other chunks, end-to-end wall time."""
    import jax

    from vijax.data import Corpus, Minibatcher, bucket_length
    from vijax.inference import svi
    from vijax.models import LDA
    from vijax.run import run

    anon = AnonPeak()
    corpus = Corpus.load_npz(path, mmap=True, validate=False)
    sizes = corpus.doc_unique_words  # lazily: computed from doc_ptr, 8 bytes a document
    length = bucket_length(int(sizes.max()))
    mb = Minibatcher(corpus, args.batch, seed=1)
    alg = svi(LDA(args.topics, corpus.vocab_size), num_data=corpus.num_docs)
    res = {
        "mapped": isinstance(corpus.word_ids, np.memmap) or isinstance(corpus.word_ids.base, np.memmap),
        "num_docs": corpus.num_docs,
    }
    t0 = time.perf_counter()
    for t in range(0, 5 * args.chunk, args.chunk):
        mb.host_batches(10**6 + t, args.chunk, length)  # steps no run below reads
    res["host_ms_per_step"] = 1e3 * (time.perf_counter() - t0) / (5 * args.chunk)
    finals = []
    for prefetch in (0, 2):
        # the runner syncs at each chunk's end (it reads the chunk's infos), so the wall times of
        # per-chunk "evaluations" that compute nothing time the chunks
        t0 = time.perf_counter()
        r = run(
            alg,
            jax.random.PRNGKey(0),
            host_batches=lambda a, n: mb.host_batches(a, n, length),
            num_steps=args.steps,
            chunk_size=args.chunk,
            progress=False,
            prefetch=prefetch,
            compile_cache=False,
            eval_fn=lambda state: {},
            eval_every=args.chunk,
        )
        jax.block_until_ready(r.state)
        e2e = time.perf_counter() - t0
        walls = [e["wall_time"] for e in r.evals]
        res[f"prefetch{prefetch}"] = {
            "first_chunk_s": walls[0],
            "e2e_s": e2e,
            "ms_per_step": 1e3 * (walls[-1] - walls[0]) / (args.steps - args.chunk),
        }
        finals.append([np.asarray(x) for x in jax.tree.leaves(r.state.q_global)])
    res["identical"] = all(np.array_equal(a, b) for a, b in zip(*finals))
    res["stream_peak_rss_mib"] = peak_rss_mib()
    res["stream_peak_anon_mib"] = anon.stop()
    res["stream_end_file_mib"] = status_mib("RssFile")
    return res


def _spawn(phase, path, docs, args):
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--phase",
        phase,
        "--path",
        path,
        "--docs",
        str(docs),
        "--topics",
        str(args.topics),
        "--vocab",
        str(args.vocab),
        "--doc-len",
        str(args.doc_len),
        "--batch",
        str(args.batch),
        "--steps",
        str(args.steps),
        "--chunk",
        str(args.chunk),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=child_env(args.device))
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode or not line:
        raise SystemExit(f"{phase} failed:\n{out.stdout}\n{out.stderr}")
    return json.loads(line[-1][7:])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--topics", type=int, default=10)
    p.add_argument("--vocab", type=int, default=500)
    p.add_argument("--doc-len", type=float, default=50.0)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--chunk", type=int, default=20)
    p.add_argument("--dir", default=None, help="where the corpora go (default: a temporary folder, removed)")
    p.add_argument("--out", default=os.path.join(HERE, "results", "streaming.json"))
    add_device_argument(p)  # where the streaming child runs JAX (JAX_PLATFORMS)
    p.add_argument("--phase", choices=("write", "stream"), help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.phase:
        return _child(args)
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for docs in args.docs:
            path = os.path.join(tmp, f"lda_{docs}.npz")
            row = {"docs": docs, **_spawn("write", path, docs, args)}
            row.update(_spawn("stream", path, docs, args))
            os.remove(path)
            rows.append(row)
            print(json.dumps(row), flush=True)
    hdr = (
        f"{'docs':>9} {'file MiB':>9} {'write s':>8} {'write RSS':>10} {'SVI RSS':>8} {'SVI anon':>9} "
        f"{'compile+1 s':>11} {'host ms/st':>10} {'ms/step':>8} {'ms/step pf':>10} {'e2e s':>7} {'e2e s pf':>8} "
        f"{'same':>5}"
    )
    print(hdr)
    for r in rows:
        a, b = r["prefetch0"], r["prefetch2"]
        print(
            f"{r['docs']:>9} {r['file_mib']:>9.1f} {r['write_s']:>8.1f} {r['write_peak_rss_mib']:>10.0f} "
            f"{r['stream_peak_rss_mib']:>8.0f} {r['stream_peak_anon_mib']:>9.0f} {a['first_chunk_s']:>11.2f} "
            f"{r['host_ms_per_step']:>10.2f} {a['ms_per_step']:>8.2f} "
            f"{b['ms_per_step']:>10.2f} {a['e2e_s']:>7.1f} {b['e2e_s']:>8.1f} {str(r['identical']):>5}"
        )
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(
            {
                "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.platform()}",
                "settings": {k: v for k, v in vars(args).items() if k not in ("phase", "path", "out", "dir")},
                "rows": rows,
            },
            f,
            indent=1,
        )


if __name__ == "__main__":
    main()
