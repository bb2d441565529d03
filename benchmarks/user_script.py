"""A user's first LDA fit, end to end, as they write it: vijax against scikit-learn and gensim, each in a
fresh Python process, import included.

The scenario: a corpus the library has not seen (2,000 synthetic documents from a seed no test
uses, K = 50 topics, V = 5,000 words, 100 tokens on average) in lda-c format on disk; 8 passes
of online LDA (Hoffman et al. 2010) over minibatches of 256 documents, the same minibatches for
every method (vijax's ``Minibatcher`` order, drawn once in this process and given to the
scikit-learn script as document indices), the same settings (alpha = 0.1, eta = 0.02,
kappa = 0.7, tau = 64, at most 100 E-step iterations, tolerance 1e-3).

Each method is a script a user would write (printed with ``--show``):

- ``vijax``: ``import jax`` and vijax's names, ``read_ldac``, ``LDA``, ``svi``, ``Minibatcher``,
  ``alg.init`` and the user's own ``jax.jit(alg.step)`` (XLA's default settings: the script does
  not call ``vijax.run.fast_cpu_compile``);
- ``vijax, cache``: the same, first line ``vijax.run.enable_compile_cache(DIR)``, run twice: the
  first run fills the cache (``cold``), the second reads it (``warm``), as a second run of the
  same script. The ``Minibatcher``'s batches are ``CorpusBatch``es, whose values the corpus
  checked when it was read: the step holds no check of them, hence no host callback (JAX's
  persistent cache stores no program with one), and the warm run loads it;
- ``vijax, jit_step, cache``: the same with ``vijax.inference.jit_step(alg.step)`` instead of
  ``jax.jit`` (the checks' results are outputs of the program: no host callback, so the
  cache stores the step);
- ``vijax, fast_cpu_compile`` and ``vijax, fast_cpu_compile, jit_step, cache``: the first and
  the third with ``vijax.run.fast_cpu_compile()`` as the script's first line after ``import jax``
  (XLA's fast CPU compile settings, which ``vijax run`` applies and docs/guide.md recommends
  for a program of one's own; the flag ``--fast-cpu-compile`` adds that line to every vijax
  script);
- ``scikit-learn``: its ``LatentDirichletAllocation(learning_method="online")``, ``partial_fit``
  on each minibatch of the lda-c file read into a SciPy sparse matrix (a plain parser, as
  scikit-learn has none for lda-c);
- ``gensim`` (when installed): its ``LdaModel`` (the same K, alpha, eta, decay = kappa, offset =
  tau, at most 100 E-step updates at tolerance 1e-3, float64) and ``update`` on each minibatch of
  the lda-c file read by its own ``BleiCorpus`` (with the vocabulary file beside it).

Timed inside each script from its first line to the final topics: import, read, set-up (the
initial state), the first update (for vijax: tracing and compiling the step, then the update)
and the rest; end to end is their sum. After the clock stops each script saves its topics,
which this process scores by the same held-out measure (per-word log predictive by document
completion on 200 further documents, ``vijax.metrics.corpus_document_completion``). Rounds
alternate the methods' order; the table gives the median and range over rounds.

    python benchmarks/user_script.py                  # 3 rounds -> results/user_script.json
    python benchmarks/user_script.py --show vijax     # the script a method runs
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import shutil
import tempfile

import numpy as np

from vijax.data import Minibatcher, read_ldac, sample_lda_corpus
from vijax.expfam import Dirichlet
from vijax.metrics import corpus_document_completion
from vijax.models import LDA

from _device import add_device_argument, child_env  # this folder's --device switch

K, V, ALPHA, ETA, KAPPA, TAU, BATCH = 50, 5000, 0.1, 0.02, 0.7, 64.0, 256
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

VIJAX = """
import time
T0 = time.perf_counter()
import json, sys
import jax
{fast}from vijax.data import Minibatcher, read_ldac
from vijax.inference import {jit_import}schedules, svi
from vijax.models import LDA
{cache}T_IMPORT = time.perf_counter()
corpus = read_ldac({path!r}, vocab_size={v})
T_READ = time.perf_counter()
model = LDA({k}, {v}, alpha={alpha}, eta={eta})
alg = svi(model, num_data=corpus.num_docs, schedule=schedules.robbins_monro(1.0, tau={tau}, kappa={kappa}))
batches = iter(Minibatcher(corpus, {batch}, seed=0, num_epochs={passes}, length="corpus"))
step = {jit}(alg.step)
key = jax.random.PRNGKey(0)
first = next(batches)
key, k0 = jax.random.split(key)
state = jax.block_until_ready(alg.init(k0, first))
T_SETUP = time.perf_counter()
key, k1 = jax.random.split(key)
state, info = jax.block_until_ready(step(k1, state, first))
T_FIRST = time.perf_counter()
for batch in batches:
    key, k = jax.random.split(key)
    state, info = step(k, state, batch)
