"""NumPyro models as users write them, fitted by vijax and by NumPyro's own SVI: the wall time until
the ELBO is within ``--tolerance`` (0.5) nats of the best any method reaches in the run.

The models (each a plain NumPyro function, given to vijax by ``vijax.from_numpyro``):

- ``eight_schools``: the non-centred eight schools (mu ~ N(0, 5), tau ~ HalfCauchy(5),
  theta_tilde ~ N(0, 1) per school);
- ``poisson_gamma``: a hierarchical Poisson model, G = 30 group rates lambda_g ~ Gamma(a, b) with
  a, b ~ Gamma(2, 1), N = 600 counts y_i ~ Poisson(lambda_{g(i)}) (the rates are conjugate given
  a and b);
- ``logistic``: a Bayesian logistic regression, N = 1000 points, D = 10 features, w ~ N(0, I),
  b ~ N(0, 5);
- ``dirichlet_categorical_mixture``: weights ~ Dirichlet(1, 1, 1), three locations ~ N(0, 5),
  N = 300 points in three groups, the assignments z ~ Categorical(weights) marked
  ``infer={"enumerate": "parallel"}`` and summed out by both libraries (vijax's target through
  NumPyro's ``enum`` handler and funsor; NumPyro's SVI by ``TraceEnum_ELBO``, its autoguides over
  the continuous sites, ``handlers.block`` hiding z, as NumPyro's enumeration examples do).

Methods, each from its library's own start:

- ``vijax-ngvi``: ``ngvi(target)`` with its default family ``vijax.inference.auto_family(target)``
  (every site of these models has a matched exponential family: Normal on the real line, Gamma on
  the positive reals), its default step sizes and gradient estimator, ``--ngvi-samples`` draws;
- ``vijax-conjugate_split``, where ``vijax.conjugate_sites`` finds a conjugate site and leaves
  another (eight schools: mu and theta_tilde; the Poisson model: b and the rates): the report
  (timed, in the set-up) and ``conjugate_split(target, report, rest="ngvi")``, the conjugate
  sites by their closed-form update and the rest by ``ngvi``, rho_t = (t + 1)^-0.7 for both. Its
  library cross-check is the ELBO by another route: E_q[log p(z, x)] at constrained draws plus the
  families' entropies in closed form;
- ``numpyro-AutoNormal`` and ``numpyro-AutoMVN``: ``SVI(model, AutoNormal | AutoMultivariateNormal,
  numpyro.optim.Adam(--lr), Trace_ELBO())`` (one particle, NumPyro's default; ``TraceEnum_ELBO()``
  where the model has enumerated sites).

Each method's step runs as a ``lax.scan`` over ``--chunk`` steps (NumPyro: ``svi.update``, as
``svi.run`` scans it, under ``jax.jit``; vijax: ``alg.step``, under ``vijax.inference.jit_step``, as
docs/guide.md recommends). ``--device cpu`` starts every process with XLA's fast CPU compile
settings (``vijax.run.fast_cpu_compile``), for both libraries; ``--xla-defaults`` leaves XLA's
settings as a user's script has them, where ``jit_step`` compiles vijax's chunk with its own CPU
options (the classic emitter, LLVM at ``-O2``) and NumPyro's programs are compiled as XLA's
defaults say (``benchmarks/results/numpyro_models_xla_defaults.json``). A method's clock holds its set-up
(building the target or the SVI object and the initial state), the compilation of the chunk and
every chunk run; imports are left out, and so is scoring. Each method runs in a fresh Python
process (this script with ``--one MODEL METHOD``), its JAX caches empty as in a user's first
script: it reuses nothing that another method or the scoring compiled (the scoring's target is
built after the set-up and the compilation are timed). After each chunk, outside the clock, q
is scored by ONE Monte Carlo estimator of the ELBO, the same for every method,

    ELBO(q) ~ (1/S) sum_s [log p(x, T(u_s)) + log |det J_T(u_s)| - log q_u(u_s)],  u_s ~ q_u,

on the unconstrained space u (the log-joint with Jacobian is the target's ``log_density``,
NumPyro's ``-potential_energy``; q_u is each method's q mapped there: the Gaussians of the
autoguides as they are, vijax's exponential families through ``target.unconstrain`` with the
Jacobian of the map). ``--eval-samples`` draws at the checkpoints (the same key for every method
and checkpoint), ``--final-samples`` for the final value. The ELBO does not depend on the
parameterization, so this is the ELBO of each q on one scale. Checks (in the JSON): the estimator
agrees with ``vijax.inference.log_weights`` for the vijax fit and with NumPyro's
``Trace_ELBO(num_particles=S)`` for the NumPyro fits, within 4 Monte Carlo standard errors of
the difference (the two taken equal, except for the split's closed-form route, which gives its
own: E_q[log p] alone spreads more than log p - log q).

The target of each model is the best ELBO any method reaches in the run less ``--tolerance``; a
method's time to the target is its clock at its first checkpoint at or above it, and the ratio is
NumPyro's time over vijax's first method to it (> 1: vijax first). The load average (``os.getloadavg``) is recorded at
the start and at the end: on a shared machine the times move with it.

    python benchmarks/numpyro_models.py           # the documented run (a few minutes on 2 cores)
    python benchmarks/numpyro_models.py --quick   # a smoke run (fewer steps and draws)

Writes ``benchmarks/results/numpyro_models.json`` (``--out``) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import vijax
from vijax import expfam
from vijax.inference import auto_family, conjugate_split, jit_step, log_weights, ngvi, sample, schedules
from _device import add_device_argument, use_device  # this folder's --device switch

try:
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import SVI, Trace_ELBO, TraceEnum_ELBO
    from numpyro.infer.autoguide import AutoMultivariateNormal, AutoNormal
except ImportError as e:  # pragma: no cover - depends on the environment
    raise SystemExit(f"benchmarks/numpyro_models.py needs NumPyro ({e}): pip install -e '.[bench]'") from e

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


# ----------------------------------------------------------------------------- the models, as users write them
def eight_schools(sigma, y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("J", sigma.shape[0]):
        theta_tilde = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0))
        numpyro.sample("obs", dist.Normal(mu + tau * theta_tilde, sigma), obs=y)


def poisson_gamma(group, num_groups, y=None):
    a = numpyro.sample("a", dist.Gamma(2.0, 1.0))
    b = numpyro.sample("b", dist.Gamma(2.0, 1.0))
    with numpyro.plate("groups", num_groups):
        rate = numpyro.sample("rate", dist.Gamma(a, b))
    with numpyro.plate("data", group.shape[0]):
        numpyro.sample("y", dist.Poisson(rate[group]), obs=y)


def logistic(x, y=None):
    w = numpyro.sample("w", dist.Normal(jnp.zeros(x.shape[1]), 1.0).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 5.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=x @ w + b), obs=y)


def dirichlet_categorical_mixture(x, k=3):
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(k)))
    locs = numpyro.sample("locs", dist.Normal(jnp.zeros(k), 5.0).to_event(1))
    with numpyro.plate("data", x.shape[0]):
        z = numpyro.sample("z", dist.Categorical(weights), infer={"enumerate": "parallel"})
        numpyro.sample("x", dist.Normal(locs[z], 1.0), obs=x)


def model_data(name: str, seed: int = 0):
    """(model, args, kwargs) of a model with its data (a fixed numpy generator)."""
    rng = np.random.default_rng(seed)
    if name == "eight_schools":
        y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
        sigma = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
        return eight_schools, (jnp.asarray(sigma),), {"y": jnp.asarray(y)}
    if name == "poisson_gamma":
        num_groups, n = 30, 600
        rate = rng.gamma(3.0, 1.0 / 0.5, num_groups)
        group = rng.integers(0, num_groups, n)
        y = rng.poisson(rate[group]).astype(np.float32)
        return poisson_gamma, (jnp.asarray(group), num_groups), {"y": jnp.asarray(y)}
    if name == "logistic":
        n, d = 1000, 10
        x = rng.normal(size=(n, d))
        w = rng.normal(size=d)
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(x @ w + 0.5)))).astype(np.float32)
        return logistic, (jnp.asarray(x, jnp.float32),), {"y": jnp.asarray(y)}
    if name == "dirichlet_categorical_mixture":
        x = np.concatenate([rng.normal(m, 1.0, 100) for m in (-4.0, 0.0, 4.0)])
        return dirichlet_categorical_mixture, (jnp.asarray(x, jnp.float32),), {}
    raise ValueError(f"model: unknown {name!r}")


MODELS = ("eight_schools", "poisson_gamma", "logistic", "dirichlet_categorical_mixture")
NOT_RUN = ()


# ----------------------------------------------------------------------------- one estimator of the ELBO
def mc_elbo(target, draws: Callable, key, num_samples: int):
    """(ELBO estimate, its Monte Carlo standard error): the mean over S draws (u_s, log q_u(u_s))
    of ``target.log_density(u_s) - log q_u(u_s)``; ``draws(key, S)`` gives them for one q."""
    u, log_q = draws(key, num_samples)
    log_w = jax.vmap(lambda uu: target.log_density(uu, None))(u) - log_q
    return jnp.mean(log_w), jnp.std(log_w) / jnp.sqrt(num_samples)


def ngvi_draws(target, alg, state, q=None):
    """An exponential-family q over the constrained sites (``q``, site name -> family; default the
    state's ``q_global``), mapped to the unconstrained space: u = unconstrain(z),
    log q_u(u) = log q(z) + log |det d constrain / du|."""

    q = state.q_global if q is None else q

    def draws(key, num_samples):
        z = sample(alg, key, state, num_samples)
        u = jax.vmap(target.unconstrain)(z)
        _, log_det = jax.vmap(target.transform)(u)
        lq = jax.tree_util.tree_map(
            lambda f, x: jnp.sum(f.log_prob(x).reshape(num_samples, -1), axis=1), q, z, is_leaf=expfam.is_family
        )
        return u, sum(jax.tree_util.tree_leaves(lq)) + log_det

    return draws


def autonormal_draws(params, sites):
    """NumPyro's AutoNormal: an independent Normal per unconstrained coordinate (its params
    ``<site>_auto_loc`` and ``<site>_auto_scale``)."""

    def draws(key, num_samples):
        keys = jax.random.split(key, len(sites))
        u, log_q = {}, 0.0
        for k, name in zip(keys, sites):
            loc, scale = params[f"{name}_auto_loc"][None], params[f"{name}_auto_scale"][None]
            x = loc + scale * jax.random.normal(k, (num_samples, *jnp.shape(loc)[1:]))
            u[name] = x
            log_q = log_q + jnp.sum(jax.scipy.stats.norm.logpdf(x, loc, scale).reshape(num_samples, -1), axis=1)
        return u, log_q

    return draws


def automvn_draws(params, sites):
    """NumPyro's AutoMultivariateNormal: a Gaussian over the flat unconstrained vector (its params
    ``auto_loc`` and ``auto_scale_tril``; the sites raveled in the model's order, as NumPyro
    ravels them)."""
    loc, tril = params["auto_loc"], params["auto_scale_tril"]

    def unravel(flat):
        out, pos = {}, 0
        for name, site in sites.items():
            size = int(np.prod(site.unconstrained_shape))
            out[name] = flat[pos : pos + size].reshape(site.unconstrained_shape)
            pos += size
        return out

    def draws(key, num_samples):
        eps = jax.random.normal(key, (num_samples, loc.shape[0]))
        flat = loc[None] + eps @ tril.T
        log_q = jnp.sum(jax.scipy.stats.norm.logpdf(eps), axis=1) - jnp.sum(jnp.log(jnp.abs(jnp.diag(tril))))
        return jax.vmap(unravel)(flat), log_q

    return draws


# ----------------------------------------------------------------------------- the methods
class Method(NamedTuple):
    """``setup() -> state`` (timed), ``chunk(state, key) -> state`` (one jitted lax.scan of
    ``--chunk`` steps), ``draws(state) -> draws(key, S)`` for the ELBO estimator, and
    ``reference(state, key, S)``: the library's own ELBO estimate (a cross-check), or (estimate,
    its standard error)."""

    name: str
    library: str
    family: str
    setup: Callable[[], Any]
    chunk: Callable
    draws: Callable
    reference: Callable


def vijax_method(model, args, kwargs, chunk: int, num_samples: int) -> Method:
    box = {}

    def setup():
        target = vijax.from_numpyro(model, *args, **kwargs)
        family = auto_family(target)
        alg = ngvi(target, num_samples=num_samples)  # its default family: auto_family(target)
        box.update(target=target, alg=alg, family=family)
        return alg.init(jax.random.PRNGKey(0))

    def run_chunk(state, key):
        return jax.lax.scan(lambda s, k: (box["alg"].step(k, s, None)[0], None), state, jax.random.split(key, chunk))[0]

    def reference(state, key, s):
        return jnp.mean(log_weights(box["alg"], key, state, None, s))

    return Method(
        "vijax-ngvi",
        "vijax",
        "auto_family",
        setup,
        run_chunk,
        lambda state: ngvi_draws(box["target"], box["alg"], state),
        reference,
    ), box


def split_families(state) -> dict:
    """A ``conjugate_split(rest="ngvi")`` state's q: the conjugate sites' and the rest's families."""
    return {**state.q_global, **state.rest.q_global}


