"""Baum–Welch (EM for HMMs): vijax against hmmlearn and dynamax on the same data from the same start.

Data: ``--num-sequences`` sequences of length ``--length`` sampled from a random HMM with K states,
with categorical (V symbols) or diagonal-Gaussian (D dimensions) emissions. Every library starts from
the same parameters (a second random HMM) and runs ``--iters`` EM iterations in float64; each final
estimate is scored with one scorer (vijax's forward pass, checked against hmmlearn's ``score``).

Measured per library: compile time (vijax: lowering and compiling the step, plus one warm-up call;
dynamax: its ``fit_em`` body -- vmapped ``e_step``, ``log_prior``, ``m_step`` -- compiled once
as one step), steady-state seconds per iteration (each iteration timed alone; the median, and the
minimum, which load on a shared machine disturbs least), end-to-end wall time (compile +
iterations), and the log-likelihood after the iterations. dynamax's own ``fit_em``, as a user calls
it (it compiles a scan of all the iterations at every call), is timed end to end too: the column
"dynamax fit_em s", to be read against the wall column of the others (at 1e4 x 100 it was faster
than vijax's compile + 10 iterations for categorical emissions). hmmlearn has no compile; its EM is a
Python loop over sequences around C forward-backward kernels, timed as one ``fit`` call of
``--iters`` iterations (its time per iteration is that call's over ``--iters``: no median, no
minimum). dynamax's M-step is MAP under its own priors, set as flat as its API allows (Dirichlet
concentrations 1, a near-flat Normal-inverse-Gamma), so its Gaussian log-likelihood can differ from
the ML fits in the last digits.

The libraries must agree: the final log-likelihood of each is compared with hmmlearn's (vijax's
float64 one without hmmlearn), to a relative ``--rtol`` (default 1e-8; float32 runs to 100 times
that, since float32's rounding drifts over the iterations: 3e-8 measured at 1e4 x 100 x 10, 6e-7 at
200 x 50 x 3). dynamax's Gaussian fit is another estimator: its M-step is the mode of a
Normal-inverse-Gamma posterior, whose variance divides by n_k + 2 or so where maximum likelihood
divides by n_k, a gap of order K / N; it is held to ``--rtol-map`` (default 1e-3; measured 2e-4 at
200 x 50 x 3, 5e-10 at 1e4 x 100 x 10). After writing the JSON and printing the table, the script
exits with status 1, naming the libraries, when one does not agree.

    python benchmarks/hmm.py                                       # the issue's size: 1e4 x 100, K = 10
    python benchmarks/hmm.py --num-sequences 1000 --iters 5        # a quick look

Writes ``benchmarks/results/hmm.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from vijax.data import sample_hmm  # noqa: E402
from vijax.inference import EMState, em  # noqa: E402
from vijax.models import CategoricalEmissions, CategoricalHMM, GaussianEmissions, GaussianHMM, HMMParams  # noqa: E402
from _device import add_device_argument, use_device  # noqa: E402  (this folder's --device switch)
from _dynamax import dynamax_em  # noqa: E402  (this folder's dynamax EM step)


def random_params(rng, kind, k, v, d, sticky):
    pi = rng.dirichlet(np.ones(k))
    trans = rng.dirichlet(np.ones(k), k) + sticky * np.eye(k)
    trans /= trans.sum(1, keepdims=True)
    if kind == "categorical":
        em_ = CategoricalEmissions(jnp.asarray(rng.dirichlet(np.ones(v) * 0.5, k)))
    else:
        em_ = GaussianEmissions(jnp.asarray(rng.normal(size=(k, d)) * 2.0), jnp.asarray(rng.uniform(0.5, 1.5, (k, d))))
    return HMMParams(jnp.asarray(pi), jnp.asarray(trans), em_)


def run_vijax(model, start, data, iters, dtype):
    cast = lambda t: jax.tree_util.tree_map(
        lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a, t
    )
    data, start = cast(data), cast(start)
    alg = em(model)
    state = EMState(start, jnp.zeros((), jnp.int32))
    key = jax.random.PRNGKey(0)
    t0 = time.perf_counter()
    step = jax.jit(alg.step).lower(key, state, data).compile()
    jax.block_until_ready(step(key, state, data))  # warm-up call, result dropped
    compile_s = time.perf_counter() - t0
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        state, info = step(key, state, data)
        jax.block_until_ready(state)
        times.append(time.perf_counter() - t0)
    return jax.tree_util.tree_map(lambda a: a.astype(jnp.float64), state.q_global), compile_s, times


def run_hmmlearn(kind, start, data, iters):
    from hmmlearn import hmm

    x = np.asarray(data.obs).reshape(-1, 1 if kind == "categorical" else data.obs.shape[-1])
    lengths = np.asarray(data.lengths)
    k = start.initial_probs.shape[0]
    if kind == "categorical":
        ref = hmm.CategoricalHMM(
            n_components=k, n_iter=iters, tol=-np.inf, init_params="", n_features=start.emissions.probs.shape[1]
        )
        ref.emissionprob_ = np.asarray(start.emissions.probs)
    else:
        ref = hmm.GaussianHMM(
            n_components=k,
            covariance_type="diag",
            n_iter=iters,
            tol=-np.inf,
            init_params="",
            means_prior=0.0,
            means_weight=0.0,
            covars_prior=0.0,
            covars_weight=1.0,
            min_covar=0.0,
        )
        ref.means_ = np.asarray(start.emissions.means)
        ref.covars_ = np.asarray(start.emissions.variances)
    ref.startprob_ = np.asarray(start.initial_probs)
    ref.transmat_ = np.asarray(start.transition_matrix)
    t0 = time.perf_counter()
    ref.fit(x, lengths)  # n_iter=iters iterations in one call, as a user runs it
    times = [(time.perf_counter() - t0) / iters] * iters
    emissions = (
        CategoricalEmissions(jnp.asarray(ref.emissionprob_))
        if kind == "categorical"
        else GaussianEmissions(jnp.asarray(ref.means_), jnp.asarray(ref._covars_))
    )
    params = HMMParams(jnp.asarray(ref.startprob_), jnp.asarray(ref.transmat_), emissions)
    return params, 0.0, times, float(ref.score(x, lengths))


def run_dynamax(kind, start, data, iters):
    hmm, params, props, y, em_step = dynamax_em(kind, start, data.obs)
    carry = (params, hmm.initialize_m_step_state(params, props))
    t0 = time.perf_counter()
    step = jax.jit(em_step).lower(carry).compile()
    jax.block_until_ready(step(carry))
    compile_s = time.perf_counter() - t0
    c, times = carry, []
    for _ in range(iters):
        t0 = time.perf_counter()
        c, _ = step(c)
        jax.block_until_ready(c)
        times.append(time.perf_counter() - t0)
    # end to end as a user calls it: fit_em compiles its scan of iters steps at every call
    t0 = time.perf_counter()
    fitted, _ = hmm.fit_em(params, props, y, num_iters=iters, verbose=False)
    jax.block_until_ready(fitted)
    fit_em_s = time.perf_counter() - t0
    if kind == "categorical":
        emissions = CategoricalEmissions(fitted.emissions.probs[:, 0, :])
    else:
        emissions = GaussianEmissions(fitted.emissions.means, fitted.emissions.scale_diags**2)
    params = HMMParams(fitted.initial.probs, fitted.transitions.transition_matrix, emissions)
    return params, compile_s, times, fit_em_s


def bench(kind, args):
    rng = np.random.default_rng(args.seed)
    k, v, d = args.states, args.symbols, args.dim
    truth = random_params(rng, kind, k, v, d, sticky=2.0)
    start = random_params(rng, kind, k, v, d, sticky=0.0)
    data = sample_hmm(jax.random.PRNGKey(args.seed), truth, num_sequences=args.num_sequences, length=args.length).data
    model = CategoricalHMM(k, v) if kind == "categorical" else GaussianHMM(k, d, min_variance=0.0)
    score = lambda p: float(jnp.sum(model.log_likelihood(p, data)))
    rows = []
    for name in args.peers:
        if name.startswith("vijax"):
            dtype = jnp.float32 if name.endswith("f32") else jnp.float64
            m = (
                CategoricalHMM(k, v, dtype=dtype)
                if kind == "categorical"
                else GaussianHMM(k, d, min_variance=0.0, dtype=dtype)
            )
            params, compile_s, times = run_vijax(m, start, data, args.iters, dtype)
            extra = {}
        elif name == "hmmlearn":
            params, compile_s, times, own = run_hmmlearn(kind, start, data, args.iters)
            extra = {"hmmlearn_own_score": own}
        else:
            params, compile_s, times, fit_em_s = run_dynamax(kind, start, data, args.iters)
            extra = {"fit_em_wall_s": fit_em_s}
        row = {
            "kind": kind,
            "library": name,
            "num_sequences": args.num_sequences,
            "length": args.length,
            "K": k,
            "iters": args.iters,
            "compile_s": compile_s,
            "s_per_iter": float(np.median(times)),
            "s_per_iter_min": float(np.min(times)),
            "wall_s": compile_s + float(np.sum(times)),
            "log_likelihood": score(params),
            **extra,
        }
        rows.append(row)
        print(
            f"{kind:>11} {name:>10} | compile {compile_s:7.2f} s | {1e3 * row['s_per_iter']:9.1f} ms/iter | "
            f"wall {row['wall_s']:8.2f} s | log-lik {row['log_likelihood']:.8e}",
            flush=True,
        )
    base = next((r for r in rows if r["library"] == "hmmlearn"), None)
    for r in rows:
        r["speedup_vs_hmmlearn_per_iter"] = None if base is None else base["s_per_iter"] / r["s_per_iter"]
    return rows


def disagreements(rows, rtol: float, rtol_map: float) -> list:
    """The rows whose final log-likelihood differs from the reference's of their kind (hmmlearn's, else
    vijax's float64 one) by more than ``rtol`` relative (``10**2 * rtol`` for float32 runs, ``rtol_map``
    for dynamax's Gaussian MAP fit), as text."""
    out = []
    for kind in dict.fromkeys(r["kind"] for r in rows):
        group = [r for r in rows if r["kind"] == kind]
        ref = next((r for r in group if r["library"] == "hmmlearn"), None) or next(
            (r for r in group if r["library"] == "vijax"), None
        )
        if ref is None:
            continue
        for r in group:
            tol = rtol * (100 if r["library"].endswith("f32") else 1)
            if r["library"] == "dynamax" and kind == "gaussian":
                tol = rtol_map
            gap = abs(r["log_likelihood"] - ref["log_likelihood"]) / abs(ref["log_likelihood"])
            r["log_likelihood_rel_gap"] = gap
            if not gap <= tol:
                out.append(
                    f"{kind}: {r['library']} log-likelihood {r['log_likelihood']:.10g} differs from "
                    f"{ref['library']}'s {ref['log_likelihood']:.10g} by {gap:.2g} relative (tolerance {tol:.0e})"
                )
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-sequences", type=int, default=10_000)
    p.add_argument("--length", type=int, default=100)
    p.add_argument("--states", type=int, default=10)
    p.add_argument("--symbols", type=int, default=20)
    p.add_argument("--dim", type=int, default=5)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kinds", nargs="+", default=["categorical", "gaussian"])
    p.add_argument("--peers", nargs="+", default=["vijax", "vijax_f32", "hmmlearn", "dynamax"])
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "hmm.json"))
    p.add_argument("--rtol", type=float, default=1e-8, help="agreement of the final log-likelihoods (float32: x100)")
    p.add_argument("--rtol-map", type=float, default=1e-3, help="the same for dynamax's Gaussian MAP fit")
    add_device_argument(p)
    args = p.parse_args(argv)
    use_device(args.device)
    rows = [r for kind in args.kinds for r in bench(kind, args)]
    disagree = disagreements(rows, args.rtol, args.rtol_map)
    print(
        f"\n| emissions | library | compile s | ms / iteration (median, min) | x hmmlearn | wall s ({args.iters} it.) "
        f"| dynamax fit_em s | log-likelihood |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        sp = r["speedup_vs_hmmlearn_per_iter"]
        per_iter = (
            f"{1e3 * r['s_per_iter']:.0f} (one fit call)"
            if r["library"] == "hmmlearn"
            else f"{1e3 * r['s_per_iter']:.0f}, {1e3 * r['s_per_iter_min']:.0f}"
        )
        fit_em = f"{r['fit_em_wall_s']:.2f}" if "fit_em_wall_s" in r else ""
        print(
            f"| {r['kind']} | {r['library']} | {r['compile_s']:.2f} | {per_iter} | "
            f"{'' if sp is None else f'{sp:.1f}'} | {r['wall_s']:.2f} | {fit_em} | {r['log_likelihood']:.6f} |"
        )
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
        "jax": jax.__version__,
        "device": str(jax.devices()[0]),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"machine": machine, "settings": vars(args), "rows": rows, "disagreements": disagree}, fh, indent=2)
    print(f"wrote {args.out}")
    if disagree:
        print("the libraries disagree:\n  " + "\n  ".join(disagree), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
