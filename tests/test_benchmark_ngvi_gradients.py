"""``benchmarks/ngvi_gradients.py``: a smoke run writes one row per estimate and dimension, with
the exact-Hessian estimate left out above ``--hessian-max-d``, and its table marks the best final
ELBO of each dimension. Each row compiles a step: marked ``slow``."""

import json
import pathlib
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.slow
def test_a_smoke_run_writes_each_estimate_and_the_table(tmp_path):
    out = tmp_path / "g.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "ngvi_gradients.py"), "--dims", "4", "70", "--steps", "3"]
        + ["--hessian-max-d", "10", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["d"], r["gradient"]) for r in rows] == [(4, "hessian"), (4, "secant"), (4, "reparam")] + [
        (70, "secant"),
        (70, "reparam"),
    ]
    for r in rows:
        assert r["compile_s"] > 0 and r["steady_ms"] > 0 and r["end_to_end_s"] >= r["compile_s"]
        assert r["final_elbo"] < 0 and r["final_elbo_se"] > 0
    assert "| 70 | secant |" in done.stdout and "below the best" in done.stdout
