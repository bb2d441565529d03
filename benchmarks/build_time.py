"""What ``vijax run`` does before its first step: each config's set-up (data, model, algorithm)
and the initial state, timed and with the programs XLA compiles for them counted.

For each config in ``configs/`` (or those named), in a fresh Python process, as ``vijax run`` starts
(``vijax.run.load_config``, ``RunConfig.apply_process_settings`` with the persistent compilation
cache off, so that nothing is read from an earlier run): the seconds and the compilations of
``vijax.run.build_experiment`` (synthetic data drawn, a data set read and prepared, the model and the
algorithm made), then of the initial state (the experiment's ``init_state`` or the algorithm's
``init``, after the process's first key split, which every run makes). Every JAX operation run
outside a program is a compilation of its own (about 10-50 ms each on a 2-core CPU), so the count
says how much of the set-up is compilation. Rounds run the configs in turn, each round in fresh
processes; the table gives the median and range of the seconds, and the compilations (the same in
every round). A config whose data is absent here is reported as skipped.

To compare two versions of the code, run the script once per checkout with its own ``--out``
(``PYTHONPATH=<checkout>``: the children import the vijax this process imports), in turn, and
gather the JSONs under ``"before"`` and ``"after"`` (``results/build_time_ab.json``); ``--compare``
prints their table.

    python benchmarks/build_time.py                        # every config -> results/build_time.json
    python benchmarks/build_time.py configs/hmm_categorical.yaml --rounds 3
    python benchmarks/build_time.py --compare benchmarks/results/build_time_ab.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

from _device import add_device_argument, child_env, use_device  # this folder's --device switch

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHILD_TIMEOUT_S = 600


class _Count(logging.Handler):
    """Counts JAX's "Finished XLA compilation" records (``jax.log_compiles``)."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def emit(self, record):
        if record.getMessage().startswith("Finished XLA compilation"):
            self.n += 1


def _child(path: str) -> None:
    """Measures one config; prints one JSON row."""
    import vijax.run as vr

    vr.import_builtin_experiments()
    config = vr.load_config(path)
    rc = vr.RunConfig(**config["run"]).replace(compile_cache=False, progress=False)
    rc.apply_process_settings()  # as vijax run starts: x64, the fast CPU compile settings
    import jax

    count = _Count()
    logger = logging.getLogger("jax")
    logger.addHandler(count)
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    jax.config.update("jax_log_compiles", True)
    name = pathlib.Path(path).stem
    start = time.perf_counter()
    try:
        exp = vr.build_experiment(config)
    except vr.ConfigError as e:
        if isinstance(e.__cause__, OSError):
            print(json.dumps({"config": name, "skipped": f"data absent: {e}"}), flush=True)
            return
        raise
    build_s, build_n = time.perf_counter() - start, count.n
    start = time.perf_counter()
    init_key = jax.random.split(jax.random.PRNGKey(config["seed"]))[0]  # the run's first split
    split_s, split_n = time.perf_counter() - start, count.n - build_n
    start = time.perf_counter()
    state = exp.algorithm.init(init_key) if exp.init_state is None else exp.init_state(init_key)
    jax.block_until_ready(state)
    init_s, init_n = time.perf_counter() - start, count.n - build_n - split_n
    row = {"config": name, "build_s": build_s, "build_compilations": build_n, "split_s": split_s}
    row |= {"init_s": init_s, "init_compilations": init_n}
    print(json.dumps(row), flush=True)


def _run_child(path: str, device: str) -> dict:
    name = pathlib.Path(path).stem
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", path],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            env=child_env(device) | {"PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT))},
        )
    except subprocess.TimeoutExpired:
        return {"config": name, "error": f"over {CHILD_TIMEOUT_S} s"}
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not rows:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        return {"config": name, "error": (lines[-1] if lines else "failed")[:200]}
    return rows[-1]


def _median_range(values: list) -> tuple:
    return statistics.median(values), min(values), max(values)


