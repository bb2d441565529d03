"""A grid of LDA hyperparameters (alpha x eta) trained by SVI: one vmapped program against one
setting at a time.

``vijax.inference.inject_hyperparameters`` puts a ``HyperparameterModel``'s hyperparameters (LDA's
alpha and eta) in SVI's state, so a whole grid of settings is one ``vmap``ped step. Three ways to
train the same grid (default 3 x 3 = 9 settings) on a synthetic corpus (``sample_lda_corpus``), all
from the same initial state, on the same minibatches with the same keys:

- (a) ``grid``: the grid as one program, ``jax.jit(jax.vmap(step, in_axes=(None, 0, None)))`` over
  the 9 injected states, compiled once;
- (b) ``one-by-one, injected``: one ``jax.jit(step)``, compiled once, run for each setting in turn
  with that setting's injected (unbatched) state;
- (c) ``one-by-one, a model per setting``: for each setting ``svi(LDA(K, V, alpha=a, eta=e), ...)``
  and its own ``jax.jit(step)``, so 9 compilations (the way before hyperparameters were state).

Each jitted step returns the new state alone (XLA then leaves out the per-step ELBO estimate), and
is compiled ahead of time (``.lower(...).compile()``, tracing included) after ``jax.clear_caches()``,
so that each way pays its own tracing and compilation. Reported for each way, in one run: compile
time (the sum of its compilations), steady-state time per grid step (all settings on one
minibatch; the median over minibatches, each step waited for) and end-to-end wall time from the
first call to the final states of every setting (set-up, compilation and every step). The headline
ratio is end to end, (c)'s time over (a)'s.

Agreement, for each setting against (c): the ELBO on the whole training corpus after the run
(one scorer, outside the timed region) within relative ``ELBO_RTOL`` for (a) and (b); (b)'s final
q(beta) within ``Q_RTOL`` (the largest relative difference of a topic concentration lambda_kv);
(a)'s final q(beta) within ``Q_L1_TOL`` in relative L1 distance, sum |lambda_a - lambda_c| /
sum lambda_c, and with ``--float64`` also within ``Q_RTOL`` entry by entry. In float32 the batched
program rounds differently from the unbatched one (a last-bit difference in the first E-step), and
LDA's E-step (per-document stopping, SQUAREM's safeguards, nearly symmetric topics at the start)
turns such differences into different updates of some documents: single lambda_kv of (a) and (c)
then differ by up to tens of percent while the ELBO agrees to about 1e-5; in float64 (b) equals (c)
to the last bit and (a) differs from them by at most about 1e-11, relatively. On a GPU (b) and (c)
round differently too, and a float32 run there fails the checks for (b) as well; ``--float64``
checks agreement there (within about 3e-9). The checks go into
the JSON (``agree``, ``agreement``); after the table and the JSON, the script exits with status 1
and names each check that failed. It also prints the setting with the best training ELBO.

The ways run one after another (``--order``, default a, b, c), each setting's steps back to back.

    python benchmarks/hyper_grid.py                                  # the README's table
    python benchmarks/hyper_grid.py --alphas 0.1 1.0 --etas 0.05 --passes 1   # a quick look
    python benchmarks/hyper_grid.py --float64 --out /tmp/hyper_grid_f64.json  # (a) checked entry by entry

Writes ``benchmarks/results/hyper_grid.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax.data import Minibatcher, sample_lda_corpus
from vijax.inference import inject_hyperparameters, schedules, svi
from vijax.models import LDA, conjugate_elbo

from _device import add_device_argument, use_device  # this folder's --device switch
from _agree import compare, exit_on_disagreement, verdict  # this folder's agreement rule

KAPPA, TAU = 0.7, 64.0
Q_RTOL = 1e-4  # largest relative difference of a topic concentration: (b) vs (c), and (a) vs (c) in float64
Q_L1_TOL = 5e-3  # relative L1 distance of (a)'s lambda from (c)'s (float32 rounding, amplified by the E-step)
ELBO_RTOL = 1e-4  # largest relative difference of the training ELBO between the ways
WAYS = ("grid", "one-by-one, injected", "one-by-one, a model per setting")
LABEL = {"grid": "(a) grid, one program", WAYS[1]: "(b) one by one, injected", WAYS[2]: "(c) one by one, a model each"}


def _machine(load_start) -> dict:
    model = ""
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "processor": model or platform.processor(),
        "cpus": os.cpu_count(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0]),
        "loadavg_1_5_15_min_at_start": load_start,
        "loadavg_1_5_15_min_at_end": os.getloadavg(),
    }


def _timed_steps(step, state, batches, keys, times):
    """Runs ``step`` over every minibatch, each call waited for; appends each call's seconds."""
    for b, k in zip(batches, keys):
        t0 = time.perf_counter()
        state = jax.block_until_ready(step(k, state, b))
        times.append(time.perf_counter() - t0)
    return state


