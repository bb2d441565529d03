"""What a user's calls outside ``jit`` cost: one compiled program against the operations run one by one.

A notebook calls some of vijax's functions on concrete arrays, outside any ``jit``: a family's mean
parameters, a fitted mixture's point estimates and predictive, a model's start. JAX compiles every
operation run on concrete values as a program of its own; vijax runs these calls as one jitted
program each. This benchmark times both side by side, each case in fresh Python processes
(imports and set-up off the clock): the call as vijax ships it ("program"), and the same call
under ``jax.disable_jit()`` ("op by op": every operation compiled and run on its own, as these
calls ran before they were programs; ``disable_jit`` also runs JAX's own jitted helpers, such as
``jax.random.choice``, operation by operation, so for a call that used them this mode costs more
than the former code did). Per case and mode: the first call (compilation included),
the steady call (median of the later calls), the end to end (the first call and every later one),
and the number of XLA compilations of the first call. Both modes return the same values (checked).

    python benchmarks/eager_calls.py            # writes benchmarks/results/eager_calls.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

from _device import add_device_argument, child_env  # this folder's --device switch

# each case: set-up code (off the clock) defining CALL, a function of no argument returning arrays
CASES = {
    "expfam.digamma (50,)": (
        "import jax.numpy as jnp\nfrom vijax import expfam\nx = jnp.linspace(0.5, 20.0, 50)\n"
        "CALL = lambda: expfam.digamma(x)"
    ),
    "Dirichlet.mean_params (3, 7)": (
        "import jax.numpy as jnp\nfrom vijax import expfam\n"
        "q = expfam.Dirichlet.from_concentration(jnp.linspace(0.5, 4.0, 21).reshape(3, 7))\n"
        "CALL = lambda: q.mean_params()"
    ),
    "DiagonalGMM.point_estimates (K = 4, D = 2)": (
        "import numpy as np\nfrom vijax.models import DiagonalGMM\n"
        "x = np.random.default_rng(0).normal(size=(1000, 2)) + np.repeat([[0, 0], [6, 6]], 500, axis=0)\n"
        "model = DiagonalGMM.from_data(x, num_components=4)\n"
        "q = model.posterior_from_responsibilities(x, np.full((1000, 4), 0.25))\n"
        "CALL = lambda: model.point_estimates(q)"
    ),
    "DiagonalGMM.log_predictive (1,000 points)": (
        "import numpy as np\nfrom vijax.models import DiagonalGMM\n"
        "x = np.random.default_rng(0).normal(size=(1000, 2)) + np.repeat([[0, 0], [6, 6]], 500, axis=0)\n"
        "model = DiagonalGMM.from_data(x, num_components=4)\n"
        "q = model.posterior_from_responsibilities(x, np.full((1000, 4), 0.25))\n"
        "CALL = lambda: model.log_predictive(q, x)"
    ),
    "DiagonalGMM.features (20,000 points, D = 16)": (
        "import numpy as np\nfrom vijax.models import DiagonalGMM\n"
        "x = np.random.default_rng(0).normal(size=(20000, 16)).astype(np.float32)\n"
        "model = DiagonalGMM.from_data(x, num_components=20)\n"
        "CALL = lambda: model.features(x)"
    ),
    "DiagonalGMM.posterior_from_responsibilities (20,000 points, K = 20, D = 16)": (
        "import numpy as np\nfrom vijax.models import DiagonalGMM\n"
        "rng = np.random.default_rng(0)\nx = rng.normal(size=(20000, 16)).astype(np.float32)\n"
        "resp = np.eye(20, dtype=np.float32)[rng.integers(0, 20, 20000)]\n"
        "model = DiagonalGMM.from_data(x, num_components=20)\n"
        "CALL = lambda: model.posterior_from_responsibilities(x, resp)"
    ),
    "UnivariateGMM.init_globals (400 points)": (
        "import jax, numpy as np\nfrom vijax.models import UnivariateGMM\n"
        "x = np.random.default_rng(0).normal(size=400).astype(np.float32)\nmodel = UnivariateGMM(5)\n"
        "key = jax.random.PRNGKey(0)\nCALL = lambda: model.init_globals(key, x)"
    ),
    "UnivariateGMM.log_predictive (300 points)": (
        "import jax, numpy as np\nfrom vijax.models import UnivariateGMM\n"
        "x = np.random.default_rng(0).normal(size=400).astype(np.float32)\nmodel = UnivariateGMM(5)\n"
        "q = model.init_globals(jax.random.PRNGKey(0), x)\ngrid = np.linspace(-4.0, 4.0, 300)\n"
        "CALL = lambda: model.log_predictive(q, grid)"
    ),
}
# a NumPyro model after a fit's start: the draws of q and the checks through the model (vijax.interop)
_EIGHT_SCHOOLS = (
    "import jax, numpy as np, numpyro, numpyro.distributions as dist\nimport vijax, vijax.interop\n"
    "from vijax.inference import ngvi, sample\n"
    "def model(sigma, y=None):\n"
    "    mu = numpyro.sample('mu', dist.Normal(0.0, 5.0))\n"
    "    tau = numpyro.sample('tau', dist.HalfCauchy(5.0))\n"
    "    with numpyro.plate('J', 8):\n"
    "        theta = numpyro.sample('theta_tilde', dist.Normal(0.0, 1.0))\n"
    "        numpyro.sample('obs', dist.Normal(mu + tau * theta, sigma), obs=y)\n"
    "sigma = np.array([15.0, 10, 16, 11, 9, 11, 10, 18], np.float32)\n"
    "y = np.array([28.0, 8, -3, 7, -1, 1, 18, 12], np.float32)\n"
    "target = vijax.from_numpyro(model, sigma, y)\nalg = ngvi(target)\n"
    "state = alg.init(jax.random.PRNGKey(0))\nkey = jax.random.PRNGKey(1)\n"
    "draws = jax.block_until_ready(sample(alg, key, state, 1000))\n"
)
CASES.update(
    {
        "sample of ngvi's q, eight schools (2,000)": _EIGHT_SCHOOLS + "CALL = lambda: sample(alg, key, state, 2000)",
        "predictive, eight schools (1,000 draws)": _EIGHT_SCHOOLS
        + "CALL = lambda: vijax.predictive(target, draws, key)",
        "log_likelihood, eight schools (1,000 draws)": (
            _EIGHT_SCHOOLS + "CALL = lambda: vijax.interop.log_likelihood(target, draws)"
        ),
    }
)

CHILD = """
import json, logging, statistics, sys, time
import jax, numpy as np
{setup}
jax.block_until_ready(jax.numpy.zeros(1) + 1)  # the backend started before the clock
compiled = []
class _H(logging.Handler):
    def emit(self, r):
        if r.getMessage().startswith("Finished XLA compilation"):
            compiled.append(1)