def summarise(runs: dict) -> list:
    """One row per config: the median and range over rounds of each time; the compilations."""
    rows = []
    for name, got in runs.items():
        ok = [r for r in got if "build_s" in r]
        if not ok:
            rows.append({"config": name, "skipped": got[0].get("skipped") or got[0].get("error")})
            continue
        row = {"config": name, "rounds": len(ok)}
        for key in ("build_s", "split_s", "init_s"):
            row[key], lo, hi = _median_range([r[key] for r in ok])
            row[key + "_range"] = [lo, hi]
        row["build_compilations"] = [r["build_compilations"] for r in ok]
        row["init_compilations"] = [r["init_compilations"] for r in ok]
        rows.append(row)
    return rows


def table(rows: list) -> str:
    lines = [
        "| config | set-up s | set-up compilations | first key split s | initial state s | its compilations |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['config']} | skipped: {r['skipped']} | | | | |")
            continue
        b, i = r["build_s_range"], r["init_s_range"]
        lines.append(
            f"| {r['config']} | {r['build_s']:.2f} ({b[0]:.2f}–{b[1]:.2f}) | {max(r['build_compilations'])} | "
            f"{r['split_s']:.2f} | {r['init_s']:.2f} ({i[0]:.2f}–{i[1]:.2f}) | {max(r['init_compilations'])} |"
        )
    return "\n".join(lines)


def compare(ab: dict) -> str:
    """The table of two versions measured in turn: ``ab`` holds each version's results (a list of
    this script's JSONs, one per round) under ``"before"`` and ``"after"``."""
    runs = {}
    for version in ("before", "after"):
        for result in ab[version]:
            for name, got in result["runs"].items():
                runs.setdefault(name, {}).setdefault(version, []).extend(r for r in got if "build_s" in r)
    lines = [
        "| config | set-up s, before | compilations | set-up s, after | compilations | initial state s, before → after |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, by in runs.items():
        b, a = by.get("before", []), by.get("after", [])
        if not b or not a:
            lines.append(f"| {name} | skipped | | | | |")
            continue
        med = [_median_range([r["build_s"] for r in rs]) for rs in (b, a)]
        init = [statistics.median(r["init_s"] for r in rs) for rs in (b, a)]
        lines.append(
            f"| {name} | {med[0][0]:.2f} ({med[0][1]:.2f}–{med[0][2]:.2f}) | {max(r['build_compilations'] for r in b)} | "
            f"{med[1][0]:.2f} ({med[1][1]:.2f}–{med[1][2]:.2f}) | {max(r['build_compilations'] for r in a)} | "
            f"{init[0]:.2f} → {init[1]:.2f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", help="config files (default: every configs/*.yaml)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds over the configs (default 1)")
    parser.add_argument(
        "--out", default=None, help="the JSON to write (default with no configs named: results/build_time.json)"
    )
    add_device_argument(parser)  # the children run JAX there (JAX_PLATFORMS)
    parser.add_argument(
        "--compare",
        default=None,
        metavar="JSON",
        help="print the table of a before/after JSON (results/build_time_ab.json)",
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compare is not None:
        print(compare(json.loads(pathlib.Path(args.compare).read_text())))
        return
    if args.child is not None:
        _child(args.child)
        return
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    device = use_device(args.device)  # stops with a clear message where JAX sees no such device
    paths = args.configs or sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs").glob("*.yaml"))
    out = args.out or (None if args.configs else str(ROOT / "benchmarks" / "results" / "build_time.json"))
    load0, start = os.getloadavg(), time.perf_counter()
    runs: dict = {pathlib.Path(p).stem: [] for p in paths}
    for _ in range(args.rounds):
        for path in paths:
            row = _run_child(path, args.device)
            runs[row["config"]].append(row)
            print(json.dumps(row), flush=True)
    rows = summarise(runs)
    print(table(rows))
    if out:
        import jax

        result = {
            "machine": {
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
                "jax": jax.__version__,
                "device": device,
                "loadavg_1_5_15_min_at_start": list(load0),
                "loadavg_1_5_15_min_at_end": list(os.getloadavg()),
            },
            "settings": {"rounds": args.rounds, "wall_s": time.perf_counter() - start},
            "rows": rows,
            "runs": runs,
        }
        pathlib.Path(out).write_text(json.dumps(result, indent=1))
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
