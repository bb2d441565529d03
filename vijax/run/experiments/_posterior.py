"""What the black-box VI experiments (``bbvi_logistic``, ``eight_schools``) share: a posterior
given as a log-likelihood, a log-prior and bijectors (``Target``), the fitted methods
(``bbvi`` with a Gaussian family on the parameter pytree, ``ngvi`` with an exponential-family q on
the flat unconstrained vector), their PSIS diagnostic (Yao et al. 2018), the moments of every
fitted q, a cached NumPyro NUTS reference, and the report (tables and one figure).

A method is named ``"<algorithm>-<family>"``: ``bbvi-fullrank``, ``bbvi-meanfield``,
``bbvi-lowrank``, ``ngvi-fullrank`` (a ``MultivariateNormal``) or ``ngvi-meanfield`` (a batch of
``Normal``s). The runner drives the configured one (``algorithm.name``, ``algorithm.family``,
through ``configured_algorithm``); the others listed in ``algorithm.baselines`` are ``Baseline``
runs with the same settings where they apply.

Both algorithms target the same density. ``bbvi`` gets the log-likelihood on the constrained
parameters and the bijectors; ``ngvi`` gets z -> log p(x | T(z)) and the log-prior
log p(T(z)) + log |det dT/dz| on the flat unconstrained vector z, built with the same
``GaussianGuide.constrain`` that ``bbvi`` uses, and NUTS samples that flat density too.
"""

from __future__ import annotations

import hashlib
import os
import time
import warnings
import zipfile
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vijax import expfam
from vijax.inference import ALGORITHMS, GaussianGuide, log_joint, log_weights, make_algorithm, sample
from vijax.metrics import KHAT_THRESHOLD, psis
from vijax.run import Baseline, ConfigError, configured_algorithm, Experiment, float_bytes, MemoryNeed, SEED_BOUND
from ._common import cell, md_table
from ._plotting import optional_plot

METHODS = ("bbvi-fullrank", "bbvi-meanfield", "bbvi-lowrank", "ngvi-fullrank", "ngvi-meanfield")
NGVI_FAMILIES = ("fullrank", "meanfield")
NUTS_DEFAULTS = {"warmup": 1000, "samples": 5000, "chains": 4, "target_accept": 0.9, "seed": 1}
# The algorithm section of every experiment here (each overrides some values).
# name/family: the runner's method; optimizer, estimator, num_samples, init_scale, rank: bbvi's
# settings (num_samples also ngvi's); gradient: ngvi's estimate (None: its default, "hessian" for
# Gaussians, "secant" for mean-field ones of more than 64 coordinates); learning_rate: Adam's rate
# of every bbvi run; ngvi_step_size: rho of every ngvi run; step_decay: both decay to this fraction
# of their value over the run's num_steps along a cosine (1.0: constant); baselines: the other
# methods; moment_draws: draws of q at each evaluation (the ELBO estimate, q's means and sds);
# psis_draws: the first so many of them give k-hat; nuts: the reference's settings (samples: 0
# switches it off).
ALG_DEFAULTS = {
    "name": "bbvi",
    "family": "fullrank",
    "optimizer": "adam",
    "estimator": "reparam",
    "num_samples": 8,
    "init_scale": 0.1,
    "rank": 2,
    "gradient": None,
    "learning_rate": 0.01,
    "ngvi_step_size": 0.05,
    "step_decay": 0.1,
    "baselines": ["bbvi-meanfield", "ngvi-fullrank"],
    "psis_draws": 2000,
    "moment_draws": 20000,
    "nuts": dict(NUTS_DEFAULTS),
}
# the allowed values of those keys (vijax/run/_bounds.py); NUTS's split R-hat compares chains: 2 or more
ALG_BOUNDS = {
    "algorithm.num_samples": ">= 1",
    "algorithm.init_scale": "> 0",
    "algorithm.rank": ">= 1",
    "algorithm.learning_rate": "> 0",
    "algorithm.ngvi_step_size": "in (0, 1]",
    "algorithm.step_decay": "in (0, 1]",
    "algorithm.psis_draws": "in [10, algorithm.moment_draws]",
    "algorithm.moment_draws": ">= 10",
    "algorithm.nuts.warmup": ">= 0",
    "algorithm.nuts.samples": ">= 0",
    "algorithm.nuts.chains": ">= 2",
    "algorithm.nuts.target_accept": "in (0, 1)",
    "algorithm.nuts.seed": SEED_BOUND,
}


