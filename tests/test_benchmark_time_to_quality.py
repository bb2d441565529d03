"""``benchmarks/time_to_quality.py``: the time to the target is read off each method's curve at its
first evaluation at or above (best in the run - tolerance), the evaluations are off the clock, and
the markdown table says which method got there first. The ``--quick`` run itself is slow (it
compiles a step of every model): marked ``slow``."""

import importlib.util
import json
import pathlib
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def ttq():
    sys.path.insert(0, str(BENCH))  # the script imports its folder's modules (bbvi, lda_online, _agree)
    try:
        spec = importlib.util.spec_from_file_location("benchmarks_time_to_quality", BENCH / "time_to_quality.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))


def _curve(points):
    return [{"step": i, "time_s": t, "quality": q} for i, (t, q) in enumerate(points)]


def _model(ttq, vijax_points, peer_points, tolerance=0.1):
    rows = [
        ttq.row("vijax", "vijax", _curve(vijax_points), 0.0, 1.0, 0.01),
        ttq.row("peer", "scikit-learn", _curve(peer_points), 0.0, 0.0, 0.1),
    ]
    return {
        "model": "m",
        "kind": "gmm",
        "setting": "s",
        "quality": "q",
        "tolerance": tolerance,
        "notes": [],
        "rows": rows,
    }


def test_time_to_target_is_the_first_evaluation_within_the_tolerance_of_the_best(ttq):
    # vijax: slow start (compile), then best; the peer: fast start, plateaus 0.15 below
    m = ttq.summarize(_model(ttq, [(1.0, -5.0), (1.5, -1.2), (2.0, -1.05), (2.5, -1.0)], [(0.1, -3.0), (0.5, -1.15)]))
    assert m["best"] == -1.0 and m["target"] == pytest.approx(-1.1)
    vijax, peer = m["rows"]
    assert (vijax["time_to_target_s"], vijax["steps_to_target"]) == (2.0, 2)  # -1.05 >= -1.1; -1.2 is not
    assert peer["time_to_target_s"] is None and peer["ratio_to_vijax"] is None  # -1.15 never within 0.1
    assert vijax["time_to_peer_final_s"] == {"peer": 2.0}  # -1.2 at 1.5 s is below the peer's final -1.15


def test_ratio_is_the_peers_time_over_vijaxs(ttq):
    m = ttq.summarize(_model(ttq, [(4.0, -2.0), (6.0, -1.0)], [(1.0, -1.5), (3.0, -1.0)], tolerance=0.2))
    assert m["rows"][1]["ratio_to_vijax"] == pytest.approx(3.0 / 6.0)  # the peer first: ratio < 1


def test_a_peer_first_is_explained_by_vijaxs_set_up_and_compilation(ttq):
    m = ttq.summarize(_model(ttq, [(4.0, -2.0), (6.0, -1.0)], [(1.0, -1.5), (3.0, -1.0)], tolerance=0.2))
    assert (
        "- peer reaches the target first (0.50×): vijax's set-up and compilation take 1.00 s of its 6.00 s; "
        "its updates to the target take 5.00 s against peer's 3.00 s." in ttq.table(m)
    )
    m = ttq.summarize(_model(ttq, [(1.0, -1.0)], [(3.0, -1.0)]))  # vijax first: no such line
    assert "reaches the target first" not in ttq.table(m)


def test_evaluation_is_off_the_methods_clock(ttq):
    def step(st, t):
        time.sleep(0.002)
        return st + 1

    def score(st):
        time.sleep(0.05)  # ten times the whole run's stepping
        return float(st)

    method = ttq.Method("m", "vijax", lambda: (0, {"compile_s": 0.0}), step, score, lambda st: None)
    r = ttq.trace(method, 5, {1, 2, 3, 4, 5})
    assert [c["step"] for c in r["curve"]] == [0, 1, 2, 3, 4, 5] and r["final_quality"] == 5.0
    assert 5 * 0.002 <= r["end_to_end_s"] < 0.2  # six evaluations of 0.05 s would be 0.3 s


def test_markdown_names_the_machine_and_a_target_not_reached(ttq):
    m = ttq.summarize(_model(ttq, [(1.0, -2.0), (2.0, -1.0)], [(0.5, -1.5)]))
    result = {
        "machine": {
            "processor": "CPU X",
            "cpus": 2,
            "jax": "0.0",
            "device": "cpu",
            "versions": {"jax": "0.0"},
            "loadavg_1_5_15_min_at_start": (1.0, 1.0, 1.0),
            "loadavg_1_5_15_min_at_end": (2.0, 1.0, 1.0),
        },
        "argv": [],
        "total_s": 1.0,
        "import_s": {"jax": 0.5},
        "models": [m],
    }
    text = ttq.markdown(result)
    assert "CPU X, 2 CPU cores" in text and "1.00, 1.00, 1.00 at the start" in text
    assert "| peer | 0.00 | 0.00 | 100 | 0.50 (0) | -1.5000 | not reached | — |" in text
    assert "| vijax | 0.00 | 1.00 | 10 | 2.00 (1) | -1.0000 | 2.00 (1) |  |" in text


def test_starts_are_summarized_each_against_its_own_target(ttq):
    """Three starts: vijax first; only vijax reaches its start's target; only the peer does. Each
    start's target is its own best less the tolerance."""
    starts = [
        ttq.start_summary(0, _model(ttq, [(1.0, -1.0)], [(3.0, -1.0)])["rows"], 0.1),  # both, vijax first: 3x
        ttq.start_summary(1, _model(ttq, [(1.0, -1.0)], [(3.0, -1.5)])["rows"], 0.1),  # the peer 0.5 below
        ttq.start_summary(2, _model(ttq, [(1.0, -2.0)], [(3.0, -1.0)])["rows"], 0.1),  # vijax 1.0 below
    ]
    assert [st["target"] for st in starts] == pytest.approx([-1.1, -1.1, -1.1])
    assert [ttq.vijax_first(st) for st in starts] == [True, True, False]
    m = {**_model(ttq, [(1.0, -1.0)], [(3.0, -1.0)]), "starts": starts}
    text = ttq.table(ttq.summarize(m))
    assert "reaches the target first in 2 of 3." in text
    assert (
        "- peer, per start: peer / vijax 3.00×, peer not reached, vijax not reached; final quality, "
        "vijax − peer: +0.000, +0.500, -1.000 (mean -0.167)." in text
    )


@pytest.mark.slow
def test_quick_run_writes_every_models_curves_and_table(tmp_path):
    out = tmp_path / "ttq.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "time_to_quality.py"), "--quick", "--no-wiki", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [m["kind"] for m in result["models"]] == ["lda", "gmm", "hmm", "bbvi"]
    for m in result["models"]:
        assert m["target"] == pytest.approx(max(r["best_quality"] for r in m["rows"]) - m["tolerance"])
        assert m["rows"][0]["library"] == "vijax" and len(m["rows"]) >= 2
        for r in m["rows"]:
            times = [c["time_s"] for c in r["curve"]]
            assert r["end_to_end_s"] == times[-1] and [c["step"] for c in r["curve"]] == sorted(
                c["step"] for c in r["curve"]
            )
            if r["library"] == "vijax":  # one run, one clock (scikit-learn's GMM points are separate fits)
                assert times == sorted(times)
    assert result["agree"] is True
    assert "### Time to quality against the peers" in (tmp_path / "ttq.md").read_text()
