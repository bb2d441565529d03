"""The cost of the value checks of a step's batch (docs/design.md, "Checked steps").

Three programs of each step: value checks off (``vijax.inference.with_value_checks(alg, False)``; the
switch is read at trace time), the checks as host callbacks (``jax.jit`` of the checked step), and
the checks as outputs of the program (``vijax.inference.jit_step``: collected checks, as the runner compiles its chunk).
Each is lowered and compiled once, timed (wall seconds, the persistent cache off: cold), then the
three are timed in rounds (the fastest of a few calls each, the order rotating) so that load on a
shared machine falls on all alike; reported: the median over rounds of the ratio to the unchecked
step - 1, with its interquartile range, the compile seconds, end to end (lowering, compiling and
the first step), and the program's temporary memory (``memory_analysis``, which XLA allocates at
every call: above 32 MB, glibc maps it afresh each time, and the step meets page faults). Two steps: LDA SVI on a minibatch
of S documents (K topics, V words, L distinct words per document) and diagonal-GMM CAVI on N points.
With ``--devices n`` (n > 1), JAX shows n CPU devices and the LDA step is ``data_parallel`` over
them (the batch sharded by rows: a check reduced over the whole batch is then an all-reduce); the
GMM rows are left out.

At the sizes of ``benchmarks/gmm_cavi.py`` (``--gmm-sizes``, default N = 1e5 and 1e6; D = 64,
K = 30; [x, x**2] features, float64 and float32) the GMM CAVI step is also timed as ``bare``: the
step's body (local step, conjugate update, ELBO) without ``checked_step``, that is, without the
non-finite guard and without any check, the step as it was before checked steps. There every
overhead is the ratio to ``bare`` - 1: ``off`` is the guard's cost, ``callback`` and ``jit_step``
the guard's and the value checks'. ``bare_state`` and ``off_state`` return the state only (the
info dropped, so that XLA may leave out what only the ELBO needs): the guard's cost where the
ELBO is not read. ``jit_step_inert_callback`` is ``jit_step``'s program plus one host callback
that never runs (``jax.debug.callback`` in a ``lax.cond`` branch no step takes): what holding a
host callback costs a program apart from the checks' own work, which ``callback`` and ``jit_step``
share. ``jit_step`` is timed as a batch seen for the first time (its program with the checks
on, as every step of a minibatch algorithm runs it); ``jit_step_same_batch`` calls the ``jit_step``
wrapper with the same batch array every time, as a full-batch algorithm's steps do (its
checks run at the first call only: an immutable array already checked is not read again), and
``jit_step_new_batch`` the wrapper with two copies of the batch in turn (every call a new array:
the checks run and their results are read back, a wait for the device at every step).
Fewer rounds there (``--big-rounds``, one call each: a step takes 20-600 ms).

    python benchmarks/check_overhead.py            # writes benchmarks/results/check_overhead.json
    python benchmarks/check_overhead.py --devices 2 --out benchmarks/results/check_overhead_2dev.json
    python benchmarks/check_overhead.py --gmm-sizes 100000 --gmm-dtypes f32   # a quicker look
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax

jax.config.update("jax_enable_x64", True)  # the float64 rows; every other array's dtype is given

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from vijax.data import BowBatch, sample_gmm  # noqa: E402
from vijax.inference import cavi, data_parallel, jit_step, svi, with_value_checks  # noqa: E402
from vijax.inference import _cavi  # noqa: E402  (the step's body, for the bare program)
from vijax.models import LDA, DiagonalGMM  # noqa: E402
from vijax.run import enable_compile_cache  # noqa: E402
from _device import add_device_argument, use_device  # noqa: E402  (this folder's --device switch)


def _bare_cavi(model):
    """The CAVI step's body without ``checked_step``: no guard, no checks (count + 1 as the step)."""

    def step(key, state, batch):
        p = _cavi.step.__wrapped__(key, state, batch, model=model, local="meanfield", num_data=None)
        return p.state._replace(count=state.count + 1), p.info

    return step