def memory_needs(config, num_data: int, num_params: int, data_key: str) -> list[MemoryNeed]:
    """The arrays of a run of these methods on ``num_data`` data and ``num_params`` parameters
    (``data_key``: the config key that sets the number of data, for the blame)."""
    a, f = config["algorithm"], float_bytes(config)
    nuts, methods = a["nuts"], 1 + len(a["baselines"])
    return [
        MemoryNeed(
            "the draws' log-weights on the data (algorithm.moment_draws x the data)",
            ("algorithm.moment_draws", data_key),
            2 * a["moment_draws"] * (num_data + num_params) * f,
        ),
        MemoryNeed(
            "a step's draws (algorithm.num_samples x the data)",
            ("algorithm.num_samples", data_key),
            methods * a["num_samples"] * (num_data + num_params) * f,
        ),
        MemoryNeed("the full-rank factors (parameters x parameters)", (data_key,), methods * 4 * num_params**2 * f),
        MemoryNeed(
            "the NUTS draws (algorithm.nuts.chains x algorithm.nuts.samples x the parameters)",
            ("algorithm.nuts.chains", "algorithm.nuts.samples"),
            nuts["chains"] * nuts["samples"] * 2 * num_params * 8,
        ),
    ]


class Target(NamedTuple):
    """A posterior: log p(x | params) (``log_lik(params, batch)``, the sum over the batch),
    ``log_prior(params)``, the parameter pytree's ``template`` (q's initial centre) and
    ``bijectors`` (None leaves: unconstrained), the ``full_batch`` (every datum), ``num_data``
    (N for minibatch scaling, or None), ``quantities(params) -> (K,)`` (what is reported) with
    their ``names``, and ``fingerprint`` (bytes identifying the data and model, for the cache)."""

    log_lik: Callable
    log_prior: Callable
    template: Any
    bijectors: Any
    full_batch: Any
    num_data: Optional[int]
    quantities: Callable
    names: tuple
    fingerprint: bytes


class Method(NamedTuple):
    """A method to fit: its ``label``, ``algorithm``, and ``draws(state, key) -> (quantities (n, K),
    log-weights (n,))``, jit-compiled, for n draws z ~ q: the reported quantities at z and
    log p(x, z) - log q(z) on the full data (one program per method, shared by every evaluation
    and the report)."""

    label: str
    algorithm: Any
    draws: Callable


def _flat(target: Target):
    """(GaussianGuide used as the map z -> params, flat log-likelihood, flat log-prior with the Jacobian)."""
    guide = GaussianGuide(target.template, "meanfield", bijectors=target.bijectors)

    def log_lik(z, batch):
        return target.log_lik(guide.constrain(z)[0], batch)

    def log_prior(z):
        params, log_det = guide.constrain(z)
        return target.log_prior(params) + log_det

    return guide, log_lik, log_prior


def _ngvi_q0(family: str, loc, scale: float):
    var = jnp.full(loc.shape, scale * scale, loc.dtype)
    if family == "fullrank":
        return expfam.MultivariateNormal.from_mean_covariance(loc, jnp.diag(var))
    return expfam.Normal.from_mean_variance(loc, var)


def _schedule(step: float, section: dict, num_steps: int):
    """``step``, or a cosine decay from it to ``step_decay * step`` over ``num_steps``."""
    decay = section["step_decay"]
    if decay == 1.0 or num_steps == 0:
        return step
    return optax.cosine_decay_schedule(step, num_steps, alpha=decay)