logging.getLogger("jax").addHandler(_H()); logging.getLogger("jax").setLevel(logging.DEBUG)
jax.config.update("jax_log_compiles", True)
mode = sys.argv[1]
def call():
    if mode == "op by op":
        with jax.disable_jit():
            return jax.block_until_ready(CALL())
    return jax.block_until_ready(CALL())
t0 = time.perf_counter(); out = call(); first = time.perf_counter() - t0
n_first = len(compiled)
later = []
for _ in range({calls}):
    t = time.perf_counter(); call(); later.append(time.perf_counter() - t)
leaves = [np.asarray(a, np.float64).ravel().tolist() for a in jax.tree_util.tree_leaves(out)]
print(json.dumps(dict(first_s=first, steady_ms=1e3 * statistics.median(later), end_to_end_s=first + sum(later),
                      compilations=n_first, values=leaves)))
"""


def _run(setup: str, mode: str, calls: int, env: dict) -> dict | None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(setup=setup, calls=calls), mode], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per case and mode, in turn")
    parser.add_argument("--calls", type=int, default=20, help="later calls timed after the first")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "eager_calls.json"))
    parser.add_argument("--cases", nargs="*", help="only the cases whose name holds one of these words")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    env = child_env(args.device)
    load_start = os.getloadavg()
    rows = []
    for case, setup in CASES.items():
        if args.cases and not any(w in case for w in args.cases):
            continue
        runs = {"program": [], "op by op": []}
        for _ in range(args.rounds):
            for mode in runs:
                r = _run(setup, mode, args.calls, env)
                if r is None:
                    return 1
                runs[mode].append(r)
        values = [r["values"] for rs in runs.values() for r in rs]
        flat = [[v for leaf in vs for v in leaf] for vs in values]
        agree = all(len(f) == len(flat[0]) for f in flat) and all(
            abs(a - b) <= 1e-5 * max(1.0, abs(b)) for f in flat for a, b in zip(f, flat[0])
        )
        for mode, rs in runs.items():
            rows.append(
                {
                    "case": case,
                    "mode": mode,
                    "first_s": statistics.median(r["first_s"] for r in rs),
                    "first_range_s": [min(r["first_s"] for r in rs), max(r["first_s"] for r in rs)],
                    "steady_ms": statistics.median(r["steady_ms"] for r in rs),
                    "end_to_end_s": statistics.median(r["end_to_end_s"] for r in rs),
                    "compilations": statistics.median(r["compilations"] for r in rs),
                    "values_agree": agree,
                }
            )
    print(f"{'case':<44} {'mode':<9} {'first s':>8} {'steady ms':>10} {'end to end s':>13} {'compiles':>9}")
    for r in rows:
        print(
            f"{r['case']:<44} {r['mode']:<9} {r['first_s']:>8.3f} {r['steady_ms']:>10.3f} "
            f"{r['end_to_end_s']:>13.3f} {r['compilations']:>9.0f}" + ("" if r["values_agree"] else "  VALUES DIFFER")
        )
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_start": load_start,
        "load_end": os.getloadavg(),
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"machine": machine, "rounds": args.rounds, "calls": args.calls, "rows": rows}, fh, indent=2)
    return 0 if all(r["values_agree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
