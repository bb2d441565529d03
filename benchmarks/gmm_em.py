"""Gaussian mixtures by EM: vijax against scikit-learn's ``GaussianMixture`` on the same data from the same start.

Data: N points in D dimensions from a random mixture of K axis-aligned Gaussians (``vijax.data.sample_gmm``,
spread 3). Both libraries start from the same parameters -- the M-step of random responsibilities
(``GaussianMixtureEM.params_from_responsibilities``, in float64) -- and run ``--iters`` EM iterations with
``reg_covar`` = 1e-6; scikit-learn on float64 data (its usual dtype), vijax in float32 (and float64 with
``--f64``). Each final estimate is scored by one scorer (vijax's float64 ``log_prob``).

Measured per library:

- compile time (vijax: lowering and compiling the step, plus one warm-up call whose result is
  dropped; scikit-learn has none);
- steady-state seconds per iteration (the median over the iterations, each timed alone, and the
  minimum, which the load of a shared machine disturbs least): vijax's compiled step; scikit-learn's
  own per-iteration "time lapse" from ``fit(verbose=2, verbose_interval=1)``;
- end-to-end wall time, from the first call to the final state: vijax compile + warm-up + the
  iterations; scikit-learn one ``fit`` call with ``max_iter=iters`` and ``tol=0``, started at the
  same parameters by ``warm_start`` (so that ``fit`` runs no initialization of its own), which
  includes its final E-step;
- the log-likelihood after the iterations.

Agreement: the same EM from the same start, so each vijax log-likelihood must equal
scikit-learn's within a relative ``LOGLIK_RTOL`` (1e-9 in float64, 5e-5 in float32: float32
rounding over N points and the iterations; measured at N = 1e6, 10 iterations: 1.6e-14 and 4.4e-12 in
float64, 5.4e-7 and 6.7e-6 in float32). The checks go into the JSON (``agree``, ``agreement``);
after the table and the JSON, the script exits with status 1 and names each check that failed.

    python benchmarks/gmm_em.py             # the issue's size: N = 1e6, D = 16, K = 30, full and diag
    python benchmarks/gmm_em.py --small     # N = 2e4, a quick look

Writes ``benchmarks/results/gmm_em.json`` (``gmm_em_small.json`` with ``--small``) and prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import re
import time
import warnings

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from vijax.data import sample_gmm  # noqa: E402
from vijax.inference import EMState, em  # noqa: E402
from vijax.models import GaussianMixtureEM  # noqa: E402

from _device import add_device_argument, use_device  # noqa: E402  (this folder's --device switch)
from _agree import compare, exit_on_disagreement, verdict  # noqa: E402  (this folder's agreement rule)

LOGLIK_RTOL = {"vijax_f64": 1e-9, "vijax_f32": 5e-5}  # |vijax - sklearn| / |sklearn|, final log-likelihood


def run_vijax(covariance_type, start, x, iters, dtype, block_size):
    k, d = start.means.shape
    model = GaussianMixtureEM(k, d, covariance_type=covariance_type, block_size=block_size, dtype=dtype)
    t_first = time.perf_counter()
    xd = jnp.asarray(x, dtype)
    state = EMState(jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), start), jnp.zeros((), jnp.int32))
    key = jax.random.PRNGKey(0)
    step = jax.jit(em(model).step).lower(key, state, xd).compile()
    jax.block_until_ready(step(key, state, xd))  # warm-up call, result dropped
    compile_s = time.perf_counter() - t_first
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        state, _ = step(key, state, xd)
        jax.block_until_ready(state)
        times.append(time.perf_counter() - t0)
    wall_s = time.perf_counter() - t_first
    return jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), state.q_global), compile_s, times, wall_s


def run_sklearn(covariance_type, start, x, iters):
    from sklearn.mixture import GaussianMixture
    from sklearn.mixture._gaussian_mixture import _compute_precision_cholesky

    k = start.means.shape[0]
    ref = GaussianMixture(
        k,
        covariance_type=covariance_type,
        reg_covar=1e-6,
        max_iter=iters,
        tol=0.0,
        warm_start=True,
        verbose=2,
        verbose_interval=1,
    )
    # the same start, set as a warm start: fit() then runs its EM loop (and final E-step) only
    ref.weights_, ref.means_ = np.asarray(start.weights), np.asarray(start.means)
    ref.covariances_ = np.asarray(start.covariances)
    ref.precisions_cholesky_ = _compute_precision_cholesky(ref.covariances_, covariance_type)
    ref.converged_, ref.lower_bound_ = False, -np.inf
    out = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out):
        warnings.simplefilter("ignore")  # ConvergenceWarning: tol = 0 runs every iteration
        t0 = time.perf_counter()
        ref.fit(x)
        wall_s = time.perf_counter() - t0
    times = [float(t) for t in re.findall(r"Iteration \d+\s+time lapse ([0-9.eE+-]+)s", out.getvalue())]
    if len(times) != iters:
        raise RuntimeError(f"expected {iters} per-iteration times in scikit-learn's output, got {len(times)}")
    from vijax.models import GMMParams

    return GMMParams(ref.weights_, ref.means_, ref.covariances_), 0.0, times, wall_s


def bench(covariance_type, args, x, resp):
    k, d = resp.shape[1], x.shape[1]
    scorer = GaussianMixtureEM(k, d, covariance_type=covariance_type, dtype=jnp.float64)
    start = jax.tree_util.tree_map(np.asarray, scorer.params_from_responsibilities(jnp.asarray(x), jnp.asarray(resp)))
    score = jax.jit(lambda p: jnp.sum(scorer.log_prob(p, jnp.asarray(x))))
    rows = []
    for name in args.peers:
        if name.startswith("vijax"):
            dtype = jnp.float64 if name.endswith("f64") else jnp.float32
            params, compile_s, times, wall_s = run_vijax(covariance_type, start, x, args.iters, dtype, args.block_size)
        else:
            params, compile_s, times, wall_s = run_sklearn(covariance_type, start, x, args.iters)
        row = {
            "covariance_type": covariance_type,
            "library": name,
            "N": x.shape[0],
            "D": d,
            "K": k,
            "iters": args.iters,
            "compile_s": compile_s,
            "s_per_iter": float(np.median(times)),
            "s_per_iter_min": float(np.min(times)),
            "wall_s": wall_s,
            "log_likelihood": float(score(jax.tree_util.tree_map(jnp.asarray, params))),
        }
        rows.append(row)
        print(
            f"{covariance_type:>5} {name:>10} | compile {compile_s:6.2f} s | {1e3 * row['s_per_iter']:9.1f} ms/iter "
            f"(min {1e3 * row['s_per_iter_min']:.1f}) | wall {wall_s:8.2f} s | log-lik {row['log_likelihood']:.8e}",
            flush=True,
        )
    base = next((r for r in rows if r["library"] == "sklearn"), None)
    for r in rows:
        if base is not None:
            r["speedup_per_iter"] = base["s_per_iter"] / r["s_per_iter"]
            r["speedup_wall"] = base["wall_s"] / r["wall_s"]
            r["log_likelihood_rel_diff_vs_sklearn"] = abs(r["log_likelihood"] - base["log_likelihood"]) / abs(
                base["log_likelihood"]
            )
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-points", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--components", type=int, default=30)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--block-size", type=int, default=8192)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--types", nargs="+", default=["full", "diag"])
    p.add_argument("--peers", nargs="+", default=["vijax_f32", "sklearn"], help="vijax_f32, vijax_f64, sklearn")
    p.add_argument("--f64", action="store_true", help="also run vijax in float64")
    p.add_argument("--small", action="store_true", help="N = 2e4 (a quick look)")
    p.add_argument("--out", default=None)
    add_device_argument(p)
    args = p.parse_args(argv)
    use_device(args.device)
    if args.small:
        args.num_points = 20_000
    if args.f64 and "vijax_f64" not in args.peers:
        args.peers.insert(1, "vijax_f64")
    out = args.out or os.path.join(
        os.path.dirname(__file__), "results", "gmm_em_small.json" if args.small else "gmm_em.json"
    )
    n, d, k = args.num_points, args.dim, args.components
    data = sample_gmm(jax.random.PRNGKey(args.seed), n, k, d, spread=3.0, dtype=jnp.float64)
    x = np.asarray(data.x)
    resp = np.array(jax.random.uniform(jax.random.PRNGKey(args.seed + 1), (n, k), jnp.float64))
    resp /= resp.sum(1, keepdims=True)
    rows = [r for ct in args.types for r in bench(ct, args, x, resp)]
    print(
        f"\n| covariance | library | compile s | s / iteration (median, min) | x sklearn (per it., wall) "
        f"| wall s ({args.iters} it.) | log-likelihood | rel. diff. |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        sp = "" if "speedup_per_iter" not in r else f"{r['speedup_per_iter']:.1f}, {r['speedup_wall']:.1f}"
        rd = r.get("log_likelihood_rel_diff_vs_sklearn")
        print(
            f"| {r['covariance_type']} | {r['library']} | {r['compile_s']:.2f} | {r['s_per_iter']:.3f}, "
            f"{r['s_per_iter_min']:.3f} | {sp} | {r['wall_s']:.2f} | {r['log_likelihood']:.6f} | "
            f"{'' if rd is None else f'{rd:.1e}'} |"
        )
    import sklearn

    machine = {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
        "jax": jax.__version__,
        "sklearn": sklearn.__version__,
        "device": str(jax.devices()[0]),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }
    checks = [
        compare(
            f"log-likelihood after {r['iters']} iterations ({r['covariance_type']}, N = {r['N']}, D = {r['D']}, "
            f"K = {r['K']})",
            r["library"],
            r["log_likelihood"],
            "sklearn",
            base["log_likelihood"],
            LOGLIK_RTOL[r["library"]],
            relative=True,
        )
        for r in rows
        if r["library"] != "sklearn"
        for base in [r2 for r2 in rows if r2["library"] == "sklearn" and r2["covariance_type"] == r["covariance_type"]]
    ]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as fh:
        json.dump({"machine": machine, "settings": vars(args), "rows": rows, **verdict(checks)}, fh, indent=2)
    print(f"wrote {out}")
    exit_on_disagreement(checks)


if __name__ == "__main__":
    main()