def _compiled(alg, state, batch, how: str, bare=None):
    """The step's compiled program ("bare", "off", "callback" or "jit_step"; "*_state": the same
    returning the state only), the function timed (the program; for ``jit_step_same_batch`` the
    ``jit_step`` wrapper itself), its lower + compile seconds and its end-to-end seconds (lowering
    to the result of its first call). ``jit_step``'s program is called with its gate on (a batch
    not checked before: every step of a minibatch algorithm)."""
    args = (jax.random.PRNGKey(1), state, batch)
    if how in ("jit_step_same_batch", "jit_step_new_batch"):  # the wrapper, as a user calls it
        wrapped = jit_step(with_value_checks(alg, True).step)
        t = time.perf_counter()
        jax.block_until_ready(wrapped(*args))  # traces, compiles, checks the batch, steps
        first = time.perf_counter() - t
        if how == "jit_step_same_batch":  # the same batch array every time
            return wrapped.lower(*args).compile(), wrapped, first, first
        copies, turn = (batch, jax.block_until_ready(batch + 0)), [0]  # two arrays in turn: each call a new one

        def alternating(key, state, _):
            turn[0] ^= 1
            return wrapped(key, state, copies[turn[0]])

        return wrapped.lower(*args).compile(), alternating, first, first
    base = how.removesuffix("_state")
    inner = bare if base == "bare" else with_value_checks(alg, base != "off").step

    def step(*a):  # a function of its own per program: jit caches traces by function, and the
        out = inner(*a)  # value-checks switch is read at trace time
        if base == "jit_step_inert_callback":  # a branch no step takes (the count is never negative)
            jax.lax.cond(out[0].count < 0, lambda: jax.debug.callback(lambda: None), lambda: None)
        return out[0] if how.endswith("_state") else out

    t = time.perf_counter()
    lowered = (jit_step(step) if base.startswith("jit_step") else jax.jit(step)).lower(*args)
    compiled = lowered.compile()
    compile_s = time.perf_counter() - t
    gate = (np.bool_(True),) if base.startswith("jit_step") else ()  # jit_step's program: whether to check

    def run(*a):
        return compiled(*a, *gate)

    jax.block_until_ready(run(*args))
    return compiled, run, compile_s, time.perf_counter() - t  # end to end: lowering to the first step's result


def _time(step, state, batch, reps: int) -> float:
    """The fastest of ``reps`` calls (the one the machine's other load disturbed least)."""
    key = jax.random.PRNGKey(3)
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(step(key, state, batch))
        best = min(best, time.perf_counter() - t)
    return best


WAYS = ("off", "callback", "jit_step")
BIG_WAYS = (
    "bare",
    "off",
    "callback",
    "jit_step",
    "jit_step_same_batch",
    "jit_step_new_batch",
    "jit_step_inert_callback",
    "bare_state",
    "off_state",
)


def measure(alg, state, batch, rounds: int, reps: int, ways=WAYS, bare=None) -> dict:
    """Per round, the fastest of ``reps`` calls of each program, back to back (the order rotating);
    the overhead of a way of checking is the median over rounds of its ratio to the first way (for
    a "*_state" way, to "bare_state") - 1."""
    compiled = {how: _compiled(alg, state, batch, how, bare) for how in ways}
    times = {how: [] for how in ways}
    for r in range(rounds):
        for how in ways[r % len(ways) :] + ways[: r % len(ways)]:
            times[how].append(_time(compiled[how][1], state, batch, reps))
    out = {"rounds": rounds, "reps": reps}
    for how in ways:
        out[f"median_s_{how}"] = float(np.median(times[how]))
        out[f"compile_s_{how}"] = round(compiled[how][2], 3)
        out[f"end_to_end_s_{how}"] = round(compiled[how][3], 3)
        # XLA allocates the temporaries (its branches' included) at every call; glibc maps an
        # allocation above 32 MB afresh each time, so a program past that line meets page faults
        out[f"temp_mb_{how}"] = round(compiled[how][0].memory_analysis().temp_size_in_bytes / 1e6, 1)
        ref = "bare_state" if how.endswith("_state") else ways[0]
        if how != ref:
            ratios = np.asarray(times[how]) / np.asarray(times[ref]) - 1.0
            out[f"overhead_{how}"] = float(np.median(ratios))
            out[f"overhead_{how}_iqr"] = [float(q) for q in np.percentile(ratios, [25, 75])]
    return out


