"""Eight schools, non-centred (Rubin 1981; Gelman et al., *Bayesian Data Analysis*, §5.5), fitted
by black-box VI and checked with PSIS (Yao, Vehtari, Simpson and Gelman 2018) and NUTS.

Model: y_j ~ N(theta_j, sigma_j^2), theta_j = mu + tau theta~_j, theta~_j ~ N(0, 1), mu ~ N(0, mu_scale^2),
tau ~ half-Cauchy(0, tau_scale), tau positive through ``model.tau_bijector``. The report compares the
posterior means and sds of mu, tau and theta_1..8 under every q with NumPyro's NUTS and with the exact
moments by quadrature over tau (``exact_moments``), and writes ``results.md`` and ``eight_schools.png``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.stats import norm

from vijax.types import tfp_jax
from vijax.run import ConfigError, Experiment, MemoryNeed, register_experiment

from ._common import needs
from ._posterior import ALG_BOUNDS, ALG_DEFAULTS, RUN_DEFAULTS, Target, compare, experiment, memory_needs
from ._posterior import nuts_reference, report

Y = (28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0)
SIGMA = (15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0)
BIJECTORS = {"exp": "Exp", "softplus": "Softplus"}  # TFP bijectors (TFP is imported at its first use)

_DEFAULTS = {
    "model": {"mu_scale": 5.0, "tau_scale": 5.0, "tau_bijector": "exp"},
    "data": {"y": list(Y), "sigma": list(SIGMA)},
    "algorithm": dict(ALG_DEFAULTS, ngvi_step_size=0.02, quadrature_points=4000),
    "run": RUN_DEFAULTS,
}
_BOUNDS = {"model.mu_scale": "> 0", "model.tau_scale": "> 0", "data.y": "non-empty, each finite"}
_BOUNDS |= {"data.sigma": "non-empty, each > 0", **ALG_BOUNDS, "algorithm.quadrature_points": ">= 100"}


def _memory(config) -> list[MemoryNeed]:
    j = len(config["data"]["y"])
    quadrature = MemoryNeed(
        "the quadrature (algorithm.quadrature_points x the schools)",
        ("algorithm.quadrature_points", "data.y"),
        8 * config["algorithm"]["quadrature_points"] * j * 8,
    )
    return memory_needs(config, j, j + 2, "data.y") + [quadrature]


def target(model: dict, y, sigma) -> Target:
    """The non-centred posterior as a ``Target``; the batch is the data ``(y, sigma)``."""
    if model["tau_bijector"] not in BIJECTORS:
        raise ConfigError(f"model.tau_bijector: one of {tuple(BIJECTORS)}, got {model['tau_bijector']!r}")
    y, sigma = np.asarray(y, np.float64), np.asarray(sigma, np.float64)
    if y.ndim != 1 or y.shape != sigma.shape or y.size < 1 or not np.all(np.isfinite(y)) or not np.all(sigma > 0):
        raise ConfigError(
            f"data.sigma must be a list as long as data.y ({y.size}) of numbers > 0, got {sigma.tolist()} "
            f"(data.y: {y.tolist()})"
        )
    mu_scale, tau_scale = model["mu_scale"], model["tau_scale"]

    def log_lik(p, batch):
        yy, ss = batch
        return jnp.sum(norm.logpdf(yy, p["mu"] + p["tau"] * p["theta_tilde"], ss))

    def log_prior(p):
        tau = p["tau"] / tau_scale
        half_cauchy = math.log(2.0 / (math.pi * tau_scale)) - jnp.log1p(tau * tau)
        return norm.logpdf(p["mu"], 0.0, mu_scale) + half_cauchy + jnp.sum(norm.logpdf(p["theta_tilde"]))

    def quantities(p):
        return jnp.concatenate([p["mu"][None], p["tau"][None], p["mu"] + p["tau"] * p["theta_tilde"]])

    j = y.size
    template = {"mu": jnp.zeros(()), "tau": jnp.ones(()), "theta_tilde": jnp.zeros(j)}
    bijectors = {
        "mu": None,
        "tau": getattr(tfp_jax().bijectors, BIJECTORS[model["tau_bijector"]])(),
        "theta_tilde": None,
    }
    batch = (jnp.asarray(y, template["mu"].dtype), jnp.asarray(sigma, template["mu"].dtype))
    names = ("mu", "tau") + tuple(f"theta{i + 1}" for i in range(j))
    fingerprint = y.tobytes() + sigma.tobytes() + repr(sorted(model.items())).encode()
    return Target(log_lik, log_prior, template, bijectors, batch, None, quantities, names, fingerprint)


def exact_moments(
    y, sigma, mu_scale: float = 5.0, tau_scale: float = 5.0, num_points: int = 4000
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior means and sds of (mu, tau, theta_1..J) by quadrature over log tau.

    Given tau, mu and theta are Gaussian in closed form (Gelman et al., *BDA*, §5.4): with
    v_j = sigma_j^2 + tau^2, mu | tau, y ~ N(m, 1/P), P = 1/mu_scale^2 + sum_j 1/v_j,
    m = sum_j (y_j / v_j) / P; p(y | tau) is proportional to
    prod_j v_j^-1/2 exp(-y_j^2 / (2 v_j)) P^-1/2 exp(P m^2 / 2); and with B_j = sigma_j^2 / v_j,
    theta_j | tau, y has mean (1 - B_j) y_j + B_j m and variance (1 - B_j) sigma_j^2 + B_j^2 / P.
    The one remaining integral, over u = log tau in [-12, 9], is a Riemann sum on ``num_points``
    points (the integrand vanishes at both ends).

    Examples:
        >>> m, s = exact_moments([28, 8, -3, 7, -1, 1, 18, 12], [15, 10, 16, 11, 9, 11, 10, 18])
        >>> [round(float(v), 2) for v in (m[0], s[0], m[1], s[1])]
        [4.4, 3.32, 3.6, 3.22]
    """
    y, s2 = np.asarray(y, np.float64), np.asarray(sigma, np.float64) ** 2
    u = np.linspace(-12.0, 9.0, int(num_points))
    tau = np.exp(u)
    v = s2[None, :] + tau[:, None] ** 2
    prec = 1.0 / mu_scale**2 + np.sum(1.0 / v, axis=1)
    m = np.sum(y[None, :] / v, axis=1) / prec
    log_w = (
        -0.5 * np.sum(np.log(v), axis=1)
        - 0.5 * np.sum(y[None, :] ** 2 / v, axis=1)
        + 0.5 * prec * m**2
        - 0.5 * np.log(prec)
        - np.log1p((tau / tau_scale) ** 2)
        + u
    )
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    b = s2[None, :] / v
    th_mean = (1.0 - b) * y[None, :] + b * m[:, None]
    th_var = (1.0 - b) * s2[None, :] + b**2 / prec[:, None]
    means = np.concatenate([[w @ m, w @ tau], w @ th_mean])
    second = np.concatenate([[w @ (1.0 / prec + m**2), w @ tau**2], w @ (th_var + th_mean**2)])
    return means, np.sqrt(second - means**2)


