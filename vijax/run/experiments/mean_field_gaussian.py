"""Mean-field under-dispersion on a correlated Gaussian: Blei, Kucukelbir & McAuliffe (2017),
*Variational Inference: A Review for Statisticians*, §2.4 and Figure 1.

The posterior is a 2-D Gaussian N(mu, Sigma); the optimal mean-field q has means mu and variances
1 / Lambda_ii = sigma_i^2 (1 - rho^2) (Bishop 2006, §10.1.2). The report compares every fitted q with the
exact moments and this optimum; ``mean_field_gaussian.png`` draws their 2-sd ellipses, ``moments.png`` the
moments.
"""

from __future__ import annotations

import math
import os

import jax
import jax.numpy as jnp
import numpy as np

from vijax.run import ConfigError, Experiment, register_experiment

from ._common import needs
from ._posterior import ALG_BOUNDS, ALG_DEFAULTS, RUN_DEFAULTS, Target, experiment, memory_needs, report
from ._plotting import figure, optional_plot

_DEFAULTS = {
    "model": {"correlation": 0.9, "mean": [0.0, 0.0], "sd": [1.0, 1.0]},
    "algorithm": ALG_DEFAULTS  # nuts: not run, the exact moments are known
    | {"family": "meanfield", "init_scale": 0.5, "rank": 1, "learning_rate": 0.05, "ngvi_step_size": 0.1}
    | {"step_decay": 0.05, "baselines": ["bbvi-fullrank", "ngvi-meanfield"]},
    "run": dict(RUN_DEFAULTS, num_steps=3000),
}
_BOUNDS = {"model.correlation": "in (-1, 1)", "model.mean": "non-empty, each finite", "model.sd": "non-empty, each > 0"}
_BOUNDS |= ALG_BOUNDS
_LOG_2PI = math.log(2.0 * math.pi)


def covariance(model: dict) -> tuple[np.ndarray, np.ndarray]:
    """(mu (2,), Sigma (2, 2)) of the posterior; ConfigError naming the key for a bad one."""
    mu, sd, rho = np.asarray(model["mean"], np.float64), np.asarray(model["sd"], np.float64), model["correlation"]
    if mu.shape != (2,) or sd.shape != (2,):
        raise ConfigError(f"model.mean and model.sd must each hold 2 numbers, got {mu.tolist()} and {sd.tolist()}")
    return mu, np.array([[sd[0] ** 2, rho * sd[0] * sd[1]], [rho * sd[0] * sd[1], sd[1] ** 2]])


def mean_field_optimum(mu: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The optimal mean-field Gaussian of N(mu, Sigma) (Bishop 2006, eq. 10.12-10.13 at their fixed
    point): means mu, sds 1 / sqrt(Lambda_ii), Lambda = Sigma^-1."""
    return mu, 1.0 / np.sqrt(np.diag(np.linalg.inv(sigma)))


def target(model: dict) -> Target:
    """The Gaussian posterior as a ``Target`` (no data: the batch is mu, which the density reads)."""
    mu, sigma = covariance(model)
    prec = jnp.asarray(np.linalg.inv(sigma))
    log_norm = -_LOG_2PI - 0.5 * float(np.linalg.slogdet(sigma)[1])

    def log_lik(p, batch):
        r = p["z"] - batch
        return log_norm - 0.5 * r @ prec @ r

    return Target(
        log_lik,
        lambda p: jnp.zeros((), p["z"].dtype),
        {"z": jnp.zeros(2)},
        {"z": None},
        jnp.asarray(mu),
        None,
        lambda p: p["z"],
        ("z1", "z2"),
        mu.tobytes() + sigma.tobytes(),
    )


def _ellipse(ax, mean, cov, **style) -> None:
    t = np.linspace(0.0, 2.0 * np.pi, 200)
    pts = mean[:, None] + 2.0 * np.linalg.cholesky(cov) @ np.stack([np.cos(t), np.sin(t)])
    ax.plot(pts[0], pts[1], **style)


@optional_plot
def _plot_ellipses(path, mu, sigma, draws) -> None:
    with figure(path, (5.2, 5.0)) as (fig, ax):
        _ellipse(ax, mu, sigma, color="tab:purple", lw=2.5, label="exact posterior")
        opt_sd = mean_field_optimum(mu, sigma)[1]
        _ellipse(ax, mu, np.diag(opt_sd**2), color="black", lw=1.0, ls=":", label="mean-field optimum (closed form)")
        colors = iter(["tab:green", "tab:orange", "tab:blue", "tab:red"])
        for label, z in draws.items():
            _ellipse(ax, z.mean(0), np.cov(z.T), color=next(colors), lw=1.5, ls="--", label=label)
        ax.set_aspect("equal")
        ax.set(xlabel="z1", ylabel="z2", title="2-sd contours: exact and variational")
        ax.legend(fontsize=7, loc="upper left")


@register_experiment(
    "mean_field_gaussian",
    defaults=_DEFAULTS,
    bounds=_BOUNDS,
    memory=lambda config: memory_needs(config, 1, 2, "model.mean"),
)
@needs({"arviz": "the PSIS k-hat of each fit"})
def build(sections: dict, seed: int) -> Experiment:
    """Blei et al. 2017, Fig. 1: mean-field under-dispersion on a correlated 2-D Gaussian (bbvi
    mean-field / full-rank, ngvi) against the closed form"""
    model, section = sections["model"], sections["algorithm"]
    tgt = target(model)
    mu, sigma = covariance(model)

    def make_report(result, out_dir, runs, draws):
        refs = {"exact": (mu, np.sqrt(np.diag(sigma))), "mean-field optimum": mean_field_optimum(mu, sigma)}
        notes = (
            f"A 2-D Gaussian posterior with correlation {model['correlation']:g}, sds {model['sd']}. The optimal "
            f"mean-field q has sds 1/sqrt(Λ_ii) = sd_i sqrt(1 - ρ²) (ratio "
            f"{math.sqrt(1 - model['correlation'] ** 2):.4f} of the exact), whatever the algorithm; "
            f"{result.num_steps} steps, moments of q from {section['moment_draws']} draws.\n"
        )
        title = "Mean-field under-dispersion (Blei et al. 2017, Fig. 1)"
        nuts = {"error": "not run: the exact moments are known in closed form"}
        summary = report(title, tgt, runs, draws, refs, "exact", nuts, out_dir, "moments.png", notes)
        summary["mean_field_sd_ratio_closed_form"] = math.sqrt(1.0 - model["correlation"] ** 2)
        summary["correlation_of_q"] = {lbl: float(np.corrcoef(z.T)[0, 1]) for lbl, z in draws.items()}
        _plot_ellipses(os.path.join(out_dir, "mean_field_gaussian.png"), mu, sigma, draws)
        return summary

    key = jax.random.fold_in(jax.random.PRNGKey(seed), 1)
    return experiment(tgt, section, _DEFAULTS["algorithm"], sections["run"]["num_steps"], key, make_report)


__all__ = ["build", "covariance", "mean_field_optimum", "target"]
