"""Compile time of every config's step (the target: at most 2 s per step on a 2-core CPU).

For each config in ``configs/`` (or those named), in a fresh Python process (cold, as a user's
``vijax run`` starts, and so that one config's memory does not stay), the experiment is built as
``vijax run`` builds it (``vijax.run.load_config``, ``vijax.run.build_experiment``) and, for its run
and each of its baselines, the chunk program the runner compiles first (``vijax.run.lower_run``: a
``lax.scan`` of ``chunk_size`` steps at the config's real sizes) is traced and lowered, then
compiled, with the persistent compilation cache off. Nothing runs beyond the init.

Per row: trace+lower seconds, XLA compile seconds (wall, and the compiling process's CPU seconds,
the steadier figure on a loaded machine), the lowered StableHLO text in kB, the number of chunk
programs the run compiles (1 with a ``batch_fn``; with host batches, the distinct stacked shapes
over the run's chunks, counted for at most a few seconds: ">= n" when cut short), the load average
before and after, and whether the compile meets the 2 s budget. The budget is per step: with
``--per-step``, a run whose program holds several steps (methods in lock step, vmapped restarts)
is also measured with each step alone (rows "<method> alone", "1 restart"). A config whose data is absent
here is reported as skipped. Each process starts as ``vijax run`` does, with XLA's fast CPU compile
settings (``vijax.run.fast_cpu_compile``); ``--compare-flags`` also measures every config with XLA's
defaults, each in its own process (the "fast flags" column).

    python benchmarks/compile_time.py --compare-flags      # every config -> results/compile_time.json
    python benchmarks/compile_time.py --per-step configs/dp_bernoulli.yaml  # also each step alone
    python benchmarks/compile_time.py                      # every config, the fast settings only
    python benchmarks/compile_time.py configs/gmm_em.yaml  # some (no JSON written unless --out)
    python benchmarks/compile_time.py --summary benchmarks/results/compile_time.json  # per config
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

from _device import add_device_argument, child_env  # this folder's --device switch

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUDGET_S = 2.0  # the target: compile <= 2 s per step
SHAPE_COUNT_SECONDS = 5.0  # at most this long counting a host-batch run's chunk shapes
CHILD_TIMEOUT_S = 300


def _programs(host_batches, num_steps: int, chunk_size: int):
    """The number of distinct stacked host-batch shapes over a run's chunks (each compiles the
    chunk again), or a lower bound as ``">= n"`` when counting took too long."""
    import jax

    if host_batches is None:
        return 1
    shapes, start = set(), time.perf_counter()
    for t0 in range(0, num_steps, chunk_size):
        chunk = host_batches(t0, chunk_size)
        shapes.add(tuple((x.shape, str(x.dtype)) for x in jax.tree.leaves(chunk)))
        if time.perf_counter() - start > SHAPE_COUNT_SECONDS and t0 + chunk_size < num_steps:
            return f">= {len(shapes)}"
    return len(shapes)


def _measure(alg, key, rc, batch_fn, host_batches, init_state) -> dict:
    import jax

    import vijax.run as vr

    load0 = os.getloadavg()[0]
    start = time.perf_counter()
    init_key = jax.random.split(key)[0]
    state = alg.init(init_key) if init_state is None else init_state(init_key)
    jax.block_until_ready(state)
    init_s = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    lowered = vr.lower_run(alg, key, batch_fn=batch_fn, host_batches=host_batches, init_state=state, config=rc)
    lower_s, lower_cpu = time.perf_counter() - start, time.process_time() - cpu
    kb = len(lowered.as_text()) / 1000
    start, cpu = time.perf_counter(), time.process_time()
    lowered.compile()
    compile_s, compile_cpu = time.perf_counter() - start, time.process_time() - cpu
    return {
        "init_s": round(init_s, 2),
        "lower_s": round(lower_s, 2),
        "lower_cpu_s": round(lower_cpu, 2),
        "compile_s": round(compile_s, 2),
        "compile_cpu_s": round(compile_cpu, 2),
        "kb": round(kb, 1),
        "chunk_size": rc.chunk_size,
        "programs": _programs(host_batches, rc.num_steps, rc.chunk_size),
        "within_budget": compile_s <= BUDGET_S,
        "load_before": round(load0, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def _child(path: str, fast: bool, per_step: bool = False) -> None:
    """Measures one config; prints one JSON row per run (the experiment's, then each baseline's)."""
    import vijax.run as vr

    vr.import_builtin_experiments()
    config = vr.load_config(path)
    rc = vr.RunConfig(**config["run"]).replace(compile_cache=False, progress=False, fast_cpu_compile=fast)
    rc.apply_process_settings()  # x64 before any array; the persistent cache off: a cold start
    name = pathlib.Path(path).stem
    try:
        exp = vr.build_experiment(config)
    except vr.ConfigError as e:
        if isinstance(e.__cause__, OSError):
            print(json.dumps({"config": name, "run": "-", "skipped": f"data absent: {e}"}), flush=True)
            return
        raise
    import jax

    runs = [("run", exp.algorithm, rc, config["seed"], exp.batch_fn, exp.host_batches, exp.init_state)]
    for b in exp.baselines:
        seed = config["seed"] if b.seed is None else b.seed
        runs.append((b.name, b.algorithm, rc.replace(**b.settings), seed, b.batch_fn, b.host_batches, b.init_state))
    for label, alg, brc, seed, batch_fn, host_batches, init_state in runs:
        row = {"config": name, "run": label, "fast_cpu_compile": fast}
        row |= _measure(alg, jax.random.PRNGKey(seed), brc, batch_fn, host_batches, init_state)
        print(json.dumps(row), flush=True)
    if per_step:
        for label, alone in _single_steps(config, exp, jax.random.PRNGKey(config["seed"])):
            e = vr.build_experiment(alone)
            row = {"config": name, "run": label, "fast_cpu_compile": fast, "single_step": True}
            row |= _measure(
                e.algorithm, jax.random.PRNGKey(config["seed"]), rc, e.batch_fn, e.host_batches, e.init_state
            )
            print(json.dumps(row), flush=True)


def _single_steps(config: dict, exp, key) -> list:
    """The configs of one step each, for a run whose program holds several: each method alone where
    the run drives ``algorithm.methods`` in lock step (its state is a dict keyed by them, as
    ``vijax.inference.lock_step``'s is), and one restart where it runs ``algorithm.restarts`` /
    ``num_restarts`` > 1 in lock step (``vmap``)."""
    import copy

    import jax

    acfg, out = config.get("algorithm", {}), []
    methods = acfg.get("methods") or []
    if len(methods) > 1:
        init_key = jax.random.split(key)[0]
        state = exp.algorithm.init(init_key) if exp.init_state is None else exp.init_state(init_key)
        if isinstance(state, dict) and set(state) == set(methods):
            for m in methods:
                alone = copy.deepcopy(config)
                alone["algorithm"]["methods"] = [m]
                out.append((f"{m} alone", alone))
    for k in ("restarts", "num_restarts"):
        if isinstance(acfg.get(k), int) and acfg[k] > 1:
            alone = copy.deepcopy(config)
            alone["algorithm"][k] = 1
            out.append(("1 restart", alone))
    return out


def _last_error(stderr: str) -> str:
    """The exception line of a child's traceback (the last line naming an error), not JAX's
    closing note about filtered frames."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    named = [ln for ln in lines if "Error" in ln.split(":", 1)[0]]
    return (named[-1] if named else lines[-1] if lines else "failed")[:200]


def _table(rows: list) -> str:
    lines = [
        "| config | run | fast flags | lower s | compile s (CPU s) | kB | programs | <= 2 s | load before/after |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        flags = "yes" if r.get("fast_cpu_compile", False) else "no"
        if "skipped" in r or "error" in r:
            lines.append(f"| {r['config']} | {r['run']} | {flags} | {r.get('skipped') or r.get('error')} | | | | | |")
            continue
        lines.append(
            f"| {r['config']} | {r['run']} | {flags} | {r['lower_s']:.2f} | {r['compile_s']:.2f} ({r['compile_cpu_s']:.2f}) | "
            f"{r['kb']:.0f} | {r['programs']} | {'yes' if r['within_budget'] else '**no**'} | "
            f"{r['load_before']:.1f} / {r['load_after']:.1f} |"
        )
    return "\n".join(lines)


def summary(rows: list) -> str:
    """One line per config (the largest figures over its runs; the runs over budget named)."""
    lines = [
        "| config | fast flags | runs | lower s | compile s (CPU s) | kB | within 2 s | over budget | slowest step alone |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, fast in dict.fromkeys((r["config"], r.get("fast_cpu_compile", False)) for r in rows):
        mine = [r for r in rows if r["config"] == name and r.get("fast_cpu_compile", False) == fast]
        steps = [r for r in mine if "compile_s" in r and r.get("single_step")]
        rs = [r for r in mine if "compile_s" in r and not r.get("single_step")]
        flags = "yes" if fast else "no"
        if not rs:
            why = next((r.get("skipped") or r.get("error") for r in mine), "")
            lines.append(f"| {name} | {flags} | skipped: {why} | | | | | | |")
            continue
        slow = max(rs, key=lambda r: r["compile_s"])
        top = max(steps, key=lambda r: r["compile_s"], default=None)
        alone = "-" if top is None else f"{top['run']} {top['compile_s']:.1f} s"
        over = [f"{r['run']} {r['compile_s']:.1f} s" for r in rs if not r["within_budget"]]
        lines.append(
            f"| {name} | {flags} | {len(rs)} | {max(r['lower_s'] for r in rs):.2f} | {slow['compile_s']:.2f} "
            f"({slow['compile_cpu_s']:.2f}) | {max(r['kb'] for r in rs):,.0f} | "
            f"{sum(r['within_budget'] for r in rs)} of {len(rs)} | "
            f"{', '.join(over[:3]) + (f' (+{len(over) - 3})' if len(over) > 3 else '') or '-'} | {alone} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", help="config files (default: every configs/*.yaml)")
    parser.add_argument(
        "--out",
        default=None,
        help="the JSON to write (default with no configs named: benchmarks/results/compile_time.json)",
    )
    parser.add_argument("--summary", default=None, metavar="JSON", help="print a results JSON's per-config table")
    parser.add_argument(
        "--compare-flags",
        action="store_true",
        help="measure every config twice, in separate processes: with XLA's default CPU compile settings "
        "and with vijax.run.fast_cpu_compile's (as vijax run starts; the default is those alone)",
    )
    parser.add_argument(
        "--per-step",
        action="store_true",
        help="also measure, for a run whose program holds several steps (methods in lock step, vmapped "
        "restarts), the program of each step alone (the 2 s budget is per step)",
    )
    add_device_argument(parser)  # the children compile for it (JAX_PLATFORMS)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-default-flags", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.summary is not None:
        print(summary(json.loads(pathlib.Path(args.summary).read_text())["rows"]))
        return
    if args.child is not None:
        _child(args.child, fast=not args.child_default_flags, per_step=args.per_step)
        return
    paths = args.configs or sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs").glob("*.yaml"))
    out = args.out or (None if args.configs else str(ROOT / "benchmarks" / "results" / "compile_time.json"))
    rows, start = [], time.perf_counter()
    settings = [["--child-default-flags"], []] if args.compare_flags else [[]]
    for path, flags in ((p, f) for p in paths for f in settings):
        name = pathlib.Path(path).stem
        try:
            proc = subprocess.run(
                [sys.executable, __file__, "--child", path, *flags, *(["--per-step"] if args.per_step else [])],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=CHILD_TIMEOUT_S,
                env=child_env(args.device)
                | {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
            )  # this checkout's vijax, not an installed one
            got = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
            if proc.returncode != 0:
                got.append(
                    {"config": name, "run": "?", "fast_cpu_compile": not flags, "error": _last_error(proc.stderr)}
                )
        except subprocess.TimeoutExpired:
            got = [{"config": name, "run": "?", "fast_cpu_compile": not flags, "error": f"over {CHILD_TIMEOUT_S} s"}]
        for r in got:
            print(_table([r]).splitlines()[-1], flush=True)
        rows += got
    import jax

    measured = [r for r in rows if "compile_s" in r]
    result = {
        "benchmark": "compile time of each config's chunk program (benchmarks/compile_time.py)",
        "machine": f"the shared 2-core x86_64 VM ({platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()})",
        "python": platform.python_version(),
        "jax": jax.__version__,
        "budget_s": BUDGET_S,
        "total_s": round(time.perf_counter() - start, 1),
        "over_budget": [
            f"{r['config']}/{r['run']}" + ("" if r.get("fast_cpu_compile") else " (default flags)")
            for r in measured
            if not r["within_budget"]
        ],
        "rows": rows,
    }
    print(_table(rows))
    for fast in dict.fromkeys(r.get("fast_cpu_compile", False) for r in measured):
        for alone in (False, True):
            mine = [
                r for r in measured if r.get("fast_cpu_compile", False) == fast and r.get("single_step", False) == alone
            ]
            if mine:
                print(
                    f"{'fast' if fast else 'default'} XLA CPU flags: {sum(r['within_budget'] for r in mine)} of "
                    f"{len(mine)} {'single steps (run alone)' if alone else 'run programs'} within {BUDGET_S} s"
                )
    print(f"{result['total_s']} s in all")
    if out:
        pathlib.Path(out).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
