"""Where an LDA SVI step's time goes, kernel by kernel.

Runs vijax's online-LDA SVI step (public API: ``LDA``, ``svi``, one JAX CPU device, the settings of
``benchmarks/lda_online.py``: K = 50, S = 256, kappa = 0.7, tau = 64, at most 100 E-step updates at
tolerance 1e-3, every minibatch padded to the corpus's one length) on the synthetic corpus and, where
the reference data are present, on wiki_bnpy. After ``--warmup`` steps it traces ``--steps`` more
with JAX's profiler (``jax.profiler.start_trace``; XLA's per-kernel trace events switched on with
``--xla_cpu_enable_xprof_traceme``) and sums the kernels' time per step by kind:

- ``contractions``: the E-step's two (chunks, K, width) batched contractions per update (``dot``);
- ``per-document sums``: the sum of each document's chunks (``tile_sum``, a small matrix product
  that XLA hands to its YNNPACK kernels, ``ynn_fusion``);
- ``row reductions``: sums over K (XLA's CPU compiler splits a reduction over more than 32
  elements into a ``reduce-window`` and a ``reduce``, two kernels);
- ``gathers``: the topic columns of a tile's words and the chunk layout;
- ``elementwise``: every other fused kernel (special functions, exponentials, logs, SQUAREM's
  arithmetic), and ``other``.

It also counts the kernels launched per step, the SQUAREM cycles (the kernels launched once per
cycle), and the kernels per cycle. The profiler's own cost inflates every kernel, so the shares
matter, not the absolute times; the step's time without the profiler is reported beside them, with
the compile time (first call) and the end-to-end time (first call to the last untraced step).

    python benchmarks/lda_step_kernels.py        # writes benchmarks/results/lda_step_kernels.json

``--compile`` measures instead the first step's compile as a user's script meets it (the scenario
of ``benchmarks/user_script.py``: 2,000 synthetic documents, ``LDA(50, 5000)``, ``svi``, a
minibatch of 256 padded to the corpus's length, the user's own ``jax.jit(alg.step)``, XLA's
default settings or, with ``--fast-cpu-compile``, ``vijax.run.fast_cpu_compile``'s). Each round
is a fresh Python process timing the trace and lowering and the compile (wall and the process's CPU
seconds, the steadier figure on a loaded machine). One more process compiles the step with XLA's
dump switched on (``--xla_dump_to``) and counts the distinct kernels XLA's CPU compiler generates
code for (one LLVM module each; XLA compiles identical fused kernels once), the size of their
optimized LLVM IR (code generation time grows with it), and names the largest; with XLA's own
timers logged (``TF_CPP_VMODULE``) it gives the time of the HLO passes, the thread time of the
kernels' MLIR emission and LLVM compile, and a fit of a kernel's thread time as a fixed cost plus a
cost per kB of its IR.

    python benchmarks/lda_step_kernels.py --compile   # writes benchmarks/results/lda_step_compile.json
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time

# XLA reads its flags once, when JAX starts: the per-kernel trace events, before anything runs
# (the fast compile settings of `vijax run`: ``use_device`` in ``main``, before anything runs)
_CALLER_XLA_FLAGS = os.environ.get("XLA_FLAGS", "")  # what --compile's fresh processes start with
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_xprof_traceme=true").strip()

import jax  # noqa: E402
import numpy as np  # noqa: E402

from vijax.data import Minibatcher, read_ldac, sample_lda_corpus, shared_data_path  # noqa: E402
from vijax.inference import schedules, svi  # noqa: E402
from vijax.models import LDA  # noqa: E402

from lda_estep_profile import machine, write_json  # noqa: E402  (this folder's profiling script)
from _device import add_device_argument, use_device  # noqa: E402  (this folder's --device switch)

KINDS = ("contractions", "per-document sums", "row reductions", "gathers", "elementwise", "other")


def _kind(name: str) -> str:
    if name.startswith("dot"):
        return "contractions"
    if name.startswith("ynn"):
        return "per-document sums"
    if name.startswith("reduce"):
        return "row reductions"
    if "gather" in name:
        return "gathers"
    if name.endswith("fusion") or re.search(r"_fusion(\.\d+)?$", name) or re.match(r"^[a-z-]+(\.\d+)?$", name):
        return "elementwise"
    return "other"


def _is_kernel(name: str) -> bool:
    """A kernel's trace event (not the runtime's, Python's, or a loop's or call's enclosing event)."""
    return not (
        name.startswith(("$", "end: ", "while", "call", "conditional", "Pjit", "Transpose::"))
        or "Execute" in name
        or "::" in name
    )


