"""What a step costs and where it should go on an accelerator: flop and byte counts of the
compiled step (``compiled.cost_analysis()``), the roofline time they imply on a few GPUs, and the
time measured on the device the script runs on.

For each case, the step as a user compiles it (``jax.jit(alg.step)``, public API only, float32)
at the size of the benchmark it comes from:

- ``gmm-cavi``: ``cavi(DiagonalGMM)``, D = 64, K = 30, N = 10^5 and 10^6 (``gmm_cavi.py``);
- ``lda-svi``: ``svi(LDA)``, K = 50, V = 5,000, minibatches of S = 256 and 1,024 synthetic
  documents of 100 tokens on average (``lda_online.py``), with the platform's E-step (dense on an
  accelerator, tiles on a CPU) or the one ``--lda-estep`` names;
- ``hmm-em``: Baum–Welch, ``em(GaussianHMM)``, K = 10, D = 8, 100 sequences of T = 1,000
  (``hmm.py``);
- ``bbvi``: ``bbvi`` with a full-rank Gaussian on a Bayesian logistic regression, N = 10^4,
  D = 100, 8 Monte Carlo samples (``bbvi.py``).

Per case: XLA's flop and byte counts of the compiled step, the compile time (trace, lower and
compile), the steady-state step time (median of ``--calls`` synchronised calls after two
warm-up calls), the end-to-end time (from lowering to the last of those 2 + ``--calls`` steps)
and the achieved rates, and the roofline time ``max(flops / peak, bytes /
bandwidth)`` on each GPU of ``GPUS`` (vendor figures: float32 without tensor cores, and the
memory bandwidth). **XLA counts the body of a loop once** (a ``while`` whose trip count depends on
the data, or a ``scan``): for the cases whose step holds such a loop (the LDA E-step, iterated per
document until it converges; the HMM's forward and backward passes, one iteration per time step)
the counts and the roofline are those of one pass through each loop, a lower bound; the number of
kernel launches and the loop's trip count then decide the time on a GPU, and the measured column
is the one to trust. Counts come from the program compiled for the device the script runs on,
so a CPU run and a GPU run report their own compiler's counts.

    python benchmarks/gpu_scaling.py                      # on the CPU -> results/gpu_scaling_cpu.json
    python benchmarks/gpu_scaling.py --device gpu         # on a GPU   -> results/gpu_scaling_gpu.json
    python benchmarks/gpu_scaling.py --device gpu --cases lda-svi --lda-estep tiles --gpu-autotune-level 0 --out x.json
    python benchmarks/gpu_scaling.py --md results/gpu_scaling_cpu.json results/gpu_scaling_gpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from vijax.data import Minibatcher, sample_gmm, sample_hmm, sample_lda_corpus
from vijax.inference import bbvi, cavi, em, svi
from vijax.models import DiagonalGMM, GaussianEmissions, GaussianHMM, HMMParams, LDA
from vijax.models.lda import estep_layout

from _device import add_device_argument, use_device  # this folder's --device switch

# (name, float32 TFLOP/s without tensor cores, memory TB/s): vendors' data sheets
GPUS = (("H200 SXM", 67.0, 4.8), ("A100 40GB", 19.5, 1.555), ("T4 (Colab)", 8.1, 0.32))
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def _cost(compiled) -> dict:
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return {"flops": float(cost.get("flops", 0.0)), "bytes": float(cost.get("bytes accessed", 0.0))}


def _gmm(n: int):
    k, d = 30, 64
    data = sample_gmm(jax.random.PRNGKey(0), n, k, d, spread=3.0)
    model = DiagonalGMM.from_data(np.asarray(data.x), k, dtype=jnp.float32)
    x = model.features(jnp.asarray(data.x, jnp.float32))
    alg = cavi(model)
    return alg, alg.init(jax.random.PRNGKey(1), x), x, f"N = {n:,}, D = {d}, K = {k}"


LDA_TILE_SLOTS = [None]  # --lda-tile-slots (None: LDA's default for the platform)
LDA_ESTEP = [None]  # --lda-estep (None: LDA's default for the platform)
LDA_TOPICS = [50]  # --lda-topics
LDA_MAX_ITERS = [None]  # --lda-max-iters (None: LDA's default)
HMM_FORWARD_BACKWARD = [None]  # --hmm-forward-backward (None: the model's default)
GPU_AUTOTUNE_LEVEL = [None]  # --gpu-autotune-level (None: XLA's)


def _lda(s: int):
    corpus = sample_lda_corpus(0, 4 * s, 50, 5000, alpha=0.1, eta=0.02, doc_length_mean=100).corpus
    batch = next(iter(Minibatcher(corpus, s, seed=0, length="corpus")))
    slots, estep, k, iters = LDA_TILE_SLOTS[0], LDA_ESTEP[0], LDA_TOPICS[0], LDA_MAX_ITERS[0]
    options = {} if iters is None else {"max_iters": iters}
    model = LDA(k, 5000, alpha=0.1, eta=0.02, tile_slots=slots, estep=estep, **options)
    alg = svi(model, num_data=corpus.num_docs)
    label = f"S = {s:,}, K = {k}, V = 5,000, {estep_layout(estep)} E-step"
    label += "" if slots is None or estep_layout(estep) == "dense" else f", tile_slots = {slots:,}"
    label += "" if iters is None else f", max_iters = {iters}"
    return alg, alg.init(jax.random.PRNGKey(1), batch), batch, label


def _hmm(_):
    k, d, n, t = 10, 8, 100, 1000
    rng = np.random.default_rng(0)
    trans = rng.dirichlet(np.ones(k), k) + 5.0 * np.eye(k)
    truth = HMMParams(
        jnp.full((k,), 1.0 / k),
        jnp.asarray(trans / trans.sum(1, keepdims=True), jnp.float32),
        GaussianEmissions(jnp.asarray(rng.normal(size=(k, d)) * 2.0, jnp.float32), jnp.ones((k, d), jnp.float32)),
    )
    data = sample_hmm(jax.random.PRNGKey(0), truth, num_sequences=n, length=t).data
    mode = HMM_FORWARD_BACKWARD[0]
    alg = em(GaussianHMM(k, d) if mode is None else GaussianHMM(k, d, forward_backward=mode))
    label = f"{n} sequences, T = {t:,}, K = {k}, D = {d}" + ("" if mode is None else f", {mode}")
    return alg, alg.init(jax.random.PRNGKey(1), data), data, label


def _bbvi(_):
    n, d = 10_000, 100
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(n, d)), jnp.float32)
    y = jnp.asarray(rng.random(n) < 1 / (1 + np.exp(-np.asarray(x) @ rng.normal(size=d) / 3)), jnp.float32)

    def log_joint(w, xy):
        xb, yb = xy
        logits = xb @ w
        return jnp.sum(yb * logits - jnp.logaddexp(0.0, logits)) - 0.5 * jnp.sum(w**2)

    alg = bbvi(log_joint, family="fullrank", init_params=jnp.zeros(d), num_samples=8, schedule=1e-2)
    return alg, alg.init(jax.random.PRNGKey(1), (x, y)), (x, y), f"N = {n:,}, D = {d}, full rank, 8 samples"


CASES = {
    "gmm-cavi": (_gmm, (100_000, 1_000_000), False),
    "lda-svi": (_lda, (256, 1024), True),
    "hmm-em": (_hmm, (None,), True),
    "bbvi": (_bbvi, (None,), False),
}


def measure(name: str, size, calls: int) -> dict:
    build, _, loops = CASES[name]
    alg, state, batch, label = build(size)
    key = jax.random.PRNGKey(2)
    start = t0 = time.perf_counter()
    options = None if GPU_AUTOTUNE_LEVEL[0] is None else {"xla_gpu_autotune_level": GPU_AUTOTUNE_LEVEL[0]}
    compiled = jax.jit(alg.step, compiler_options=options).lower(key, state, batch).compile()
    compile_s = time.perf_counter() - t0
    for _ in range(2):
        jax.block_until_ready(compiled(key, state, batch))  # warm-up calls, results dropped
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(key, state, batch))
        times.append(time.perf_counter() - t0)
    end_to_end_s = time.perf_counter() - start  # lowering, compiling, the 2 + calls steps
    step_s = statistics.median(times)
    cost = _cost(compiled)
    row = {
        "case": name,
        "size": label,
        "loops_counted_once": loops,
        "compile_s": compile_s,
        "step_ms": 1e3 * step_s,
        "end_to_end_s": end_to_end_s,
        **cost,
        "gflops_achieved": cost["flops"] / step_s / 1e9,
        "gbytes_per_s_achieved": cost["bytes"] / step_s / 1e9,
        "roofline_ms": {
            gpu: 1e3 * max(cost["flops"] / (tflops * 1e12), cost["bytes"] / (tbs * 1e12)) for gpu, tflops, tbs in GPUS
        },
    }
    print(
        f"{name:9s} {label:40s} compile {compile_s:6.2f} s  step {row['step_ms']:9.3f} ms  "
        f"{cost['flops'] / 1e9:9.3f} GFLOP {cost['bytes'] / 1e9:8.3f} GB" + ("  (loops once)" if loops else ""),
        flush=True,
    )
    return row


def markdown(results: list) -> str:
    """The docs' tables: per results file (one device), each case's counts, its roofline on each
    GPU of ``GPUS`` and the measured step and compile times."""
    out = []
    for result in results:
        m, level = result["machine"], result.get("gpu_autotune_level")
        setting = "" if level is None else f", XLA GPU autotune level {level}"
        setting += f", XLA_FLAGS={m['xla_flags']}" if m.get("xla_flags") else ""
        out.append(f"**{m['device']}**, JAX {m['jax']}, {m['cpus']} CPU cores ({m['platform']}{setting}):")
        out.append("")
        head = ["case", "size", "GFLOP", "GB"] + [f"roofline {g} (ms)" for g, _, _ in GPUS]
        head += ["measured (ms)", "compile (s)", "end to end (s)"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * 2 + "---:|" * (len(head) - 2))
        for row in result["rows"]:
            if "error" in row:
                out.append(f"| {row['case']} | {row['size']} | failed: {row['error']} |")
                continue
            cells = [row["case"] + (" (loops once)" if row["loops_counted_once"] else ""), row["size"]]
            cells += [f"{row['flops'] / 1e9:.3g}", f"{row['bytes'] / 1e9:.3g}"]
            cells += [f"{1e3 * max(row['flops'] / (f * 1e12), row['bytes'] / (b * 1e12)):.3g}" for _, f, b in GPUS]
            e2e = row.get("end_to_end_s")
            cells += [f"{row['step_ms']:.3g}", f"{row['compile_s']:.2g}", "—" if e2e is None else f"{e2e:.2g}"]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    p.add_argument("--calls", type=int, default=20, help="timed calls per case (the median counts)")
    p.add_argument("--quick", action="store_true", help="the smallest size of each case only")
    p.add_argument("--lda-tile-slots", type=int, default=None, help="LDA(tile_slots=...) (default: the platform's)")
    p.add_argument(
        "--lda-estep", choices=["tiles", "dense"], default=None, help="LDA(estep=...) (default: the platform's)"
    )
    p.add_argument("--lda-topics", type=int, default=50, help="K of the lda-svi case")
    p.add_argument("--lda-max-iters", type=int, default=None, help="LDA(max_iters=...) (default: LDA's, 100)")
    p.add_argument("--hmm-forward-backward", choices=["sequential", "parallel"], default=None)
    p.add_argument("--gpu-autotune-level", type=int, choices=range(6), default=None, help="XLA's (default: XLA's, 4)")
    p.add_argument("--out", default=None, help="the JSON (default results/gpu_scaling_<device>.json)")
    p.add_argument("--md", nargs="+", default=None, metavar="JSON", help="print the docs' table of these results")
    add_device_argument(p)
    args = p.parse_args(argv)
    if args.md:
        results = [json.load(open(path)) for path in args.md]
        print(markdown(results))
        return {}
    device = use_device(args.device)
    LDA_TILE_SLOTS[0], LDA_ESTEP[0], LDA_TOPICS[0] = args.lda_tile_slots, args.lda_estep, args.lda_topics
    LDA_MAX_ITERS[0] = args.lda_max_iters
    HMM_FORWARD_BACKWARD[0], GPU_AUTOTUNE_LEVEL[0] = args.hmm_forward_backward, args.gpu_autotune_level
    load_start = os.getloadavg()
    rows = []
    for name in args.cases:
        sizes = CASES[name][1][:1] if args.quick else CASES[name][1]
        for size in sizes:
            try:
                rows.append(measure(name, size, args.calls))
            except Exception as e:  # one case's failure (e.g. on another JAX version) leaves the others
                print(f"{name} {size}: failed: {type(e).__name__}: {e}", flush=True)
                rows.append({"case": name, "size": str(size), "error": f"{type(e).__name__}: {e}"})
    result = {
        "machine": {
            "device": device,
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "jax": jax.__version__,
            "python": sys.version.split()[0],
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "loadavg_1_5_15_min_at_start": load_start,
            "loadavg_1_5_15_min_at_end": os.getloadavg(),
        },
        "gpu_autotune_level": args.gpu_autotune_level,
        "gpus": [{"name": g, "fp32_tflops": f, "memory_tb_s": b} for g, f, b in GPUS],
        "rows": rows,
    }
    out = args.out or os.path.join(RESULTS, f"gpu_scaling_{args.device}.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