jax.block_until_ready(state)
T_END = time.perf_counter()
import numpy as np
np.save({out!r}, np.asarray(state.q_global.concentration))
print("RESULT " + json.dumps(dict(import_s=T_IMPORT - T0, read_s=T_READ - T_IMPORT, setup_s=T_SETUP - T_READ,
      first_s=T_FIRST - T_SETUP, rest_s=T_END - T_FIRST, end_to_end_s=T_END - T0)))
"""

SKLEARN = """
import time
T0 = time.perf_counter()
import json
import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import LatentDirichletAllocation
T_IMPORT = time.perf_counter()
rows, cols, vals = [], [], []
with open({path!r}) as fh:
    for d, line in enumerate(fh):
        for pair in line.split()[1:]:
            w, c = pair.split(":")
            rows.append(d); cols.append(int(w)); vals.append(float(c))
x = sp.csr_matrix((vals, (rows, cols)), shape=(d + 1, {v}))
order = np.load({order!r})
T_READ = time.perf_counter()
lda = LatentDirichletAllocation(n_components={k}, doc_topic_prior={alpha}, topic_word_prior={eta},
    learning_method="online", learning_decay={kappa}, learning_offset={tau}, batch_size={batch},
    total_samples=x.shape[0], max_doc_update_iter=100, mean_change_tol=1e-3, random_state=0)
T_SETUP = time.perf_counter()
lda.partial_fit(x[order[0][order[0] >= 0]])
T_FIRST = time.perf_counter()
for idx in order[1:]:
    lda.partial_fit(x[idx[idx >= 0]])
T_END = time.perf_counter()
np.save({out!r}, lda.components_)
print("RESULT " + json.dumps(dict(import_s=T_IMPORT - T0, read_s=T_READ - T_IMPORT, setup_s=T_SETUP - T_READ,
      first_s=T_FIRST - T_SETUP, rest_s=T_END - T_FIRST, end_to_end_s=T_END - T0)))
"""

GENSIM = """
import time
T0 = time.perf_counter()
import json
import numpy as np
from gensim.corpora import BleiCorpus
from gensim.models import LdaModel
T_IMPORT = time.perf_counter()
corpus = BleiCorpus({path!r})  # lda-c, with its vocabulary file beside it
docs = list(corpus)
order = np.load({order!r})
T_READ = time.perf_counter()
lda = LdaModel(num_topics={k}, id2word=corpus.id2word, chunksize={batch}, alpha={alpha}, eta={eta},
    decay={kappa}, offset={tau}, iterations=100, gamma_threshold=1e-3, eval_every=None, random_state=0,
    dtype=np.float64)
T_SETUP = time.perf_counter()
def update(idx):
    lda.update([docs[i] for i in idx[idx >= 0]], chunksize={batch}, decay={kappa}, offset={tau}, passes=1,
        update_every=1, eval_every=None, iterations=100, gamma_threshold=1e-3)
update(order[0])
T_FIRST = time.perf_counter()
for idx in order[1:]:
    update(idx)
T_END = time.perf_counter()
np.save({out!r}, lda.state.get_lambda())
print("RESULT " + json.dumps(dict(import_s=T_IMPORT - T0, read_s=T_READ - T_IMPORT, setup_s=T_SETUP - T_READ,
      first_s=T_FIRST - T_SETUP, rest_s=T_END - T_FIRST, end_to_end_s=T_END - T0)))