def _trace_summary(trace_dir: str, steps: int) -> dict:
    path = glob.glob(os.path.join(trace_dir, "**", "perfetto_trace.json.gz"), recursive=True)[0]
    with gzip.open(path) as fh:
        data = json.load(fh)
    events = [e for e in (data["traceEvents"] if isinstance(data, dict) else data) if e.get("ph") == "X"]
    time_us, count = collections.Counter(), collections.Counter()
    for e in events:
        if _is_kernel(e["name"]):
            time_us[e["name"]] += e.get("dur", 0)
            count[e["name"]] += 1
    by_kind = collections.Counter()
    for name, t in time_us.items():
        by_kind[_kind(name)] += t
    total = sum(time_us.values())
    # the SQUAREM cycles: an update holds the two contractions, a cycle three updates, so each of
    # the cycle's six dot kernels is launched once per cycle
    dots = sorted(c for n, c in count.items() if n.startswith("dot"))
    cycles = dots[len(dots) // 2] // steps if dots else 0
    per_cycle = sum(1 for c in count.values() if cycles and c // steps == cycles)
    return {
        "kernels_per_step": sum(count.values()) // steps,
        "squarem_cycles_per_step": cycles,
        "kernels_per_cycle": per_cycle,
        "traced_kernel_ms_per_step": total / steps / 1e3,
        "share": {k: by_kind[k] / total for k in KINDS},
        "top_kernels": [
            {"name": n, "ms_per_step": t / steps / 1e3, "launches_per_step": count[n] // steps}
            for n, t in time_us.most_common(12)
        ],
    }


def profile(name, corpus, k: int, s: int, warmup: int, steps: int, seed: int = 0) -> dict:
    model = LDA(k, corpus.vocab_size, alpha=0.1, eta=0.02, max_iters=100, tol=1e-3)
    alg = svi(
        model, num_data=corpus.num_docs, local="meanfield", schedule=schedules.robbins_monro(1.0, tau=64.0, kappa=0.7)
    )
    step = jax.jit(lambda key, st, batch: alg.step(key, st, batch)[0])
    mb = Minibatcher(corpus, s, seed, length="corpus")
    key = jax.random.PRNGKey(seed)
    batches = [mb.step_batch(t) for t in range(warmup + steps)]
    t0 = time.perf_counter()
    state = jax.block_until_ready(alg.init(jax.random.fold_in(key, 0)))
    state = jax.block_until_ready(step(jax.random.fold_in(key, 1), state, batches[0]))
    compile_s = time.perf_counter() - t0
    times = []
    for t in range(1, warmup):
        t1 = time.perf_counter()
        state = jax.block_until_ready(step(jax.random.fold_in(key, t + 1), state, batches[t]))
        times.append(time.perf_counter() - t1)
    end_to_end_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as trace_dir:
        jax.profiler.start_trace(trace_dir, create_perfetto_trace=True)
        for t in range(warmup, warmup + steps):
            state = jax.block_until_ready(step(jax.random.fold_in(key, t + 1), state, batches[t]))
        jax.profiler.stop_trace()
        out = _trace_summary(trace_dir, steps)
    step_ms = 1e3 * float(np.median(times[len(times) // 2 :]))
    row = {
        "corpus": name,
        "S": s,
        "K": k,
        "compile_s": compile_s,
        "step_ms": step_ms,
        "docs_per_s": s / step_ms * 1e3,
        "end_to_end_s": end_to_end_s,
        "end_to_end_steps": warmup,
        **out,
    }
    print(
        f"{name}, S = {s}: compile (first call) {compile_s:.2f} s, step {step_ms:.1f} ms ({row['docs_per_s']:.0f} docs/s), "
        f"end to end {end_to_end_s:.2f} s for {warmup} steps; {out['kernels_per_step']} kernels per step, "
        f"{out['squarem_cycles_per_step']} SQUAREM cycles of {out['kernels_per_cycle']} kernels"
    )
    print("  share of the traced kernels' time: " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in out["share"].items()))
    return row


FIRST_STEP = """
import json, os, sys, time
{fast}import jax
from vijax.data import Minibatcher, sample_lda_corpus
from vijax.inference import schedules, svi
from vijax.models import LDA
corpus = sample_lda_corpus(20261126, 2000, 50, 5000, alpha=0.1, eta=0.02, doc_length_mean=100).corpus
alg = svi(LDA(50, 5000, alpha=0.1, eta=0.02), num_data=corpus.num_docs,
          schedule=schedules.robbins_monro(1.0, tau=64.0, kappa=0.7))
batch = next(iter(Minibatcher(corpus, 256, seed=0, num_epochs=1, length="corpus")))
state = jax.block_until_ready(alg.init(jax.random.PRNGKey(0), batch))
load = os.getloadavg()
t0 = time.perf_counter()
lowered = jax.jit(alg.step).lower(jax.random.PRNGKey(1), state, batch)
t1, c1 = time.perf_counter(), time.process_time()
lowered.compile()
print("RESULT " + json.dumps(dict(lower_s=t1 - t0, compile_s=time.perf_counter() - t1,
      compile_cpu_s=time.process_time() - c1, loadavg_1_5_15_min=load)))
"""


def _first_step_child(fast: bool, extra_flags: str = "", timers: bool = False) -> dict:
    """The first step's lowering and compile in a fresh process (``FIRST_STEP``); with ``timers``,
    XLA's own timers logged (its HLO passes, and each kernel's MLIR emission and LLVM compile) are
    returned too, as ``stderr``."""
    code = FIRST_STEP.format(fast="import vijax.run\nvijax.run.fast_cpu_compile()\n" if fast else "")
    env = dict(os.environ, XLA_FLAGS=(_CALLER_XLA_FLAGS + " " + extra_flags).strip(), JAX_PLATFORMS="cpu")
    if timers:
        env.update(TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="cpu_compiler=1,fusion_compiler=2,ir_compiler=2")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not line:
        raise SystemExit(f"the first-step process failed:\n{proc.stdout}\n{proc.stderr}")
    return dict(json.loads(line[-1][7:]), **({"stderr": proc.stderr} if timers else {}))


def _ms(text: str) -> float:
    value, unit = re.search(r"time: ([\d.]+) (us|ms|s) ", text).groups()
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def _xla_timers(log: str, ir_kb: dict) -> dict:
    """XLA's timers for the step's program (the log after its ``Compiling: jit_step``): the HLO
    passes, and per kernel the thread time of its MLIR emission and LLVM compile (wall time of
    tasks that share the cores), fitted as a fixed cost per kernel plus a cost per kB of IR."""
    lines = log.splitlines()
    start = max((i for i, ln in enumerate(lines) if "Compiling: jit_step" in ln), default=0)
    hlo = [_ms(ln) for ln in lines if "Running HLO passes on [jit_step]" in ln]
    per_kernel = collections.Counter()
    mlir = llvm = 0.0
    for ln in lines[start:]:
        m = re.search(r"Compiled (MLIR|LLVM) module: (\S+) time", ln)
        if m:
            t = _ms(ln)
            mlir, llvm = mlir + t * (m[1] == "MLIR"), llvm + t * (m[1] == "LLVM")
            name = m[2].replace("__compute_module_", "").replace("_kernel_module", "").replace("_elemental", "")
            per_kernel[name] += t
    names = [k for k in per_kernel if k in ir_kb]
    fit = [float("nan"), float("nan")]
    if len(names) > 2:
        x = np.array([ir_kb[k] for k in names])
        fit = np.linalg.lstsq(np.vstack([np.ones_like(x), x]).T, np.array([per_kernel[k] for k in names]), rcond=None)[
            0
        ]
    return {
        "hlo_passes_s": hlo[-1] / 1e3 if hlo else None,
        "mlir_emission_thread_s": mlir / 1e3,
        "llvm_compile_thread_s": llvm / 1e3,
        "kernel_thread_ms_fit": {"per_kernel": float(fit[0]), "per_kb_of_ir": float(fit[1]), "kernels": len(names)},
    }


def _kernels(fast: bool) -> dict:
    """Distinct kernels of the step (the LLVM modules of XLA's dump for the step's program) and
    the size of their optimized IR, the largest named."""
    with tempfile.TemporaryDirectory() as dump:
        log = _first_step_child(fast, f"--xla_dump_to={dump}", timers=True)["stderr"]
        names = os.listdir(dump)
        modules = collections.Counter(n.split(".")[0] for n in names if n.endswith(".ir-no-opt.ll"))
        step = modules.most_common(1)[0][0]  # the step's program: by far the most kernels
        sizes = {
            n[len(step) + 1 : -len(".ir-with-opt.ll")]: os.path.getsize(os.path.join(dump, n))
            for n in names
            if n.startswith(step + ".") and n.endswith(".ir-with-opt.ll")
        }
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:8]
    bare = {  # the kernel's name as XLA's timers give it
        k.split(".", 1)[1].replace("__compute_module_", "").replace("_kernel_module", "").replace("_elemental", ""): v
        for k, v in sizes.items()
    }
    return {
        "distinct_kernels": modules[step],
        "optimized_ir_kb": sum(sizes.values()) / 1e3,
        "largest_kernels_ir_kb": [{"kernel": k, "ir_kb": v / 1e3} for k, v in largest],
        **_xla_timers(log, {k: v / 1e3 for k, v in bare.items()}),
    }


def compile_profile(rounds: int, fast: bool) -> dict:
    """``--compile``: the first step's compile over ``rounds`` fresh processes, and its kernels."""
    runs = []
    for r in range(rounds):
        runs.append(_first_step_child(fast))
        print(
            f"round {r}: lower {runs[-1]['lower_s']:.2f} s, compile {runs[-1]['compile_s']:.2f} s "
            f"(CPU {runs[-1]['compile_cpu_s']:.2f} s), load {runs[-1]['loadavg_1_5_15_min'][0]:.2f}"
        )
    row = {key: float(np.median([run[key] for run in runs])) for key in ("lower_s", "compile_s", "compile_cpu_s")}
    row.update({key + "_range": [min(run[key] for run in runs), max(run[key] for run in runs)] for key in row})
    row.update(_kernels(fast))
    print(
        f"compile (median of {rounds}) {row['compile_s']:.2f} s, CPU {row['compile_cpu_s']:.2f} s; "
        f"{row['distinct_kernels']} distinct kernels, {row['optimized_ir_kb']:.0f} kB of optimized LLVM IR"
    )
    fit = row["kernel_thread_ms_fit"]
    print(
        f"XLA's timers: HLO passes {row['hlo_passes_s']:.2f} s; kernels' thread time: MLIR emission "
        f"{row['mlir_emission_thread_s']:.2f} s, LLVM {row['llvm_compile_thread_s']:.2f} s, per kernel "
        f"{fit['per_kernel']:.1f} ms + {fit['per_kb_of_ir']:.2f} ms per kB of IR ({fit['kernels']} kernels)"
    )
    return {"fast_cpu_compile": fast, "rounds": rounds, **row, "runs": runs}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--k", type=int, default=50)
    p.add_argument("--warmup", type=int, default=20, help="untimed-by-the-profiler steps (the step time is theirs)")
    p.add_argument("--steps", type=int, default=5, help="steps traced")
    p.add_argument("--no-wiki", action="store_true")
    p.add_argument(
        "--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "lda_step_kernels.json")
    )
    p.add_argument("--compile", action="store_true", help="the first step's compile and kernels (see above)")
    p.add_argument("--rounds", type=int, default=3, help="with --compile: fresh processes timed")
    p.add_argument("--fast-cpu-compile", action="store_true", help="with --compile: fast_cpu_compile first")
    add_device_argument(p)
    args = p.parse_args(argv)
    if args.compile:
        load0 = os.getloadavg()
        result = {
            "benchmark": "LDA SVI first step's compile, as a user's jax.jit (benchmarks/lda_step_kernels.py --compile)",
            **compile_profile(args.rounds, args.fast_cpu_compile),
            "machine": machine(load0),
        }
        default = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "lda_step_compile.json")
        write_json(args.out if args.out != p.get_default("out") else default, result)
        return result
    use_device(args.device)
    corpora = [("synthetic", sample_lda_corpus(0, 20000, 50, 5000, alpha=0.1, eta=0.02, doc_length_mean=100).corpus)]
    path = shared_data_path("wiki_bnpy", "train.ldac.gz")
    if path is not None and not args.no_wiki:
        corpora.append(("wiki_bnpy", read_ldac(path, shared_data_path("wiki_bnpy", "vocab.txt"))))
    load0 = os.getloadavg()
    rows = [profile(name, c, args.k, args.batch_size, args.warmup, args.steps) for name, c in corpora]
    result = {
        "benchmark": "LDA SVI step, kernel by kernel (benchmarks/lda_step_kernels.py)",
        "machine": machine(load0),
        "rows": rows,
    }
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
