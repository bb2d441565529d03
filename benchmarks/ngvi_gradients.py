"""``ngvi``'s estimates of the natural gradient of mean-field Normal factors, side by side:
``"hessian"`` (Price's theorem with the exact Hessian diagonal, one forward pass of the gradient
per coordinate and draw), ``"secant"`` (the same update with the diagonal estimated from the
gradients at each draw and its mirror) and ``"reparam"`` (the reparameterization gradient and the
inverse Fisher), on a Bayesian logistic regression of growing dimension D.

The model: N = 2,000 points, x ~ N(0, 9 / D I), y ~ Bernoulli(sigmoid(x w)), w ~ N(0, I) as the
prior; q(w) = N(0, I) at the start, S = 8 draws per step, each estimate with ``ngvi``'s default
step size for it, 60 steps compiled by ``vijax.inference.jit_step``. Per estimate and D: the
initial state and the first call (tracing and compiling the step: ``compile_s``), the steady
step time (the median of the 60), end to end (``compile_s`` and the 60 steps) and the final ELBO, by ``log_weights``
with 4,000 draws of the final q (the same key for every estimate). ``"hessian"`` is left out
above ``--hessian-max-d`` (its Hessians of D x D per draw).

    python benchmarks/ngvi_gradients.py            # D = 20, 100, 400, 1000 (about 1 minute)
    python benchmarks/ngvi_gradients.py --quick    # D = 20, 100; 20 steps

Writes ``benchmarks/results/ngvi_gradients.json`` (``--out``) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from _device import add_device_argument, machine, use_device  # this folder's --device switch

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
ESTIMATES = ("hessian", "secant", "reparam")


def problem(d: int, n: int = 2000, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.normal(size=(n, d)) * 3.0 / np.sqrt(d), jnp.float32)
    w = rng.normal(size=d)
    y = jnp.asarray((rng.random(n) < 1.0 / (1.0 + np.exp(-(np.asarray(x) @ w)))).astype(np.float32))

    def log_joint(z, batch):
        logits = x @ z
        return jnp.sum(y * logits - jnp.logaddexp(0.0, logits)) - 0.5 * jnp.sum(z * z)

    return log_joint


def run(d: int, gradient: str, steps: int, num_samples: int = 8) -> dict:
    from vijax.expfam import Normal
    from vijax.inference import jit_step, log_weights, ngvi

    alg = ngvi(
        problem(d),
        family=Normal.from_mean_variance(jnp.zeros(d), jnp.ones(d)),
        gradient=gradient,
        num_samples=num_samples,
    )
    step = jit_step(alg.step)
    t0 = time.perf_counter()
    state = alg.init(jax.random.PRNGKey(0))
    state, _ = jax.block_until_ready(step(jax.random.PRNGKey(1), state, None))
    compile_s = time.perf_counter() - t0
    times = []
    for t in range(steps):
        t1 = time.perf_counter()
        state, _ = jax.block_until_ready(step(jax.random.PRNGKey(t + 2), state, None))
        times.append(time.perf_counter() - t1)
    end_to_end = time.perf_counter() - t0
    lw = log_weights(alg, jax.random.PRNGKey(999), state, None, 4000)
    return {
        "d": d,
        "gradient": gradient,
        "compile_s": compile_s,
        "steady_ms": 1e3 * float(np.median(times)),
        "end_to_end_s": end_to_end,
        "final_elbo": float(jnp.mean(lw)),
        "final_elbo_se": float(jnp.std(lw) / np.sqrt(lw.shape[0])),
    }


def table(rows: list) -> str:
    best = {}
    for r in rows:
        best[r["d"]] = max(best.get(r["d"], -np.inf), r["final_elbo"])
    lines = [
        "| D | gradient | compile s | steady ms / step | end to end s | final ELBO | below the best |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['d']} | {r['gradient']} | {r['compile_s']:.2f} | {r['steady_ms']:.1f} | {r['end_to_end_s']:.2f} | "
            f"{r['final_elbo']:.2f} ± {r['final_elbo_se']:.2f} | {best[r['d']] - r['final_elbo']:.2f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="D = 20, 100 and 20 steps")
    p.add_argument("--dims", type=int, nargs="+", default=None, help="default 20 100 400 1000")
    p.add_argument("--steps", type=int, default=None, help="default 60 (--quick 20)")
    p.add_argument("--hessian-max-d", type=int, default=1000, help="the largest D the exact Hessian runs at")
    p.add_argument("--out", default=os.path.join(RESULTS, "ngvi_gradients.json"))
    add_device_argument(p)
    args = p.parse_args(argv)
    device = use_device(args.device)
    dims = args.dims or ([20, 100] if args.quick else [20, 100, 400, 1000])
    steps = args.steps or (20 if args.quick else 60)
    if steps < 1 or any(d < 1 for d in dims):
        p.error("--steps and every --dims value must be >= 1")
    load = os.getloadavg()
    rows = []
    for d in dims:
        for gradient in ESTIMATES:
            if gradient == "hessian" and d > args.hessian_max_d:
                continue
            rows.append(run(d, gradient, steps))
            print(f"D = {d}, {gradient}: {rows[-1]['steady_ms']:.1f} ms / step", flush=True)
    result = {"machine": machine(device, load), "steps": steps, "rows": rows}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
    print(table(rows))
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
