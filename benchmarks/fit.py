"""``vijax.fit`` against NumPyro's SVI with ``AutoNormal``: the time to the answer, from a fresh process's start.

The answer: every scalar of the posterior (each element of each latent site) with its mean within ``--within`` (0.3)
reference posterior sds of the reference mean. References, computed once and cached in
``benchmarks/results/fit_reference.json`` (not timed): the closed form where one exists (Beta–Bernoulli,
Gamma–Poisson with exposures, the Normal with unknown mean and precision and its grouped version; Bishop 2006,
§2.3.6), else NumPyro's NUTS on the full data (2 chains of 1,000 draws after 500 warm-up steps at the docs' sizes;
2 × 300 after 300 at 10⁵ observations, kept where it finishes within ``--nuts-limit`` seconds), else, at 10⁶
observations, the Laplace approximation at the posterior mode in float64 (``laplace_reference``; its agreement with
NUTS at 10⁵ is recorded with it), else "no reference" (the model is then not timed: a long run of either method is
not a reference).

Models. The docs' eight at their sizes (``vijax.fit``'s tests): eight schools, Poisson regression, logistic
regression, hierarchical linear, Beta–Bernoulli, Gamma–Poisson with exposures, the Normal with unknown mean and
precision, a two-component Gaussian mixture with the assignments enumerated. At ``--sizes`` observations (10⁵,
10⁶), with the data plate subsampled by its own ``subsample_size`` (``--subsample``, 1,000) for both libraries: a
hierarchical Poisson regression with 1,000 groups (conjugate Gamma rates), a logistic regression with 100
covariates, the Gaussian mixture with enumerated assignments, and a grouped Normal–Gamma (1,000 groups, each group's
mean and precision conjugate).

Methods, each in a fresh Python process (this script with ``--one``), its clock started by the parent just before
the process starts, so the interpreter's start, the imports and every compilation count:

- ``vijax``: ``vijax.fit(model, *args, progress=False)`` with its defaults (its route, its stopping rule; with the
  plate subsampled, ``max_steps=500``, as its own rule waits 20 passes over the data); where the answer is not yet
  reached, ``vijax.fit(..., init=post, max_steps=n, tol=None)`` continues it, n half the steps
  so far (checks at 1.5 times the steps of the one before);
- ``numpyro``: ``SVI(model, AutoNormal(model), numpyro.optim.Adam(--lr), Trace_ELBO())`` (``TraceEnum_ELBO`` and the
  guide over ``handlers.block``'s continuous sites where the model enumerates, as NumPyro's examples do), its
  ``svi.update`` scanned over chunks of ``--chunk`` steps under ``jax.jit`` (as ``svi.run`` does), checked after
  100, 200, 400, ... steps, and once more when the cap has passed.

``--full-batch`` also times ``vijax.fit`` on the large models with conjugate sites called without
``subsample_size`` (every observation in each step; its own row); ``--methods`` chooses the methods timed, among
them ``vijax_ngvi``, the ``vijax`` method with ``route="ngvi"`` (its own row, "model (route ngvi)"). No compiled program is kept between processes (``VIJAX_COMPILE_CACHE=off``; JAX's own cache is off by default). A
check (``--draws`` draws of q, each scalar's mean compared with the reference) and the data's generation are
timed and taken out of the clock: the time to the answer is the clock at the first check that passes, less these.
A run that passes no check within ``--cap`` seconds reports the cap ("> cap"); ``--merge`` keeps the other runs of
``--out`` (another model, size or method), each row with its own cap, and ``--append`` all of them, the new rounds
numbered after the old. ``--rounds`` (3) rounds, the methods
interleaved; the table gives the medians, the ratio NumPyro / vijax and its target: ≥ 3× at the docs' sizes,
≥ 10× at 10⁵–10⁶ observations where the model has conjugate sites, ≥ 3× elsewhere. Where NumPyro's median passed the
cap the ratio is a lower bound, from the median of its runs' own bounds (a run's time, or the cap it passed: runs
added by ``--merge`` or ``--append`` may have other caps); one below the target is "open", neither met nor missed.

Each run also reports, for both methods by one rule:

- ``import_s``: the clock when ``import jax`` and ``import numpyro`` are done (the interpreter's start included);
- ``compile_s``: the compile time within the clock, as JAX reports it through ``jax.monitoring``'s time spans of
  ``COMPILE_EVENTS``: each jitted program's tracing to a jaxpr (the outermost ``jit`` only), its lowering to MLIR and
  XLA's compile, eager operations compiled on their first use included; the length of the spans' union (a compile
  inside another's span counts once), the checks' own compiles left out. Python work outside these spans (vijax's
  planning, NumPyro's ``svi.init`` running the model op by op) is not compile time. ``compile_parts`` gives the
  three summed and the number of XLA compiles;
- ``steps``: the steps taken when the answer is reached (at the last check when it is not);
- ``steps_per_s``: the steady-state throughput, those steps over the fit's wall time (from the data's arrays to the
  answer, checks left out) less the compile time within it. It counts each library's per-call Python as running
  time; NumPyro's scan alone is ``scan_steps_per_s`` (``--chunk`` steps over the median chunk after the first);
- ``continuation_compile_s`` (vijax): the compile time of the ``fit(..., init=post)`` calls after the first fit
  (not zero where such a call compiles its programs again).

    python benchmarks/fit.py --reference       # compute the missing references (NUTS: minutes)
    python benchmarks/fit.py                   # the timed runs; benchmarks/results/fit.json and fit.md
    python benchmarks/fit.py --models small --rounds 1 --cap 20   # a shorter run
    python benchmarks/fit.py --models large --rounds 1 --cap 300 --full-batch --out benchmarks/results/fit_large.json
    python benchmarks/fit.py --summarize --models large --out benchmarks/results/fit_large.json  # its table again
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _device import add_device_argument, child_env  # noqa: E402  (this folder's --device switch)
from _docs import replace_span  # noqa: E402  (this folder's docs tables)

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
SMALL = (
    "eight_schools",
    "poisson_regression",
    "logistic",
    "hierarchical_linear",
    "beta_bernoulli",
    "gamma_poisson",
    "normal_gamma",
    "gmm",
)
LARGE = ("hier_poisson", "logistic_100", "gmm_large", "grouped_normal_gamma")
CONJUGATE = {"hier_poisson", "grouped_normal_gamma"}  # the large models with conjugate sites (target 10x)
FIRST_SUBSAMPLED_CHECK = 500  # vijax's first check of a subsampled fit, whose own rule waits 20 passes
ENUMERATED = {"gmm": ["z"], "gmm_large": ["z"]}
# mixtures: NUTS's chains visit both labellings; each draw's components are ordered by this site's values (as q's are)
ORDERED = {"gmm": "loc", "gmm_large": "loc"}
NUM_GROUPS = 1000


# ----------------------------------------------------------------------------- the models, as users write them
def _models():
    """The NumPyro models (imported lazily: the child's clock starts before ``import jax``)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    def eight_schools(sigma, y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
        with numpyro.plate("J", sigma.shape[0]):
            theta_tilde = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0))
            numpyro.sample("obs", dist.Normal(mu + tau * theta_tilde, sigma), obs=y)

    def poisson_regression(x, y):
        b = numpyro.sample("b", dist.Normal(0.0, 2.0))
        w = numpyro.sample("w", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Poisson(jnp.exp(b + w * x)), obs=y)

    def logistic(x, y, subsample_size=None):
        w = numpyro.sample("w", dist.Normal(jnp.zeros(x.shape[1]), 1.0).to_event(1))
        with numpyro.plate("data", x.shape[0], subsample_size=subsample_size) as idx:
            numpyro.sample("y", dist.Bernoulli(logits=x[idx] @ w), obs=y[idx])

    def hierarchical_linear(group, x, y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        sigma_a = numpyro.sample("sigma_a", dist.HalfNormal(2.0))
        slope = numpyro.sample("slope", dist.Normal(0.0, 2.0))
        with numpyro.plate("groups", 4):
            a = numpyro.sample("a", dist.Normal(mu, sigma_a))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Normal(a[group] + slope * x, 0.5), obs=y)

    def beta_bernoulli(y):
        p = numpyro.sample("p", dist.Beta(2.0, 3.0))
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.Bernoulli(p), obs=y)

    def gamma_poisson(exposure, k):
        rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
        with numpyro.plate("data", exposure.shape[0]):
            numpyro.sample("k", dist.Poisson(rate * exposure), obs=k)

    def normal_gamma(y):
        tau = numpyro.sample("tau", dist.Gamma(3.0, 2.0))
        mu = numpyro.sample("mu", dist.Normal(1.0, 1.0 / jnp.sqrt(0.5 * tau)))
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.Normal(mu, 1.0 / jnp.sqrt(tau)), obs=y)

    def gmm(y, subsample_size=None):
        w = numpyro.sample("w", dist.Dirichlet(jnp.ones(2)))
        loc = numpyro.sample("loc", dist.Normal(jnp.array([-1.0, 1.0]), 3.0).to_event(1))
        with numpyro.plate("data", y.shape[0], subsample_size=subsample_size) as idx:
            z = numpyro.sample("z", dist.Categorical(w), infer={"enumerate": "parallel"})
            numpyro.sample("y", dist.Normal(loc[z], 1.0), obs=y[idx])

    def hier_poisson(group, x, y, subsample_size=None):
        beta = numpyro.sample("beta", dist.Gamma(2.0, 1.0))
        w = numpyro.sample("w", dist.Normal(0.0, 1.0))
        with numpyro.plate("groups", NUM_GROUPS):
            rate = numpyro.sample("rate", dist.Gamma(2.0, beta))
        with numpyro.plate("data", x.shape[0], subsample_size=subsample_size) as idx:
            numpyro.sample("y", dist.Poisson(rate[group[idx]] * jnp.exp(w * x[idx])), obs=y[idx])

    def grouped_normal_gamma(group, y, subsample_size=None):
        with numpyro.plate("groups", NUM_GROUPS):
            tau = numpyro.sample("tau", dist.Gamma(3.0, 2.0))
            mu = numpyro.sample("mu", dist.Normal(0.0, 1.0 / jnp.sqrt(0.5 * tau)))
        with numpyro.plate("data", y.shape[0], subsample_size=subsample_size) as idx:
            g = group[idx]
            numpyro.sample("y", dist.Normal(mu[g], 1.0 / jnp.sqrt(tau[g])), obs=y[idx])

    return dict(
        eight_schools=eight_schools,
        poisson_regression=poisson_regression,
        logistic=logistic,
        hierarchical_linear=hierarchical_linear,
        beta_bernoulli=beta_bernoulli,
        gamma_poisson=gamma_poisson,
        normal_gamma=normal_gamma,
        gmm=gmm,
        hier_poisson=hier_poisson,
        logistic_100=logistic,
        gmm_large=gmm,
        grouped_normal_gamma=grouped_normal_gamma,
    )


