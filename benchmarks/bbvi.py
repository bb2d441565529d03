"""Black-box VI: vijax ``bbvi`` and ``ngvi`` against NumPyro's SVI and BlackJAX's Gaussian VI.

One model, one run, side by side: Bayesian logistic regression on synthetic data (N = 10^4
points, D = 100 features drawn from a fixed numpy generator; prior w ~ N(0, I); log-joint
sum_i log sigmoid(y_i x_i^T w) + log N(w | 0, I), the same jitted function for every method).
Every method fits a Gaussian q over w, mean-field or full-rank, from the same start (mean 0,
standard deviation 0.1 in every coordinate), with the same number S of Monte Carlo draws per step:

- ``vijax-bbvi``: ``bbvi(family="meanfield" | "fullrank", optimizer="adam")`` with its default
  estimator (reparameterization, closed-form entropy), and with ``estimator="stl"``;
- ``numpyro``: ``SVI`` with ``AutoNormal`` / ``AutoMultivariateNormal``, ``Trace_ELBO(num_particles=S)``
  and ``numpyro.optim.Adam`` (its default: Monte Carlo log q, no stopped gradient);
- ``blackjax``: ``meanfield_vi`` / ``fullrank_vi`` with ``optax.adam`` (its default: the
  "sticking the landing" estimator);
- ``vijax-ngvi``: ``ngvi(gradient="hessian")``, the natural-gradient (conjugate-computation) step
  of Khan et al. 2016 / Khan and Lin 2017 with the Price-theorem Hessian estimate, on a mean-field
  ``expfam.Normal`` or a full-rank ``expfam.MultivariateNormal``, with a constant rho and S / 2
  antithetic pairs (its estimator evaluates each draw with its mirror image: S points per step).

The Adam runs share one learning rate per family (``--lr-meanfield``, ``--lr-fullrank``).
Each method's step runs under ``jax.jit`` as a ``lax.scan`` over ``--chunk`` steps (NumPyro:
``svi.update``; BlackJAX: its ``step``; vijax: ``alg.step``), the data passed as an argument (not
baked into the program as a constant). Timed, on the wall clock with ``block_until_ready``:

- init: building the algorithm and its initial state;
- compile: ``jax.jit(chunk).lower(...).compile()`` of that scanned chunk (the same for all);
- steps/s: after every run, the methods take turns in ``--rounds`` rounds (a fresh random order
  each round) running 100 steps (ngvi: 3) of their compiled chunk; the median over rounds, so that
  a changing background load on a shared machine falls on all alike;
- end-to-end: init + compile + the ``--steps`` steps, checkpoint scoring excluded.

Every method's q is scored after each chunk, outside the timed region, by ONE estimator that is
independent of every library compared: the ELBO of the Gaussian q(w) = N(m, Sigma) in float64
numpy, E_q[log p(y, w)] + H[q], with the likelihood term by 64-point Gauss-Hermite quadrature on
each a_i = y_i x_i^T w ~ N(y_i x_i^T m, x_i^T Sigma x_i) and the prior and entropy terms in closed
form (64 and 128 points agree to 1e-9 nats at the optima; they differ only for a q far wider than
the posterior). The exact optimum of each family is computed the same way (a damped Newton /
fixed-point iteration on those exact expectations, largest gradient entry < 1e-8), so that gaps
are to the true optimum. Equal wall time: each method's ELBO at NumPyro's end-to-end time.
The target: NumPyro's final ELBO less ``--tolerance`` nats; the time each method needs to first
reach it is reported, and the checks of the tracker's targets are printed.

Agreement with the peers, each run's ELBO at its end (the exact ELBO above, the median of the
last 10% of its checkpoints, as a single final value carries Adam's noise: 0.3 nats sd
mean-field at the default size) within ``--tolerance`` nats:
vijax ``bbvi`` (reparameterization) and NumPyro, the same estimator, either way; vijax ``bbvi``
with ``estimator="stl"`` and BlackJAX (STL) on the mean-field family, either way (BlackJAX's
``fullrank_vi``, whose off-diagonal Cholesky entries are free in absolute units, is not checked: it
diverges at the default size); vijax ``ngvi`` at least NumPyro's less the tolerance. The checks go
into the JSON (``agree``, ``agreement``); after the tables and the files, the script exits with
status 1 and names each check that failed.

A second table counts the steps natural-gradient VI and Adam need to come within a tolerance of
the exact optimum, on this logistic regression and on a Poisson-Gamma model (x_i ~ Poisson(lambda),
lambda ~ Gamma(a0, b0), q = Gamma, whose posterior and ELBO optimum are closed form).

    python benchmarks/bbvi.py            # the README's tables (a few minutes on 2 CPU cores)
    python benchmarks/bbvi.py --quick    # a small look (N = 2000, D = 20, few steps)

Writes ``benchmarks/results/bbvi.json`` and ``benchmarks/results/bbvi.md`` (a README section) and
prints the markdown tables.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special

from vijax import expfam
from vijax.inference import bbvi, guide, ngvi

from _device import add_device_argument, use_device  # this folder's --device switch
from _agree import compare, exit_on_disagreement, verdict  # this folder's agreement rule

GH_NODES, GH_WEIGHTS = np.polynomial.hermite.hermgauss(64)


# ----------------------------------------------------------------------------- peers
def _peers():
    """NumPyro and BlackJAX, imported on demand (``pip install -e '.[bench]'``)."""
    try:
        import blackjax
        import numpyro
        import optax
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise SystemExit(
            f"benchmarks/bbvi.py compares against NumPyro and BlackJAX ({e}); install them with "
            "pip install -e '.[bench]'"
        ) from e
    return numpyro, blackjax, optax


# ----------------------------------------------------------------------------- data and the exact ELBO
def make_data(n: int, d: int, seed: int = 0) -> np.ndarray:
    """The rows y_i x_i (float64, (n, d)) of a synthetic logistic regression: x_i ~ N(0, I),
    w_true ~ N(0, 0.3^2 I) (logits of standard deviation about 3 for d = 100), y_i in {-1, 1}."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    w_true = 0.3 * rng.normal(size=d)
    y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-x @ w_true)), 1.0, -1.0)
    return y[:, None] * x