def _pieces(name: str, family: str, section: dict, target: Target, num_steps: int):
    """(model argument, settings the experiment supplies, step size, on the parameter pytree?)."""
    spec = ALGORITHMS.get(name)
    if spec is not None and "init_params" in spec.settings:  # a guide on the parameter pytree (bbvi)
        extras = {"init_params": target.template, "bijectors": target.bijectors, "log_prior": target.log_prior}
        return target.log_lik, extras, _schedule(section["learning_rate"], section, num_steps), True
    if family not in NGVI_FAMILIES:
        raise ConfigError(
            f"algorithm.family: {name!r} fits q on the flat unconstrained vector, as one of "
            f"{NGVI_FAMILIES}; got {family!r}"
        )
    guide, log_lik, log_prior = _flat(target)
    extras = {"family": _ngvi_q0(family, guide.loc0, section["init_scale"]), "log_prior": log_prior}
    return log_lik, extras, _schedule(section["ngvi_step_size"], section, num_steps), False


def _method(label: str, alg, pytree_guide: bool, target: Target, num_draws: int) -> Method:
    full, n = target.full_batch, num_draws
    if pytree_guide:  # bbvi: its own sampler and log-weights

        def draws(st, key):
            return jax.vmap(target.quantities)(sample(alg, key, st, n)), log_weights(alg, key, st, full, n)

        return Method(label, alg, jax.jit(draws))
    guide = _flat(target)[0]

    def flat_draws(st, key):  # ngvi's own draws and log-weights (the same key: the same draws)
        z = sample(alg, key, st, n)
        return jax.vmap(lambda zs: target.quantities(guide.constrain(zs)[0]))(z), log_weights(alg, key, st, full, n)

    return Method(label, alg, jax.jit(flat_draws))


def check_section(section: dict) -> tuple[str, list[str]]:
    """(the runner's method label, the baselines' labels), checked (ConfigError naming the key)."""
    missing = sorted(set(ALG_DEFAULTS) - set(section))
    if missing:
        raise ValueError(f"the experiment's algorithm section lacks {missing} (see ALG_DEFAULTS)")
    main = f"{section['name']}-{section['family']}"
    others = list(section["baselines"])
    bad = [m for m in others if m not in METHODS]
    if bad or len(set(others)) != len(others):
        raise ConfigError(f"algorithm.baselines must be distinct names from {METHODS}, got {others}")
    if main in others:
        raise ConfigError(f"algorithm.baselines: {main!r} is the runner's own method (algorithm.name-family)")
    return main, others  # the numbers: ALG_BOUNDS, checked when the config loads


def methods(section: dict, defaults: dict, target: Target, num_steps: int) -> tuple[Method, list[Method]]:
    """The runner's method (``configured_algorithm``: ``algorithm.name`` reaches the registry) and
    the baselines' (``make_algorithm`` with the section's settings that each takes); step sizes
    decay over ``num_steps`` (the run's)."""
    main_label, others = check_section(section)
    name, family = section["name"], section["family"]
    if name not in ALGORITHMS:  # let configured_algorithm name it
        configured_algorithm(section, defaults, None)
    model, extras, step, pytree = _pieces(name, family, section, target, num_steps)
    added = {k: None for k in extras if k not in section}
    alg = configured_algorithm(
        dict(section, **added),
        dict(defaults, **added),
        model,
        num_data=target.num_data,
        schedule=step,
        schedule_keys=("learning_rate", "ngvi_step_size"),
        resolved=extras,
    )
    main = _method(main_label, alg, pytree, target, section["moment_draws"])
    out = []
    for label in others:
        b_name, _, b_family = label.partition("-")
        model, extras, step, pytree = _pieces(b_name, b_family, section, target, num_steps)
        settings = {k: section[k] for k in ALGORITHMS[b_name].settings if k in section}
        settings.update({"family": b_family}, **extras)  # ngvi's extras replace the family by its q
        out.append(
            _method(
                label,
                make_algorithm(b_name, model, num_data=target.num_data, schedule=step, **settings),
                pytree,
                target,
                section["moment_draws"],
            )
        )
    return main, out