def model_data(name: str, n: int = 0) -> dict:
    """name -> numpy array of the model's data (a fixed generator); ``n`` observations for the large models."""
    rng = np.random.default_rng(0)
    if name == "eight_schools":
        return dict(
            sigma=np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]),
            y=np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0]),
        )
    if name == "poisson_regression":
        x = rng.normal(size=40)
        return dict(x=x, y=rng.poisson(np.exp(0.5 + 0.7 * x)).astype(np.float64))
    if name == "logistic":
        x = rng.normal(size=(60, 3))
        p = 1.0 / (1.0 + np.exp(-(x @ np.array([-0.7, 0.9, 1.4]))))
        return dict(x=x, y=(rng.random(60) < p).astype(np.float64))
    if name == "hierarchical_linear":
        group, x = rng.integers(0, 4, 40), rng.normal(size=40)
        y = np.array([0.5, 1.0, -0.5, 2.0])[group] + 0.8 * x + 0.5 * rng.normal(size=40)
        return dict(group=group, x=x, y=y)
    if name == "beta_bernoulli":
        return dict(y=np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]))
    if name == "gamma_poisson":
        return dict(exposure=np.array([1.0, 0.5, 2.0, 1.5, 1.0]), k=np.array([3.0, 1.0, 4.0, 2.0, 5.0]))
    if name == "normal_gamma":
        return dict(y=np.array([2.1, 0.4, 1.7, 3.0, 1.2, 2.6, 0.9, 1.8]))
    if name == "gmm":
        return dict(y=np.concatenate([rng.normal(-2.0, 1.0, 30), rng.normal(2.5, 1.0, 30)]))
    if name == "hier_poisson":
        group, x = rng.integers(0, NUM_GROUPS, n), rng.normal(size=n)
        rate = rng.gamma(2.0, 1.0, NUM_GROUPS)
        return dict(group=group, x=x, y=rng.poisson(rate[group] * np.exp(0.3 * x)).astype(np.float64))
    if name == "logistic_100":
        x = rng.normal(size=(n, 100)) / 10.0  # unit-variance logits
        p = 1.0 / (1.0 + np.exp(-(x @ rng.normal(size=100))))
        return dict(x=x, y=(rng.random(n) < p).astype(np.float64))
    if name == "gmm_large":
        y = np.where(rng.random(n) < 0.4, rng.normal(-2.0, 1.0, n), rng.normal(2.5, 1.0, n))
        return dict(y=y)
    if name == "grouped_normal_gamma":
        group = rng.integers(0, NUM_GROUPS, n)
        tau = rng.gamma(3.0, 0.5, NUM_GROUPS)
        mu = rng.normal(0.0, 1.0 / np.sqrt(0.5 * tau))
        return dict(group=group, y=rng.normal(mu[group], 1.0 / np.sqrt(tau[group])))
    raise ValueError(f"model: unknown {name!r}")


