"""Where the time of LDA's mean-field E-step goes, against the roofline.

The inner update of a document d (Hoffman et al. 2010; ``LDA._meanfield``) is two contractions
over its U_d distinct words and K topics, z = e_d . b_w and sum_w (n_w / z_w) b_w: about
2 K U_d multiply-adds each, 4 K U_d flops per update. This script measures, on one minibatch of
S synthetic documents (K = 50, V = 5,000, S = 256, mean length 100 tokens), one JAX CPU device:

- the time of one update over the whole batch: the plain iteration (``LDA(accelerate=False)``)
  with ``tol=0`` runs exactly ``max_iters`` updates on every tile, and the difference between
  60 and 20 updates over 40 removes the fixed costs (sorting, tiling, the statistics' scatter);
- the flops of the useful work, 4 K sum_d U_d, and of the work done: every tile's R x W slots
  (padding included, ``vijax.solvers.tile_shape``), giving GFLOP/s of each;
- the contractions alone: the same two einsums on (R, K, W) tiles in a loop of the same trip
  count, so that the rest of an update (digamma and log-gamma of gamma, exp, the per-document
  sums, the loop) is the difference;
- the machine's matrix-multiply rate on one device (a 1024 x 1024 float32 product) as the roof;
- how many updates the default E-steps spend: the time of the default plain iteration and of
  SQUAREM (tol 1e-3, at most 100 updates) at the batch's start from the initial topics, over the
  time of one update.

    python benchmarks/lda_estep_profile.py        # writes benchmarks/results/lda_estep_profile.json
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

from vijax.data import Minibatcher, bucket_length, sample_lda_corpus
from vijax.models import LDA
from vijax.solvers import by_length_tiles, tile_shape
from _device import add_device_argument, use_device  # this folder's --device switch


def _best(fn, *args, reps: int = 7) -> float:
    jax.block_until_ready(fn(*args))
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t)
    return best


def _num_tiles(batch, k: int, slots: int, width: int) -> int:
    """The tiles ``vijax.solvers.by_length_tiles`` packs the batch into, counted by running it with a
    tile function that only counts."""
    n = jnp.asarray(batch.counts)
    _, count = by_length_tiles(
        jnp.asarray(batch.word_ids),
        n,
        k,
        lambda tile, c: (jnp.zeros((tile.member.shape[0], k), n.dtype), c + 1),
        0,
        slots,
        width,
    )
    return int(count)


def estep_seconds(k, v, batch, log_beta, *, accelerate, tol, max_iters) -> float:
    model = LDA(k, v, max_iters=max_iters, tol=tol, accelerate=accelerate)
    fn = jax.jit(lambda lb, b: model.local_step((lb,), b).local_params)
    return _best(fn, log_beta, batch)


def contractions_seconds(k, r, w, trips: int, dtype) -> float:
    """The update's two contractions on an (R, K, W) tile, ``trips`` times in a loop."""
    kb, ke, kn = jax.random.split(jax.random.PRNGKey(0), 3)
    bb = jax.random.uniform(kb, (r, k, w), dtype)
    e0 = jax.random.uniform(ke, (r, k), dtype)
    n = jax.random.uniform(kn, (r, w), dtype)

    def body(_, e):
        z = jnp.einsum("ckl,ck->cl", bb, e)
        return e * 0.5 + 1e-3 * jnp.einsum("ckl,cl->ck", bb, n / z)

    fn = jax.jit(lambda e: jax.lax.fori_loop(0, trips, body, e))
    return _best(fn, e0)