def run_grid(alg, model, s0, grid, batches, keys):
    """(a): the grid's states stacked, one vmapped step, compiled once."""
    jax.clear_caches()
    t_start = time.perf_counter()
    dt = s0.q_global.concentration.dtype
    alphas = jnp.asarray([a for a, _ in grid], dt)
    etas = jnp.asarray([e for _, e in grid], dt)
    states = jax.vmap(lambda a, e: inject_hyperparameters(s0, model, alpha=a, eta=e))(alphas, etas)
    jax.block_until_ready(states)
    setup = time.perf_counter() - t_start
    t0 = time.perf_counter()
    step = jax.jit(jax.vmap(lambda k, s, b: alg.step(k, s, b)[0], in_axes=(None, 0, None)))
    step = step.lower(keys[0], states, batches[0]).compile()
    compile_s = time.perf_counter() - t0
    times = []
    states = _timed_steps(step, states, batches, keys, times)
    end = time.perf_counter() - t_start
    qs = [jax.tree_util.tree_map(lambda u, g=g: u[g], states.q_global) for g in range(len(grid))]
    return qs, {"setup_s": setup, "compile_s": compile_s, "compilations": 1, "grid_step_s": times, "end_to_end_s": end}


def run_injected(alg, model, s0, grid, batches, keys):
    """(b): one jitted step, compiled once, run for each setting's injected state in turn."""
    jax.clear_caches()
    t_start = time.perf_counter()
    step = jax.jit(lambda k, s, b: alg.step(k, s, b)[0])
    compile_s, setup, qs, per_setting = 0.0, 0.0, [], []
    for g, (a, e) in enumerate(grid):
        t0 = time.perf_counter()
        state = jax.block_until_ready(inject_hyperparameters(s0, model, alpha=a, eta=e))
        setup += time.perf_counter() - t0
        if g == 0:  # every injected state has the same structure, shapes and dtypes: one program
            t0 = time.perf_counter()
            step = step.lower(keys[0], state, batches[0]).compile()
            compile_s += time.perf_counter() - t0
        times = []
        state = _timed_steps(step, state, batches, keys, times)
        per_setting.append(times)
        qs.append(state.q_global)
    end = time.perf_counter() - t_start
    return qs, {
        "setup_s": setup,
        "compile_s": compile_s,
        "compilations": 1,
        "grid_step_s": [float(x) for x in np.sum(per_setting, axis=0)],
        "end_to_end_s": end,
    }