def model_call(name: str, data: dict, subsample: int | None):
    """(model, args, kwargs) as a user calls it: float32 arrays (int32 indices), the large models subsampled."""
    import jax.numpy as jnp

    arrays = {k: jnp.asarray(v, jnp.int32 if v.dtype.kind == "i" else jnp.float32) for k, v in data.items()}
    model = _models()[name]
    kwargs = {} if name in SMALL or subsample is None else {"subsample_size": subsample}
    return model, tuple(arrays.values()), kwargs


# ----------------------------------------------------------------------------- references
def _normal_gamma_posterior(y, m0, k0, a0, b0):
    """The Normal–Gamma posterior (Bishop 2006, §2.3.6) of y's mean (a Student t) and precision (a Gamma)."""
    n, ybar = y.shape[-1], y.mean(-1)
    kn, an = k0 + n, a0 + n / 2.0
    mn = (k0 * m0 + n * ybar) / kn
    bn = b0 + 0.5 * (((y - ybar[..., None]) ** 2).sum(-1) + k0 * n * (ybar - m0) ** 2 / kn)
    return {"mu": (mn, np.sqrt(bn / (kn * (an - 1.0)))), "tau": (an / bn, np.sqrt(an) / bn)}


def closed_form(name: str, data: dict):
    """site -> (mean, sd) of the exact posterior, or None where there is none."""
    if name == "beta_bernoulli":
        a, b = 2.0 + data["y"].sum(), 3.0 + (1.0 - data["y"]).sum()
        return {"p": (a / (a + b), np.sqrt(a * b / ((a + b) ** 2 * (a + b + 1.0))))}
    if name == "gamma_poisson":
        a, b = 2.0 + data["k"].sum(), 1.0 + data["exposure"].sum()
        return {"rate": (a / b, np.sqrt(a) / b)}
    if name == "normal_gamma":
        return _normal_gamma_posterior(data["y"], 1.0, 0.5, 3.0, 2.0)
    if name == "grouped_normal_gamma":
        g, y = data["group"], data["y"]
        n = np.bincount(g, minlength=NUM_GROUPS).astype(np.float64)
        ybar = np.bincount(g, y, NUM_GROUPS) / np.maximum(n, 1.0)  # a group without data: its prior
        ss = np.bincount(g, (y - ybar[g]) ** 2, NUM_GROUPS)
        kn, an = 0.5 + n, 3.0 + n / 2.0
        mn = n * ybar / kn
        bn = 2.0 + 0.5 * (ss + 0.5 * n * ybar**2 / kn)
        return {"mu": (mn, np.sqrt(bn / (kn * (an - 1.0)))), "tau": (an / bn, np.sqrt(an) / bn)}
    return None


def nuts_reference(name: str, data: dict, num_warmup: int, num_samples: int, seed: int = 0):
    """site -> (mean, sd) over NumPyro NUTS draws (2 chains, vectorized), on the full data."""
    import jax
    from numpyro.infer import MCMC, NUTS

    model, args, _ = model_call(name, data, None)
    mcmc = MCMC(NUTS(model), num_warmup=num_warmup, num_samples=num_samples, num_chains=2, chain_method="vectorized")
    mcmc._progress_bar = False
    with jax.numpy_rank_promotion("allow"):  # NumPyro's code broadcasts by rank
        mcmc.run(jax.random.PRNGKey(seed), *args)
    return _moments(name, mcmc.get_samples())


