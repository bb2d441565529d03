"""The cost of one device-side minibatch of a pass over N points (``vijax.data.epoch_batches``): its keyed Feistel
permutation of the minibatch's positions (``shuffled_positions``, O(M)), side by side with a full permutation per
minibatch (``jax.random.permutation`` of N, sliced: O(N log N), what ``epoch_batches`` did before). Each is
jitted with a traced step t; reported per N: compile time (the first call), steady-state minibatches per second
(over ``--steps`` calls after it) and end-to-end wall time from the first call to the last minibatch.

    python benchmarks/minibatch.py                     # N = 10⁵, 10⁶; M = 1,000

Writes ``benchmarks/results/minibatch.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _device import add_device_argument, use_device  # noqa: E402  (this folder's --device switch)

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def permutation_batches(num_data: int, batch_size: int, key):
    """Minibatch t of pass t // (N / M): a slice of the pass's full permutation, drawn again each minibatch."""
    spp = num_data // batch_size

    def batch_fn(_key, t):
        perm = jax.random.permutation(jax.random.fold_in(key, t // spp), num_data)
        return jax.lax.dynamic_slice(perm, ((t % spp) * batch_size,), (batch_size,))

    return batch_fn


def timed(batch_fn, steps: int) -> dict:
    fn = jax.jit(batch_fn)
    start = time.perf_counter()
    fn(None, jnp.int32(0)).block_until_ready()
    compiled = time.perf_counter()
    for t in range(1, steps + 1):
        fn(None, jnp.int32(t)).block_until_ready()
    end = time.perf_counter()
    return {
        "compile_s": compiled - start,
        "minibatches_per_s": steps / (end - compiled),
        "ms_per_minibatch": 1e3 * (end - compiled) / steps,
        "end_to_end_s": end - start,
        "steps": steps + 1,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100000,1000000")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--out", default=os.path.join(RESULTS, "minibatch.json"))
    add_device_argument(p)
    args = p.parse_args(argv)
    use_device(args.device)
    from vijax.data import epoch_batches

    key, rows = jax.random.PRNGKey(0), []
    for n in (int(s) for s in args.sizes.split(",")):
        for method, fn in (
            ("vijax epoch_batches", epoch_batches(n, args.batch_size, key)[0]),
            ("permutation per minibatch", permutation_batches(n, args.batch_size, key)),
        ):
            rows.append({"n": n, "batch_size": args.batch_size, "method": method, **timed(fn, args.steps)})
    lines = ["| N | method | compile s | minibatches/s | ms a minibatch | end to end s |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {r['n']:,} | {r['method']} | {r['compile_s']:.2f} | {r['minibatches_per_s']:,.0f} | "
        f"{r['ms_per_minibatch']:.2f} | {r['end_to_end_s']:.2f} |"
        for r in rows
    ]
    print("\n".join(lines))
    with open(args.out, "w") as f:
        json.dump({"machine": {"platform": platform.platform(), "cores": os.cpu_count()}, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
