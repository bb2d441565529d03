"""``benchmarks/numpyro_models.py``: its one ELBO estimator gives every method's q the ELBO of the
same model (checked against the closed form on a Gamma-Poisson model, for an exponential-family q
mapped through the target's transform and for NumPyro's AutoNormal and AutoMultivariateNormal
parameters), and the time to the target is read off each curve at its first checkpoint at or
above (best - tolerance). The ``--quick`` run compiles every method of every model (minutes on
2 busy cores): marked ``slow``."""

import importlib.util
import json
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

pytest.importorskip("numpyro")

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
K = np.array([3.0, 1.0, 4.0, 2.0, 5.0, 0.0, 2.0])


@pytest.fixture(scope="module")
def nm():
    sys.path.insert(0, str(BENCH))  # the script imports its folder's modules (_device)
    try:
        spec = importlib.util.spec_from_file_location("benchmarks_numpyro_models", BENCH / "numpyro_models.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


def _gamma_poisson(k):
    import numpyro
    import numpyro.distributions as dist

    rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
    with numpyro.plate("data", k.shape[0]):
        numpyro.sample("k", dist.Poisson(rate), obs=k)


def _closed_form(e_log_r, e_r, entropy):
    """ELBO of q(rate) for rate ~ Gamma(2, 1), k_i ~ Poisson(rate), from E_q[log r], E_q[r], H[q]."""
    log_lik = np.sum(K) * e_log_r - K.size * e_r - np.sum(special.gammaln(K + 1.0))
    return log_lik + (e_log_r - e_r) + entropy


@pytest.mark.slow
def test_one_estimator_gives_each_q_its_closed_form_elbo(nm):
    """A Gamma q (vijax's auto family, through unconstrain and the Jacobian) and a log-normal q
    (NumPyro's AutoNormal and AutoMultivariateNormal parameters): the estimate within 5 Monte Carlo
    standard errors of the closed-form ELBO, 20000 draws."""
    import vijax
    from vijax import expfam
    from vijax.inference import ngvi

    target = vijax.from_numpyro(_gamma_poisson, jnp.asarray(K))
    alg = ngvi(target)
    a, b = 3.0, 1.5
    state = alg.init(jax.random.PRNGKey(0))
    state = state._replace(q_global={"rate": expfam.Gamma.from_shape_rate(jnp.float32(a), jnp.float32(b))})
    gamma_elbo = _closed_form(
        special.digamma(a) - np.log(b), a / b, a - np.log(b) + special.gammaln(a) + (1 - a) * special.digamma(a)
    )
    m, s = 0.8, 0.3
    lognormal_elbo = _closed_form(m, np.exp(m + s**2 / 2), m + 0.5 + np.log(s * np.sqrt(2 * np.pi)))
    cases = [
        (nm.ngvi_draws(target, alg, state), gamma_elbo),
        (
            nm.autonormal_draws({"rate_auto_loc": jnp.array(m), "rate_auto_scale": jnp.array(s)}, ["rate"]),
            lognormal_elbo,
        ),
        (
            nm.automvn_draws({"auto_loc": jnp.array([m]), "auto_scale_tril": jnp.array([[s]])}, target.sites),
            lognormal_elbo,
        ),
    ]
    for draws, exact in cases:
        est, se = nm.mc_elbo(target, draws, jax.random.PRNGKey(1), 20000)
        assert abs(float(est) - exact) < 5 * float(se) + 1e-4, (float(est), exact, float(se))


def _row(library, points):
    return {
        "method": library,
        "library": library,
        "final_elbo": points[-1][1],
        "curve": [{"step": 10 * i, "time_s": t, "elbo": e} for i, (t, e) in enumerate(points)],
    }


def test_time_to_target_is_the_first_checkpoint_within_the_tolerance(nm):
    rows = [
        _row("vijax", [(2.0, -50.0), (3.0, -31.0), (4.0, -30.0)]),
        _row("numpyro", [(0.5, -60.0), (1.0, -31.2), (9.0, -30.6)]),
    ]
    out = nm.summarize(rows, 0.5)
    assert out == {"best_elbo": -30.0, "target_elbo": -30.5}
    assert (rows[0]["time_to_target_s"], rows[0]["steps_to_target"]) == (4.0, 20)
    assert rows[1]["time_to_target_s"] is None and rows[1]["ratio_to_vijax"] is None
    rows[1]["curve"][-1]["elbo"] = -30.4
    nm.summarize(rows, 0.5)
    assert rows[1]["ratio_to_vijax"] == pytest.approx(9.0 / 4.0)


@pytest.mark.slow
def test_quick_run_writes_every_model(tmp_path):
    out = tmp_path / "nm.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "numpyro_models.py"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    for name in ("eight_schools", "poisson_gamma", "logistic", "dirichlet_categorical_mixture"):
        rows = result["models"][name]["rows"]
        methods = [r["method"] for r in rows]
        split = ["vijax-conjugate_split"] if name in ("eight_schools", "poisson_gamma") else []
        assert methods == ["vijax-ngvi", *split, "numpyro-AutoNormal", "numpyro-AutoMVN"], methods
        assert all(r["library_elbo_agrees"] for r in rows)


def test_each_method_runs_in_a_fresh_process_with_the_runs_settings(nm, monkeypatch):
    """The parent starts this script with ``--one MODEL METHOD``, every setting of its run and the
    model's summed-out sites, and takes the row the child prints; a child that fails stops the run, naming the model and method."""
    import argparse

    seen = {}

    def fake_run(cmd, capture_output, text):
        seen["cmd"] = cmd
        return subprocess.CompletedProcess(cmd, 0, stdout='noise\nROW {"method": "numpyro-AutoMVN"}\n', stderr="")

    monkeypatch.setattr(nm.subprocess, "run", fake_run)
    args = argparse.Namespace(
        device="cpu",
        steps_vijax=40,
        steps_numpyro=200,
        chunk=20,
        lr=0.01,
        ngvi_samples=8,
        eval_samples=200,
        final_samples=2000,
        xla_defaults=False,
    )
    row = nm.run_in_fresh_process("dirichlet_categorical_mixture", "numpyro-AutoMVN", args, ("z",))
    assert row == {"method": "numpyro-AutoMVN"}
    cmd = seen["cmd"]
    assert cmd[0] == sys.executable and cmd[1].endswith("numpyro_models.py")
    assert cmd[cmd.index("--one") + 1 : cmd.index("--one") + 3] == ["dirichlet_categorical_mixture", "numpyro-AutoMVN"]
    assert cmd[cmd.index("--enumerated") + 1] == "z"
    for flag, value in vars(args).items():
        if flag != "xla_defaults":
            assert cmd[cmd.index("--" + flag.replace("_", "-")) + 1] == str(value), flag
    assert "--xla-defaults" not in cmd  # the run's XLA settings: the child's too
    nm.run_in_fresh_process("logistic", "vijax-ngvi", argparse.Namespace(**{**vars(args), "xla_defaults": True}))
    assert "--xla-defaults" in seen["cmd"]

    def failing_run(cmd, capture_output, text):
        return subprocess.CompletedProcess(cmd, 1, stdout="", stderr="Traceback: boom")

    monkeypatch.setattr(nm.subprocess, "run", failing_run)
    with pytest.raises(SystemExit, match="(?s)logistic / vijax-ngvi failed:.*boom"):
        nm.run_in_fresh_process("logistic", "vijax-ngvi", args)