def _moments(name: str, draws: dict) -> dict:
    """site -> (mean, sd) over ``draws`` (site -> (draws, ...)), the enumerated sites left out, a mixture's components
    ordered by ``ORDERED``'s site in each draw."""
    draws = {n: np.asarray(v, np.float64) for n, v in draws.items() if n not in ENUMERATED.get(name, ())}
    if name in ORDERED:
        order = np.argsort(draws[ORDERED[name]], axis=-1)
        draws = {n: np.take_along_axis(v, order, axis=-1) for n, v in draws.items()}
    return {n: (v.mean(0), v.std(0)) for n, v in draws.items()}


def laplace_reference(name: str, data: dict, num_draws: int = 20_000, seed: int = 0):
    """site -> (mean, sd) of the Laplace approximation at the posterior mode, in float64 and independent of vijax (a
    reference for vijax's own ``laplace`` too): NumPyro's potential on the unconstrained space minimized by SciPy's
    L-BFGS, five Newton steps with the exact Hessian (Hessian-vector products
    in blocks of 16), then ``num_draws`` draws of N(mode, H^-1) mapped to the sites' constrained values. At 10⁶
    observations the posterior is near Gaussian (Bernstein–von Mises): the mean's error is O(N^-1/2) posterior sds."""
    import jax
    import jax.numpy as jnp
    import scipy.optimize
    from jax.flatten_util import ravel_pytree
    from numpyro.infer.util import initialize_model

    with jax.enable_x64(True), jax.numpy_rank_promotion("allow"):  # NumPyro's code broadcasts by rank
        args = tuple(jnp.asarray(v, jnp.int32 if v.dtype.kind == "i" else jnp.float64) for v in data.values())
        info = initialize_model(jax.random.PRNGKey(seed), _models()[name], model_args=args)
        u0, unravel = ravel_pytree(info.param_info.z)

        def potential(u):
            return info.potential_fn(unravel(u))

        value_and_grad = jax.jit(jax.value_and_grad(potential))
        hvp = jax.jit(jax.vmap(lambda u, v: jax.jvp(jax.grad(potential), (u,), (v,))[1], in_axes=(None, 0)))
        eye = np.eye(u0.shape[0])

        def hessian(u):
            h = np.concatenate([np.asarray(hvp(u, jnp.asarray(eye[i : i + 16]))) for i in range(0, len(eye), 16)])
            return 0.5 * (h + h.T)

        def fun(u):
            v, g = value_and_grad(jnp.asarray(u))
            return float(v), np.asarray(g, np.float64)

        opts = dict(maxiter=5000, gtol=1e-9, ftol=1e-15)
        u = scipy.optimize.minimize(fun, np.asarray(u0, np.float64), jac=True, method="L-BFGS-B", options=opts).x
        for _ in range(5):
            u = u - np.linalg.solve(hessian(jnp.asarray(u)), fun(u)[1])
        chol = np.linalg.cholesky(np.linalg.inv(hessian(jnp.asarray(u))))
        draws_u = u[None] + np.random.default_rng(seed).normal(size=(num_draws, len(u))) @ chol.T
        constrain = jax.jit(jax.vmap(lambda w: info.postprocess_fn(unravel(w))))
        return _moments(name, constrain(jnp.asarray(draws_u)))


def _agreement(ref: dict, other: dict) -> dict:
    """How ``ref``'s sites ({site: (mean, sd)}) agree with ``other``'s reference entry: |Δmean| / other's sd (the
    largest and the root mean square over every scalar) and the range of the sd ratios."""
    z, ratio = [], []
    for site, r in other["sites"].items():
        sd = np.asarray(r["sd"])
        z.append(np.ravel((ref[site][0] - np.asarray(r["mean"])) / sd))
        ratio.append(np.ravel(ref[site][1] / sd))
    z, ratio = np.concatenate(z), np.concatenate(ratio)
    return dict(
        scalars=int(z.size),
        max_z=float(np.abs(z).max()),
        rms_z=float(np.sqrt(np.mean(z**2))),
        sd_ratio=[float(ratio.min()), float(ratio.max())],
    )


def _key(name: str, n: int) -> str:
    return name if name in SMALL else f"{name}@{n}"


def load_references(path: str) -> dict:
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def compute_reference(name: str, n: int, nuts_limit: float, refs: dict) -> dict:
    """{"kind", "sites": {site: {"mean", "sd"}}, "seconds"}; kind "none" where NUTS passes ``nuts_limit``. Above
    10⁵ observations without a closed form: the Laplace approximation (``laplace_reference``), with ``"check"``: the
    same approximation at 10⁵ observations against that size's NUTS reference in ``refs`` (``_agreement``)."""
    data = model_data(name, n)
    start = time.time()
    ref = closed_form(name, data)
    kind, check = "closed form", None
    if ref is None:
        if name in SMALL:
            ref, kind = nuts_reference(name, data, 500, 1000), "NUTS 2x1000"
        elif n <= 100_000:
            ref, kind = nuts_reference(name, data, 300, 300), "NUTS 2x300"
        else:
            ref, kind = laplace_reference(name, data), "Laplace at the mode"
    seconds = time.time() - start
    if kind.startswith("NUTS") and name not in SMALL and seconds > nuts_limit:
        return {"kind": "none", "sites": {}, "seconds": seconds, "why": f"NUTS took {seconds:.0f} s"}
    if kind.startswith("Laplace") and refs.get(_key(name, 100_000), {}).get("kind", "").startswith("NUTS"):
        check = dict(
            observations=100_000,
            against=refs[_key(name, 100_000)]["kind"],
            **_agreement(laplace_reference(name, model_data(name, 100_000)), refs[_key(name, 100_000)]),
        )
    sites = {s: {"mean": np.asarray(m).tolist(), "sd": np.asarray(sd).tolist()} for s, (m, sd) in ref.items()}
    return {"kind": kind, "sites": sites, "seconds": seconds, **({"check": check} if check else {})}