def run_per_model(k, v, dtype, num_data, schedule, key, grid, batches, keys, s0):
    """(c): a model, an algorithm, an initial state and a compiled step per setting."""
    jax.clear_caches()
    t_start = time.perf_counter()
    compile_s, setup, qs, per_setting, same_start = 0.0, 0.0, [], [], True
    for a, e in grid:
        t0 = time.perf_counter()
        alg = svi(LDA(k, v, alpha=a, eta=e, dtype=dtype), num_data=num_data, schedule=schedule)
        state = jax.block_until_ready(alg.init(key))
        setup += time.perf_counter() - t0
        same_start &= bool(jnp.array_equal(state.q_global.concentration, s0.q_global.concentration))
        t0 = time.perf_counter()
        step = jax.jit(lambda kk, s, b, alg=alg: alg.step(kk, s, b)[0]).lower(keys[0], state, batches[0]).compile()
        compile_s += time.perf_counter() - t0
        times = []
        state = _timed_steps(step, state, batches, keys, times)
        per_setting.append(times)
        qs.append(state.q_global)
    end = time.perf_counter() - t_start
    return qs, {
        "setup_s": setup,
        "compile_s": compile_s,
        "compilations": len(grid),
        "grid_step_s": [float(x) for x in np.sum(per_setting, axis=0)],
        "end_to_end_s": end,
        "same_initial_state": same_start,
    }


def _scorer(model, corpus, length):
    """A jitted ``(q, alpha, eta) -> ELBO`` of the whole corpus (the locals fitted at q), compiled once."""
    batch = jax.device_put(corpus.batch(np.arange(corpus.num_docs), length=length))

    @jax.jit
    def elbo(q, batch, alpha, eta):
        hyper = {"alpha": alpha, "eta": eta}
        loc = model.local_step(expfam.tree_mean_params(q), batch, hyper=hyper)
        return conjugate_elbo(model.prior(hyper=hyper), q, loc)

    dt = batch.counts.dtype
    return lambda q, a, e: float(elbo(q, batch, jnp.asarray(a, dt), jnp.asarray(e, dt)))


def _max_rel_diff(q, ref) -> float:
    """The largest relative difference of a topic concentration, max_kv |lambda_kv - ref_kv| / ref_kv."""
    u, w = np.asarray(q.concentration, np.float64), np.asarray(ref.concentration, np.float64)
    return float(np.max(np.abs(u - w) / np.abs(w)))


