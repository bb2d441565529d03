"""XLA's CPU compiler settings against the LDA SVI step (or the GMM CAVI step): compile time and step
time per setting.

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
over the repeats. The first setting, XLA's defaults, is the reference of the ratios. Every setting
but the last is a process's ``XLA_FLAGS`` with ``jit_step(..., cpu_compile="xla")``; the last,
``jit_step``'s own default (``cpu_compile="quick"``: the classic emitter and LLVM at ``-O2`` as
the program's compiler options, no ``XLA_FLAGS``), is what a user's script gets from ``jit_step``.

``--model gmm_f32`` / ``gmm_f64``: CAVI for a diagonal GMM (N = ``--gmm-points``, D = 64, K = 30,
the data of ``benchmarks/gmm_cavi.py``), its 8 steps on the one data array.

    python benchmarks/xla_flags.py                  # -> benchmarks/results/xla_flags.json
    python benchmarks/xla_flags.py --model gmm_f32  # -> benchmarks/results/xla_flags_gmm_f32.json
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
    "jit_step's quick CPU options (no XLA_FLAGS)": "quick",  # jit_step(cpu_compile="quick")
}
MODELS = ("lda", "gmm_f32", "gmm_f64")


def _problem(model_name: str, gmm_points: int):
    """(algorithm, initial state, the 8 batches of a measurement)."""
    import jax
    import numpy as np

    if model_name == "lda":
        from vijax.data import bucket_length, sample_lda_corpus
        from vijax.inference import schedules, svi
        from vijax.models import LDA

        corpus = sample_lda_corpus(0, 8 * 256, 50, 5000, doc_length_mean=100.0).corpus
        model = LDA(50, 5000, alpha=0.1, eta=0.02, max_iters=100, tol=1e-3)
        alg = svi(model, num_data=corpus.num_docs, schedule=schedules.robbins_monro(1.0, tau=64.0, kappa=0.7))
        length = bucket_length(int(corpus.doc_unique_words.max()))
        batches = [corpus.batch(np.arange(i * 256, (i + 1) * 256), length=length) for i in range(8)]
        return alg, alg.init(jax.random.PRNGKey(0)), batches
    if model_name == "gmm_f64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from vijax.data import sample_gmm
    from vijax.inference import cavi
    from vijax.models import DiagonalGMM

    dtype = jnp.float64 if model_name == "gmm_f64" else jnp.float32
    x64 = np.asarray(sample_gmm(jax.random.PRNGKey(0), gmm_points, 30, 64).x, np.float64)
    model = DiagonalGMM.from_data(x64, 30, dtype=dtype)
    x = model.features(jnp.asarray(x64, dtype))  # [x, x^2] once, as the runner does
    alg = cavi(model)
    return alg, alg.init(jax.random.PRNGKey(0), x), [x] * 8  # full batch: the same array at every step


def _child(rounds: int, fast: bool, quick: bool, model_name: str, gmm_points: int) -> dict:
    if fast:
        from vijax.run import fast_cpu_compile

        assert fast_cpu_compile()  # before anything runs on the backend
    import jax

    from vijax.inference import jit_step

    alg, state, batches = _problem(model_name, gmm_points)
    cpu_compile = "quick" if quick else "xla"
    key = jax.random.PRNGKey(1)
    # end to end, as a user meets it: from the first call (tracing, compiling) to the final state
    step = jit_step(lambda k, st, batch: alg.step(k, st, batch)[0], cpu_compile=cpu_compile)
    start, st = time.perf_counter(), state
    for b in batches:
        st = step(key, st, b)
    jax.block_until_ready(st)
    end_to_end_s = time.perf_counter() - start
    # compile apart: a program of its own (a new function: jit caches traces by function), lowered and compiled
    fresh = jit_step(lambda k, st, batch: alg.step(k, st, batch)[0], cpu_compile=cpu_compile)
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
        "compiler_options": step.compiler_options(),
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="times each setting is measured, in turn")
    p.add_argument("--rounds", type=int, default=5, help="rounds of 8 steps per measurement (the fastest counts)")
    p.add_argument("--model", default="lda", choices=MODELS)
    p.add_argument("--gmm-points", type=int, default=100_000, help="with --model gmm_*: N")
    p.add_argument("--out", default=None, help="default: results/xla_flags.json (lda), xla_flags_<model>.json")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--child-fast", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--child-quick", action="store_true", help=argparse.SUPPRESS)
    add_device_argument(p)
    args = p.parse_args(argv)
    if args.device != "cpu":
        raise SystemExit(
            f"--device {args.device}: this benchmark measures XLA's CPU compiler settings; use --device cpu"
        )
    if args.child:
        print(json.dumps(_child(args.rounds, args.child_fast, args.child_quick, args.model, args.gmm_points)))
        return {}
    results = os.path.join(os.path.dirname(__file__), "results")
    if args.out is None:
        args.out = os.path.join(results, "xla_flags.json" if args.model == "lda" else f"xla_flags_{args.model}.json")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runs = {name: [] for name in SETTINGS}
    load_start = os.getloadavg()
    for _ in range(args.repeats):
        for name, flags in SETTINGS.items():
            env = dict(os.environ, XLA_FLAGS=flags if flags not in (None, "quick") else "", JAX_PLATFORMS="cpu")
            env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])  # this checkout's vijax
            child = [
                "--child",
                "--rounds",
                str(args.rounds),
                "--model",
                args.model,
                "--gmm-points",
                str(args.gmm_points),
            ]
            out = subprocess.run(
                [sys.executable, __file__, *child]
                + (["--child-fast"] if flags is None else [])
                + (["--child-quick"] if flags == "quick" else []),
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
                "compiler_options": rs[0]["compiler_options"],
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
        "benchmark": f"XLA CPU compile settings on the {args.model} step (benchmarks/xla_flags.py)",
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "jax": jax.__version__,
        "step": (
            "LDA svi, mean-field SQUAREM E-step, K = 50, V = 5000, S = 256, one CPU device, float32, jit_step"
            if args.model == "lda"
            else f"DiagonalGMM cavi, N = {args.gmm_points}, D = 64, K = 30, {args.model[4:]}, one CPU device, jit_step"
        ),
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