# ----------------------------------------------------------------------------- one timed run (a fresh process)
def max_z(means: dict, ref: dict, name: str = "") -> float:
    """The largest |mean - reference mean| / reference sd over every scalar of every reference site (a mixture's
    components ordered as the reference's, ``ORDERED``)."""
    if name in ORDERED:
        order = np.argsort(np.asarray(means[ORDERED[name]]), axis=-1)
        means = {
            k: np.take_along_axis(np.asarray(v), order, axis=-1) if k in ref["sites"] else v for k, v in means.items()
        }
    worst = 0.0
    for site, r in ref["sites"].items():
        z = (np.asarray(means[site], np.float64) - np.asarray(r["mean"])) / np.asarray(r["sd"])
        worst = max(worst, float(np.max(np.abs(z))))
    return worst


# the durations JAX reports for each compiled program: its tracing to a jaxpr (the outermost jit's only), its
# lowering to an MLIR module and XLA's compile; eager operations compiled on first use count too
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)


class Compiles:
    """The time spans of JAX's compile events (``COMPILE_EVENTS``), recorded through ``jax.monitoring``; ``seconds``
    is the length of their union (so a compile inside another's span counts once). Spans that start while
    ``paused`` (the excluded checks) are not kept."""

    def __init__(self):
        self.spans, self.paused = [], False

    def __call__(self, event: str, start: float, end: float, **_):
        if event in COMPILE_EVENTS and not self.paused:
            self.spans.append((start, end, event))

    def seconds(self) -> float:
        total, reach = 0.0, float("-inf")
        for a, b, _ in sorted(self.spans):
            a = max(a, reach)
            if b > a:
                total, reach = total + b - a, b
        return total

    def by_event(self) -> dict:
        """{"trace"|"lower"|"backend_compile": seconds (summed), "programs": XLA compiles}."""
        out = {"trace": 0.0, "lower": 0.0, "backend_compile": 0.0, "programs": 0}
        for a, b, event in self.spans:
            part = ("trace", "lower", "backend_compile")[COMPILE_EVENTS.index(event)]
            out[part] += b - a
            out["programs"] += part == "backend_compile"
        return out


class Clock:
    """Wall time since ``t0`` less the excluded spans (checks, data generation), and the compile time within it."""

    def __init__(self, t0: float, compiles: Compiles | None = None):
        self.t0, self.excluded, self.compiles = t0, 0.0, compiles or Compiles()

    def now(self) -> float:
        return time.time() - self.t0 - self.excluded

    def compile_s(self) -> float:
        return self.compiles.seconds()

    def exclude(self, fn, *args):
        start = time.time()
        self.compiles.paused = True
        try:
            out = fn(*args)
        finally:
            self.compiles.paused = False
        self.excluded += time.time() - start
        return out

    def check(self, fn, arg, steps: int) -> dict:
        """A check of the state after ``steps`` steps: the clock, the compile time so far, the distance."""
        z = self.exclude(fn, arg)
        return {"seconds": self.now(), "compile_s": self.compile_s(), "steps": steps, "max_z": z}