def evaluator(method: Method, num_psis: int, key) -> Callable:
    """``state -> {elbo_mc, khat, psis_ess}``: the ELBO estimated from the log-weights
    log p(x, z) - log q(z) of ``method.draws`` (a fixed key, so that every evaluation sees the
    same noise), and the PSIS k-hat and effective sample size of the first ``num_psis`` of them.
    PSIS needs ArviZ (the extra ``vijax-toolkit[arviz]``): without it this raises the ImportError
    that names the extra now, when the experiment is built, not at the run's first evaluation."""
    try:
        psis(np.zeros(10))
    except ImportError as e:
        raise ImportError(f"this experiment reports the PSIS k-hat of each fit: {e}", name=e.name) from e

    def evaluate(state) -> dict:
        lw = np.asarray(method.draws(state, key)[1], np.float64)
        if np.any(np.isnan(lw)) or np.any(lw == np.inf):
            return {"elbo_mc": float("nan"), "khat": float("nan"), "psis_ess": float("nan")}
        r = psis(lw[:num_psis])
        return {"elbo_mc": float(np.mean(lw)), "khat": float(r.khat), "psis_ess": float(r.ess)}

    return evaluate


def all_runs(main: Method, others: list[Method], result, results: dict) -> dict:
    """``{label: RunResult}`` of the configured method (``result``) and of its baselines (``results``)."""
    return {main.label: result} | {m.label: results[m.label] for m in others}


def experiment(main: Method, others: list[Method], section: dict, key, make_report, batch, batch_fn=None) -> Experiment:
    """The ``Experiment`` that runs ``main`` from ``main.algorithm.init(key, batch)`` on
    ``batch_fn(key, t)`` (None: ``batch`` at every step) and ``others`` as baselines on the same
    batches, each evaluated by ``evaluator`` with ``algorithm.psis_draws`` and the fixed ``key``."""
    if batch_fn is None:
        batch_fn = lambda key, t: batch  # noqa: E731  (the whole data at every step)
    return Experiment(
        main.algorithm,
        lambda key: main.algorithm.init(key, batch),
        batch_fn,
        evaluator(main, section["psis_draws"], key),
        make_report,
        baselines=tuple(
            Baseline(m.label, m.algorithm, batch_fn=batch_fn, eval_fn=evaluator(m, section["psis_draws"], key))
            for m in others
        ),
    )


def q_moments(method: Method, state, key) -> tuple[np.ndarray, np.ndarray]:
    """Means and sds of the quantities under q, from ``method.draws``."""
    qs = np.asarray(method.draws(state, key)[0], np.float64)
    return qs.mean(axis=0), qs.std(axis=0)


# ---- the NUTS reference ------------------------------------------------------------------------

_MEMO: dict[str, dict] = {}


def _fingerprint(target: Target, nuts: dict) -> str:
    h = hashlib.sha256(target.fingerprint)
    h.update(repr((target.names, sorted(nuts.items()), str(jnp.zeros(()).dtype))).encode())
    return h.hexdigest()