def log_joint(w, xy):
    """log p(y, w) = sum_i log sigmoid(y_i x_i^T w) + log N(w | 0, I): the one target of every method."""
    d = w.shape[-1]
    return jnp.sum(jax.nn.log_sigmoid(xy @ w)) - 0.5 * jnp.sum(w * w) - 0.5 * d * math.log(2.0 * math.pi)


def _moments(xy, m, cov, nodes):
    """Gauss-Hermite abscissae of each a_i = y_i x_i^T w under q, shape (n, len(nodes))."""
    mu = xy @ m
    s2 = (xy**2) @ cov if cov.ndim == 1 else np.einsum("nd,nd->n", xy @ cov, xy)
    return mu[:, None] + np.sqrt(2.0 * s2)[:, None] * nodes


def exact_elbo(xy: np.ndarray, m: np.ndarray, cov: np.ndarray, num_nodes: int = 64) -> float:
    """ELBO of q = N(m, cov) (cov a (D,) variance vector or a (D, D) matrix) for ``log_joint``, in
    float64: the likelihood by Gauss-Hermite quadrature, prior and entropy in closed form."""
    m, cov = np.asarray(m, np.float64), np.asarray(cov, np.float64)
    if num_nodes == 64:
        nodes, weights = GH_NODES, GH_WEIGHTS
    else:
        nodes, weights = np.polynomial.hermite.hermgauss(num_nodes)
    d = m.shape[0]
    if cov.ndim == 1:
        log_det, trace = np.sum(np.log(cov)), np.sum(cov)
    else:
        sign, log_det = np.linalg.slogdet(cov)
        if sign <= 0:
            return -math.inf
        trace = np.trace(cov)
    if not (np.all(np.isfinite(m)) and np.isfinite(log_det)):
        return -math.inf
    a = _moments(xy, m, cov, nodes)
    expected_loglik = np.sum(-np.logaddexp(0.0, -a) @ weights) / math.sqrt(math.pi)
    expected_logprior = -0.5 * d * math.log(2.0 * math.pi) - 0.5 * (m @ m + trace)
    entropy = 0.5 * log_det + 0.5 * d * (1.0 + math.log(2.0 * math.pi))
    return float(expected_loglik + expected_logprior + entropy)


def exact_optimum(xy: np.ndarray, family: str, iters: int = 30) -> dict:
    """The ELBO-optimal Gaussian of ``family`` for ``log_joint``, by exact expectations (quadrature).

    Stationarity: grad_m = sum_i g_i y_i x_i - m = 0 with g_i = E[sigmoid(-a_i)], and the precision
    I + sum_i h_i x_i x_i^T (its diagonal for mean-field) with h_i = E[sigmoid(a_i) sigmoid(-a_i)].
    Each round takes a Newton step in m (backtracked on the exact ELBO) and then three fixed-point
    updates of the covariance; the ELBO is concave in (m, Cholesky factor) (Challis and Barber 2013),
    so the stationary point is the optimum.
    """
    n, d = xy.shape
    m = np.zeros(d)
    cov = np.full(d, 0.01) if family == "meanfield" else 0.01 * np.eye(d)

    def expectations(m, cov):
        a = _moments(xy, m, cov, GH_NODES)
        s = 0.5 * (1.0 + np.tanh(0.5 * a))
        return ((1.0 - s) @ GH_WEIGHTS) / math.sqrt(math.pi), ((s * (1.0 - s)) @ GH_WEIGHTS) / math.sqrt(math.pi)

    grad_norm = math.inf
    for _ in range(iters):
        g, h = expectations(m, cov)
        grad = xy.T @ g - m
        grad_norm = float(np.max(np.abs(grad)))
        if grad_norm < 1e-9:
            break
        newton = np.linalg.solve(xy.T @ (h[:, None] * xy) + np.eye(d), grad)
        e0, t = exact_elbo(xy, m, cov), 1.0
        while exact_elbo(xy, m + t * newton, cov) < e0 and t > 1e-6:
            t *= 0.5
        m = m + t * newton
        for _ in range(3):
            _, h = expectations(m, cov)
            cov = (
                1.0 / (1.0 + (xy**2).T @ h)
                if family == "meanfield"
                else np.linalg.inv(xy.T @ (h[:, None] * xy) + np.eye(d))
            )
    elbo = exact_elbo(xy, m, cov)
    return {
        "elbo": elbo,
        "grad_max": grad_norm,
        "quadrature_error": abs(exact_elbo(xy, m, cov, 128) - elbo),
        "m": m,
        "cov": cov,
    }


# ----------------------------------------------------------------------------- the methods
class Method(NamedTuple):
    """A method on the logistic regression: ``init() -> state`` (host side), ``step(key, state, xy)
    -> state`` (pure, scanned under jit) and ``gaussian(state) -> (m, cov)`` in float64."""

    name: str
    family: str
    init: Callable[[], Any]
    step: Callable[[Any, Any, Any], Any]
    gaussian: Callable[[Any], tuple]


