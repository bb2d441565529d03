"""``benchmarks/fit.py``: its closed-form references (against a grid integral and against each other), the distance
to the answer, the clock that leaves the checks out, the table's medians and targets, and each run's fresh process
(the command and its environment)."""

import importlib.util
import json
import pathlib
import subprocess
import sys
import types

import numpy as np
import pytest

pytest.importorskip("numpyro")

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def fb():
    spec = importlib.util.spec_from_file_location("benchmarks_fit", BENCH / "fit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_normal_gamma_closed_form_is_the_grid_posterior(fb):
    """The Normal–Gamma posterior's means and sds against a 600 x 600 grid of the unnormalized posterior."""
    y = fb.model_data("normal_gamma")["y"]
    mu, tau = np.meshgrid(np.linspace(-1.0, 4.0, 600), np.linspace(1e-3, 8.0, 600), indexing="ij")
    log_p = (3.0 - 1.0) * np.log(tau) - 2.0 * tau  # tau ~ Gamma(3, 2)
    log_p += 0.5 * np.log(0.5 * tau) - 0.25 * tau * (mu - 1.0) ** 2  # mu ~ N(1, 1 / (0.5 tau))
    log_p += 0.5 * y.size * np.log(tau) - 0.5 * tau * ((y[:, None, None] - mu) ** 2).sum(0)
    w = np.exp(log_p - log_p.max())
    w /= w.sum()
    exact = fb.closed_form("normal_gamma", {"y": y})
    for site, x in (("mu", mu), ("tau", tau)):
        mean = (w * x).sum()
        sd = np.sqrt((w * (x - mean) ** 2).sum())
        np.testing.assert_allclose([mean, sd], exact[site], rtol=2e-3)


def test_grouped_normal_gamma_is_the_single_group_formula_per_group(fb):
    data = fb.model_data("grouped_normal_gamma", 5000)
    ref = fb.closed_form("grouped_normal_gamma", data)
    for g in (0, 7, 999):
        one = fb._normal_gamma_posterior(data["y"][data["group"] == g], 0.0, 0.5, 3.0, 2.0)
        for site in ("mu", "tau"):
            np.testing.assert_allclose([ref[site][0][g], ref[site][1][g]], one[site], rtol=1e-10)


def test_conjugate_closed_forms(fb):
    ref = fb.closed_form("beta_bernoulli", fb.model_data("beta_bernoulli"))
    np.testing.assert_allclose(ref["p"], [7.0 / 12.0, np.sqrt(7.0 * 5.0 / (144.0 * 13.0))])
    ref = fb.closed_form("gamma_poisson", fb.model_data("gamma_poisson"))
    np.testing.assert_allclose(ref["rate"], [17.0 / 7.0, np.sqrt(17.0) / 7.0])
    assert fb.closed_form("logistic", fb.model_data("logistic")) is None


def test_distance_to_the_answer_is_the_worst_scalar_in_reference_sds(fb):
    ref = {"sites": {"a": {"mean": [0.0, 1.0], "sd": [1.0, 0.5]}, "b": {"mean": 2.0, "sd": 4.0}}}
    assert fb.max_z({"a": np.array([0.1, 1.2]), "b": 1.0, "extra": 9.0}, ref) == pytest.approx(0.4)


def test_clock_leaves_out_the_excluded_spans(fb, monkeypatch):
    now = iter([10.0, 12.5, 13.0])
    monkeypatch.setattr(fb.time, "time", lambda: next(now))
    clock = fb.Clock(4.0)
    assert clock.exclude(lambda x: x + 1, 1) == 2 and clock.excluded == 2.5
    assert clock.now() == pytest.approx(13.0 - 4.0 - 2.5)


def _run(method, model, n, seconds, route=None, **timing):
    return dict(method=method, model=model, n=n, reached=seconds is not None, seconds=seconds, route=route, **timing)


def test_table_takes_medians_ratios_and_the_targets(fb):
    runs = [
        _run("vijax", "gamma_poisson", 0, t, "conjugate", compile_s=c, steps=s, steps_per_s=v)
        for t, c, s, v in ((1.0, 0.5, 100, 800.0), (2.0, 1.5, 300, 1000.0), (9.0, 6.0, 200, 2000.0))
    ]
    runs += [
        _run("numpyro", "gamma_poisson", 0, t, compile_s=c, steps=s, steps_per_s=v)
        for t, c, s, v in ((5.0, 4.0, 800, 1500.0), (8.0, 7.0, 800, 1600.0), (7.0, 6.5, 1600, 1234.6))
    ]
    runs += [_run("vijax", "hier_poisson", 10**5, t, "conjugate") for t in (10.0, 12.0, 11.0)]
    runs += [_run("numpyro", "hier_poisson", 10**5, t) for t in (None, None, 50.0)]  # the cap, 60 s, twice
    runs += [_run("vijax_full", "hier_poisson", 10**5, t, "conjugate") for t in (3.0, 4.0, 5.0)]
    rows = {(r["model"], r["n"]): r for r in fb.summarize(runs, cap=60.0)}
    small = rows[("gamma_poisson", 0)]
    assert (small["vijax_s"], small["numpyro_s"], small["ratio"], small["target"]) == (2.0, 7.0, 3.5, 3.0)
    assert small["met"] and small["route"] == "conjugate"
    assert (small["vijax_compile_s"], small["vijax_steps"], small["vijax_steps_per_s"]) == (1.5, 200, 1000.0)
    assert (small["numpyro_compile_s"], small["numpyro_steps"], small["numpyro_steps_per_s"]) == (6.5, 800, 1500.0)
    assert small["vijax_continued"] == 0 and small["vijax_continuation_compile_s"] is None
    large = rows[("hier_poisson", 10**5)]
    assert large["numpyro_capped"] and large["ratio"] == pytest.approx(60.0 / 11.0) and large["target"] == 10.0
    assert large["met"] is None  # NumPyro capped: the ratio is a lower bound below the target, so open
    full = rows[("hier_poisson (fit at full batch)", 10**5)]
    assert full["vijax_s"] == 4.0 and full["met"]
    forced = runs + [_run("vijax_ngvi", "gamma_poisson", 0, t, "ngvi") for t in (1.0, 1.5, 3.0)]
    ngvi = {(r["model"], r["n"]): r for r in fb.summarize(forced, cap=60.0)}[("gamma_poisson (route ngvi)", 0)]
    assert (ngvi["vijax_s"], ngvi["numpyro_s"], ngvi["route"], ngvi["target"]) == (1.5, 7.0, "ngvi", 3.0)
    own = [dict(r, route="ngvi") if r["method"] == "vijax" else r for r in forced]  # fit's own route is ngvi
    assert ("gamma_poisson (route ngvi)", 0) not in {(r["model"], r["n"]) for r in fb.summarize(own, cap=60.0)}
    text = fb.table(list(rows.values()), 60.0)
    # runs past different caps: the median is past the median of the caps (each run is past its own)
    mixed = [_run("vijax", "hier_poisson", 10**6, 100.0, "conjugate")]
    mixed += [dict(_run("numpyro", "hier_poisson", 10**6, None), cap=c) for c in (800.0, 1400.0, 1400.0)]
    (row,) = fb.summarize(mixed, cap=60.0)
    assert row["cap"] == 1400.0 and row["ratio"] == pytest.approx(14.0) and row["met"]
    mixed[1] = _run("numpyro", "hier_poisson", 10**6, 900.0)  # one reached the answer, two passed 1,400 s
    assert fb.summarize(mixed, cap=60.0)[0]["ratio"] == pytest.approx(14.0)
    mixed[2] = dict(mixed[2], cap=700.0)  # past 700 s, 900 s, past 1,400 s: the median is past 900 s
    assert fb.summarize(mixed, cap=60.0)[0]["ratio"] == pytest.approx(9.0)
    assert (
        "| gamma_poisson | docs | conjugate | 2.0 | 1.5 | 200 | 1,000 | 7.0 | 6.5 | 800 | 1,500 | 3.5× | ≥ 3× | met |"
        in text
    )
    assert (
        "| hier_poisson | 100,000 | conjugate | 11.0 | — | — | — | > 60 | — | — | — | ≥ 5.5× | ≥ 10× | open |" in text
    )
    assert text.splitlines()[0].count("|") == text.splitlines()[1].count("|") == 15


def test_compile_time_is_the_union_of_the_spans_outside_the_checks(fb):
    compiles = fb.Compiles()
    trace, lower, backend = fb.COMPILE_EVENTS
    compiles(trace, 0.0, 1.0)
    compiles(backend, 0.5, 2.0)  # overlapping the trace: counted once
    compiles(lower, 3.0, 3.5)
    compiles("/jax/other_event", 4.0, 9.0)  # not a compile
    compiles.paused = True
    compiles(backend, 5.0, 6.0)  # during a check: left out
    compiles.paused = False
    assert compiles.seconds() == pytest.approx(2.5)
    assert compiles.by_event() == {"trace": 1.0, "lower": 0.5, "backend_compile": 1.5, "programs": 1}


def test_compile_events_are_the_ones_jax_reports(fb):
    """A jitted function's first call records a trace, a lowering and an XLA compile; its second call none."""
    import jax
    import jax.numpy as jnp

    clock = fb.Clock(0.0)
    jax.monitoring.register_event_time_span_listener(clock.compiles)
    try:
        f = jax.jit(lambda x: jnp.sin(x) * 2.0 + 1.0)
        f(jnp.ones(3)).block_until_ready()
        parts = clock.compiles.by_event()
        assert parts["programs"] >= 1 and parts["trace"] > 0 and parts["lower"] > 0
        first = clock.compile_s()
        assert 0 < first <= parts["trace"] + parts["lower"] + parts["backend_compile"] + 1e-9
        clock.exclude(lambda: jax.jit(jnp.cos)(jnp.ones(2)).block_until_ready())  # a check's compile: left out
        f(jnp.ones(3)).block_until_ready()
        assert clock.compile_s() == first
    finally:
        jax.monitoring.unregister_event_time_span_listener(clock.compiles)


def test_steady_rate_is_the_steps_over_the_fit_less_its_compiles(fb):
    last = {"seconds": 9.0, "compile_s": 6.5, "steps": 800}
    out = fb.steady(last, started=2.0, compiled_before=0.5)  # 7 s of fit, 6 s of it compiling
    assert out == {"fit_s": 7.0, "steps": 800, "steps_per_s": 800.0}
    assert fb.steady(dict(last, compile_s=7.5), 2.0, 0.5)["steps_per_s"] is None


def test_each_run_is_a_fresh_process_without_a_compile_cache(fb, monkeypatch):
    seen = {}

    def fake_run(cmd, capture_output, text, timeout, env):
        seen.update(cmd=cmd, env=env, timeout=timeout)
        return subprocess.CompletedProcess(cmd, 0, stdout='noise\n{"seconds": 1.5, "reached": true}\n', stderr="")

    monkeypatch.setattr(fb.subprocess, "run", fake_run)
    opts = types.SimpleNamespace(cap=30.0, passthrough=["--cap=30.0"], device="cpu")
    assert fb.spawn("numpyro", "gmm_large", 1000, opts) == {"seconds": 1.5, "reached": True}
    cmd = seen["cmd"]
    assert cmd[0] == sys.executable and cmd[1].endswith("fit.py")
    assert cmd[cmd.index("--one") + 1 : cmd.index("--one") + 4] == ["numpyro", "gmm_large", "1000"]
    assert "--cap=30.0" in cmd and float(cmd[cmd.index("--t0") + 1]) > 0
    assert seen["env"]["VIJAX_COMPILE_CACHE"] == "off" and seen["env"]["JAX_PLATFORMS"] == "cpu"

    def failing_run(cmd, capture_output, text, timeout, env):
        return subprocess.CompletedProcess(
            cmd, 1, stdout="", stderr="Traceback\nvijax.ArgumentError: boom\nFor simplicity, JAX ..."
        )

    monkeypatch.setattr(fb.subprocess, "run", failing_run)
    out = fb.spawn("vijax", "hier_poisson", 1000, opts)
    assert out["error"] == "vijax.ArgumentError: boom" and not out["reached"]


def test_merge_replaces_the_timed_rows_and_append_adds_rounds_after_theirs(fb, monkeypatch, tmp_path):
    monkeypatch.setattr(fb, "load_references", lambda path: {fb._key("hier_poisson", 1000): {"kind": "laplace"}})
    monkeypatch.setattr(
        fb, "spawn", lambda method, name, n, opts: dict(method=method, model=name, n=n, seconds=2.0, reached=True)
    )
    out = tmp_path / "r.json"
    args = ["--models", "hier_poisson", "--sizes", "1000", "--methods", "vijax,numpyro", "--rounds", "1"]
    args += ["--out", str(out)]

    def rounds():
        return sorted((r["method"], r["round"]) for r in json.loads(out.read_text())["runs"])

    fb.main(args)
    fb.main(args + ["--append"])
    assert rounds() == [("numpyro", 0), ("numpyro", 1), ("vijax", 0), ("vijax", 1)]
    assert json.loads(out.read_text())["rows"][0]["runs"] == [2, 2]
    fb.main(args + ["--merge"])  # the rows timed again: their runs replaced
    assert rounds() == [("numpyro", 0), ("vijax", 0)]


def test_docs_table_is_the_recorded_runs(fb):
    page = (ROOT / "docs" / "numpyro_tfp.md").read_text()
    span = page.split("<!-- fit.table -->", 1)[1].split("<!-- /fit -->", 1)[0]
    assert span.strip() == fb.docs_table().strip()