"""

METHODS = (
    "vijax",
    "vijax, cache",
    "vijax, jit_step, cache",
    "vijax, fast_cpu_compile",
    "vijax, fast_cpu_compile, jit_step, cache",
    "scikit-learn",
    "gensim",
)
PHASES = ("import_s", "read_s", "setup_s", "first_s", "rest_s", "end_to_end_s")


def _write_ldac(corpus, path: str) -> None:
    with open(path, "w") as fh:
        for d in range(corpus.num_docs):
            ids, counts = corpus.document(d)
            fh.write(f"{len(ids)} " + " ".join(f"{int(w)}:{int(c)}" for w, c in zip(ids, counts)) + "\n")


def script(method: str, folder: str, passes: int, fast: bool, out: str) -> str:
    common = dict(k=K, v=V, alpha=ALPHA, eta=ETA, kappa=KAPPA, tau=TAU, batch=BATCH, out=out)
    path = os.path.join(folder, "train.ldac")
    if method == "scikit-learn":
        return SKLEARN.format(path=path, order=os.path.join(folder, "order.npy"), **common)
    if method == "gensim":
        return GENSIM.format(path=path, order=os.path.join(folder, "order.npy"), **common)
    cache = ""
    if "cache" in method:
        cache = f"import vijax.run\nvijax.run.enable_compile_cache({os.path.join(folder, 'cache')!r})\n"
    fast = fast or "fast_cpu_compile" in method
    fast_line = "import vijax.run\nvijax.run.fast_cpu_compile()\n" if fast else ""
    jit = "jit_step" if "jit_step" in method else "jax.jit"
    jit_import = "jit_step, " if "jit_step" in method else ""
    return VIJAX.format(path=path, passes=passes, cache=cache, fast=fast_line, jit=jit, jit_import=jit_import, **common)


def prepare(folder: str, docs: int, passes: int, seed: int):
    """Writes the training corpus (lda-c) and the minibatch order; returns the held-out split."""
    sample = sample_lda_corpus(seed, docs + 200, K, V, alpha=ALPHA, eta=ETA, doc_length_mean=100)
    train = sample.corpus.subset(range(docs))
    test = sample.corpus.subset(range(docs, docs + 200))
    path = os.path.join(folder, "train.ldac")
    _write_ldac(train, path)
    with open(path + ".vocab", "w") as fh:  # the vocabulary file gensim's BleiCorpus reads beside it
        fh.write("".join(f"w{i}\n" for i in range(V)))
    read_back = read_ldac(path, vocab_size=V)
    assert read_back.num_docs == docs and int(np.sum(read_back.counts)) == int(np.sum(train.counts))
    mb = Minibatcher(read_back, BATCH, seed=0)
    np.save(
        os.path.join(folder, "order.npy"), np.stack([mb.step_indices(t) for t in range(passes * mb.steps_per_epoch)])
    )
    return test.split_tokens(1, 0.5)


def run_one(method, folder, passes, fast, device, score):
    out = os.path.join(folder, "topics.npy")
    code = script(method, folder, passes, fast, out)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(device))
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not line:
        raise SystemExit(f"{method} failed:\n{proc.stdout}\n{proc.stderr}")
    row = json.loads(line[-1][7:])
    row["heldout_per_word"] = score(np.load(out))
    return row


def summarize(runs: dict) -> list:
    rows = []
    for method, rs in runs.items():
        row = {"method": method, "rounds": len(rs)}
        for key in PHASES + ("heldout_per_word",):
            values = [r[key] for r in rs]
            row[key] = statistics.median(values)
            row[key + "_range"] = [min(values), max(values)]
        rows.append(row)
    for peer, key in (("scikit-learn", "vs_sklearn_end_to_end"), ("gensim", "vs_gensim_end_to_end")):
        base = next((r for r in rows if r["method"] == peer), None)
        for r in rows:
            r[key] = None if base is None else r["end_to_end_s"] / base["end_to_end_s"]
    return rows


def table(rows: list) -> str:
    head = (
        "| method | import s | read s | set-up s | first update s | other updates s | end to end s "
        "| × scikit-learn | × gensim | held-out per word |"
    )
    lines = [head, "|---|" + "---:|" * 9]
    for r in rows:
        lo, hi = r["end_to_end_s_range"]
        ratios = ["—" if r.get(k) is None else f"{r[k]:.2f}" for k in ("vs_sklearn_end_to_end", "vs_gensim_end_to_end")]
        lines.append(
            f"| {r['method']} | {r['import_s']:.2f} | {r['read_s']:.2f} | {r['setup_s']:.2f} | {r['first_s']:.2f} | "
            f"{r['rest_s']:.2f} | {r['end_to_end_s']:.2f} ({lo:.2f}–{hi:.2f}) | {ratios[0]} | {ratios[1]} | "
            f"{r['heldout_per_word']:.3f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, default=2000)
    p.add_argument("--passes", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=20261126, help="the corpus's seed (one no test uses)")
    p.add_argument("--fast-cpu-compile", action="store_true", help="vijax's scripts call fast_cpu_compile first")
    p.add_argument("--show", default=None, choices=list(METHODS))
    p.add_argument("--out", default=os.path.join(RESULTS, "user_script.json"))
    add_device_argument(p)  # where the vijax scripts run JAX (JAX_PLATFORMS)
    args = p.parse_args(argv)
    if args.show:
        print(script(args.show, "<folder>", args.passes, args.fast_cpu_compile, "<topics.npy>"))
        return {}
    load_start = os.getloadavg()
    runs: dict = {}
    with tempfile.TemporaryDirectory() as folder:
        obs, held = prepare(folder, args.docs, args.passes, args.seed)
        model = LDA(K, V, alpha=ALPHA, eta=ETA)

        def score(lam):
            q = Dirichlet.from_concentration(np.asarray(lam, np.float32))
            r = corpus_document_completion(model, q, obs, held, 200)
            return r.log_prob / r.num_tokens

        for r in range(args.rounds):
            order = [m for m in METHODS if m != "gensim" or importlib.util.find_spec("gensim") is not None]
            order = order[r % len(order) :] + order[: r % len(order)]
            for method in order:
                for label in (f"{method} (cold)", f"{method} (warm)") if "cache" in method else (method,):
                    cache = os.path.join(folder, "cache")
                    if label.endswith("(cold)") and os.path.isdir(cache):
                        shutil.rmtree(cache)
                    row = run_one(method, folder, args.passes, args.fast_cpu_compile, args.device, score)
                    runs.setdefault(label, []).append(row)
                print(f"round {r}: {method} done", flush=True)
    rows = summarize(runs)
    print(table(rows))
    import jax

    result = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "jax": jax.__version__,
            "device": args.device,
            "loadavg_1_5_15_min_at_start": load_start,
            "loadavg_1_5_15_min_at_end": os.getloadavg(),
        },
        "settings": vars(args),
        "rows": rows,
        "runs": runs,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
