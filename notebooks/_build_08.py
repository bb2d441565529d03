"""Builds notebooks/08_your_numpyro_model.ipynb (kept as source so the notebook's diff stays readable)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import code, install, md, write  # noqa: E402

cells = [
    md(
        "# Your NumPyro model, fitted by vijax\n\n"
        "A model written in NumPyro, as its users write it, goes to **vijax** as it is: "
        "`vijax.from_numpyro(model, *args, **kwargs)` turns it into a *target* (the log-joint, the map from the "
        "unconstrained space and the latent sites, through NumPyro's own handlers and `biject_to`); "
        "`vijax.inference.auto_family` matches an exponential family to each site's support; "
        "`vijax.inference.ngvi` fits it by natural-gradient VI (the conjugate-computation step of Khan and Lin "
        "2017). The fit is then checked with ArviZ as a NumPyro MCMC fit would be: `vijax.to_arviz(..., "
        "target=...)`, `az.summary`, PSIS-LOO (`az.loo`; Vehtari, Gelman and Gabry 2017) and a posterior "
        "predictive check. The model is the non-centred *eight schools* (Rubin 1981; Gelman et al., *Bayesian "
        "Data Analysis*, §5.5). Reference: docs/numpyro_tfp.md."
    ),
    install("plots", "numpyro", "arviz"),
    code(
        "import os\n"
        "import warnings\n"
        "import jax\n"
        "import jax.numpy as jnp\n"
        "import numpy as np\n"
        "import matplotlib.pyplot as plt\n"
        "import arviz as az\n"
        "import numpyro\n"
        "import numpyro.distributions as dist\n"
        "import vijax\n"
        "from vijax.inference import auto_family, log_weights, ngvi, sample\n"
        "SMALL = os.environ.get('VIJAX_NOTEBOOK_SMALL') == '1'  # the test suite runs a small version"
    ),
    md(
        "## The model, in NumPyro\n\n"
        "Eight schools' estimated coaching effects $y_j$ with known standard errors $\\sigma_j$; the effects "
        "$\\theta_j = \\mu + \\tau \\tilde\\theta_j$ share a mean $\\mu$ and a spread $\\tau$. Nothing in the "
        "model is written for vijax."
    ),
    code(
        "def eight_schools(sigma, y=None):\n"
        "    mu = numpyro.sample('mu', dist.Normal(0.0, 5.0))\n"
        "    tau = numpyro.sample('tau', dist.HalfCauchy(5.0))\n"
        "    with numpyro.plate('school', sigma.shape[0]):\n"
        "        theta_tilde = numpyro.sample('theta_tilde', dist.Normal(0.0, 1.0))\n"
        "        numpyro.deterministic('theta', mu + tau * theta_tilde)\n"
        "        numpyro.sample('y', dist.Normal(mu + tau * theta_tilde, sigma), obs=y)\n"
        "\n"
        "y = jnp.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])\n"
        "sigma = jnp.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])"
    ),
    md(
        "## One call: `vijax.fit`\n\n"
        "`vijax.fit(model, *args)` reads the model's structure, chooses a route per site (closed form where a site "
        "is conditionally conjugate, `ngvi` where every support has an exponential family, `bbvi` otherwise), "
        "prints that plan, runs until the relative change of the ELBO is below `tol` (Stan ADVI's rule) and "
        "returns a posterior with `sample`, `predictive`, `summary` and `to_arviz`."
    ),
    code("post = vijax.fit(eight_schools, sigma, y, max_steps=400 if SMALL else 2000)\nprint(post.summary())"),
    md(
        "## What `fit` did, step by step: target, families, natural-gradient VI\n\n"
        "`auto_family` gives a Normal for each real site ($\\mu$, $\\tilde\\theta$) and a Gamma for the "
        "positive $\\tau$. `ngvi(target)` uses them by default; its step is pure and jit-able, so the whole "
        "fit is one `lax.scan`."
    ),
    code(
        "target = vijax.from_numpyro(eight_schools, sigma, y)\n"
        "print({name: type(f).__name__ for name, f in auto_family(target).items()})\n"
        "\n"
        "alg = ngvi(target, num_samples=8)          # family=auto_family(target)\n"
        "num_steps = 200 if SMALL else 500\n"
        "run = jax.jit(lambda key: jax.lax.scan(lambda s, k: alg.step(k, s, None), alg.init(key),\n"
        "                                       jax.random.split(key, num_steps)))\n"
        "state, info = run(jax.random.PRNGKey(0))\n"
        "elbo = np.asarray(info.elbo)\n"
        "print(f'ELBO estimate, mean of the last 50 steps: {elbo[-50:].mean():.2f}')\n"
        "q_tau = state.q_global['tau']\n"
        "print(f'q(tau) = Gamma(shape {float(q_tau.concentration):.2f}, rate {float(q_tau.rate):.2f})')"
    ),
    code(
        "fig, ax = plt.subplots(figsize=(6, 3))\n"
        "ax.plot(elbo, lw=0.8); ax.set_ylim(np.percentile(elbo, 5) - 5, elbo.max() + 2)\n"
        "ax.set_xlabel('step'); ax.set_ylabel('ELBO estimate (8 draws)'); ax.set_title('ngvi on eight schools')\n"
        "plt.show()"
    ),
    md(
        "## Checked with ArviZ\n\n"
        "The draws of q go back through the model: `vijax.to_arviz(draws, key, target=target)` holds the "
        "posterior under the model's site names, the posterior predictive draws of `y` (NumPyro's `Predictive`), "
        "the pointwise log-likelihood (for LOO) and the observed data. The PSIS $\\hat k$ of q against the "
        "posterior (Yao et al. 2018) comes from `log_weights` of the same draws."
    ),
    code(
        "key = jax.random.PRNGKey(1)\n"
        "draws = sample(alg, key, state, 2000)      # {'mu': (2000,), 'tau': (2000,), 'theta_tilde': (2000, 8)}\n"
        "lw = log_weights(alg, key, state, None, 2000)  # the same draws (the same key)\n"
        "idata = vijax.to_arviz(draws, jax.random.PRNGKey(2), target=target, log_weights=lw)\n"
        "print('q against the posterior, PSIS k-hat:', round(float(idata.sample_stats.attrs['khat']), 2))\n"
        "az.summary(idata, var_names=['mu', 'tau', 'theta_tilde'], kind='stats')"
    ),
    code(
        "theta = vijax.predictive(target, draws, jax.random.PRNGKey(3), sites=['theta'])['theta']\n"
        "print('E[theta_j]:', np.round(np.asarray(theta.mean(0)), 1))\n"
        "with warnings.catch_warnings(record=True) as caught:   # ArviZ's warning, printed without its file path\n"
        "    warnings.simplefilter('always')\n"
        "    loo = az.loo(idata)\n"
        "for w in caught:\n"
        "    print('ArviZ:', w.message)\n"
        "print(loo)\n"
        "assert np.isfinite(loo.elpd_loo)\n"
        "print('schools with Pareto k > 0.7:', np.flatnonzero(np.asarray(loo.pareto_k) > 0.7).tolist())"
    ),
    code(
        "fig, ax = plt.subplots(figsize=(6, 3))\n"
        "az.plot_ppc(idata, num_pp_samples=100, ax=ax)\n"
        "plt.show()\n"
        "pp = np.asarray(idata.posterior_predictive['y']).reshape(-1, 8)\n"
        "inside = np.mean((np.percentile(pp, 5, 0) <= y) & (y <= np.percentile(pp, 95, 0)))\n"
        "print(f'schools whose y lies in its 90% posterior predictive interval: {inside:.0%}')"
    ),
    md(
        "Every check reads q as the posterior: it is as good as q is. Here $q(\\tau)$ is a Gamma (NumPyro's "
        "`AutoNormal` would give a log-normal), and the PSIS $\\hat k$ of q against the posterior, below 0.7, says "
        "that q's draws are usable for importance-sampling corrections (Yao et al. 2018). `az.loo`'s Pareto $k$ is "
        "another question: whether each school's leave-one-out posterior is close enough to q for importance "
        "sampling. With eight observations, each one moves the posterior, and the schools it flags (k > 0.7) are "
        "those whose PSIS-LOO term is unreliable (Vehtari, Gelman and Gabry 2017): their elpd needs an exact refit "
        "without the school (K-fold). The same model in `benchmarks/numpyro_models.py` "
        "is timed against NumPyro's SVI with `AutoNormal` and `AutoMultivariateNormal` (the Benchmarks page)."
    ),
]
write(cells, "notebooks/08_your_numpyro_model.ipynb")
