"""The cost of the value checks of a step's batch (docs/design.md, "Checked steps").

Three programs of each step: value checks off (``vijax.inference.value_checks(False)``; the
switch is read at trace time), the checks as host callbacks (``jax.jit`` of the checked step), and
the checks as outputs of the program (``vijax.inference.jit_step``: collected checks, as the runner compiles its chunk).
Each is lowered and compiled once, timed (wall seconds, the persistent cache off: cold), then the
three are timed in rounds (the fastest of a few calls each, the order rotating) so that load on a
shared machine falls on all alike; reported: the median over rounds of the ratio to the unchecked
step - 1, with its interquartile range, the compile seconds, and end to end (lowering, compiling and
the first step). Two steps: LDA SVI on a minibatch
of S documents (K topics, V words, L distinct words per document) and diagonal-GMM CAVI on N points.
With ``--devices n`` (n > 1), JAX shows n CPU devices and the LDA step is ``data_parallel`` over
them (the batch sharded by rows: a check reduced over the whole batch is then an all-reduce); the
GMM row is left out.

    python benchmarks/check_overhead.py            # writes benchmarks/results/check_overhead.json
    python benchmarks/check_overhead.py --devices 2 --out benchmarks/results/check_overhead_2dev.json
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

from vijax.data import BowBatch
from vijax.inference import cavi, data_parallel, jit_step, svi, value_checks
from vijax.models import LDA, DiagonalGMM
from vijax.run import enable_compile_cache, fast_cpu_compile


def _compiled(alg, state, batch, how: str):
    """The step's compiled program ("off", "callback" or "jit_step"), its lower + compile seconds and
    its end-to-end seconds (lowering to the result of its first call)."""
    args = (state, batch, jax.random.PRNGKey(1))

    def step(*a):  # a function of its own per program: jit caches traces by function, and the
        return alg.step(*a)  # value-checks switch is read at trace time

    t = time.perf_counter()
    with value_checks(how != "off"):
        lowered = (jit_step(step) if how == "jit_step" else jax.jit(step)).lower(*args)
    compiled = lowered.compile()
    compile_s = time.perf_counter() - t
    jax.block_until_ready(compiled(*args))
    return compiled, compile_s, time.perf_counter() - t  # end to end: lowering to the first step's result


def _time(step, state, batch, reps: int) -> float:
    """The fastest of ``reps`` calls (the one the machine's other load disturbed least)."""
    key = jax.random.PRNGKey(3)
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(step(state, batch, key))
        best = min(best, time.perf_counter() - t)
    return best


WAYS = ("off", "callback", "jit_step")


def measure(alg, state, batch, rounds: int, reps: int) -> dict:
    """Per round, the fastest of ``reps`` calls of each program, back to back (the order rotating);
    the overhead of a way of checking is the median over rounds of its ratio to "off" - 1."""
    compiled = {how: _compiled(alg, state, batch, how) for how in WAYS}
    times = {how: [] for how in WAYS}
    for r in range(rounds):
        for how in WAYS[r % 3 :] + WAYS[: r % 3]:
            times[how].append(_time(compiled[how][0], state, batch, reps))
    out = {"rounds": rounds, "reps": reps}
    for how in WAYS:
        out[f"median_s_{how}"] = float(np.median(times[how]))
        out[f"compile_s_{how}"] = round(compiled[how][1], 3)
        out[f"end_to_end_s_{how}"] = round(compiled[how][2], 3)
        if how != "off":
            ratios = np.asarray(times[how]) / np.asarray(times["off"]) - 1.0
            out[f"overhead_{how}"] = float(np.median(ratios))
            out[f"overhead_{how}_iqr"] = [float(q) for q in np.percentile(ratios, [25, 75])]
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--devices", type=int, default=1, help="CPU devices; > 1: the LDA step data_parallel over them")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "check_overhead.json"))
    a = p.parse_args(argv)
    if a.devices > 1:
        jax.config.update("jax_num_cpu_devices", a.devices)  # before JAX starts its backends
    fast_cpu_compile()  # XLA's CPU compile settings of `vijax run`, before anything runs
    enable_compile_cache(False)  # every compile cold
    rng = np.random.default_rng(0)
    s, length, k, v = 64, 128, 20, 5000
    ids = jnp.asarray(np.sort(rng.choice(v, (s, length)), 1), jnp.int32)
    batch = BowBatch(ids, jnp.asarray(rng.integers(1, 4, (s, length)), jnp.float32))
    lda = svi(data_parallel(LDA(k, v)) if a.devices > 1 else LDA(k, v), num_data=10_000, schedule=0.5)
    res = {
        "lda_svi": dict(
            measure(lda, lda.init(jax.random.PRNGKey(0)), batch, a.rounds, a.reps),
            docs=s,
            length=length,
            topics=k,
            vocab=v,
            devices=jax.device_count(),
        )
    }
    if a.devices <= 1:
        x = jnp.asarray(rng.normal(size=(20_000, 2)), jnp.float32)
        gmm = cavi(DiagonalGMM(5, 2))
        res["gmm_cavi"] = dict(
            measure(gmm, gmm.init(jax.random.PRNGKey(0), x), x, a.rounds, a.reps), points=20_000, dim=2, components=5
        )
    res["machine"] = f"{platform.machine()} {os.cpu_count()} cores, jax {jax.__version__}"
    res["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    print("| step | checks | step ms | overhead (IQR) | compile s | end-to-end s (first step) |")
    print("| --- | --- | ---: | --- | ---: | ---: |")
    for name, r in res.items():
        if not isinstance(r, dict):
            continue
        for how in WAYS:
            over = (
                "-"
                if how == "off"
                else f"{100 * r[f'overhead_{how}']:+.1f} % ({100 * r[f'overhead_{how}_iqr'][0]:+.1f} .. "
                f"{100 * r[f'overhead_{how}_iqr'][1]:+.1f} %)"
            )
            print(
                f"| {name} | {how} | {r[f'median_s_{how}'] * 1e3:.3f} | {over} | {r[f'compile_s_{how}']:.2f} | {r[f'end_to_end_s_{how}']:.2f} |"
            )
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2)
    return res


if __name__ == "__main__":
    main()
