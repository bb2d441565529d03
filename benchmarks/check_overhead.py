"""The cost of the value checks of a step's batch (docs/design.md, "Checked steps").

Times the jitted step with value checks on and off (``vijax.inference.value_checks``; the
switch is read at trace time, so each setting is its own compiled step), in alternating rounds
(the fastest of a few calls each) so that load on a shared machine falls on both alike, and
reports the median over rounds of the ratio on / off - 1, with its interquartile range. Two steps: LDA SVI on a minibatch of S documents (K topics, V words,
L distinct words per document) and diagonal-GMM CAVI on N points.

    python benchmarks/check_overhead.py            # writes benchmarks/results/check_overhead.json
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
from vijax.inference import cavi, svi, value_checks
from vijax.models import LDA, DiagonalGMM
from vijax.run import fast_cpu_compile


def _compiled(alg, state, batch, checks: bool):
    with value_checks(checks):
        return jax.jit(alg.step).lower(state, batch, jax.random.PRNGKey(1)).compile()


def _time(step, state, batch, reps: int) -> float:
    """The fastest of ``reps`` calls (the one the machine's other load disturbed least)."""
    key = jax.random.PRNGKey(3)
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(step(state, batch, key))
        best = min(best, time.perf_counter() - t)
    return best


def measure(alg, state, batch, rounds: int, reps: int) -> dict:
    """Per round, the fastest of ``reps`` calls with checks on and off, back to back (the order
    alternating); the overhead is the median over rounds of the ratio on / off - 1."""
    on, off = _compiled(alg, state, batch, True), _compiled(alg, state, batch, False)
    t_on, t_off = [], []
    for r in range(rounds):
        if r % 2:
            t_on.append(_time(on, state, batch, reps)), t_off.append(_time(off, state, batch, reps))
        else:
            t_off.append(_time(off, state, batch, reps)), t_on.append(_time(on, state, batch, reps))
    ratios = np.asarray(t_on) / np.asarray(t_off) - 1.0
    return {
        "median_s_checks_on": float(np.median(t_on)),
        "median_s_checks_off": float(np.median(t_off)),
        "overhead": float(np.median(ratios)),
        "overhead_iqr": [float(q) for q in np.percentile(ratios, [25, 75])],
        "rounds": rounds,
        "reps": reps,
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "check_overhead.json"))
    a = p.parse_args(argv)
    fast_cpu_compile()  # XLA's CPU compile settings of `vijax run`, before anything runs
    rng = np.random.default_rng(0)
    s, length, k, v = 64, 128, 20, 5000
    ids = jnp.asarray(np.sort(rng.choice(v, (s, length)), 1), jnp.int32)
    batch = BowBatch(ids, jnp.asarray(rng.integers(1, 4, (s, length)), jnp.float32))
    lda = svi(LDA(k, v), num_data=10_000, schedule=0.5)
    res = {
        "lda_svi": dict(
            measure(lda, lda.init(jax.random.PRNGKey(0)), batch, a.rounds, a.reps),
            docs=s,
            length=length,
            topics=k,
            vocab=v,
        )
    }
    x = jnp.asarray(rng.normal(size=(20_000, 2)), jnp.float32)
    gmm = cavi(DiagonalGMM(5, 2))
    res["gmm_cavi"] = dict(
        measure(gmm, gmm.init(jax.random.PRNGKey(0), x), x, a.rounds, a.reps), points=20_000, dim=2, components=5
    )
    res["machine"] = f"{platform.machine()} {os.cpu_count()} cores, jax {jax.__version__}"
    for name, r in res.items():
        if isinstance(r, dict):
            print(
                f"{name:9s} on {r['median_s_checks_on'] * 1e3:8.3f} ms  off {r['median_s_checks_off'] * 1e3:8.3f} ms  "
                f"overhead {100 * r['overhead']:+.2f} % (IQR {100 * r['overhead_iqr'][0]:+.2f} .. "
                f"{100 * r['overhead_iqr'][1]:+.2f} %)"
            )
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2)
    return res


if __name__ == "__main__":
    main()
