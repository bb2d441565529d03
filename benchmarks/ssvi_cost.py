"""Cost per document of SSVI and SSVI-A relative to SVI on LDA, for each E-step (Hoffman & Blei 2015, §4.1:
"SSVI took about 30% longer than [SVI] to analyze the same number of documents, and SSVI-A's
speed is very close to SSVI").

The same synthetic corpus and minibatches as ``benchmarks/lda_online.py`` (its ``_corpora``,
``_batches``, ``_run_schedule`` and ``vijax_runner`` are imported): every M-step (SVI = "meanfield",
SSVI, SSVI-A, and the MAP-EM point estimate) with every E-step (mean-field, CVB0, Gibbs) sees
the same documents in the same order, the updates interleaved so that all share the machine's
background load. Each step is jitted returning the new state alone, every padded shape compiled
before timing. Reported per cell, in one run: compile time (every padded shape's first calls),
steady-state documents/s, end-to-end wall time from the first call to the final state (initial
state, compilation and every update), the time per document relative to SVI with the same E-step
(steady state, and end to end), and the held-out per-word log predictive (document completion)
after the run. There is no peer library here: the comparison is between vijax's M-steps.

A second table splits the extra cost of the structured M-steps: one draw of the K x V
Dirichlet (the rejection sampler), and the draw plus one V product (VJP through the implicit
derivative, then the O(V) inverse Fisher product), timed alone.

    python benchmarks/ssvi_cost.py                  # K = 50, V = 5000, S = 256
    python benchmarks/ssvi_cost.py --batch-size 1000 --k 100

Writes ``benchmarks/results/ssvi_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lda_online import MAX_ITERS, TAU, KAPPA, TOL, _batches, _run_schedule, vijax_runner  # noqa: E402

from vijax.data import sample_lda_corpus  # noqa: E402
from vijax.expfam import Dirichlet, reparam_stats, stats_and_v_product  # noqa: E402
from vijax.inference import M_STEPS, make_algorithm, schedules  # noqa: E402
from vijax.models import LDA  # noqa: E402
from _device import add_device_argument, use_device  # noqa: E402  (this folder's --device switch)

GLOBALS = ("meanfield", "ssvi", "ssvi_a", "map")
LABEL = {"meanfield": "SVI", "ssvi": "SSVI", "ssvi_a": "SSVI-A", "map": "MAP-EM"}


def run_cell(model, train, obs, held, batches, global_update, local):
    alg = make_algorithm(
        M_STEPS[global_update],
        model,
        num_data=train.num_docs,
        local=local,
        schedule=schedules.robbins_monro(1.0, tau=TAU, kappa=KAPPA),
    )
    return vijax_runner(alg, model, train, obs, held, batches)


def _best_time(f, *args, repeats=5):
    jax.block_until_ready(f(*args))
    times = []
    for i in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args[:-1], jax.random.PRNGKey(i)))
        times.append(time.perf_counter() - t0)
    return min(times)


def global_overheads(k, v, s_docs_per_step):
    """Seconds per step for E_q[log beta] (SVI's view), one Dirichlet draw's log beta, and the draw
    plus one V product, on a K x V Dirichlet with LDA-like concentrations."""
    lam = 0.02 + jax.random.gamma(jax.random.PRNGKey(0), 0.5, (k, v)) * 10.0
    q = Dirichlet.from_concentration(lam)
    key = jax.random.PRNGKey(1)
    mean = jax.jit(lambda q, key: q.mean_params())
    draw = jax.jit(lambda q, key: reparam_stats(q, key))
    draw_v = jax.jit(lambda q, key: (lambda st, vp: vp(st))(*stats_and_v_product(q, key)))
    out = {
        "mean_params_s": _best_time(mean, q, key),
        "draw_s": _best_time(draw, q, key),
        "draw_and_v_product_s": _best_time(draw_v, q, key),
    }
    return {name: {"s_per_step": t, "ms_per_doc": 1e3 * t / s_docs_per_step} for name, t in out.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, default=20000, help="training documents in the synthetic corpus")
    p.add_argument("--k", type=int, default=50)
    p.add_argument("--vocab", type=int, default=5000)
    p.add_argument("--alpha", type=float, default=0.1)
    p.add_argument("--eta", type=float, default=0.02)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--batches", type=int, default=8, help="timed updates per cell (mean-field and CVB0 E-steps)")
    p.add_argument("--gibbs-batches", type=int, default=2, help="timed updates per cell with the Gibbs E-step")
    p.add_argument("--locals", nargs="+", default=["meanfield", "cvb0", "gibbs"])
    p.add_argument("--globals", nargs="+", default=list(GLOBALS))
    p.add_argument(
        "--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "ssvi_cost.json")
    )
    add_device_argument(p)
    args = p.parse_args(argv)
    use_device(args.device)
    warnings.simplefilter("ignore")
    load_start = os.getloadavg()
    syn = sample_lda_corpus(
        0, args.docs + 1000, args.k, args.vocab, alpha=args.alpha, eta=args.eta, doc_length_mean=100
    )
    train, test = syn.corpus.split_documents(0, 1000 / (args.docs + 1000))
    test = test.subset(np.arange(min(500, test.num_docs)))
    obs, held = test.split_tokens(1, 0.5)
    model = LDA(args.k, train.vocab_size, alpha=args.alpha, eta=args.eta, max_iters=MAX_ITERS, tol=TOL)
    s = args.batch_size
    rows = []
    print(
        f"LDA K={args.k} V={train.vocab_size}, S={s}; {platform.node()} ({os.cpu_count()} CPUs, load {load_start[0]:.1f})"
    )
    print(
        f"{'E-step':>10} {'M-step':>8} | {'docs':>5} {'compile s':>9} {'docs/s':>8} {'end-to-end s':>12} | "
        f"{'x SVI steady':>8} {'end to end':>10} | held-out/word"
    )
    for local in args.locals:
        n = args.gibbs_batches if local == "gibbs" else args.batches
        seq = _batches(train, s, 0, n)
        runners, batches, checkpoints = {}, {}, {}
        for g in args.globals:
            runners[g] = run_cell(model, train, obs, held, seq, g, local)
            batches[g], checkpoints[g] = seq, {n}
        results = _run_schedule(runners, batches, checkpoints, interleaved=True)
        base = results["meanfield"]["time_s"] if "meanfield" in results else None
        for g in args.globals:
            r = results[g]
            base_e2e = results["meanfield"]["end_to_end_s"] if "meanfield" in results else None
            row = {
                "local": local,
                "global": g,
                "method": LABEL[g],
                "batch_size": s,
                "docs": n * s,
                "time_s": r["time_s"],
                "compile_s": r["compile_s"],
                "setup_s": r["setup_s"],
                "end_to_end_s": r["end_to_end_s"],
                "docs_per_s": n * s / r["time_s"],
                "time_per_doc_vs_svi": (r["time_s"] / base) if base else None,
                "end_to_end_vs_svi": (r["end_to_end_s"] / base_e2e) if base_e2e else None,
                "heldout_per_word": r["curve"][-1]["heldout_per_word"],
            }
            rows.append(row)
            rel = "n/a" if row["time_per_doc_vs_svi"] is None else f"{row['time_per_doc_vs_svi']:.2f}"
            rel_e2e = "n/a" if row["end_to_end_vs_svi"] is None else f"{row['end_to_end_vs_svi']:.2f}"
            print(
                f"{local:>10} {LABEL[g]:>8} | {row['docs']:>5} {row['compile_s']:9.2f} {row['docs_per_s']:8.0f} "
                f"{row['end_to_end_s']:12.2f} | {rel:>8} {rel_e2e:>10} | {row['heldout_per_word']:8.4f}",
                flush=True,
            )
    over = global_overheads(args.k, train.vocab_size, s)
    print(
        f"global view of a {args.k} x {train.vocab_size} Dirichlet, ms per document at S={s}: "
        + ", ".join(f"{k_} {v_['ms_per_doc']:.3f}" for k_, v_ in over.items())
    )
    machine = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "loadavg_1_5_15_min_at_start": load_start,
        "loadavg_1_5_15_min_at_end": os.getloadavg(),
    }
    settings = {
        "k": args.k,
        "vocab": train.vocab_size,
        "alpha": args.alpha,
        "eta": args.eta,
        "batch_size": s,
        "train_docs": train.num_docs,
        "max_iters": MAX_ITERS,
        "tol": TOL,
        "tau": TAU,
        "kappa": KAPPA,
        "dtype": str(jax.numpy.result_type(float)),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"machine": machine, "settings": settings, "rows": rows, "global_overheads": over}, fh, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
