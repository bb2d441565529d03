"""XLA's CPU compiler settings against the LDA SVI step: compile time and step time per setting.

The evidence for ``vijax.run.fast_cpu_compile`` (the target: compile one LDA svi step in at most
2 s with no loss of steady-state speed). For each setting, in a fresh process (XLA reads
``XLA_FLAGS`` once, when JAX starts): LDA's mean-field SVI step with its default SQUAREM E-step
(K = 50, V = 5,000, S = 256 synthetic documents of about 100 words, padded to one length; one
CPU device, float32; the step returning the new state alone, compiled by
``vijax.inference.jit_step`` as the runner and ``benchmarks/lda_online.py`` compile it) is lowered
and compiled (wall and CPU seconds of the process); end to end is the wall time from the first call
of a fresh compiled step (tracing and compiling included) to the state after 8 minibatches; then
the step runs over the 8 minibatches ``--rounds`` times, and the step time is the fastest round's
mean. The settings are run ``--repeats`` times in
turn (so that a change of the machine's load affects them alike), and each figure is the median
over the repeats. The first setting, XLA's defaults, is the reference of the ratios.

    python benchmarks/xla_flags.py                  # -> benchmarks/results/xla_flags.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from _device import add_device_argument  # this folder's --device switch

SETTINGS = {
    "XLA defaults": "",
    "no loop unrolling": "--xla_backend_extra_options=xla_cpu_disable_loop_unrolling",
    "no SLP vectorizer": "--xla_backend_extra_options=xla_cpu_disable_slp_vectorizer",
    "classic emitter (no fusion emitters)": "--xla_cpu_use_fusion_emitters=false",
    "backend optimization level 1": "--xla_backend_optimization_level=1",
    "no expensive LLVM passes": "--xla_llvm_disable_expensive_passes=true",
    "optimize for size": "--xla_backend_extra_options=xla_cpu_optimize_for_size",
    "vijax.run.fast_cpu_compile": None,  # the settings fast_cpu_compile adds
}


def _child(rounds: int, fast: bool) -> dict:
    if fast:
        from vijax.run import fast_cpu_compile

        assert fast_cpu_compile()  # before anything runs on the backend
    import jax
    import numpy as np

    from vijax.data import bucket_length, sample_lda_corpus
    from vijax.inference import jit_step, schedules, svi
    from vijax.models import LDA

    corpus = sample_lda_corpus(0, 8 * 256, 50, 5000, doc_length_mean=100.0).corpus
    model = LDA(50, 5000, alpha=0.1, eta=0.02, max_iters=100, tol=1e-3)
    alg = svi(model, num_data=corpus.num_docs, schedule=schedules.robbins_monro(1.0, tau=64.0, kappa=0.7))
    state = alg.init(jax.random.PRNGKey(0))
    length = bucket_length(int(corpus.doc_unique_words.max()))
    batches = [corpus.batch(np.arange(i * 256, (i + 1) * 256), length=length) for i in range(8)]
    key = jax.random.PRNGKey(1)
    # end to end, as a user meets it: from the first call (tracing, compiling) to the final state
    step = jit_step(lambda k, st, batch: alg.step(k, st, batch)[0])
    start, st = time.perf_counter(), state
    for b in batches:
        st = step(key, st, b)
    jax.block_until_ready(st)
    end_to_end_s = time.perf_counter() - start
    # compile apart: a program of its own (a new function: jit caches traces by function), lowered and compiled
    fresh = jit_step(lambda k, st, batch: alg.step(k, st, batch)[0])
    start = time.perf_counter()
    lowered = fresh.lower(key, state, batches[0])
    lower_s = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    lowered.compile()
    compile_s, compile_cpu_s = time.perf_counter() - start, time.process_time() - cpu
    best = float("inf")  # steady state: the first program, compiled
    for _ in range(rounds):
        start, st = time.perf_counter(), state
        for b in batches:
            st = step(key, st, b)
        jax.block_until_ready(st)
        best = min(best, (time.perf_counter() - start) / len(batches))
    return {
        "lower_s": round(lower_s, 3),
        "compile_s": round(compile_s, 3),
        "compile_cpu_s": round(compile_cpu_s, 3),
        "step_ms": round(best * 1e3, 2),
        "end_to_end_s": round(end_to_end_s, 3),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="times each setting is measured, in turn")
    p.add_argument("--rounds", type=int, default=5, help="rounds of 8 steps per measurement (the fastest counts)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "xla_flags.json"))
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--child-fast", action="store_true", help=argparse.SUPPRESS)
    add_device_argument(p)
    args = p.parse_args(argv)
    if args.device != "cpu":
        raise SystemExit(
            f"--device {args.device}: this benchmark measures XLA's CPU compiler settings; use --device cpu"
        )
    if args.child:
        print(json.dumps(_child(args.rounds, args.child_fast)))
        return {}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runs = {name: [] for name in SETTINGS}
    load_start = os.getloadavg()
    for _ in range(args.repeats):
        for name, flags in SETTINGS.items():
            env = dict(os.environ, XLA_FLAGS=flags or "", JAX_PLATFORMS="cpu")
            env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])  # this checkout's vijax
            out = subprocess.run(
                [sys.executable, __file__, "--child", "--rounds", str(args.rounds)]
                + (["--child-fast"] if flags is None else []),
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    rows = []
    for name, rs in runs.items():
        rows.append(
            {
                "setting": name,
                "xla_flags": rs[0]["xla_flags"],
                **{
                    k: statistics.median(r[k] for r in rs)
                    for k in ("lower_s", "compile_s", "compile_cpu_s", "step_ms", "end_to_end_s")
                },
                "runs": rs,
            }
        )
    ref = rows[0]
    print("| setting | compile s (CPU s) | × defaults | step ms | × defaults | end-to-end s, 8 steps | × defaults |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r['setting']} | {r['compile_s']:.2f} ({r['compile_cpu_s']:.2f}) | "
            f"{r['compile_s'] / ref['compile_s']:.2f} | {r['step_ms']:.1f} | {r['step_ms'] / ref['step_ms']:.2f} | "
            f"{r['end_to_end_s']:.2f} | {r['end_to_end_s'] / ref['end_to_end_s']:.2f} |"
        )
    import jax

    result = {
        "benchmark": "XLA CPU compile settings on the LDA SVI step (benchmarks/xla_flags.py)",
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "jax": jax.__version__,
        "step": "LDA svi, mean-field SQUAREM E-step, K = 50, V = 5000, S = 256, one CPU device, float32, jit_step",
        "repeats": args.repeats,
        "rounds": args.rounds,
        "loadavg_1_5_15_min_at_start": load_start,
        "loadavg_1_5_15_min_at_end": os.getloadavg(),
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