def split_method(model, args, kwargs, chunk: int, num_samples: int) -> Method:
    """vijax with the conjugate sites found: ``conjugate_sites`` (timed, in the set-up), then
    ``conjugate_split(rest="ngvi")``: the conjugate sites by their closed-form update, the rest by
    ``ngvi`` with ``auto_family``; rho_t = (t + 1)^-0.7 for both (``robbins_monro(1.0, tau=1.0,
    kappa=0.7)``, decreasing: the rest's draws make each closed-form update noisy)."""
    box = {}

    def setup():
        target = vijax.from_numpyro(model, *args, **kwargs)
        report = vijax.conjugate_sites(target, jax.random.PRNGKey(0))
        rho = schedules.robbins_monro(1.0, tau=1.0, kappa=0.7)
        alg = conjugate_split(target, report, rest="ngvi", schedule=rho, rest_schedule=rho, num_samples=num_samples)
        box.update(target=target, alg=alg, report=report)
        return alg.init(jax.random.PRNGKey(0))

    def run_chunk(state, key):
        return jax.lax.scan(lambda s, k: (box["alg"].step(k, s, None)[0], None), state, jax.random.split(key, chunk))[0]

    def reference(state, key, s):
        # the ELBO by another route: E_q[log p(z, x)] over constrained draws plus q's entropies in
        # closed form (no Jacobian, no log q of the draws)
        # (closed-form entropies, so the estimate has log p's spread, not log p - log q's: its own
        # standard error enters the agreement check)
        z = sample(box["alg"], key, state, s)
        log_p = jax.vmap(lambda zz: box["target"].log_prob(zz, None))(z)
        entropy = sum(jnp.sum(f.entropy()) for f in split_families(state).values())
        return jnp.mean(log_p) + entropy, jnp.std(log_p) / jnp.sqrt(s)

    return Method(
        "vijax-conjugate_split",
        "vijax",
        "conjugate sites + auto_family",
        setup,
        run_chunk,
        lambda state: ngvi_draws(box["target"], box["alg"], state, split_families(state)),
        reference,
    ), box