def run_vijax(model, args, kwargs, check, clock: Clock, cap: float, first: int | None = None) -> dict:
    import vijax

    checks = []
    post = vijax.fit(model, *args, progress=False, **({} if first is None else {"max_steps": first}), **kwargs)
    first = clock.now()
    route, steps = post.plan.route, int(post.num_steps)
    while True:
        checks.append(clock.check(check, post, steps))
        if checks[-1]["max_z"] < WITHIN[0] or clock.now() > cap:
            break
        post = vijax.fit(model, *args, init=post, max_steps=max(steps // 2, 1), tol=None, progress=False, **kwargs)
        steps = int(post.num_steps)
    return {
        "route": route,
        "first_fit_s": first,
        "default_steps": checks[0]["steps"],
        "continuation_compile_s": checks[-1]["compile_s"] - checks[0]["compile_s"],
        "checks": checks,
    }


def run_numpyro(model, args, kwargs, enumerated, check, clock: Clock, cap: float, lr: float, chunk: int) -> dict:
    import jax
    import numpyro
    from numpyro.infer import SVI, Trace_ELBO, TraceEnum_ELBO
    from numpyro.infer.autoguide import AutoNormal

    guide = AutoNormal(numpyro.handlers.block(model, hide=enumerated) if enumerated else model)
    svi = SVI(model, guide, numpyro.optim.Adam(lr), TraceEnum_ELBO() if enumerated else Trace_ELBO())
    state = svi.init(jax.random.PRNGKey(0), *args, **kwargs)

    @jax.jit
    def advance(state):
        return jax.lax.scan(lambda s, _: (svi.update(s, *args, **kwargs)[0], None), state, None, length=chunk)[0]

    checks, chunk_s, steps, next_check = [], [], 0, 100
    while True:
        start = time.time()
        state = jax.block_until_ready(advance(state))
        chunk_s.append(time.time() - start)
        steps += chunk
        if steps < next_check and clock.now() <= cap:
            continue
        next_check *= 2
        checks.append(clock.check(check, (guide, svi.get_params(state)), steps))
        if checks[-1]["max_z"] < WITHIN[0] or clock.now() > cap:
            break
    later = chunk_s[1:]
    return {
        "route": "AutoNormal",
        "first_chunk_s": chunk_s[0],
        "scan_steps_per_s": chunk / statistics.median(later) if later else None,
        "checks": checks,
    }


WITHIN = [0.3]


def steady(last: dict, started: float, compiled_before: float) -> dict:
    """The fit's wall time (from ``started`` to the ``last`` check, checks left out), its steps and its steps per
    second less the compile time it spent (``last["compile_s"] - compiled_before``)."""
    fit_s = last["seconds"] - started
    running = fit_s - (last["compile_s"] - compiled_before)
    return {"fit_s": fit_s, "steps": last["steps"], "steps_per_s": last["steps"] / running if running > 0 else None}


def one(method: str, name: str, n: int, t0: float, opts) -> dict:
    """A timed run in this process: the clock from ``t0`` (the parent's, just before it started the process)."""
    import jax

    clock = Clock(t0)
    jax.monitoring.register_event_time_span_listener(clock.compiles)
    import numpyro  # noqa: F401 (imported by the model's definition: timed for both methods)

    imported = clock.now()
    ref = load_references(opts.references)[_key(name, n)]
    data = clock.exclude(model_data, name, n)
    model, args, kwargs = clock.exclude(model_call, name, data, opts.subsample)
    key = jax.random.PRNGKey(1)
    enumerated = ENUMERATED.get(name, [])

    def means_vijax(post):
        s = post.summary(key, num_samples=opts.draws)
        return max_z({k: v["mean"] for k, v in s.items()}, ref, name)

    def means_numpyro(guide_params):
        guide, params = guide_params
        draws = guide.sample_posterior(key, params, *args, sample_shape=(opts.draws,), **kwargs)
        return max_z({k: np.asarray(v).mean(0) for k, v in draws.items()}, ref, name)

    started, compiled_before = clock.now(), clock.compile_s()
    with jax.numpy_rank_promotion("allow"):  # NumPyro's code broadcasts by rank
        if method == "vijax_full":  # the large models' fit at full batch (the plate not subsampled)
            out = run_vijax(model, args, {}, means_vijax, clock, opts.cap)
        elif method in ("vijax", "vijax_ngvi"):
            forced = {"route": "ngvi"} if method == "vijax_ngvi" else {}
            first = FIRST_SUBSAMPLED_CHECK if kwargs else None  # the plate subsampled (kwargs: its size)
            out = run_vijax(model, args, {**kwargs, **forced}, means_vijax, clock, opts.cap, first)
        else:
            out = run_numpyro(model, args, kwargs, enumerated, means_numpyro, clock, opts.cap, opts.lr, opts.chunk)
    last = out["checks"][-1]
    reached = last["max_z"] < opts.within
    out.update(
        method=method,
        model=name,
        n=n,
        cap=opts.cap,
        import_s=imported,
        reached=reached,
        seconds=last["seconds"] if reached else None,
        end_s=last["seconds"],
        compile_s=last["compile_s"],
        compile_parts=clock.compiles.by_event(),
        **steady(last, started, compiled_before),
        wall_s=time.time() - t0,
    )
    return out


# ----------------------------------------------------------------------------- the driver
def spawn(method: str, name: str, n: int, opts) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--one", method, name, str(n), *opts.passthrough]
    t0 = time.time()
    cmd += ["--t0", repr(t0)]
    try:
        env = {**child_env(opts.device), "VIJAX_COMPILE_CACHE": "off"}  # no program kept from an earlier process
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=opts.cap + 120, env=env)
    except subprocess.TimeoutExpired:
        return {"method": method, "model": name, "n": n, "reached": False, "seconds": None, "error": "killed"}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        lines = done.stderr.strip().splitlines() or ["?"]
        err = next((ln for ln in reversed(lines) if re.match(r"^[\w.]+(Error|Exception)\b", ln)), lines[-1])
        return {"method": method, "model": name, "n": n, "reached": False, "seconds": None, "error": err[-300:]}
    return json.loads(lines[-1])


def _methods(opts, name: str) -> list:
    """The methods timed on the model ``name``."""
    methods = opts.methods.split(",") + (["vijax_full"] if opts.full_batch and name in CONJUGATE else [])
    return list(dict.fromkeys(m for m in methods if m != "vijax_full" or name in CONJUGATE))


def target_of(name: str) -> float:
    return 10.0 if name in CONJUGATE else 3.0


def summarize(runs: list, cap: float) -> list:
    """One row per (model, n): medians over rounds (a run without the answer counts as the cap)."""
    rows = {}
    for r in runs:
        methods = {"vijax": [], "numpyro": [], "vijax_full": [], "vijax_ngvi": []}
        rows.setdefault((r["model"], r["n"]), methods)[r["method"]].append(r)
    out = []
    for (name, n), by in list(rows.items()):
        for method, label in (("vijax_full", "fit at full batch"), ("vijax_ngvi", "route ngvi")):
            same = method == "vijax_ngvi" and all(r.get("route") == "ngvi" for r in by["vijax"])
            if by[method] and not same:  # a row of its own, against the same NumPyro runs (not fit's own route)
                rows[(f"{name} ({label})", n)] = {"vijax": by[method], "numpyro": by["numpyro"]}
    for (name, n), by in rows.items():
        if not by["vijax"]:  # only the fit at full batch, or route ngvi, was timed (``--methods``)
            continue

        def median(rs):
            ts = [r["seconds"] if r.get("reached") else float("inf") for r in rs]
            return statistics.median(ts) if ts else None

        tv, tn = median(by["vijax"]), median(by["numpyro"])
        killed = any(r.get("error") == "killed" for r in by["vijax"])  # past the cap + 120 s in its first fit
        route = next((r.get("route") for r in by["vijax"] if r.get("route")), "killed" if killed else "error")
        capped = tn is not None and not np.isfinite(tn)
        # where the median passed the cap, it is at least the median of the runs' lower bounds: each run's time
        # to the answer or, past its own cap (runs of --merge and --append may differ), that cap
        bounds = [r["seconds"] if r.get("reached") else r.get("cap", cap) for r in by["numpyro"]]
        row_cap = statistics.median(bounds) if capped else min((r.get("cap", cap) for r in by["numpyro"]), default=cap)
        ratio, met = None, None
        target = 3.0 if name in SMALL else target_of(name.split(" ")[0])
        if tv is not None and tn is not None and np.isfinite(tv):
            ratio = (row_cap if capped else tn) / tv  # a lower bound where NumPyro passed the cap
            met = True if ratio >= target else (None if capped else False)  # a bound below the target: open
        elif tv is not None and tn is not None and not capped:
            met = False  # vijax without the answer, NumPyro with it

        def finite(t):
            return t if t is not None and np.isfinite(t) else None

        def parts(rs, method):  # medians of each run's compile time, steps and steady-state rate
            def med(field):
                xs = [r[field] for r in rs if r.get(field) is not None]
                return statistics.median(xs) if xs else None

            return {f"{method}_{f}": med(f) for f in ("import_s", "compile_s", "steps", "steps_per_s")}

        cont = [r["continuation_compile_s"] for r in by["vijax"] if len(r.get("checks", ())) > 1]
        out.append(
            dict(
                model=name,
                n=n,
                route=route,
                vijax_s=finite(tv),
                numpyro_s=finite(tn),
                **parts(by["vijax"], "vijax"),
                **parts(by["numpyro"], "numpyro"),
                vijax_continued=len(cont),  # runs that called fit(..., init=post) after the first fit
                vijax_continuation_compile_s=statistics.median(cont) if cont else None,
                ratio=ratio,
                numpyro_capped=capped,
                cap=row_cap,
                runs=(len(by["vijax"]), len(by["numpyro"])),
                target=target,
                met=met,
            )
        )
    return out


def table(rows: list, cap: float) -> str:
    """Per model, each method's time to the answer, compile seconds, steps and steps per second (medians)."""

    def fmt(t, row):
        return f"> {row.get('cap', cap):.0f}" if t is None or not np.isfinite(t) else f"{t:.1f}"

    def num(x, spec):
        return "—" if x is None else format(x, spec)

    def rate(x):
        return "—" if x is None else (f"{x:,.0f}" if x >= 10 else f"{x:.1f}")

    lines = [
        "| model | observations | route of fit | vijax s | compile s | steps | steps/s | NumPyro s | compile s | steps "
        "| steps/s | NumPyro / vijax | target | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = "—" if r["ratio"] is None else ("≥ " if r["numpyro_capped"] else "") + f"{r['ratio']:.1f}×"
        met = ("open" if r["ratio"] is not None else "—") if r["met"] is None else ("met" if r["met"] else "missed")
        n = "docs" if r["model"].split(" ")[0] in SMALL else f"{r['n']:,}"
        ran = r.get("runs", (1, 1))[1]
        cols = []
        failed = {"error": "failed", "killed": f"killed > {cap + 120:.0f}"}.get(r["route"])
        for m, t in (("vijax", failed or fmt(r["vijax_s"], r)), ("numpyro", None)):
            if m == "numpyro":
                t = fmt(r["numpyro_s"], r) if ran else "not run"
            cols += [
                t,
                num(r.get(f"{m}_compile_s"), ".1f"),
                num(r.get(f"{m}_steps"), ",.0f"),
                rate(r.get(f"{m}_steps_per_s")),
            ]
        lines.append(
            f"| {r['model']} | {n} | {'—' if failed else r['route']} | {' | '.join(cols)} | {ratio} | "
            f"≥ {r['target']:.0f}× | {met} |"
        )
    return "\n".join(lines)


def docs_table(results=RESULTS) -> str:
    """docs/numpyro_tfp.md's tables: the rows of ``fit.json`` (the docs' sizes) and ``fit_large.json`` (10⁵ and 10⁶
    observations), each file's machine, load, cap and rounds under it."""

    def load(x):
        return f"{(x[0] if isinstance(x, list) else x):.1f}"

    parts = []
    for name in ("fit.json", "fit_large.json"):
        path = os.path.join(results, name)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            r = json.load(f)
        m, runs = r["machine"], [c for row in r["rows"] for c in row["runs"] if c]
        rounds = f"{min(runs)} round(s)" if min(runs) == max(runs) else f"{min(runs)}–{max(runs)} runs a method"
        loads = [run["load_average"] for run in r["runs"] if "load_average" in run]
        at_runs = f", {min(loads):.1f}–{max(loads):.1f} at the runs' starts (median {statistics.median(loads):.1f})"
        parts.append(
            table(r["rows"], r["settings"]["cap"])
            + f"\n\n{m['processor']}, {m['cores']} cores, CPU; load average (1 min) {load(r['load_average_start'])} at the "
            f"start, {load(r['load_average_end'])} at the end{at_runs if loads else ''}; {rounds} (medians); "
            f"{_caps(r)}; `benchmarks/results/{name}`."
        )
    return "\n\n".join(parts)


def _caps(result: dict) -> str:
    """The caps of a result's rows: one, or the rows' own where ``--merge`` mixed them."""
    cap, other = result["settings"]["cap"], {}
    for row in result["rows"]:
        if row.get("cap", cap) != cap:
            where = other.setdefault((row["cap"], row["n"]), [])
            where += [m for m in [row["model"].split(" ")[0]] if m not in where]
    parts = [f"{c:.0f} s for {', '.join(ms)} at {n:,}" for (c, n), ms in other.items()]
    return f"cap {cap:.0f} s" + "".join(f"; {p}" for p in parts)


def write_results(out: str, result: dict, models: str) -> str:
    """Writes ``result`` to ``out`` (JSON) and its table to the ``.md`` beside it; returns the table."""
    with open(out, "w") as f:
        json.dump(result, f, indent=1, default=float)
    text = table(result["rows"], result["settings"]["cap"])
    title = {"small": "the docs' models at their sizes", "large": "10⁵ and 10⁶ observations"}.get(
        models, models.replace(",", ", ")
    )
    with open(os.path.splitext(out)[0] + ".md", "w") as f:
        f.write(f"# vijax.fit against NumPyro's SVI + AutoNormal, time to the answer: {title}\n\n{text}\n")
    return text


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="all", help="'all', 'small', 'large' or a comma-separated list")
    p.add_argument("--sizes", default="100000,1000000", help="observations of the large models")
    p.add_argument("--subsample", type=int, default=1000, help="the large models' plate subsample_size")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cap", type=float, default=60.0, help="seconds after which a run reports '> cap'")
    p.add_argument("--within", type=float, default=0.3, help="reference sds")
    p.add_argument("--draws", type=int, default=2000, help="draws of q per check")
    p.add_argument("--lr", type=float, default=0.01, help="NumPyro's Adam step size")
    p.add_argument("--chunk", type=int, default=100, help="NumPyro's steps per jitted scan")
    p.add_argument("--nuts-limit", type=float, default=300.0, help="seconds a NUTS reference may take")
    p.add_argument("--references", default=os.path.join(RESULTS, "fit_reference.json"))
    p.add_argument("--out", default=os.path.join(RESULTS, "fit.json"))
    p.add_argument(
        "--full-batch",
        action="store_true",
        help="also time the fit at full batch of the large models with conjugate sites",
    )
    p.add_argument(
        "--methods",
        default="vijax,numpyro",
        help="methods timed: vijax, numpyro, vijax_ngvi (route='ngvi'), and vijax_full with --full-batch",
    )
    p.add_argument("--reference", action="store_true", help="compute the missing (or 'none') references and stop")
    p.add_argument("--summarize", action="store_true", help="recompute --out's table from the runs it holds")
    p.add_argument(
        "--merge", action="store_true", help="keep --out's runs of the models, sizes and methods not timed here"
    )
    p.add_argument(
        "--append", action="store_true", help="keep all of --out's runs, the new rounds numbered after theirs"
    )
    p.add_argument("--docs-table", action="store_true", help="rewrite docs/numpyro_tfp.md's table from the JSON")
    p.add_argument("--one", nargs=3, metavar=("METHOD", "MODEL", "N"), help=argparse.SUPPRESS)
    p.add_argument("--t0", type=float, help=argparse.SUPPRESS)
    add_device_argument(p)  # where both libraries' JAX runs, in every child process
    opts = p.parse_args(argv)
    unknown = set(opts.methods.split(",")) - {"vijax", "numpyro", "vijax_full", "vijax_ngvi"}
    if unknown:
        p.error(f"--methods: unknown {sorted(unknown)} (vijax, numpyro, vijax_full, vijax_ngvi)")
    WITHIN[0] = opts.within
    if opts.docs_table:
        replace_span(os.path.join(os.path.dirname(RESULTS), os.pardir, "docs", "numpyro_tfp.md"), "fit", docs_table())
        return
    if opts.summarize:
        with open(opts.out) as f:
            result = json.load(f)
        result["rows"] = summarize(result["runs"], result["settings"]["cap"])
        print(write_results(opts.out, result, opts.models))
        return
    if opts.one:
        method, name, n = opts.one
        print(json.dumps(one(method, name, int(n), opts.t0, opts)), flush=True)
        return
    sizes = [int(s) for s in opts.sizes.split(",") if s]
    names = {"all": SMALL + LARGE, "small": SMALL, "large": LARGE}.get(opts.models) or tuple(opts.models.split(","))
    cases = [(m, 0) for m in names if m in SMALL] + [(m, n) for n in sizes for m in names if m in LARGE]
    refs = load_references(opts.references)
    if opts.reference:
        for name, n in cases:
            if refs.get(_key(name, n), {}).get("kind", "none") == "none":
                refs[_key(name, n)] = compute_reference(name, n, opts.nuts_limit, refs)
                print(_key(name, n), refs[_key(name, n)]["kind"], f"{refs[_key(name, n)]['seconds']:.0f} s", flush=True)
                with open(opts.references, "w") as f:
                    json.dump(refs, f)
        return
    opts.passthrough = [
        f"--{k}={getattr(opts, k.replace('-', '_'))}" for k in ("subsample", "cap", "within", "draws", "lr", "chunk")
    ] + ["--references", opts.references]
    timed = [(m, n) for m, n in cases if refs.get(_key(m, n), {}).get("kind", "none") != "none"]
    skipped = [_key(m, n) for m, n in cases if (m, n) not in timed]
    load_start, runs = os.getloadavg(), []
    settings = {k: getattr(opts, k) for k in ("subsample", "rounds", "cap", "within", "draws", "lr", "chunk")}
    first_round = 0
    if (opts.merge or opts.append) and os.path.exists(opts.out):
        with open(opts.out) as f:
            kept = json.load(f)
        timing = {(m, n, method) for m, n in timed for method in _methods(opts, m)}
        runs = [r for r in kept["runs"] if opts.append or (r["model"], r["n"], r["method"]) not in timing]
        first_round = 1 + max((r["round"] for r in runs if (r["model"], r["n"], r["method"]) in timing), default=-1)
        load_start, skipped, settings = kept["load_average_start"], kept["no_reference"], kept["settings"]

    def write():  # after every run, so that a stopped run keeps what it measured
        result = dict(
            machine=dict(platform=platform.platform(), processor=_cpu_name(), cores=os.cpu_count()),
            load_average_start=load_start,
            load_average_end=os.getloadavg(),
            settings=settings,
            no_reference=skipped,
            rows=summarize(runs, settings["cap"]),
            runs=runs,
        )
        return write_results(opts.out, result, opts.models)

    for r in range(first_round, first_round + opts.rounds):
        for name, n in timed:
            for method in _methods(opts, name):
                load = os.getloadavg()[0]
                out = spawn(method, name, n, opts)
                out.update(round=r, load_average=load)
                runs.append(out)
                t = "—" if out.get("seconds") is None else f"{out['seconds']:.1f} s"
                print(f"round {r} {_key(name, n):<28} {method:<10} {t:>9} {out.get('error', '')}", flush=True)
                write()
    print(write())
    if skipped:
        print("no reference (not timed):", ", ".join(skipped))


if __name__ == "__main__":
    main()
