"""What the black-box VI experiments (``bbvi_logistic``, ``eight_schools``, ``mean_field_gaussian``) share:
a posterior as a ``Target``, the fitted methods ``"<algorithm>-<family>"`` (``bbvi`` on the parameter
pytree, ``ngvi`` on the flat unconstrained z, through ``GaussianGuide.constrain``), their PSIS diagnostic
(Yao et al. 2018), a cached NumPyro NUTS reference, and the report.
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
from vijax._validate import require
from ._common import cell, md_table
from ._plotting import figure, optional_plot

METHODS = ("bbvi-fullrank", "bbvi-meanfield", "bbvi-lowrank", "ngvi-fullrank", "ngvi-meanfield")
NGVI_FAMILIES = ("fullrank", "meanfield")
# The algorithm section: bbvi's settings (num_samples also ngvi's); gradient: ngvi's estimate (None: its default)
ALG_DEFAULTS = {"name": "bbvi", "family": "fullrank", "optimizer": "adam", "estimator": "reparam", "num_samples": 8}
ALG_DEFAULTS |= {"init_scale": 0.1, "rank": 2, "gradient": None}
# Adam's rate (bbvi) and rho (ngvi), both decaying to step_decay of themselves along a cosine (1.0: constant)
ALG_DEFAULTS |= {"learning_rate": 0.01, "ngvi_step_size": 0.05, "step_decay": 0.1}
ALG_DEFAULTS |= {"baselines": ["bbvi-meanfield", "ngvi-fullrank"]}
# moment_draws: draws of q at each evaluation (ELBO, means, sds), the first psis_draws give k-hat; nuts: the
# reference (samples 0: none)
ALG_DEFAULTS |= {"psis_draws": 2000, "moment_draws": 20000}
ALG_DEFAULTS |= {"nuts": {"warmup": 1000, "samples": 5000, "chains": 4, "target_accept": 0.9, "seed": 1}}
RUN_DEFAULTS = {"num_steps": 5000, "chunk_size": 500, "eval_every": 1000, "x64": True, "progress": False}
ALG_BOUNDS = {"algorithm.num_samples": ">= 1", "algorithm.init_scale": "> 0", "algorithm.rank": ">= 1"}
ALG_BOUNDS |= {"algorithm.learning_rate": "> 0", "algorithm.ngvi_step_size": "in (0, 1]"}
ALG_BOUNDS |= {"algorithm.step_decay": "in (0, 1]", "algorithm.psis_draws": "in [10, algorithm.moment_draws]"}
ALG_BOUNDS |= {"algorithm.moment_draws": ">= 10", "algorithm.nuts.warmup": ">= 0", "algorithm.nuts.samples": ">= 0"}
# NUTS's split R-hat compares chains: 2 or more
ALG_BOUNDS |= {"algorithm.nuts.chains": ">= 2", "algorithm.nuts.target_accept": "in (0, 1)"}
ALG_BOUNDS |= {"algorithm.nuts.seed": SEED_BOUND}


def memory_needs(config, num_data: int, num_params: int, data_key: str) -> list[MemoryNeed]:
    """The arrays of a run on ``num_data`` data and ``num_params`` parameters (``data_key`` sets the data's size)."""
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
    """A posterior: ``log_lik(params, batch)`` (summed over the batch), ``log_prior(params)``, the
    parameter pytree's ``template`` (q's initial centre), ``bijectors`` (None leaves: unconstrained),
    the ``full_batch``, ``num_data`` (N for minibatch scaling, or None), the reported
    ``quantities(params) -> (K,)`` and their ``names``, and a ``fingerprint`` of data and model (bytes)."""

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
    """A fitted method: ``label``, ``algorithm``, and the jitted ``draws(state, key) -> (quantities (n, K),
    log p(x, z) - log q(z) (n,))`` of n = ``algorithm.moment_draws`` draws z ~ q on the full data."""

    label: str
    algorithm: Any
    draws: Callable


def _flat(target: Target):
    """(the guide whose ``constrain`` maps z to the parameters, flat log-likelihood, flat log-prior + log-Jacobian)."""
    guide = GaussianGuide(target.template, "meanfield", bijectors=target.bijectors)

    def log_prior(z):
        params, log_det = guide.constrain(z)
        return target.log_prior(params) + log_det

    return guide, lambda z, batch: target.log_lik(guide.constrain(z)[0], batch), log_prior


def _method(label: str, name: str, family: str, section: dict, target: Target, num_steps: int, make) -> Method:
    """``label``'s Method, its algorithm ``make(model, schedule, extras)`` with the settings the experiment supplies."""
    decay = section["step_decay"]

    def schedule(step):  # a cosine decay to ``decay * step`` over the run
        return step if decay == 1.0 or num_steps == 0 else optax.cosine_decay_schedule(step, num_steps, alpha=decay)

    n, full = section["moment_draws"], target.full_batch
    spec = ALGORITHMS.get(name)
    if spec is not None and "init_params" in spec.settings:  # a guide on the parameter pytree (bbvi)
        extras = {"init_params": target.template, "bijectors": target.bijectors, "log_prior": target.log_prior}
        alg = make(target.log_lik, schedule(section["learning_rate"]), extras)
        quantities = target.quantities
    else:
        if family not in NGVI_FAMILIES:
            raise ConfigError(
                f"algorithm.family: {name!r} fits q on the flat unconstrained vector, as one of "
                f"{NGVI_FAMILIES}; got {family!r}"
            )
        guide, log_lik, log_prior = _flat(target)
        loc = guide.loc0
        var = jnp.full(loc.shape, section["init_scale"] ** 2, loc.dtype)
        q0 = (
            expfam.MultivariateNormal.from_mean_covariance(loc, jnp.diag(var))
            if family == "fullrank"
            else expfam.Normal.from_mean_variance(loc, var)
        )
        alg = make(log_lik, schedule(section["ngvi_step_size"]), {"family": q0, "log_prior": log_prior})
        quantities = lambda z: target.quantities(guide.constrain(z)[0])

    def draws(st, key):  # the same key: the same draws for the quantities and the log-weights
        return jax.vmap(quantities)(sample(alg, key, st, n)), log_weights(alg, key, st, full, n)

    return Method(label, alg, jax.jit(draws))


def methods(section: dict, defaults: dict, target: Target, num_steps: int) -> tuple[Method, list[Method]]:
    """The runner's method (``configured_algorithm``) and the baselines' (``make_algorithm`` with the
    section's settings each takes), checked (ConfigError naming the key); step sizes decay over ``num_steps``."""
    name, family = section["name"], section["family"]
    main_label, others = f"{name}-{family}", list(section["baselines"])
    if any(m not in METHODS for m in others) or len(set(others)) != len(others):
        raise ConfigError(f"algorithm.baselines must be distinct names from {METHODS}, got {others}")
    if main_label in others:
        raise ConfigError(f"algorithm.baselines: {main_label!r} is the runner's own method (algorithm.name-family)")
    if name not in ALGORITHMS:  # let configured_algorithm name it
        configured_algorithm(section, defaults, None)

    common = {"num_data": target.num_data, "schedule_keys": ("learning_rate", "ngvi_step_size")}

    def configured(model, step, extras):
        added = {k: None for k in extras if k not in section}
        return configured_algorithm(section | added, defaults | added, model, schedule=step, resolved=extras, **common)

    def baseline(label):
        b_name, _, b_family = label.partition("-")
        settings = {k: section[k] for k in ALGORITHMS[b_name].settings if k in section}

        def make(model, step, extras):  # ngvi's extras replace the family by its q
            return make_algorithm(b_name, model, num_data=target.num_data, schedule=step, **settings | extras)

        settings["family"] = b_family
        return _method(label, b_name, b_family, section, target, num_steps, make)

    return _method(main_label, name, family, section, target, num_steps, configured), [baseline(b) for b in others]


def evaluator(method: Method, num_psis: int, key) -> Callable:
    """``state -> {elbo_mc, khat, psis_ess}``: the ELBO as the mean log-weight of ``method.draws`` (a
    fixed key: every evaluation sees the same noise), and the PSIS k-hat and ESS of the first
    ``num_psis``. PSIS needs ArviZ (``vijax-toolkit[arviz]``): without it this raises the ImportError
    naming the extra when the experiment is built, not at the run's first evaluation."""
    require("arviz", "arviz", "this experiment (the PSIS k-hat of each fit)")

    def evaluate(state) -> dict:
        lw = np.asarray(method.draws(state, key)[1], np.float64)
        if np.any(np.isnan(lw)) or np.any(lw == np.inf):
            return {"elbo_mc": float("nan"), "khat": float("nan"), "psis_ess": float("nan")}
        r = psis(lw[:num_psis])
        return {"elbo_mc": float(np.mean(lw)), "khat": float(r.khat), "psis_ess": float(r.ess)}

    return evaluate


def experiment(target: Target, section: dict, defaults: dict, num_steps: int, key, make_report, batch_fn=None):
    """The ``Experiment`` of ``methods``: the runner's method from ``init(key, target.full_batch)``, the
    baselines after it, all on ``batch_fn(key, t)`` (None: the full batch) and evaluated by ``evaluator``
    with the fixed ``key``. The report is ``make_report(result, out_dir, runs, draws)``: ``runs`` maps each
    label to its RunResult (the runner's first), ``draws`` to its quantities at ``method.draws``."""
    main, others = methods(section, defaults, target, num_steps)
    batch_fn = batch_fn or (lambda key, t: target.full_batch)

    def report(result, out_dir, results):
        runs = {main.label: result} | {m.label: results[m.label] for m in others}
        draws = {m.label: np.asarray(m.draws(runs[m.label].state, key)[0], np.float64) for m in [main, *others]}
        return make_report(result, out_dir, runs, draws)

    evals = {m.label: evaluator(m, section["psis_draws"], key) for m in [main, *others]}
    baselines = tuple(Baseline(m.label, m.algorithm, batch_fn=batch_fn, eval_fn=evals[m.label]) for m in others)
    init = lambda k: main.algorithm.init(k, target.full_batch)  # noqa: E731
    return Experiment(main.algorithm, init, batch_fn, evals[main.label], report, baselines=baselines)


# ---- the NUTS reference ------------------------------------------------------------------------

_MEMO: dict[str, dict] = {}
_REF_KEYS = ("mean", "sd", "ess", "rhat", "mcse", "divergences", "draws", "wall_time")


def _fingerprint(target: Target, nuts: dict) -> str:
    h = hashlib.sha256(target.fingerprint)
    h.update(repr((target.names, sorted(nuts.items()), str(jnp.zeros(()).dtype))).encode())
    return h.hexdigest()


def nuts_reference(target: Target, nuts: dict, out_dir: str) -> dict:
    """The quantities' moments under a long NumPyro NUTS run on the flat unconstrained density, with
    its diagnostics: ``{"mean", "sd", "mcse", "ess", "rhat", "divergences", "draws", "wall_time",
    "cached"}``, or ``{"error": why}`` when switched off or NumPyro is missing. Cached in
    ``<out_dir>/nuts_reference.npz`` (and in this process) under a fingerprint of data, model and settings."""
    if nuts["samples"] <= 0:
        return {"error": "switched off by algorithm.nuts.samples = 0"}
    fp = _fingerprint(target, nuts)
    path = os.path.join(out_dir, "nuts_reference.npz")
    ref = _MEMO.get(fp) or _load(path, fp)
    if ref is not None:
        if not os.path.exists(path):
            _save(path, fp, ref)
        _MEMO[fp] = ref
        return dict(ref, cached=True)
    try:
        require("numpyro", "numpyro", "the NUTS reference")
        from numpyro.diagnostics import effective_sample_size, split_gelman_rubin
        from numpyro.infer import MCMC, NUTS
    except ImportError as e:
        return {"error": str(e)}

    guide, log_lik, log_prior = _flat(target)
    joint = log_joint(log_lik, log_prior=log_prior, num_data=target.num_data)
    t0 = time.time()
    k_init, k_run = jax.random.split(jax.random.PRNGKey(nuts["seed"]))
    init = guide.loc0[None, :] + 0.1 * jax.random.normal(k_init, (nuts["chains"], guide.dim), guide.loc0.dtype)
    kernel = NUTS(potential_fn=lambda z: -joint(z, target.full_batch), target_accept_prob=nuts["target_accept"])
    sizes = {"num_warmup": nuts["warmup"], "num_samples": nuts["samples"], "num_chains": nuts["chains"]}
    mcmc = MCMC(kernel, **sizes, chain_method="vectorized", progress_bar=False)
    mcmc.run(k_run, init_params=init, extra_fields=("diverging",))
    z = mcmc.get_samples(group_by_chain=True)
    qs = np.asarray(jax.jit(jax.vmap(jax.vmap(lambda v: target.quantities(guide.constrain(v)[0]))))(z), np.float64)
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


def _load(path: str, fp: str) -> Optional[dict]:
    """The reference cached in ``path`` under ``fp``; None when there is none, it is another run's, or
    the file cannot be read (a warning names it; the reference is then computed again)."""
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
    np.savez(path + ".tmp.npz", fingerprint=np.asarray(fp), **ref)
    os.replace(path + ".tmp.npz", path)


# ---- the report --------------------------------------------------------------------------------


def compare(fits: dict, ref: Optional[tuple]) -> dict:
    """Per method: the largest and mean |mean_q - mean_ref| / sd_ref over the quantities, and the
    smallest, median and largest sd_q / sd_ref (empty without a reference)."""
    out = {}
    for label, (mean, sd) in fits.items():
        if ref is None:
            out[label] = {}
            continue
        z, r = np.abs(mean - ref[0]) / ref[1], sd / ref[1]
        out[label] = {
            "max |Δmean|/sd": float(z.max()),
            "mean |Δmean|/sd": float(z.mean()),
            "min sd ratio": float(r.min()),
            "median sd ratio": float(np.median(r)),
            "max sd ratio": float(r.max()),
        }
    return out


def report(title, target, runs, draws, refs, ref_name, nuts, out_dir, figure, notes="") -> dict:
    """Writes ``results.md`` and ``figure`` and returns the summary.

    Args:
      runs, draws: what ``experiment`` gives ``make_report``.
      refs: reference name -> (means, sds) (NUTS, an exact one); ``ref_name`` the one compared to.
      nuts: what ``nuts_reference`` returned.
    """
    fits = {label: (z.mean(axis=0), z.std(axis=0)) for label, z in draws.items()}
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
    lines.append(md_table(rows, list(rows[0])))
    everything = {**refs, **fits}
    qrows = [
        {"quantity": q} | {name: f"{m[i]:.3f} ± {s[i]:.3f}" for name, (m, s) in everything.items()}
        for i, q in enumerate(target.names)
    ]
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
            k: {"mean": np.asarray(m).tolist(), "sd": np.asarray(s).tolist()} for k, (m, s) in everything.items()
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
    k = len(names)
    x = np.arange(k, dtype=float)
    n = len(fits) + len(refs)
    width = 0.8 / max(n, 1)
    with figure(path, (min(16.0, max(7.0, 0.1 * k * n + 3)), 9), 3, 1, sharex=True) as (fig, ax):
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
