"""Import time of vijax beside JAX and the peers a user also imports, each in fresh interpreters.

What a user waits for before the first line of a script runs: ``import jax`` (the floor every JAX
library pays), ``import vijax`` (its layers, JAX with them, load at their first use: PEP 562), the imports of a
user's LDA script (``read_ldac``, ``Minibatcher``, ``svi``, ``schedules``, ``LDA``: each package
loads only the modules of the names used), every public name of every layer but ``interop`` loaded
(TFP's JAX substrate still loads at its own first use),
``import vijax`` followed by that first use of TFP (``vijax.types.tfp_jax()``: what ``import
vijax`` cost when it imported TFP), and the peers ``numpyro``, ``blackjax``, ``sklearn.mixture`` and
``gensim`` where installed. Import has no compile or steady state: each row is the wall time of one
fresh interpreter's imports (the median and the range over ``--repeats`` runs, the interpreter's own
start subtracted: ``python -c pass``, measured the same way). Writes
``benchmarks/results/import_time.json``.

``--before DIR`` times every case also with another checkout of vijax first on the path
(``PYTHONPATH=DIR``, e.g. a ``git worktree`` of an older commit), each run of it in turn with a run
of this checkout, so that both see the same load; its figures are the rows' ``before_*``.

    python benchmarks/import_time.py --repeats 7
    python benchmarks/import_time.py --repeats 15 --before /tmp/vijax-before
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

from _device import add_device_argument, child_env  # this folder's --device switch

CASES = {
    "jax": "import jax",
    "vijax": "import vijax",
    "vijax, LDA script": "from vijax.data import Minibatcher, read_ldac; from vijax.inference import schedules, svi; "
    "from vijax.models import LDA",
    "vijax, every name": "import vijax; [getattr(m, n) for m in (vijax.data, vijax.expfam, vijax.inference, "
    "vijax.metrics, vijax.models, vijax.run, vijax.solvers) for n in m.__all__]",
    "vijax + first TFP use": "import vijax, vijax.types; vijax.types.tfp_jax()",
    "numpyro": "import numpyro",
    "blackjax": "import blackjax",
    "sklearn.mixture": "import sklearn.mixture",
    "gensim": "import gensim",
}


def _wall(code: str, env: dict | None = None, cwd: str | None = None) -> float | None:
    t0 = time.perf_counter()
    # the working directory is first on a ``-c`` interpreter's path: each checkout runs in its own
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, cwd=cwd)
    return time.perf_counter() - t0 if done.returncode == 0 else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "import_time.json"))
    parser.add_argument("--before", default=None, help="another vijax checkout, timed in turn with this one")
    add_device_argument(parser)  # the JAX platform of the importing processes (JAX_PLATFORMS)
    args = parser.parse_args(argv)
    env = child_env(args.device)
    before_env = None if args.before is None else dict(env, PYTHONPATH=os.path.abspath(args.before))
    base = statistics.median(_wall("pass", env) for _ in range(args.repeats))
    rows = []
    for name, code in CASES.items():
        times, before = [], []
        for _ in range(args.repeats):  # with --before, each run of this checkout in turn with one of the other
            times.append(_wall(code, env))
            if before_env is not None and name.startswith("vijax"):
                before.append(_wall(code, before_env, cwd=args.before))
        if any(t is None for t in times):
            rows.append({"case": name, "code": code, "installed": False})
            continue
        net = [t - base for t in times]
        row = {
            "case": name,
            "code": code,
            "installed": True,
            "median_s": statistics.median(net),
            "min_s": min(net),
            "max_s": max(net),
        }
        if before and all(t is not None for t in before):
            old = [t - base for t in before]
            row.update(before_median_s=statistics.median(old), before_min_s=min(old), before_max_s=max(old))
        rows.append(row)
    print(f"{'imports':<24} {'median s':>9} {'range s':>15}" + (f" {'before: median s':>17}" if before_env else ""))
    for r in rows:
        if r["installed"]:
            extra = f" {r['before_median_s']:>17.3f}" if "before_median_s" in r else ""
            print(f"{r['case']:<24} {r['median_s']:>9.3f} {r['min_s']:>7.3f}–{r['max_s']:.3f}{extra}")
        else:
            print(f"{r['case']:<24} {'not installed':>9}")
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(
            {
                "machine": machine,
                "repeats": args.repeats,
                "interpreter_start_s": base,
                "before": args.before,
                "load_average_at_end": list(os.getloadavg()),
                "rows": rows,
            },
            fh,
            indent=2,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
