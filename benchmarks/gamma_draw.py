"""One SSVI draw and V product of a model with several Gamma-based families: pooled or per family.

The globals of the DP mixture of Bernoullis (Hoffman & Blei 2015, §4.2; the default ``vijax run``):
a Dirichlet(100) and a Beta(100 x 100), float64, concentrations as after a fit (log-uniform
between e^-1 and e^6). Two ways, side by side in one process:

- ``pooled``: ``vijax.expfam.stats_and_v_product`` of the pytree, which draws the Gamma variables of
  all its ``GammaBased`` families in one ``standard_log_gamma`` (one rejection loop, one implicit
  derivative, the latter in blocks sorted by shape);
- ``per family``: ``stats_and_v_product`` of each family on its own key split (as the draw was made
  before the pooling: one rejection loop and one implicit derivative per family; the derivative in
  blocks sorted by shape in both ways, so this measures the pooling alone).

and, on the Beta(100 x 100) alone (20,000 Gamma variables), the implicit derivative two ways:

- ``Beta, derivative in sorted blocks``: ``stats_and_v_product`` ``jax.vmap``-ed over the family
  cut in 2 halves (on split keys): each call sees 10,000 Gamma variables, above the blocking size,
  so the implicit derivative runs in blocks of ``QUANTILE_GRAD_BLOCK`` elements sorted by shape (each
  block iterating as long as its own largest shape needs);
- ``Beta, derivative on one array``: the same call ``jax.vmap``-ed over the family's 100 rows:
  each call sees 200 Gamma variables, under the blocking size, so the implicit derivative is evaluated
  on one array of all 20,000, iterating until the slowest element converges (the rule before the
  blocks). The rejection loop and the vmap are the same in both.

Reported for each: compile time (lowering and XLA compile, the persistent cache off), steady-state
milliseconds per call (median of rounds, the two ways alternating), and end to end (compile plus
the first call).

    python benchmarks/gamma_draw.py      # writes benchmarks/results/gamma_draw.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam

from _device import add_device_argument, use_device  # this folder's --device switch


def _globals(key):
    k1, k2, k3 = jax.random.split(key, 3)
    dirichlet = expfam.Dirichlet.from_concentration(jnp.exp(jax.random.uniform(k1, (100,), minval=-1.0, maxval=4.0)))
    c1 = jnp.exp(jax.random.uniform(k2, (100, 100), minval=-1.0, maxval=6.0))
    c0 = jnp.exp(jax.random.uniform(k3, (100, 100), minval=-1.0, maxval=6.0))
    return dirichlet, expfam.Beta.from_concentrations(c1, c0)


def pooled(q, key):
    stats, v = expfam.stats_and_v_product(q, key)
    return stats, v(stats)


def per_family(q, key):
    out = []
    for f, k in zip(q, jax.random.split(key, len(q))):
        stats, v = expfam.stats_and_v_product(f, k)
        out.append((stats, v(stats)))
    return out


def _beta_rows(q, rows: int):
    """The Beta(100 x 100) of ``q`` as ``rows`` families stacked on a leading axis."""
    c1, c0 = q[1].concentration1, q[1].concentration0
    return expfam.Beta.from_concentrations(c1.reshape(rows, -1, c1.shape[-1]), c0.reshape(rows, -1, c0.shape[-1]))


def beta_blocked(q, key):
    return jax.vmap(pooled)(_beta_rows(q, 2), jax.random.split(key, 2))


def beta_one_array(q, key):
    return jax.vmap(pooled)(_beta_rows(q, 100), jax.random.split(key, 100))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument(
        "--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "gamma_draw.json")
    )
    add_device_argument(p)
    args = p.parse_args(argv)
    use_device(args.device)
    jax.config.update("jax_enable_x64", True)
    q, key = _globals(jax.random.PRNGKey(0)), jax.random.PRNGKey(1)
    ways = {
        "pooled": pooled,
        "per family": per_family,
        "Beta, derivative in sorted blocks": beta_blocked,
        "Beta, derivative on one array": beta_one_array,
    }
    compiled, rows = {}, {}
    for name, fn in ways.items():
        start = time.perf_counter()
        compiled[name] = jax.jit(fn).lower(q, key).compile()
        compile_s = time.perf_counter() - start
        jax.block_until_ready(compiled[name](q, key))
        rows[name] = {"compile_s": round(compile_s, 3), "end_to_end_s": round(time.perf_counter() - start, 3)}
    times = {name: [] for name in ways}
    for r in range(args.rounds):
        for name in list(ways)[r % len(ways) :] + list(ways)[: r % len(ways)]:
            start = time.perf_counter()
            jax.block_until_ready(compiled[name](q, jax.random.fold_in(key, r)))
            times[name].append(time.perf_counter() - start)
    for name in ways:
        rows[name]["steady_ms"] = round(1e3 * float(np.median(times[name])), 2)
    print("| way | compile s | steady ms per draw + V product | end to end s (compile + first call) |")
    print("| --- | ---: | ---: | ---: |")
    for name, r in rows.items():
        print(f"| {name} | {r['compile_s']:.2f} | {r['steady_ms']:.1f} | {r['end_to_end_s']:.2f} |")
    result = {
        "benchmark": "SSVI draw + V product, Dirichlet(100) and Beta(100 x 100), float64 (benchmarks/gamma_draw.py)",
        "machine": f"the shared 2-core x86_64 VM ({platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()})",
        "jax": jax.__version__,
        "rounds": args.rounds,
        "rows": rows,
    }
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
        fh.write("\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