def has_split(target) -> bool:
    """Whether ``conjugate_sites`` finds a conjugate site and leaves one for the rest."""
    report = vijax.conjugate_sites(target, jax.random.PRNGKey(0))
    conjugate = [n for n, r in report.items() if r.conjugate]
    return 0 < len(conjugate) < len(target.sites)


def numpyro_method(model, args, kwargs, guide_cls, lr: float, chunk: int, enumerated: tuple = ()):
    box = {}
    elbo_cls = TraceEnum_ELBO if enumerated else Trace_ELBO

    def setup():
        guide = guide_cls(numpyro.handlers.block(model, hide=list(enumerated)) if enumerated else model)
        svi = SVI(model, guide, numpyro.optim.Adam(lr), elbo_cls())
        box.update(svi=svi, guide=guide)
        return svi.init(jax.random.PRNGKey(0), *args, **kwargs)

    def run_chunk(state, key):
        del key  # SVI's state carries its own PRNG key
        return jax.lax.scan(lambda s, _: (box["svi"].update(s, *args, **kwargs)[0], None), state, None, length=chunk)[0]

    def reference(state, key, s):
        params = box["svi"].get_params(state)
        return -elbo_cls(num_particles=s).loss(key, params, model, box["guide"], *args, **kwargs)

    def draws_of(state, target):
        params = box["svi"].get_params(state)
        if guide_cls is AutoNormal:
            return autonormal_draws(params, list(target.sites))
        return automvn_draws(params, target.sites)

    name = "numpyro-AutoNormal" if guide_cls is AutoNormal else "numpyro-AutoMVN"
    return Method(name, "numpyro", guide_cls.__name__, setup, run_chunk, draws_of, reference), box