def _l1_rel_diff(q, ref) -> float:
    """The relative L1 distance of the topic concentrations, sum |lambda - ref| / sum ref."""
    u, w = np.asarray(q.concentration, np.float64), np.asarray(ref.concentration, np.float64)
    return float(np.sum(np.abs(u - w)) / np.sum(np.abs(w)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--alphas", type=float, nargs="+", default=[0.05, 0.2, 1.0])
    p.add_argument("--etas", type=float, nargs="+", default=[0.01, 0.1, 0.5])
    p.add_argument("--k", type=int, default=20)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--docs", type=int, default=2048, help="documents of the synthetic corpus")
    p.add_argument("--true-alpha", type=float, default=0.2, help="the corpus's document-topic concentration")
    p.add_argument("--true-eta", type=float, default=0.1, help="the corpus's topic-word concentration")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--passes", type=int, default=8, help="passes over the corpus")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--order", nargs=3, choices=["a", "b", "c"], default=["a", "b", "c"], help="the order the three ways run in"
    )
    p.add_argument("--float64", action="store_true", help="run in float64 (JAX's x64 mode) instead of float32")
    p.add_argument(
        "--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "hyper_grid.json")
    )
    add_device_argument(p)
    args = p.parse_args(argv)
    if args.float64:
        jax.config.update("jax_enable_x64", True)
    dtype = jnp.float64 if args.float64 else jnp.float32
    use_device(args.device)
    load_start = os.getloadavg()
    grid = list(itertools.product(args.alphas, args.etas))
    corpus = sample_lda_corpus(
        args.seed, args.docs, args.k, args.vocab, alpha=args.true_alpha, eta=args.true_eta
    ).corpus
    mb = Minibatcher(corpus, args.batch_size, args.seed, drop_remainder=True, length="corpus", dtype=dtype)
    num_steps = args.passes * mb.steps_per_epoch
    batches = [jax.device_put(mb.step_batch(t)) for t in range(num_steps)]  # in memory before any clock
    key = jax.random.PRNGKey(args.seed)
    keys = [jax.random.fold_in(key, t) for t in range(num_steps)]
    schedule = schedules.robbins_monro(1.0, tau=TAU, kappa=KAPPA)
    model = LDA(args.k, corpus.vocab_size, dtype=dtype)
    alg = svi(model, num_data=corpus.num_docs, schedule=schedule)
    s0 = jax.block_until_ready(alg.init(key))  # the shared initial state (it does not depend on alpha, eta)
    print(
        f"LDA K={args.k} V={corpus.vocab_size}, {corpus.num_docs} docs, S={args.batch_size}, {num_steps} steps "
        f"({args.passes} passes), grid {len(args.alphas)} alpha x {len(args.etas)} eta = {len(grid)} settings; "
        f"{platform.node()} ({os.cpu_count()} CPUs, load {load_start[0]:.1f})",
        flush=True,
    )
    contenders = {
        "a": (WAYS[0], lambda: run_grid(alg, model, s0, grid, batches, keys)),
        "b": (WAYS[1], lambda: run_injected(alg, model, s0, grid, batches, keys)),
        "c": (
            WAYS[2],
            lambda: run_per_model(
                args.k, corpus.vocab_size, dtype, corpus.num_docs, schedule, key, grid, batches, keys, s0
            ),
        ),
    }
    if sorted(args.order) != ["a", "b", "c"]:
        p.error(f"--order must name a, b and c once each, got {args.order}")
    finals, runs = {}, {}
    for name in args.order:
        w, run = contenders[name]
        finals[w], runs[w] = run()

    score = _scorer(model, corpus, mb.length)
    elbos = {w: [score(q, a, e) for q, (a, e) in zip(finals[w], grid)] for w in WAYS}
    base = runs[WAYS[2]]
    rows = []
    hdr = (
        f"{'way':>30} | {'compilations':>12} | {'compile s':>9} | {'steady ms/grid step':>19} | "
        f"{'end-to-end s':>12} | {'(c) / this, end to end':>22} | {'steady':>7}"
    )
    print(hdr)
    print("-" * len(hdr))
    for w in WAYS:
        r = runs[w]
        steady = float(np.median(r["grid_step_s"]))
        row = {
            "way": w,
            "label": LABEL[w],
            "compilations": r["compilations"],
            "compile_s": r["compile_s"],
            "setup_s": r["setup_s"],
            "steady_s_per_grid_step": steady,
            "stepping_s": float(np.sum(r["grid_step_s"])),
            "grid_step_s": r["grid_step_s"],
            "end_to_end_s": r["end_to_end_s"],
            "end_to_end_ratio_c_over_this": base["end_to_end_s"] / r["end_to_end_s"],
            "steady_ratio_c_over_this": float(np.median(base["grid_step_s"])) / steady,
            "train_elbo": elbos[w],
            "train_elbo_per_word": [x / corpus.num_tokens for x in elbos[w]],
        }
        if "same_initial_state" in r:
            row["same_initial_state"] = r["same_initial_state"]
        rows.append(row)
        print(
            f"{LABEL[w]:>30} | {r['compilations']:>12} | {r['compile_s']:9.2f} | {1e3 * steady:19.1f} | "
            f"{r['end_to_end_s']:12.2f} | {row['end_to_end_ratio_c_over_this']:21.2f}x | "
            f"{row['steady_ratio_c_over_this']:6.2f}x",
            flush=True,
        )
    print("training ELBO per word after the run, per setting ((a); (b) and (c) agree below):")
    for (a, e), x in zip(grid, elbos["grid"]):
        print(f"  alpha={a:<5g} eta={e:<5g} {x / corpus.num_tokens:9.4f}")
    best = {w: grid[int(np.argmax(elbos[w]))] for w in WAYS}
    a_best, e_best = best["grid"]
    print(
        f"best setting by training ELBO: alpha={a_best:g}, eta={e_best:g} "
        f"(the corpus was drawn with alpha={args.true_alpha:g}, eta={args.true_eta:g}); "
        + ("every way picks it" if len(set(best.values())) == 1 else f"per way: {best}")
    )

    checks, q_diff = [], {w: {"max_relative": [], "l1_relative": []} for w in WAYS[:2]}
    ref = LABEL[WAYS[2]]
    for g, (a, e) in enumerate(grid):
        where = f"alpha={a:g}, eta={e:g}"
        for w in WAYS[:2]:
            q, q_ref = finals[w][g], finals[WAYS[2]][g]
            q_diff[w]["max_relative"].append(_max_rel_diff(q, q_ref))
            q_diff[w]["l1_relative"].append(_l1_rel_diff(q, q_ref))
            checks.append(
                compare(
                    f"training ELBO ({where})", LABEL[w], elbos[w][g], ref, elbos[WAYS[2]][g], ELBO_RTOL, relative=True
                )
            )
            if w == WAYS[1] or args.float64:
                checks.append(
                    compare(
                        f"final q(beta), max_kv |lambda - lambda_c| / lambda_c ({where})",
                        f"{LABEL[w]} vs (c)",
                        q_diff[w]["max_relative"][-1],
                        "equal q",
                        0.0,
                        Q_RTOL,
                    )
                )
            if w == WAYS[0]:
                checks.append(
                    compare(
                        f"final q(beta), sum |lambda - lambda_c| / sum lambda_c ({where})",
                        f"{LABEL[w]} vs (c)",
                        q_diff[w]["l1_relative"][-1],
                        "equal q",
                        0.0,
                        Q_L1_TOL,
                    )
                )
    checks.append(
        compare(
            "(c)'s initial states equal the shared one (1 = all equal)",
            LABEL[WAYS[2]],
            float(runs[WAYS[2]]["same_initial_state"]),
            "the shared initial state",
            1.0,
            0.0,
        )
    )
    for row in rows:
        row["q_difference_from_c"] = q_diff.get(row["way"])
    print(
        "final q against (c), largest relative difference of a lambda_kv / relative L1 distance, worst setting: "
        + "; ".join(
            f"{LABEL[w][:3]} {max(q_diff[w]['max_relative']):.1e} / {max(q_diff[w]['l1_relative']):.1e}"
            for w in WAYS[:2]
        )
    )
    settings = {
        "k": args.k,
        "vocab": corpus.vocab_size,
        "docs": corpus.num_docs,
        "tokens": corpus.num_tokens,
        "true_alpha": args.true_alpha,
        "true_eta": args.true_eta,
        "batch_size": args.batch_size,
        "padded_length": mb.length,
        "passes": args.passes,
        "steps": num_steps,
        "grid": [{"alpha": a, "eta": e} for a, e in grid],
        "schedule": f"robbins_monro(1.0, tau={TAU:g}, kappa={KAPPA:g})",
        "dtype": str(jnp.result_type(float)),
        "order": [contenders[n][0] for n in args.order],
    }
    out = {
        "machine": _machine(load_start),
        "settings": settings,
        "rows": rows,
        "best_setting_by_train_elbo": {"alpha": a_best, "eta": e_best},
        "end_to_end_ratio_c_over_a": rows[0]["end_to_end_ratio_c_over_this"],
        **verdict(checks),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)
    print(f"wrote {args.out}")
    if args.device != "cpu" and not args.float64 and not all(c["agree"] for c in checks):
        print(
            "note: on an accelerator the float32 programs of the three ways round differently, and LDA's E-step "
            "turns last-bit differences into different updates; check agreement there with --float64"
        )
    exit_on_disagreement(checks)


if __name__ == "__main__":
    main()