def nuts_reference(target: Target, nuts: dict, out_dir: str) -> dict:
    """The moments of the quantities under a long NumPyro NUTS run on the flat unconstrained
    density, with its diagnostics: ``{"mean", "sd", "mcse", "ess", "rhat", "divergences",
    "draws", "wall_time", "cached"}``; or ``{"error": why}`` when NUTS is switched off or NumPyro
    is missing. Cached in ``<out_dir>/nuts_reference.npz`` (and in this process) under a
    fingerprint of the data, the model and the NUTS settings."""
    if nuts["samples"] <= 0:
        return {"error": "switched off by algorithm.nuts.samples = 0"}
    fp = _fingerprint(target, nuts)
    path = os.path.join(out_dir, "nuts_reference.npz")
    if fp in _MEMO:
        if not os.path.exists(path):
            _save(path, fp, _MEMO[fp])
        return dict(_MEMO[fp], cached=True)
    ref = _load(path, fp)
    if ref is not None:
        _MEMO[fp] = ref
        return dict(ref, cached=True)
    try:
        from numpyro.diagnostics import effective_sample_size, split_gelman_rubin
        from numpyro.infer import MCMC, NUTS
    except ImportError as e:
        return {"error": f"NumPyro is not installed ({e}); install the test or bench extra for the NUTS reference"}
    guide, log_lik, log_prior = _flat(target)
    joint = log_joint(log_lik, log_prior=log_prior, num_data=target.num_data)
    full = target.full_batch
    t0 = time.time()
    key = jax.random.PRNGKey(nuts["seed"])
    k_init, k_run = jax.random.split(key)
    init = guide.loc0[None, :] + 0.1 * jax.random.normal(k_init, (nuts["chains"], guide.dim), guide.loc0.dtype)
    kernel = NUTS(potential_fn=lambda z: -joint(z, full), target_accept_prob=nuts["target_accept"])
    mcmc = MCMC(
        kernel,
        num_warmup=nuts["warmup"],
        num_samples=nuts["samples"],
        num_chains=nuts["chains"],
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(k_run, init_params=init, extra_fields=("diverging",))
    z = mcmc.get_samples(group_by_chain=True)
    qs = jax.jit(jax.vmap(jax.vmap(lambda v: target.quantities(guide.constrain(v)[0]))))(z)
    qs = np.asarray(qs, np.float64)
    ess = np.asarray(effective_sample_size(qs), np.float64)
    rhat = np.asarray(split_gelman_rubin(qs), np.float64) if nuts["samples"] >= 4 else np.full(qs.shape[-1], np.nan)
    flat = qs.reshape(-1, qs.shape[-1])
    sd = flat.std(axis=0)
    ref = {
        "mean": flat.mean(axis=0),
        "sd": sd,
        "ess": ess,
        "rhat": rhat,
        "mcse": sd / np.sqrt(ess),
        "divergences": int(np.sum(mcmc.get_extra_fields()["diverging"])),
        "draws": int(flat.shape[0]),
        "wall_time": time.time() - t0,
    }
    _MEMO[fp] = ref
    _save(path, fp, ref)
    return dict(ref, cached=False)


_REF_KEYS = ("mean", "sd", "ess", "rhat", "mcse", "divergences", "draws", "wall_time")


def _load(path: str, fp: str) -> Optional[dict]:
    """The reference cached in ``path`` under the fingerprint ``fp``; None when there is none, it
    is another run's, or the file cannot be read (truncated, not an .npz: a warning names it,
    and the reference is computed again and the file replaced)."""
    if not os.path.exists(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            if str(f["fingerprint"]) != fp:
                return None
            ref = {k: f[k] for k in _REF_KEYS}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        warnings.warn(
            f"{path}: the cached NUTS reference cannot be read ({type(e).__name__}: {e}); running NUTS again",
            stacklevel=3,
        )
        return None
    return {k: (v if v.ndim else v.item()) for k, v in ref.items()}


def _save(path: str, fp: str, ref: dict) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp.npz"
    np.savez(tmp, fingerprint=np.asarray(fp), **ref)
    os.replace(tmp, path)


# ---- the report --------------------------------------------------------------------------------


def compare(fits: dict, ref: Optional[tuple]) -> dict:
    """Per method: the largest and mean |mean_q - mean_ref| / sd_ref over the quantities, and the
    smallest, median and largest sd_q / sd_ref (None without a reference)."""
    out = {}
    for label, (mean, sd) in fits.items():
        if ref is None:
            out[label] = {}
            continue
        z = np.abs(mean - ref[0]) / ref[1]
        r = sd / ref[1]
        out[label] = {
            "max |Δmean|/sd": float(z.max()),
            "mean |Δmean|/sd": float(z.mean()),
            "min sd ratio": float(r.min()),
            "median sd ratio": float(np.median(r)),
            "max sd ratio": float(r.max()),
        }
    return out


def report(
    title: str,
    target: Target,
    runs: dict,
    fits: dict,
    refs: dict,
    ref_name: Optional[str],
    nuts: dict,
    out_dir: str,
    figure: str,
    notes: str = "",
) -> dict:
    """Writes ``results.md`` and ``figure`` and returns the summary.

    Args:
      runs: label -> RunResult of every method (the runner's first).
      fits: label -> (means, sds) of the quantities under each q.
      refs: reference name -> (means, sds) (NUTS, an exact one); ``ref_name`` the one compared to.
      nuts: what ``nuts_reference`` returned.
    """
    ref = refs.get(ref_name)
    cmp = compare(fits, ref)
    rows = []
    for label, res in runs.items():
        last = res.evals[-1] if res.evals else {}
        khat = last.get("khat")
        rows.append(
            {
                "method": label,
                "steps": res.num_steps,
                "ELBO": last.get("elbo_mc"),
                "k-hat": khat,
                "PSIS ESS": last.get("psis_ess"),
                "k-hat <= 0.7": None if khat is None or np.isnan(khat) else bool(khat <= KHAT_THRESHOLD),
                **cmp[label],
                "wall time (s)": res.wall_time,
            }
        )
    cols = list(rows[0])
    lines = [f"# {title}\n", notes, ""]
    if "error" in nuts:
        lines.append(f"NUTS reference: none ({nuts['error']}).\n")
    else:
        lines.append(
            f"NUTS reference (NumPyro): {nuts['draws']} draws, min ESS {np.min(nuts['ess']):.0f}, "
            f"max R-hat {np.max(nuts['rhat']):.4f}, {nuts['divergences']} divergences, "
            f"{nuts['wall_time']:.1f} s{' (cached)' if nuts.get('cached') else ''}.\n"
        )
    lines.append(
        f"Compared with: {ref_name or 'nothing (no reference)'}. ELBO, k-hat and PSIS ESS from "
        "the last evaluation's log-weights; Δmean and sd ratios over every reported quantity.\n"
    )
    lines.append(md_table(rows, cols))
    qrows = []
    for i, q in enumerate(target.names):
        row = {"quantity": q}
        for name, (m, s) in list(refs.items()) + list(fits.items()):
            row[name] = f"{m[i]:.3f} ± {s[i]:.3f}"
        qrows.append(row)
    lines.append("\nPosterior mean ± sd of every quantity:\n")
    lines.append(md_table(qrows, list(qrows[0])))
    with open(os.path.join(out_dir, "results.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    khats = {r["method"]: r["k-hat"] for r in rows}
    _plot(os.path.join(out_dir, figure), target.names, fits, refs, ref_name, khats, title)
    summary = {
        "table": rows,
        "quantities": list(target.names),
        "reference": ref_name,
        "moments": {
            k: {"mean": np.asarray(m).tolist(), "sd": np.asarray(s).tolist()}
            for k, (m, s) in list(refs.items()) + list(fits.items())
        },
    }
    if "error" in nuts:
        summary["nuts"] = {"error": nuts["error"]}
    else:
        summary["nuts"] = {k: nuts[k] for k in ("draws", "divergences", "wall_time", "cached")} | {
            "min_ess": float(np.min(nuts["ess"])),
            "max_rhat": float(np.max(nuts["rhat"])),
            "max_mcse_over_sd": float(np.max(nuts["mcse"] / nuts["sd"])),
        }
    return summary


@optional_plot
def _plot(path, names, fits, refs, ref_name, khats, title):
    from matplotlib.figure import Figure

    k = len(names)
    x = np.arange(k, dtype=float)
    n = len(fits) + len(refs)
    width = 0.8 / max(n, 1)
    fig = Figure(figsize=(min(16.0, max(7.0, 0.1 * k * n + 3)), 9))
    ax = fig.subplots(3, 1, sharex=True)
    ref = refs.get(ref_name)
    for j, (name, (m, s)) in enumerate(list(refs.items()) + list(fits.items())):
        off = (j - (n - 1) / 2) * width
        is_ref = name in refs
        label = name if is_ref else f"{name} (k-hat {cell(khats.get(name))})"
        style = dict(fmt="s" if is_ref else "o", ms=4, capsize=2, label=label)
        if is_ref and name == ref_name:
            style["color"] = "black"
        ax[0].errorbar(x + off, m, yerr=s, **style)
        if ref is not None and not (is_ref and name == ref_name):
            ax[1].plot(x + off, (m - ref[0]) / ref[1], style["fmt"], ms=4, color=ax[0].lines[-1].get_color())
            ax[2].plot(x + off, s / ref[1], style["fmt"], ms=4, color=ax[0].lines[-1].get_color())
    ax[0].set(ylabel="posterior mean ± sd", title=title)
    ax[0].legend(fontsize=8)
    ax[1].axhline(0.0, color="black", lw=0.8)
    ax[1].set_ylabel(f"(mean - {ref_name}) / sd" if ref is not None else "no reference")
    ax[2].axhline(1.0, color="black", lw=0.8)
    ax[2].set(ylabel=f"sd / sd of {ref_name}" if ref is not None else "no reference", xticks=x)
    ax[2].set_xticklabels(names, rotation=90 if k > 12 else 0, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