def trace(
    method: Method, make_target: Callable, steps: int, chunk: int, eval_samples: int, final_samples: int, seed: int = 1
):
    """Runs ``method`` for ``steps`` steps in chunks, scoring q after each chunk off the clock.
    ``make_target()`` gives the scoring target; it is called once the set-up and the compilation
    are timed, so that nothing it compiles reaches the method's clock."""
    t0 = time.perf_counter()
    state = jax.block_until_ready(method.setup())
    setup_s = time.perf_counter() - t0
    keys = jax.random.split(jax.random.PRNGKey(seed), steps // chunk)
    t0 = time.perf_counter()
    if method.library == "vijax":  # compiled here; its calls below reuse the compilation
        compiled = jit_step(method.chunk)
        compiled.lower(state, keys[0]).compile()
    else:
        compiled = jax.jit(method.chunk).lower(state, keys[0]).compile()
    compile_s = time.perf_counter() - t0
    target = make_target()
    eval_key = jax.random.PRNGKey(12345)

    def draws_of(st):
        return method.draws(st) if method.library == "vijax" else method.draws(st, target)

    score = jax.jit(lambda st, k, s: mc_elbo(target, draws_of(st), k, s), static_argnums=2)
    clock = setup_s + compile_s
    curve = [{"step": 0, "time_s": clock, "elbo": float(score(state, eval_key, eval_samples)[0])}]
    times = []
    for i, k in enumerate(keys):
        t0 = time.perf_counter()
        state = jax.block_until_ready(compiled(state, k))
        times.append(time.perf_counter() - t0)
        clock += times[-1]
        curve.append({"step": (i + 1) * chunk, "time_s": clock, "elbo": float(score(state, eval_key, eval_samples)[0])})
    final, se = score(state, jax.random.PRNGKey(777), final_samples)
    ref = method.reference(state, jax.random.PRNGKey(778), final_samples)
    # the reference's standard error where it gives one, else taken equal to the estimator's
    ref, ref_se = (float(ref[0]), float(ref[1])) if isinstance(ref, tuple) else (float(ref), float(se))
    steady = float(np.median(times[1:] if len(times) > 1 else times))
    return {
        "method": method.name,
        "library": method.library,
        "family": method.family,
        "setup_s": setup_s,
        "compile_s": compile_s,
        "steps": steps,
        "steps_per_s": chunk / steady,
        "end_to_end_s": clock,
        "final_elbo": float(final),
        "final_elbo_se": float(se),
        "library_elbo": ref,
        "library_elbo_agrees": bool(abs(ref - float(final)) <= 4.0 * np.hypot(float(se), ref_se) + 1e-6),
        "curve": curve,
    }, state


METHODS = ("vijax-ngvi", "vijax-conjugate_split", "numpyro-AutoNormal", "numpyro-AutoMVN")


def run_method(name: str, method: str, args) -> dict:
    """``method`` (one of ``METHODS``) on the model ``name`` in this process: its row for the JSON.
    The scoring target is built only after the method's set-up and compilation are timed; a NumPyro
    method's ELBO and guide take the model's summed-out sites from ``args.enumerated`` (the parent's
    target's), since this process builds no target before the clock starts."""
    model, margs, mkw = model_data(name)
    if method == "vijax-ngvi":
        m, box = vijax_method(model, margs, mkw, args.chunk, args.ngvi_samples)
    elif method == "vijax-conjugate_split":
        m, box = split_method(model, margs, mkw, args.chunk, args.ngvi_samples)
    elif method in METHODS:
        guide_cls = AutoNormal if method == "numpyro-AutoNormal" else AutoMultivariateNormal
        m, box = numpyro_method(model, margs, mkw, guide_cls, args.lr, args.chunk, tuple(args.enumerated))
    else:
        raise SystemExit(f"--one: unknown method {method!r}; one of {', '.join(METHODS)}")
    steps = args.steps_vijax if m.library == "vijax" else args.steps_numpyro
    row, _ = trace(
        m, lambda: vijax.from_numpyro(model, *margs, **mkw), steps, args.chunk, args.eval_samples, args.final_samples
    )
    if method == "vijax-ngvi":
        row["families"] = {s: type(f).__name__ for s, f in box["family"].items()}
    if method == "vijax-conjugate_split":
        row["conjugate"] = [n for n, r in box["report"].items() if r.conjugate]
    return row


def run_in_fresh_process(name: str, method: str, args, enumerated: tuple = ()) -> dict:
    """``run_method`` in a fresh Python process (this script with ``--one``): each method starts with
    JAX's caches empty, as a user's script does, and reuses nothing another method, the scoring
    target or this process compiled (one process for all let a later method reuse the programs of
    an earlier one: vijax's target start, built for the scoring, came to vijax's set-up compiled).
    ``enumerated``: the model's summed-out sites (``target.enumerated``)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one", name, method, "--device", args.device]
    cmd += ["--xla-defaults"] if args.xla_defaults else []
    cmd += ["--enumerated", *enumerated]
    for flag in ("steps_vijax", "steps_numpyro", "chunk", "lr", "ngvi_samples", "eval_samples", "final_samples"):
        cmd += ["--" + flag.replace("_", "-"), str(getattr(args, flag))]
    done = subprocess.run(cmd, capture_output=True, text=True)
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("ROW ")]
    if done.returncode or not line:
        raise SystemExit(f"{name} / {method} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads(line[-1][4:])


def check_not_supported(name: str) -> str:
    """The error vijax gives for a model it cannot fit (its message), or '' when it builds."""
    model, args, kwargs = model_data(name)
    try:
        vijax.from_numpyro(model, *args, **kwargs)
    except (ValueError, NotImplementedError, TypeError) as e:
        return f"{type(e).__name__}: {e}"
    return ""


def summarize(rows: list, tolerance: float) -> dict:
    best = max(max(c["elbo"] for c in r["curve"]) for r in rows)
    best = max(best, max(r["final_elbo"] for r in rows))
    target = best - tolerance
    for r in rows:
        hit = next((c for c in r["curve"] if c["elbo"] >= target), None)
        r["time_to_target_s"] = None if hit is None else hit["time_s"]
        r["steps_to_target"] = None if hit is None else hit["step"]
    # the ratio is to vijax's first method to the target (its first row where none reaches it)
    ours = [r for r in rows if r["library"] == "vijax"]
    reached = [r for r in ours if r["time_to_target_s"] is not None]
    v = min(reached, key=lambda r: r["time_to_target_s"]) if reached else ours[0]
    for r in rows:
        a, b = r["time_to_target_s"], v["time_to_target_s"]
        r["ratio_to_vijax"] = None if r["library"] == "vijax" or a is None or b is None else a / b
    return {"best_elbo": best, "target_elbo": target}


def _f(x, spec=".2f"):
    return "—" if x is None else format(x, spec)


def table(results: dict) -> list[str]:
    lines = [
        "| model | method | compile s | steps/s | steps to target | time to target s | ratio (NumPyro / vijax) | final ELBO |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in results["models"].items():
        if "not_supported" in m:
            lines.append(f"| {name} | not supported: {m['not_supported']} | | | | | | |")
            continue
        for r in m["rows"]:
            lines.append(
                f"| {name} | {r['method']} | {r['compile_s']:.2f} | {r['steps_per_s']:.0f} | "
                f"{_f(r['steps_to_target'], 'd')} | {_f(r['time_to_target_s'])} | {_f(r['ratio_to_vijax'])}× | "
                f"{r['final_elbo']:.2f} ± {r['final_elbo_se']:.2f} |"
            )
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: fewer steps and draws")
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--steps-vijax", type=int, default=400)
    parser.add_argument("--steps-numpyro", type=int, default=4000)
    parser.add_argument("--chunk", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.01, help="NumPyro's Adam step size")
    parser.add_argument("--ngvi-samples", type=int, default=8)
    parser.add_argument("--eval-samples", type=int, default=2000)
    parser.add_argument("--final-samples", type=int, default=50000)
    parser.add_argument("--tolerance", type=float, default=0.5)
    parser.add_argument("--out", default=os.path.join(RESULTS, "numpyro_models.json"))
    parser.add_argument(
        "--one",
        nargs=2,
        metavar=("MODEL", "METHOD"),
        help="run one method on one model in this process and print its row",
    )
    parser.add_argument("--enumerated", nargs="*", default=[], help="with --one: the model's summed-out sites")
    parser.add_argument(
        "--xla-defaults", action="store_true", help="XLA's own CPU settings, not vijax run's fast ones, for both"
    )
    add_device_argument(parser)
    args = parser.parse_args(argv)
    use_device(args.device, fast_cpu=not args.xla_defaults)
    if args.quick:
        args.steps_vijax, args.steps_numpyro, args.chunk = 40, 200, 20
        args.eval_samples, args.final_samples = 200, 2000
        if args.out == os.path.join(RESULTS, "numpyro_models.json"):
            args.out = os.path.join(RESULTS, "numpyro_models_quick.json")
    if args.xla_defaults and args.out == os.path.join(RESULTS, "numpyro_models.json"):
        args.out = os.path.join(RESULTS, "numpyro_models_xla_defaults.json")
    if args.one:
        print("ROW " + json.dumps(run_method(args.one[0], args.one[1], args)), flush=True)
        return 0
    load_start, t_start = os.getloadavg(), time.perf_counter()
    results = {"models": {}}
    for name in args.models:
        model, margs, mkw = model_data(name)
        target = vijax.from_numpyro(model, *margs, **mkw)  # this process's only: which rows apply
        methods = ["vijax-ngvi"]
        if not target.enumerated and has_split(target):
            methods.append("vijax-conjugate_split")
        methods += ["numpyro-AutoNormal", "numpyro-AutoMVN"]
        rows = [run_in_fresh_process(name, method, args, tuple(target.enumerated)) for method in methods]
        results["models"][name] = {"rows": rows, **summarize(rows, args.tolerance)}
        print(f"{name}: done at {time.perf_counter() - t_start:.0f} s", flush=True)
    for name in NOT_RUN:
        results["models"][name] = {"not_supported": check_not_supported(name) or "(built: run it)"}
    results.update(
        config=vars(args),
        machine=f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}, {platform.processor() or ''}",
        jax=jax.__version__,
        numpyro=numpyro.__version__,
        device=str(jax.devices()[0]),
        load_average_start=load_start,
        load_average_end=os.getloadavg(),
        wall_s=time.perf_counter() - t_start,
        estimator="the mean of target.log_density(u) - log q_u(u) over u ~ q_u on the unconstrained space "
        "(NumPyro's -potential_energy), the same for every method",
    )
    lines = table(results)
    lines.append("")
    lines.append(
        f"{results['machine']}; load average {load_start[0]:.1f} at the start, {results['load_average_end'][0]:.1f} "
        f"at the end; target: the best ELBO less {args.tolerance} nats"
    )
    print("\n".join(lines))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