def matmul_gflops(dtype) -> float:
    a = jnp.ones((1024, 1024), dtype)
    t = _best(jax.jit(lambda x: x @ x), a)
    return 2 * 1024**3 / t / 1e9


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--k", type=int, default=50)
    p.add_argument("--vocab", type=int, default=5000)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "lda_estep_profile.json"))
    add_device_argument(p)
    args = p.parse_args(argv)
    use_device(args.device)
    k, v, s = args.k, args.vocab, args.batch_size
    dtype = jnp.float32
    corpus = sample_lda_corpus(0, 4 * s, k, v, alpha=0.1, eta=0.02, doc_length_mean=100).corpus
    batch = Minibatcher(corpus, s, 0, length="corpus").step_batch(0)
    lengths = np.asarray(corpus.doc_unique_words)[np.asarray(Minibatcher(corpus, s, 0).step_indices(0))]
    unique = int(lengths.sum())
    r, w, m = tile_shape(bucket_length(int(corpus.doc_unique_words.max())), 512, 32)
    tiles = _num_tiles(batch, k, 512, 32)
    log_beta = jnp.log(jax.random.dirichlet(jax.random.PRNGKey(1), jnp.full((v,), 0.1), (k,))).astype(dtype)
    load0 = os.getloadavg()

    t20 = estep_seconds(k, v, batch, log_beta, accelerate=False, tol=0.0, max_iters=20)
    t60 = estep_seconds(k, v, batch, log_beta, accelerate=False, tol=0.0, max_iters=60)
    per_update = (t60 - t20) / 40
    fixed = t20 - 20 * per_update
    t_contract = contractions_seconds(k, r, w, 40 * tiles, dtype) / 40
    useful, done = 4 * k * unique, 4 * k * tiles * r * w
    t_plain = estep_seconds(k, v, batch, log_beta, accelerate=False, tol=1e-3, max_iters=100)
    t_squarem = estep_seconds(k, v, batch, log_beta, accelerate=True, tol=1e-3, max_iters=100)
    peak = matmul_gflops(dtype)
    out = {
        "batch": {"S": s, "K": k, "V": v, "distinct_words": unique, "tiles": tiles, "tile_R_W_M": [r, w, m]},
        "slot_efficiency": unique / (tiles * r * w),
        "update_ms": 1e3 * per_update,
        "fixed_ms": 1e3 * fixed,
        "contractions_ms": 1e3 * t_contract,
        "rest_of_update_ms": 1e3 * (per_update - t_contract),
        "useful_gflops": useful / per_update / 1e9,
        "done_gflops": done / per_update / 1e9,
        "contractions_gflops": done / t_contract / 1e9,
        "matmul_gflops": peak,
        "plain_default_ms": 1e3 * t_plain,
        "plain_updates_equiv": (t_plain - fixed) / per_update,
        "squarem_default_ms": 1e3 * t_squarem,
        "squarem_updates_equiv": (t_squarem - fixed) / per_update,
    }
    print(
        f"S = {s} documents, K = {k}: {unique} distinct words in {tiles} tiles of {r} x {w} slots "
        f"({100 * out['slot_efficiency']:.0f}% of the slots computed are words)"
    )
    print(
        f"one update of the whole batch: {out['update_ms']:.3f} ms = {out['useful_gflops']:.1f} GFLOP/s of useful "
        f"work (4 K U flops), {out['done_gflops']:.1f} GFLOP/s of work done (padding included)"
    )
    print(
        f"  of which the two contractions alone: {out['contractions_ms']:.3f} ms ({out['contractions_gflops']:.1f} "
        f"GFLOP/s); the rest (digamma/log-gamma, exp, per-document sums, loop): {out['rest_of_update_ms']:.3f} ms"
    )
    print(f"fixed cost per E-step (sort, tiles, statistics): {out['fixed_ms']:.2f} ms")
    print(f"roof: a 1024 x 1024 float32 matrix product runs at {peak:.0f} GFLOP/s on this device")
    print(
        f"default E-steps from the initial topics: plain {out['plain_default_ms']:.1f} ms "
        f"(= {out['plain_updates_equiv']:.0f} updates), SQUAREM {out['squarem_default_ms']:.1f} ms "
        f"(= {out['squarem_updates_equiv']:.0f} updates)"
    )
    out["machine"] = machine(load0)
    write_json(args.out, out)
    return out


def machine(load_at_start) -> dict:
    """The machine fields of an LDA profiling script's JSON (``lda_step_kernels.py`` uses them too)."""
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "jax": jax.__version__,
        "jax_devices": len(jax.devices()),
        "loadavg_1_5_15_min_at_start": load_at_start,
        "loadavg_1_5_15_min_at_end": os.getloadavg(),
    }


def write_json(path: str, result: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(result, fh, indent=1)
        fh.write("\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