def gmm_at_size(n: int, dtype: str, rounds: int, reps: int, d: int = 64, k: int = 30) -> dict:
    """GMM CAVI at ``benchmarks/gmm_cavi.py``'s sizes: its data, its [x, x**2] features."""
    dt = {"f64": jnp.float64, "f32": jnp.float32}[dtype]
    x = np.asarray(sample_gmm(jax.random.PRNGKey(0), n, k, d, spread=3.0).x, np.float64)
    model = DiagonalGMM(k, d, dtype=dt)
    feats = model.features(jnp.asarray(x, dt))
    del x
    alg = cavi(model)
    state = alg.init(jax.random.PRNGKey(0), feats)
    res = measure(alg, state, feats, rounds, reps, BIG_WAYS, _bare_cavi(model))
    return dict(res, points=n, dim=d, components=k, dtype=dtype, features=True)


def _row(name, how, r) -> str:
    key = f"overhead_{how}"
    over = (
        "-"
        if key not in r
        else f"{100 * r[key]:+.1f} % ({100 * r[f'{key}_iqr'][0]:+.1f} .. {100 * r[f'{key}_iqr'][1]:+.1f} %)"
    )
    return (
        f"| {name} | {how} | {r[f'median_s_{how}'] * 1e3:.3f} | {over} | {r[f'compile_s_{how}']:.2f} | "
        f"{r[f'end_to_end_s_{how}']:.2f} | {r.get(f'temp_mb_{how}', float('nan')):.1f} |"
    )


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--devices", type=int, default=1, help="CPU devices; > 1: the LDA step data_parallel over them")
    p.add_argument("--gmm-sizes", type=int, nargs="*", default=[100_000, 1_000_000], help="N of the large GMM rows")
    p.add_argument("--gmm-dtypes", nargs="*", default=["f64", "f32"], choices=["f64", "f32"])
    p.add_argument("--big-rounds", type=int, default=9, help="rounds of the large GMM rows (one call each)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "check_overhead.json"))
    add_device_argument(p)
    a = p.parse_args(argv)
    if a.devices > 1:
        jax.config.update("jax_num_cpu_devices", a.devices)  # before JAX starts its backends
    device = use_device(a.device)
    enable_compile_cache(False)  # every compile cold
    rng = np.random.default_rng(0)
    s, length, k, v = 64, 128, 20, 5000
    ids = jnp.asarray(np.sort(rng.choice(v, (s, length)), 1), jnp.int32)
    batch = BowBatch(ids, jnp.asarray(rng.integers(1, 4, (s, length)), jnp.float32))
    lda_model = LDA(k, v, dtype=jnp.float32)
    lda = svi(data_parallel(lda_model) if a.devices > 1 else lda_model, num_data=10_000, schedule=0.5)
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
        gmm = cavi(DiagonalGMM(5, 2, dtype=jnp.float32))
        res["gmm_cavi"] = dict(
            measure(gmm, gmm.init(jax.random.PRNGKey(0), x), x, a.rounds, a.reps), points=20_000, dim=2, components=5
        )
        for n in a.gmm_sizes:
            for dt in a.gmm_dtypes:
                res[f"gmm_cavi_N{n}_{dt}"] = gmm_at_size(n, dt, a.big_rounds, 1)
                print(f"gmm_cavi N = {n} {dt} done", flush=True)
    res["machine"] = f"{platform.machine()} {os.cpu_count()} cores, jax {jax.__version__}"
    res["device"] = device
    res["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    res["loadavg_1_5_15_min_at_end"] = os.getloadavg()
    print("| step | checks | step ms | overhead (IQR) | compile s | end-to-end s (first step) | temporaries MB |")
    print("| --- | --- | ---: | --- | ---: | ---: | ---: |")
    for name, r in res.items():
        if not isinstance(r, dict):
            continue
        for how in BIG_WAYS if "median_s_bare" in r else WAYS:
            print(_row(name, how, r))
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2)
    return res


if __name__ == "__main__":
    main()
