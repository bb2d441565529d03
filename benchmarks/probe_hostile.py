"""A probe of the public ``step`` of every registered algorithm with hostile batches, as a new user
would feed them (issue 15's probe, step part): for each (model, algorithm) pair, a valid tiny batch
and its corruptions (an out-of-range id or label, a negative, NaN or infinite value, one extra
trailing axis, a string array), each fed to the step eagerly and under ``jax.jit``.

Each outcome is one of: ``clear`` (a ValueError, or a JaxRuntimeError carrying one, whose message
names the batch or a field; also ``jax.jit``'s own TypeError for a string array, which names the
argument ``batch`` before any vijax code runs), ``handled`` (the step returned with ``info.accepted`` False: the
non-finite update was rejected and the state kept), ``obscure`` (another exception), or
``silent`` (the step returned an update from bad data as if it were fine).

    python benchmarks/probe_hostile.py     # prints the tally, writes benchmarks/results/probe_hostile.json

Run with another checkout first on ``PYTHONPATH`` to probe that version (the "before" figures).
"""

from __future__ import annotations

import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

from vijax import models as vm
from vijax.data import BowBatch
from vijax.inference import make_algorithm

KEY = jax.random.PRNGKey(0)
X1 = jnp.array([-2.0, -1.5, 1.5, 2.0, 0.1])
X2 = jnp.array([[-2.0, 0.1], [-1.5, 0.3], [1.5, -0.2], [2.0, 0.0], [0.1, 0.2]])
Y01 = jnp.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
XY = (jnp.array([[1.0, 0.5], [-1.0, 0.2], [0.3, -0.4], [0.9, 1.0]]), jnp.array([1.0, 0.0, 1.0, 0.0]))
BOW = BowBatch(jnp.array([[0, 1, 2, 3], [4, 5, 0, 1], [2, 3, 4, 5]], jnp.int32), jnp.ones((3, 4), jnp.float32))
OBS = jnp.array([[0, 1, 1, 0], [1, 1, 0, 0]], jnp.int32)


def _set(tree, value, field=None, index=0):
    """``tree`` with its ``field``-th leaf's first entry set to ``value``."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    i = index if field is None else field
    leaf = leaves[i]
    leaves[i] = leaf.at[(0,) * leaf.ndim].set(jnp.asarray(value, leaf.dtype))
    return jax.tree_util.tree_unflatten(treedef, leaves)


# (label, model, algorithm, settings, valid batch, {corruption: batch})
def cases():
    gmm = {"nan": _set(X2, np.nan), "inf": _set(X2, np.inf), "wide": jnp.concatenate([X2, X2], 1)}
    return [
        (
            "LDA/svi",
            vm.LDA(2, 6),
            "svi",
            {"num_data": 3},
            BOW,
            {
                "id>=V": _set(BOW, 60, 0),
                "id<0": _set(BOW, -1, 0),
                "count<0": _set(BOW, -2.0, 1),
                "count nan": _set(BOW, np.nan, 1),
                "count inf": _set(BOW, np.inf, 1),
            },
        ),
        (
            "LDA/ssvi",
            vm.LDA(2, 6),
            "ssvi",
            {"num_data": 3},
            BOW,
            {"id>=V": _set(BOW, 60, 0), "count nan": _set(BOW, np.nan, 1)},
        ),
        (
            "LDA/map",
            vm.LDA(2, 6),
            "map",
            {"num_data": 3},
            BOW,
            {"id>=V": _set(BOW, 60, 0), "count<0": _set(BOW, -2.0, 1)},
        ),
        (
            "UnivariateGMM/cavi",
            vm.UnivariateGMM(num_components=2),
            "cavi",
            {},
            X1,
            {"nan": _set(X1, np.nan), "inf": _set(X1, np.inf), "2-D": X1[:, None]},
        ),
        ("DiagonalGMM/svi", vm.DiagonalGMM(2, 2), "svi", {"num_data": 5}, X2, gmm),
        ("FullGMM/cavi", vm.FullGMM(2, 2), "cavi", {}, X2, gmm),
        (
            "BernoulliMixture/cavi",
            vm.BernoulliMixture(2, 3),
            "cavi",
            {},
            Y01,
            {"y=2": _set(Y01, 2.0), "y=-1": _set(Y01, -1.0), "y nan": _set(Y01, np.nan)},
        ),
        (
            "GLM/prox_svi",
            vm.GLM(2),
            "prox_svi",
            {"num_data": 4, "schedule": 0.1},
            XY,
            {
                "label -1": _set(XY, -1.0, 1),
                "label 2": _set(XY, 2.0, 1),
                "x nan": _set(XY, np.nan, 0),
                "x wide": (jnp.concatenate([XY[0], XY[0]], 1), XY[1]),
            },
        ),
        (
            "CategoricalHMM/em",
            vm.CategoricalHMM(num_states=2, num_symbols=2),
            "em",
            {},
            OBS,
            {"symbol>=V": _set(OBS, 5), "symbol<0": _set(OBS, -1)},
        ),
        (
            "GPClassification/optax",
            vm.GPClassification(*XY, log_lengthscale=0.0, log_scale=0.0),
            "optax",
            {"num_data": 4, "optimizer": "adam", "schedule": 0.01},
            jnp.array([0, 1, 2], jnp.int32),
            {"index>=N": jnp.array([0, 9, 2], jnp.int32), "index<0": jnp.array([0, -1, 2], jnp.int32)},
        ),
    ]


def classify(call, info_of=lambda out: out[1]) -> str:
    try:
        out = call()
        jax.block_until_ready(out)
    except (ValueError, TypeError) as e:
        # jax.jit's own refusal of a non-array argument names it ("... at path batch"): clear too
        return "clear" if isinstance(e, ValueError) or "at path batch" in str(e) else "obscure"
    except jax.errors.JaxRuntimeError as e:
        return "clear" if "ValueError: " in str(e) else "obscure"
    except Exception:  # noqa: BLE001 -- anything else is an obscure failure
        return "obscure"
    accepted = getattr(info_of(out), "accepted", None)
    return "handled" if accepted is not None and not bool(np.all(np.asarray(accepted))) else "silent"


def main() -> dict:
    tally = {"clear": 0, "handled": 0, "obscure": 0, "silent": 0}
    rows = []
    for label, model, name, settings, batch, bad in cases():
        alg = make_algorithm(name, model, **settings)
        state = alg.init(jax.random.PRNGKey(1), batch)
        jitted = jax.jit(alg.step)
        for what, b in list(bad.items()) + [("strings", np.array(["a", "b"]))]:
            for mode, fn in (("eager", alg.step), ("jit", jitted)):
                outcome = classify(lambda: fn(state, b, jax.random.PRNGKey(2)))
                tally[outcome] += 1
                rows.append({"case": label, "input": what, "mode": mode, "outcome": outcome})
    total = sum(tally.values())
    print(f"{total} hostile inputs: " + ", ".join(f"{k} {v}" for k, v in tally.items()))
    for r in rows:
        if r["outcome"] in ("silent", "obscure"):
            print(f"  {r['outcome']:8s} {r['case']:24s} {r['input']:10s} {r['mode']}")
    res = {"tally": tally, "rows": rows}
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results", "probe_hostile.json")
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
