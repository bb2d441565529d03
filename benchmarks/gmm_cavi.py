"""CAVI for a diagonal Bayesian GMM: vijax against scikit-learn's BayesianGaussianMixture.

Both fit the same data (K = 30 components, D dimensions, N points) with matched priors from the
same initial responsibilities (``vijax.testing.matched_sklearn_bgmm``). scikit-learn runs
``--iters`` iterations; its fitted q is scored with vijax's ELBO (local step at that q, then
Blei et al.'s (2017) ELBO), and vijax CAVI runs until its ELBO reaches that value (relative slack 1e-7; every state is scored in float64, outside the timed region).
vijax's step is compiled by ``vijax.inference.jit_step``, as the runner compiles it: the value checks
of its batch on, their results outputs of the program.
Reported for each method, in one run: compile time (vijax's jit compile and one warm-up call;
scikit-learn compiles nothing), steady-state time per iteration, and end-to-end wall time from the
first call to the final state (scikit-learn: its ``fit``; vijax: the [x, x^2] features and the
initial state, compilation, and every step until its ELBO reaches scikit-learn's). The headline
ratio is the end-to-end one (scikit-learn's time over vijax's), the steady-state ratio beside it.

Agreement: vijax (float64 and float32) must reach scikit-learn's ELBO within the relative slack
1e-7 in at most 5 x ``--iters`` steps (one-sided: scikit-learn's diagonal E-step takes the expected
log-determinant of a full Wishart, so vijax's exact CAVI may end above it). The checks go into the
JSON (``agree``, ``agreement``); after the table and the JSON, the script exits with status 1 and
names each check that failed.

    python benchmarks/gmm_cavi.py                   # the README's table (N up to 1e6, D = 64)
    python benchmarks/gmm_cavi.py --sizes 10000 --dims 8 --iters 20   # a quick look
    python benchmarks/gmm_cavi.py --sizes 100000 1000000              # the two large sizes only

Writes ``benchmarks/results/gmm_cavi.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from vijax import expfam  # noqa: E402
from vijax.data import sample_gmm  # noqa: E402
from vijax.inference import CAVIState, cavi, jit_step  # noqa: E402
from vijax.models import DiagonalGMM, conjugate_elbo  # noqa: E402
from vijax.testing import matched_sklearn_bgmm, sklearn_to_q  # noqa: E402

from _device import add_device_argument, use_device  # noqa: E402  (this folder's --device switch)
from _agree import compare, exit_on_disagreement, verdict  # noqa: E402  (this folder's agreement rule)

REACH_RTOL = 1e-7  # vijax's ELBO counts as reaching scikit-learn's within this relative slack


def _elbo_fn(model, x):
    """A jitted ``q -> ELBO(q)`` on data ``x``, with the locals at their optimum given q."""

    @jax.jit
    def elbo(q):
        loc = model.local_step(expfam.tree_mean_params(q), x)
        return conjugate_elbo(model.prior(), q, loc)

    return lambda q: float(elbo(q))


def _initial_resp(x: np.ndarray, k: int, seed: int) -> np.ndarray:
    r = np.random.default_rng(seed)
    centers = x[r.choice(x.shape[0], k, replace=False)]
    d2 = (x**2).sum(1)[:, None] - 2 * x @ centers.T + (centers**2).sum(1)[None]
    return np.eye(k)[d2.argmin(1)]


def bench_one(n: int, d: int, k: int, iters: int, seed: int = 0) -> dict:
    data = sample_gmm(jax.random.PRNGKey(seed), n, k, d, spread=3.0)
    x64 = np.asarray(data.x, np.float64)
    model64 = DiagonalGMM.from_data(x64, k, dtype=jnp.float64)
    resp0 = _initial_resp(x64, k, seed)

    est = matched_sklearn_bgmm(model64, resp0=resp0, max_iter=iters, tol=0.0)
    t0 = time.perf_counter()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: we cap the iterations on purpose
        est.fit(x64)
    t_sk = time.perf_counter() - t0
    score = _elbo_fn(model64, model64.features(jnp.asarray(x64)))
    target = score(sklearn_to_q(est, jnp.float64))

    row = {
        "N": n,
        "D": d,
        "K": k,
        "sklearn_iters": iters,
        "sklearn_s": t_sk,
        "target_elbo": target,
        "sklearn_s_per_iter": t_sk / iters,
        "sklearn_compile_s": 0.0,
        "sklearn_end_to_end_s": t_sk,
    }
    for name, dt in (("f64", jnp.float64), ("f32", jnp.float32)):
        t0 = time.perf_counter()
        model = DiagonalGMM.from_data(x64, k, dtype=dt)
        x = model.features(jnp.asarray(x64, dt))  # [x, x^2] once, as vijax's runner does
        alg = cavi(model)
        step = jit_step(alg.step)  # as the runner compiles it: the batch checks on, as outputs of the program
        q0 = model.posterior_from_responsibilities(x, jnp.asarray(resp0, dt))  # scikit-learn's start
        state = jax.block_until_ready(CAVIState(q0, jnp.zeros((), jnp.int32)))
        t_setup = time.perf_counter() - t0
        key = jax.random.PRNGKey(1)
        t0 = time.perf_counter()
        jax.block_until_ready(step(key, state, x))  # compiles the step (calls below reuse it); result dropped
        jax.block_until_ready(step(key, state, x))  # warm-up call (thread pools, buffers); result dropped
        t_compile = time.perf_counter() - t0
        # Time only the steps (each synced); score every state with the float64 ELBO outside
        # the timed region, so float32's own rounding of a sum over N points does not decide.
        reached, elbo, steps, stepping = None, None, 0, 0.0
        for _ in range(5 * iters):
            t0 = time.perf_counter()
            state, info = step(key, state, x)
            jax.block_until_ready(state)
            stepping += time.perf_counter() - t0
            steps += 1
            elbo = score(jax.tree_util.tree_map(lambda a: a.astype(jnp.float64), state.q_global))
            if elbo >= target - REACH_RTOL * abs(target):
                reached = stepping
                break
        row[f"vijax_{name}_s_per_step"] = stepping / steps
        row[f"vijax_{name}_steps"] = steps
        row[f"vijax_{name}_s"] = None if reached is None else t_setup + t_compile + reached
        row[f"vijax_{name}_end_to_end_s"] = row[f"vijax_{name}_s"]
        row[f"vijax_{name}_setup_s"] = t_setup
        row[f"vijax_{name}_compile_s"] = t_compile
        row[f"vijax_{name}_elbo"] = elbo
        row[f"speedup_{name}"] = None if reached is None else t_sk / row[f"vijax_{name}_s"]  # end to end
        row[f"steady_speedup_{name}"] = row["sklearn_s_per_iter"] / row[f"vijax_{name}_s_per_step"]
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--dims", type=int, nargs="+", default=[64])
    p.add_argument("--k", type=int, default=30)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "gmm_cavi.json"))
    add_device_argument(p)
    args = p.parse_args(argv)
    use_device(args.device)
    rows = []
    hdr = (
        f"{'N':>9} {'D':>3} | {'method':>12} | {'compile s':>9} | {'steady ms/iter':>14} | {'iters':>5} | "
        f"{'end-to-end s':>12} | {'sk/vijax end to end':>19} | {'steady':>7}"
    )
    print(hdr)
    print("-" * len(hdr))
    for d in args.dims:
        for n in args.sizes:
            r = bench_one(n, d, args.k, args.iters)
            rows.append(r)
            print(
                f"{n:>9} {d:>3} | {'scikit-learn':>12} | {0.0:9.2f} | {1e3 * r['sklearn_s_per_iter']:14.1f} | "
                f"{args.iters:>5} | {r['sklearn_s']:12.2f} | {'':>19} | {'':>7}"
            )
            for name in ("f64", "f32"):
                e2e, ratio = r[f"vijax_{name}_s"], r[f"speedup_{name}"]
                print(
                    f"{n:>9} {d:>3} | {'vijax ' + name:>12} | {r[f'vijax_{name}_compile_s']:9.2f} | "
                    f"{1e3 * r[f'vijax_{name}_s_per_step']:14.1f} | {r[f'vijax_{name}_steps']:>5} | "
                    + ("  not reached" if e2e is None else f"{e2e:12.2f} | {ratio:18.2f}x")
                    + " | "
                    f"{r[f'steady_speedup_{name}']:6.2f}x",
                    flush=True,
                )
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
        "jax": jax.__version__,
        "device": str(jax.devices()[0]),
        "loadavg_1_5_15_min_at_end": os.getloadavg(),
    }
    checks = [
        compare(
            f"ELBO within {5 * r['sklearn_iters']} steps (N = {r['N']}, D = {r['D']}, K = {r['K']})",
            f"vijax {name}",
            r[f"vijax_{name}_elbo"],
            f"scikit-learn ({r['sklearn_iters']} iterations)",
            r["target_elbo"],
            REACH_RTOL,
            relative=True,
            at_least=True,
        )
        for r in rows
        for name in ("f64", "f32")
    ]
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"machine": machine, "rows": rows, **verdict(checks)}, fh, indent=2)
    print(f"wrote {args.out}")
    exit_on_disagreement(checks)


if __name__ == "__main__":
    main()