def _f64(x):
    return np.asarray(x, np.float64)


def _diag_or_full(family, cov):
    cov = _f64(cov)
    return np.diag(cov) if family == "meanfield" and cov.ndim == 2 else cov


def vijax_bbvi(family: str, d: int, lr: float, s: int, estimator: str = "reparam") -> Method:
    alg = bbvi(
        log_joint,
        family=family,
        init_params=jnp.zeros(d),
        optimizer="adam",
        schedule=lr,
        num_samples=s,
        init_scale=0.1,
        estimator=estimator,
    )

    def gaussian(state):
        q = guide(alg).to_tfp(state.q_global)
        return _f64(q.mean()), _diag_or_full(family, q.covariance())

    label = "" if estimator == "reparam" else f"{estimator.upper()}, "
    return Method(
        f"vijax-bbvi ({label}Adam {lr:g})",
        family,
        lambda: alg.init(jax.random.PRNGKey(0)),
        lambda key, st, xy: alg.step(key, st, xy)[0],
        gaussian,
    )


def vijax_ngvi(family: str, d: int, rho: float, s: int) -> Method:
    if family == "meanfield":
        q0 = expfam.Normal.from_mean_variance(jnp.zeros(d), jnp.full((d,), 0.01))
    else:
        q0 = expfam.MultivariateNormal.from_mean_covariance(jnp.zeros(d), 0.01 * jnp.eye(d))
    # ngvi's Hessian estimate evaluates each draw with its antithetic partner m - (z - m): s // 2
    # pairs are the same s evaluation points per step as the other methods' s draws.
    alg = ngvi(log_joint, family=q0, schedule=rho, num_samples=max(1, s // 2), gradient="hessian")

    def gaussian(state):
        q = state.q_global
        return _f64(q.mean), _f64(q.variance if family == "meanfield" else q.covariance)

    return Method(
        f"vijax-ngvi (rho {rho:g})",
        family,
        lambda: alg.init(jax.random.PRNGKey(0)),
        lambda key, st, xy: alg.step(key, st, xy)[0],
        gaussian,
    )


def numpyro_svi(family: str, d: int, lr: float, s: int, xy0) -> Method:
    numpyro, _, _ = _peers()
    import numpyro.distributions as dist
    from numpyro.infer import SVI, Trace_ELBO, init_to_value
    from numpyro.infer.autoguide import AutoMultivariateNormal, AutoNormal

    def model(xy):
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([d]).to_event(1))
        # the same log-joint as every method: the Normal prior above plus this factor
        numpyro.factor("loglik", jnp.sum(jax.nn.log_sigmoid(xy @ w)))

    start = init_to_value(values={"w": jnp.zeros(d)})
    guide = (
        AutoNormal(model, init_loc_fn=start, init_scale=0.1)
        if family == "meanfield"
        else AutoMultivariateNormal(model, init_loc_fn=start, init_scale=0.1)
    )
    svi = SVI(model, guide, numpyro.optim.Adam(lr), Trace_ELBO(num_particles=s))

    def gaussian(state):
        p = svi.get_params(state)
        if family == "meanfield":
            return _f64(p["w_auto_loc"]), _f64(p["w_auto_scale"]) ** 2
        chol = _f64(p["auto_scale_tril"])
        return _f64(p["auto_loc"]), chol @ chol.T

    return Method(
        f"numpyro SVI (Adam {lr:g})",
        family,
        lambda: svi.init(jax.random.PRNGKey(0), xy0),
        lambda key, st, xy: svi.update(st, xy)[0],
        gaussian,
    )


def blackjax_vi(family: str, d: int, lr: float, s: int) -> Method:
    _, blackjax, optax = _peers()
    from blackjax.vi.fullrank_vi import FRVIState
    from blackjax.vi.meanfield_vi import MFVIState

    opt = optax.adam(lr)
    make = blackjax.meanfield_vi if family == "meanfield" else blackjax.fullrank_vi
    tril = np.tril_indices(d, -1)

    def init():
        mu = jnp.zeros(d)
        if family == "meanfield":  # q's scale is exp(rho)
            rho = jnp.full((d,), math.log(0.1))
            return MFVIState(mu, rho, opt.init((mu, rho)))
        # the flat Cholesky factor: log-diagonal first, then the strict lower triangle row by row
        chol = jnp.concatenate([jnp.full((d,), math.log(0.1)), jnp.zeros(d * (d - 1) // 2)])
        return FRVIState(mu, chol, opt.init((mu, chol)))

    def step(key, state, xy):
        return make(lambda w: log_joint(w, xy), opt, num_samples=s).step(key, state)[0]

    def gaussian(state):
        if family == "meanfield":
            return _f64(state.mu), np.exp(2.0 * _f64(state.rho))
        p = _f64(state.chol_params)
        chol = np.diag(np.exp(p[:d]))
        chol[tril] = p[d:]
        return _f64(state.mu), chol @ chol.T

    return Method(f"blackjax (Adam {lr:g})", family, init, step, gaussian)


# ----------------------------------------------------------------------------- the runner
def run(method: Method, xy, xy64, steps: int, chunk: int, seed: int = 1) -> tuple[dict, Callable]:
    """Runs ``steps`` steps in jitted chunks; scores q after every chunk, outside the timed region.

    Returns (the row, a ``block(num_calls) -> seconds`` timer of the compiled chunk from q's start).
    """
    t0 = time.perf_counter()
    state = jax.block_until_ready(method.init())
    t_init = time.perf_counter() - t0
    keys = jax.random.split(jax.random.PRNGKey(seed), steps).reshape(steps // chunk, chunk, -1)

    def run_chunk(state, keys, xy):
        return jax.lax.scan(lambda st, k: (method.step(k, st, xy), None), state, keys)[0]

    t0 = time.perf_counter()
    compiled = jax.jit(run_chunk).lower(state, keys[0], xy).compile()
    t_compile = time.perf_counter() - t0
    start = state
    trace_steps, trace_time, trace_elbo = [0], [t_init + t_compile], [exact_elbo(xy64, *method.gaussian(state))]
    chunk_times = []
    for c in range(steps // chunk):
        t0 = time.perf_counter()
        state = jax.block_until_ready(compiled(state, keys[c], xy))
        chunk_times.append(time.perf_counter() - t0)
        trace_steps.append((c + 1) * chunk)
        trace_time.append(t_init + t_compile + sum(chunk_times))
        trace_elbo.append(exact_elbo(xy64, *method.gaussian(state)))
    steady = chunk_times[1:] or chunk_times

    def block(num_calls: int) -> float:
        st = start
        t0 = time.perf_counter()
        for c in range(num_calls):
            st = compiled(st, keys[c % len(keys)], xy)
        jax.block_until_ready(st)
        return time.perf_counter() - t0

    row = {
        "method": method.name,
        "family": method.family,
        "steps": steps,
        "chunk": chunk,
        "init_s": t_init,
        "compile_s": t_compile,
        "hlo_lines": len(compiled.as_text().splitlines()),
        "steps_per_s_sequential": chunk * len(steady) / sum(steady),
        "end_to_end_s": trace_time[-1],
        "final_elbo": trace_elbo[-1],
        "trace": {"steps": trace_steps, "time_s": trace_time, "elbo": trace_elbo},
    }
    return row, block


def throughput(rows, blocks, rounds: int, calls: int = 5, ngvi_steps: int = 3) -> None:
    """Steps/s of every method, interleaved: in each round every method (in a fresh random order, so
    that no method always follows the same one) runs ``calls`` of its compiled chunks (ngvi, whose
    chunk is one step: ``ngvi_steps``) from its start, so that a changing background load on a
    shared machine falls on all alike. Sets ``row["steps_per_s"]`` (median over rounds) and
    ``row["round_rates"]``."""
    calls = [calls if r["chunk"] > 1 else ngvi_steps for r in rows]
    rates = [[] for _ in rows]
    order = np.random.default_rng(0)
    for _ in range(rounds):
        for i in order.permutation(len(rows)):
            rates[i].append(calls[i] * rows[i]["chunk"] / blocks[i](calls[i]))
    for r, rr in zip(rows, rates):
        r["round_rates"], r["steps_per_s"] = rr, float(np.median(rr))


def elbo_at_step(row: dict, step: int):
    tr = row["trace"]
    return tr["elbo"][tr["steps"].index(step)] if step in tr["steps"] else None


def elbo_at_time(row: dict, budget: float) -> float:
    """The ELBO of the last checkpoint reached within ``budget`` seconds end to end (the initial q
    if setting up and compiling alone took longer)."""
    tr = row["trace"]
    ok = [e for t, e in zip(tr["time_s"], tr["elbo"]) if t <= budget]
    return ok[-1] if ok else tr["elbo"][0]


def first_reach(row: dict, target: float):
    """(steps, end-to-end seconds, seconds of stepping alone) at the first checkpoint with
    ELBO >= target, or Nones."""
    tr = row["trace"]
    for s, t, e in zip(tr["steps"], tr["time_s"], tr["elbo"]):
        if e >= target:
            return s, t, t - tr["time_s"][0]
    return None, None, None


def steps_to(elbos, steps, target):
    """The first step whose ELBO is >= target, or None."""
    for s, e in zip(steps, elbos):
        if e >= target:
            return s
    return None


# ----------------------------------------------------------------------------- Poisson-Gamma
def poisson_gamma(n: int, steps: int, s: int, rhos, lrs, seed: int = 2) -> dict:
    """Every step's q of ngvi and bbvi (Adam) on x_i ~ Poisson(lambda), lambda ~ Gamma(a0, b0),
    q = Gamma, scored by the closed-form ELBO; the optimum is the exact posterior."""
    a0, b0, lam = 2.0, 1.0, 3.0
    x = np.random.default_rng(seed).poisson(lam, size=n).astype(np.float64)
    sx, lfact = x.sum(), special.gammaln(x + 1.0).sum()

    def elbo(a, b):  # E_q[log p(x | lambda)] - KL(Gamma(a, b) || Gamma(a0, b0)), float64
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        e_log, e_lam = special.digamma(a) - np.log(b), a / b
        kl = (
            (a - a0) * special.digamma(a)
            - special.gammaln(a)
            + special.gammaln(a0)
            + a0 * (np.log(b) - np.log(b0))
            + a * (b0 - b) / b
        )
        return sx * e_log - n * e_lam - lfact - kl

    a_n, b_n = a0 + sx, b0 + n
    optimum = float(elbo(a_n, b_n))
    log_evidence = float(a0 * math.log(b0) - special.gammaln(a0) + special.gammaln(a_n) - a_n * math.log(b_n) - lfact)
    xj = jnp.asarray(x, jnp.float32)

    def loglik(lam_, batch):
        return jnp.sum(batch * jnp.log(lam_) - lam_ - jax.scipy.special.gammaln(batch + 1.0))

    def log_prior(lam_):
        return a0 * math.log(b0) - math.lgamma(a0) + (a0 - 1.0) * jnp.log(lam_) - b0 * lam_

    q0 = expfam.Gamma.from_shape_rate(1.0, 1.0)
    prior = expfam.Gamma.from_shape_rate(a0, b0)
    runs = []

    def trajectory(name, alg, shape_rate):
        def body(st, k):
            st = alg.step(k, st, xj)[0]
            return st, shape_rate(st)

        keys = jax.random.split(jax.random.PRNGKey(seed), steps)
        t0 = time.perf_counter()
        _, (a, b) = jax.jit(lambda st, ks: jax.lax.scan(body, st, ks))(alg.init(jax.random.PRNGKey(0)), keys)
        e = np.concatenate([[float(elbo(1.0, 1.0))], elbo(a, b)])
        runs.append({"method": name, "seconds_with_compile": time.perf_counter() - t0, "elbo": e.tolist()})

    for rho in rhos:
        alg = ngvi(loglik, family=q0, prior=prior, schedule=rho, num_samples=s)
        trajectory(f"vijax-ngvi (rho {rho:g})", alg, lambda st: (st.q_global.concentration, st.q_global.rate))
    for lr in lrs:
        alg = bbvi(loglik, family=q0, optimizer="adam", schedule=lr, num_samples=s, log_prior=log_prior)
        trajectory(
            f"vijax-bbvi (Adam {lr:g})",
            alg,
            lambda st, alg=alg: (guide(alg).to_tfp(st.q_global).concentration, guide(alg).to_tfp(st.q_global).rate),
        )
    return {
        "n": n,
        "a0": a0,
        "b0": b0,
        "lambda_true": lam,
        "posterior_shape": a_n,
        "posterior_rate": b_n,
        "optimum_elbo": optimum,
        "log_evidence": log_evidence,
        "steps": steps,
        "runs": runs,
    }


# ----------------------------------------------------------------------------- tables
def _fmt(v, spec=".2f", none="—"):
    if v is None:
        return none
    return "-inf" if v == -math.inf else ("NaN" if v != v else format(v, spec))


def _targets(rows, family, tol):
    npy = next(r for r in rows if r["family"] == family and r["method"].startswith("numpyro"))
    return npy, npy["final_elbo"] - tol


def main_table(rows, opt, cfg) -> list[str]:
    out = []
    for family in ("meanfield", "fullrank"):
        fam = [r for r in rows if r["family"] == family]
        npy, target = _targets(rows, family, cfg["tolerance"])
        budget = npy["end_to_end_s"]
        title = "Mean-field" if family == "meanfield" else "Full-rank"
        out += [
            "",
            f"{title} Gaussian q (D = {cfg['d']}). Exact optimum of the family: ELBO {opt[family]['elbo']:.2f}. "
            f"Target = NumPyro's final ELBO {npy['final_elbo']:.2f} - {cfg['tolerance']:g} = {target:.2f}. "
            f"Equal wall time = NumPyro's end-to-end time, {budget:.1f} s.",
            "",
            f"| method | init s | compile s | steps/s | end-to-end s | ELBO @ {cfg['short']} steps "
            f"| ELBO @ {cfg['steps']} steps | ELBO @ {budget:.1f} s | first reaches target: step, s (stepping s) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in fam:
            s, t, t_run = first_reach(r, target)
            reach = "not reached" if s is None else f"{s}, {t:.2f} ({t_run:.2f})"
            early = "*" if r["end_to_end_s"] < budget else ""
            out.append(
                f"| {r['method']} | {r['init_s']:.2f} | {r['compile_s']:.2f} | {r['steps_per_s']:.1f} | "
                f"{r['end_to_end_s']:.2f} ({r['steps']} steps) | {_fmt(elbo_at_step(r, cfg['short']))} | "
                f"{_fmt(elbo_at_step(r, cfg['steps']))} | {_fmt(elbo_at_time(r, budget))}{early} | {reach} |"
            )
    return out


def target_lines(rows, cfg) -> tuple[list[str], dict]:
    lines, verdicts = [], {}
    for family in ("meanfield", "fullrank"):
        npy, target = _targets(rows, family, cfg["tolerance"])
        vj = next(r for r in rows if r["family"] == family and r["method"].startswith("vijax-bbvi (Adam"))
        ng = next(r for r in rows if r["family"] == family and r["method"].startswith("vijax-ngvi"))
        ratios = np.array(vj["round_rates"]) / np.array(npy["round_rates"])
        speed = float(np.median(ratios))
        gap = vj["final_elbo"] - npy["final_elbo"]
        _, t_np, r_np = first_reach(npy, target)
        _, t_ng, r_ng = first_reach(ng, target)
        v = {
            "steps_per_s_ratio": speed,
            "ratio_range": [float(ratios.min()), float(ratios.max())],
            "final_elbo_vijax": vj["final_elbo"],
            "final_elbo_numpyro": npy["final_elbo"],
            "numpyro_time_to_target_s": t_np,
            "ngvi_time_to_target_s": t_ng,
            "time_ratio_end_to_end": None if t_ng is None else t_np / t_ng,
            "time_ratio_stepping": None if t_ng is None or not r_ng else r_np / r_ng,
        }
        v["speed_met"] = speed >= 1.5 and vj["final_elbo"] >= npy["final_elbo"] - cfg["tolerance"]
        v["ngvi_met"] = v["time_ratio_end_to_end"] is not None and v["time_ratio_end_to_end"] >= 10.0
        verdicts[family] = v
        title = "mean-field" if family == "meanfield" else "full-rank"
        lines.append(
            f"- {title}, vijax `bbvi` steps/s >= 1.5x NumPyro's at equal ELBO: **{'met' if v['speed_met'] else 'not met'}**: "
            f"{speed:.2f}x (median of {len(ratios)} interleaved rounds, range {ratios.min():.2f}-{ratios.max():.2f}); "
            f"ELBO after {cfg['steps']} steps {vj['final_elbo']:.2f} vs NumPyro's {npy['final_elbo']:.2f} "
            f"({'equal within' if abs(gap) <= cfg['tolerance'] else ('above by more than' if gap > 0 else 'below by more than')} "
            f"{cfg['tolerance']:g} nats)."
        )
        if t_ng is None:
            lines.append(
                f"- {title}, `ngvi` reaches NumPyro's final ELBO (within {cfg['tolerance']:g}) in >= 10x less wall "
                f"time: **not met**: ngvi did not reach {target:.2f} in {ng['steps']} steps (NumPyro: {t_np:.2f} s)."
            )
        else:
            lines.append(
                f"- {title}, `ngvi` reaches NumPyro's final ELBO (within {cfg['tolerance']:g}) in >= 10x less wall time: "
                f"**{'met' if v['ngvi_met'] else 'not met'}**: {v['time_ratio_end_to_end']:.2f}x end to end "
                f"(NumPyro {t_np:.2f} s, ngvi {t_ng:.2f} s, set-up and compilation included); "
                f"{_fmt(v['time_ratio_stepping'])}x counting stepping alone ({r_np:.2f} s vs {r_ng:.2f} s)."
            )
    return lines, verdicts


def agreement(rows, cfg) -> list[dict]:
    """vijax's ELBOs at the end (``end_elbo``) against the peers' (see the module docstring),
    ``cfg["tolerance"]`` nats."""
    checks = []
    for family in ("meanfield", "fullrank"):
        fam = {r["method"]: r for r in rows if r["family"] == family}
        npy = next(r for m, r in fam.items() if m.startswith("numpyro"))
        pairs = [(next(r for m, r in fam.items() if m.startswith("vijax-bbvi (Adam")), npy, False)]
        if family == "meanfield":  # BlackJAX's full-rank run diverges (module docstring)
            stl = next(r for m, r in fam.items() if m.startswith("vijax-bbvi (STL"))
            pairs.append((stl, next(r for m, r in fam.items() if m.startswith("blackjax")), False))
        pairs.append((next(r for m, r in fam.items() if m.startswith("vijax-ngvi")), npy, True))
        for vj, peer, at_least in pairs:
            checks.append(
                compare(
                    f"ELBO at the end (median of the last 10% of checkpoints), {family} ({vj['steps']} and "
                    f"{peer['steps']} steps, N = {cfg['n']}, D = {cfg['d']})",
                    vj["method"],
                    end_elbo(vj["trace"]["elbo"]),
                    peer["method"],
                    end_elbo(peer["trace"]["elbo"]),
                    cfg["tolerance"],
                    at_least=at_least,
                )
            )
    return checks


def end_elbo(elbos) -> float:
    """A run's ELBO at its end: the median of the last 10% of its checkpoints (at least one)."""
    return float(np.median(elbos[-max(1, len(elbos) // 10) :]))


def step_table(opt, logit_runs, pg, cfg) -> list[str]:
    out = [
        "| model | q | method | steps to within 0.1% of the optimum | steps to within "
        "the tight tolerance | gap at the end (median over the last 10% of the run) |",
        "|---|---|---|---:|---:|---:|",
    ]
    for r in logit_runs:
        best = opt[r["family"]]["elbo"]
        tr = r["trace"]
        loose = steps_to(tr["elbo"], tr["steps"], best - 1e-3 * abs(best))
        tight = steps_to(tr["elbo"], tr["steps"], best - cfg["tight_logistic"])
        gap = best - end_elbo(tr["elbo"])
        out.append(
            f"| logistic regression | {r['family']} | {r['method']} | {_fmt(loose, 'd', 'not reached')} | "
            f"{_fmt(tight, 'd', 'not reached')} | {gap:.2f} |"
        )
    best = pg["optimum_elbo"]
    for r in pg["runs"]:
        e = r["elbo"]
        loose = steps_to(e, range(len(e)), best - 1e-3 * abs(best))
        tight = steps_to(e, range(len(e)), best - cfg["tight_poisson"])
        gap = best - end_elbo(e)
        out.append(
            f"| Poisson-Gamma | Gamma | {r['method']} | {_fmt(loose, 'd', 'not reached')} | "
            f"{_fmt(tight, 'd', 'not reached')} | {gap:.3f} |"
        )
    return out


# ----------------------------------------------------------------------------- main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="N = 2000, D = 20, few steps: a smoke run")
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--samples", type=int, default=8, help="Monte Carlo draws per step, every method")
    p.add_argument("--steps", type=int, default=3000, help="steps of the Adam methods")
    p.add_argument("--ngvi-steps", type=int, default=40)
    p.add_argument("--chunk", type=int, default=20, help="Adam steps per jitted scan (the checkpoint spacing)")
    p.add_argument("--lr-meanfield", type=float, default=0.01)
    p.add_argument("--lr-fullrank", type=float, default=0.003)
    p.add_argument(
        "--rho",
        type=float,
        default=1.0,
        help="ngvi's constant step size (the log-joint is log-concave, so the full natural-gradient step is safe)",
    )
    p.add_argument("--tolerance", type=float, default=0.5, help="nats below NumPyro's final ELBO that count as reached")
    p.add_argument("--rounds", type=int, default=30, help="interleaved rounds of the steps/s measurement")
    p.add_argument("--pg-steps", type=int, default=3000, help="steps of the Poisson-Gamma runs")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "bbvi.json"))
    p.add_argument("--md", default=os.path.join(os.path.dirname(__file__), "results", "bbvi.md"))
    add_device_argument(p)
    args = p.parse_args(argv)
    use_device(args.device)
    if args.quick:
        args.n, args.d, args.steps, args.ngvi_steps, args.rounds, args.pg_steps = 2000, 20, 400, 20, 3, 300
    if jax.config.jax_enable_x64:
        raise SystemExit("run in float32 (JAX's default): unset JAX_ENABLE_X64")
    _peers()
    t_start, load_start = time.perf_counter(), os.getloadavg()

    xy64 = make_data(args.n, args.d)
    xy = jnp.asarray(xy64, jnp.float32)
    _warm_up(xy)
    opt = {fam: exact_optimum(xy64, fam) for fam in ("meanfield", "fullrank")}
    print(
        f"exact optima: mean-field {opt['meanfield']['elbo']:.4f}, full-rank {opt['fullrank']['elbo']:.4f} "
        f"(quadrature error {max(o['quadrature_error'] for o in opt.values()):.1e})",
        flush=True,
    )

    d, s = args.d, args.samples
    lrs = {"meanfield": args.lr_meanfield, "fullrank": args.lr_fullrank}
    rows, blocks = [], []

    def go(method, steps, chunk):
        r, block = run(method, xy, xy64, steps, chunk)
        print(
            f"{method.family:9s} {r['method']:32s} init {r['init_s']:5.2f} s  compile {r['compile_s']:5.2f} s  "
            f"{r['steps_per_s_sequential']:7.1f} steps/s  end-to-end {r['end_to_end_s']:6.2f} s  "
            f"final ELBO {r['final_elbo']:.2f}",
            flush=True,
        )
        return r, block

    for family in ("meanfield", "fullrank"):
        lr = lrs[family]
        for method, steps, chunk in [
            (vijax_bbvi(family, d, lr, s), args.steps, args.chunk),
            (vijax_bbvi(family, d, lr, s, "stl"), args.steps, args.chunk),
            (numpyro_svi(family, d, lr, s, xy), args.steps, args.chunk),
            (blackjax_vi(family, d, lr, s), args.steps, args.chunk),
            (vijax_ngvi(family, d, args.rho, s), args.ngvi_steps, 1),
        ]:
            r, block = go(method, steps, chunk)
            rows.append(r)
            blocks.append(block)
    print("steps/s, interleaved ...", flush=True)
    throughput(rows, blocks, args.rounds)
    del blocks

    # natural gradient against Adam: more step sizes on the logistic regression
    extra = []
    for family in ("meanfield", "fullrank"):
        for rho in [r for r in (1.0, 0.5, 0.2) if r != args.rho]:
            extra.append(go(vijax_ngvi(family, d, rho, s), args.ngvi_steps, 1)[0])
        for lr in {"meanfield": (0.003, 0.03), "fullrank": (0.001, 0.01)}[family]:
            extra.append(go(vijax_bbvi(family, d, lr, s), args.steps, args.chunk)[0])
    logit_runs = sorted(
        [r for r in rows if r["method"].startswith(("vijax-ngvi", "vijax-bbvi (Adam"))] + extra,
        key=lambda r: (r["family"] != "meanfield", not r["method"].startswith("vijax-ngvi"), r["method"]),
    )
    print("Poisson-Gamma ...", flush=True)
    pg = poisson_gamma(
        100, args.pg_steps, s, rhos=(1.0,) if args.quick else (1.0, 0.5), lrs=(1.0,) if args.quick else (0.1, 1.0, 3.0)
    )

    machine = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "jax": jax.__version__,
        "device": str(jax.devices()[0]),
        "dtype": str(xy.dtype),
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
    }
    for mod in ("numpyro", "blackjax", "optax"):
        machine[mod] = __import__(mod).__version__
    cfg = {
        "n": args.n,
        "d": args.d,
        "samples": s,
        "steps": args.steps,
        "short": args.ngvi_steps,
        "chunk": args.chunk,
        "lr_meanfield": args.lr_meanfield,
        "lr_fullrank": args.lr_fullrank,
        "rho": args.rho,
        "tolerance": args.tolerance,
        "rounds": args.rounds,
        "tight_logistic": 1.0,
        "tight_poisson": 0.01,
        "total_s": time.perf_counter() - t_start,
    }
    table = main_table(rows, opt, cfg)
    targets, verdicts = target_lines(rows, cfg)
    steps = step_table(opt, logit_runs, pg, cfg)
    checks = agreement(rows, cfg)
    print("\n".join(table + [""] + targets + [""] + steps))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    for r in pg["runs"]:  # every step up to 100, then every 10th
        r["elbo"] = [e for i, e in enumerate(r["elbo"]) if i <= 100 or i % 10 == 0]
    pg["elbo_steps"] = "0..100, then every 10th"
    with open(args.out, "w") as fh:
        json.dump(
            _compact(
                {
                    "machine": machine,
                    "config": cfg,
                    "optimum": {k: {kk: vv for kk, vv in v.items() if kk not in ("m", "cov")} for k, v in opt.items()},
                    "targets": verdicts,
                    "rows": rows,
                    "step_counts": {"logistic": logit_runs, "poisson_gamma": pg},
                    **verdict(checks),
                }
            ),
            fh,
            indent=1,
        )
    with open(args.md, "w") as fh:
        fh.write(markdown(table, targets, steps, machine, cfg, pg, opt) + "\n")
    print(f"wrote {args.out} and {args.md} ({cfg['total_s']:.0f} s)")
    exit_on_disagreement(checks)


def markdown(table, targets, steps, machine, cfg, pg, opt) -> str:
    la, lb = machine["load_average_start"], machine["load_average_end"]
    return "\n".join(
        [
            "### Black-box VI against NumPyro and BlackJAX",
            "",
            f"`python benchmarks/bbvi.py` (one run, {cfg['total_s'] / 60:.1f} min). Bayesian logistic regression, "
            f"N = {cfg['n']}, D = {cfg['d']} (synthetic, fixed numpy generator), prior w ~ N(0, I); every method gets the same "
            f"jitted log-joint, the same start (mean 0, standard deviation 0.1), S = {cfg['samples']} Monte Carlo draws per "
            f"step and, for the Adam methods, the same learning rate ({cfg['lr_meanfield']:g} mean-field, "
            f"{cfg['lr_fullrank']:g} full-rank). vijax `bbvi` uses its default estimator (reparameterization, closed-form "
            "entropy) and, in the STL rows, `estimator=\"stl\"`; NumPyro `SVI` with `AutoNormal` / "
            "`AutoMultivariateNormal`, `Trace_ELBO(num_particles=S)` and `numpyro.optim.Adam`; BlackJAX `meanfield_vi` "
            f"(and `fullrank_vi`) with `optax.adam` and its default STL estimator; vijax `ngvi(gradient=\"hessian\")` "
            f"with constant rho = {cfg['rho']:g} and `num_samples={cfg['samples'] // 2}`: its estimator evaluates each "
            f"draw with its antithetic mirror, so {cfg['samples'] // 2} pairs are the same {cfg['samples']} points per step.",
            "",
            f"Machine: {machine['cpu']}, {machine['cores']} CPU cores, no accelerator, JAX {machine['jax']} "
            f"({machine['dtype']}), NumPyro {machine['numpyro']}, BlackJAX {machine['blackjax']}. The machine was shared "
            f"with other jobs (load average {la[0]:.1f} at the start, {lb[0]:.1f} at the end, on {machine['cores']} cores): "
            "sequential times carry that noise, which is why steps/s comes from interleaved rounds.",
            "",
            "What was timed (wall clock, `block_until_ready`): every step runs under `jax.jit` as a `lax.scan` over "
            f"{cfg['chunk']} steps (ngvi: 1), the data passed as an argument. *init*: building the algorithm and its "
            "initial state (NumPyro's `svi.init` traces the model and guide). *compile*: "
            "`jax.jit(chunk).lower(...).compile()` of that scan. *steps/s*: the median over "
            f"{cfg['rounds']} interleaved rounds of {5 * cfg['chunk']} steps per method (ngvi: 3), the methods in a "
            "fresh random order each round. *end-to-end*: init + compile + every step, with the scoring of checkpoints left "
            f"out. ELBOs: each method's q after every scan (ngvi: every step) is scored by one library-independent "
            "function, the exact ELBO of the Gaussian q in float64 (64-point Gauss-Hermite quadrature for the "
            "likelihood term, closed-form prior and entropy; 64 and 128 nodes agree to 1e-9 nats at the optima); "
            "the exact optimum of each family is computed the same way. \\* = the run ended before that time (its "
            "final ELBO). The target is NumPyro's final ELBO less "
            f"{cfg['tolerance']:g} nats; *first reaches target* gives the first checkpoint at or above it.",
            *table,
            "",
            "Targets:",
            "",
            *targets,
            "",
            "#### Natural-gradient vs Adam step counts",
            "",
            "Steps until the exact ELBO of q comes within a tolerance of the family's exact optimum (Adam rows: "
            f"checkpoints every {cfg['chunk']} steps). Logistic regression: 0.1% is "
            f"{1e-3 * abs(opt['meanfield']['elbo']):.2f} nats, the tight tolerance {cfg['tight_logistic']:g} nat. "
            f"Poisson-Gamma: N = {pg['n']} counts (lambda = {pg['lambda_true']:g}), prior Gamma({pg['a0']:g}, {pg['b0']:g}), "
            f"q starts at Gamma(1, 1); the optimum is the exact posterior Gamma({pg['posterior_shape']:g}, "
            f"{pg['posterior_rate']:g}) with ELBO = log evidence = {pg['optimum_elbo']:.3f}; 0.1% is "
            f"{1e-3 * abs(pg['optimum_elbo']):.3f} nats, the tight tolerance {cfg['tight_poisson']:g} nats; "
            f"ngvi with `prior=expfam.Gamma.from_shape_rate(a0, b0)` (reparameterized gradient), bbvi with "
            f"`family=expfam.Gamma(...)` and `log_prior`, {pg['steps']} steps each, S = {cfg['samples']}.",
            "",
            *steps,
        ]
    )


def _compact(obj):
    """Floats to 8 significant digits (non-finite ones as None) for the JSON."""
    if isinstance(obj, dict):
        return {k: _compact(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_compact(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(f"{obj:.8g}") if math.isfinite(obj) else None
    if isinstance(obj, (np.integer, np.bool_)):
        return obj.item()
    return obj


def _warm_up(xy) -> None:
    """Starts JAX's CPU backend and thread pools before anything is timed, so that the first method
    run does not pay for them."""
    f = jax.jit(
        lambda w, keys, xy: jax.lax.scan(
            lambda w, k: (w + 1e-3 * jax.grad(log_joint)(w + jax.random.normal(k, w.shape), xy), None), w, keys
        )[0]
    )
    jax.block_until_ready(f(jnp.zeros(xy.shape[1]), jax.random.split(jax.random.PRNGKey(0), 4), xy))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    main()