@register_experiment("eight_schools", defaults=_DEFAULTS, bounds=_BOUNDS, memory=_memory)
@needs({"arviz": "the PSIS k-hat of each fit"})
def build(sections: dict, seed: int) -> Experiment:
    """eight schools (non-centred): bbvi full-rank / mean-field and ngvi against NUTS, with PSIS
    k-hat"""
    model, data, section = sections["model"], sections["data"], sections["algorithm"]
    tgt = target(model, data["y"], data["sigma"])

    def make_report(result, out_dir, runs, draws):
        refs = {}
        nuts = nuts_reference(tgt, section["nuts"], out_dir)
        if "error" not in nuts:
            refs["NUTS"] = (nuts["mean"], nuts["sd"])
        refs["exact"] = exact_moments(
            data["y"], data["sigma"], model["mu_scale"], model["tau_scale"], section["quadrature_points"]
        )
        ref_name = "NUTS" if "NUTS" in refs else "exact"
        check = ""
        if "NUTS" in refs:
            c = compare({"NUTS": refs["NUTS"]}, refs["exact"])["NUTS"]
            check = (
                f"NUTS against the exact moments (quadrature over tau): max |Δmean|/sd "
                f"{c['max |Δmean|/sd']:.3f}, sd ratios {c['min sd ratio']:.3f}–{c['max sd ratio']:.3f}.\n"
            )
        notes = (
            f"Non-centred, tau through {model['tau_bijector']}; mu ~ N(0, {model['mu_scale']:g}^2), tau ~ "
            f"half-Cauchy(0, {model['tau_scale']:g}). {result.num_steps} steps, S = {section['num_samples']}, "
            f"Adam rate {section['learning_rate']:g} (bbvi), rho {section['ngvi_step_size']:g} (ngvi), both "
            f"decaying to {section['step_decay']:g} x along a cosine; "
            f"ELBO and moments of q from {section['moment_draws']} draws, k-hat from the first "
            f"{section['psis_draws']}.\n\n{check}"
        )
        summary = report(
            "Eight schools (non-centred)", tgt, runs, draws, refs, ref_name, nuts, out_dir, "eight_schools.png", notes
        )
        summary["nuts_vs_exact"] = c if "NUTS" in refs else None
        return summary

    key = jax.random.fold_in(jax.random.PRNGKey(seed), 8)
    return experiment(tgt, section, _DEFAULTS["algorithm"], sections["run"]["num_steps"], key, make_report)
