"""Posterior predictive draws, pointwise log-likelihoods and ArviZ groups of a target fit
(``vijax.predictive``, ``vijax.interop.log_likelihood``, ``vijax.to_arviz(..., target=...)``): against
closed forms (the Gaussian likelihood, the exact leave-one-out predictive density of a conjugate
linear regression), TFP's own ``log_prob``, and NumPyro's NUTS (slow)."""

import math
import pathlib
import warnings

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from scipy import stats
from tensorflow_probability.substrates import jax as tfp

import vijax
from vijax.inference import bbvi, log_weights, sample
from vijax.interop import log_likelihood, observed_data, predictive, site_dims

from tests.interop._models import SIGMA, Y, eight_schools, normal_mean, regression

tfd = tfp.distributions
NOISE = 0.5  # the regression's known noise scale
RNG = np.random.default_rng(0)
N = 20
S = 4000  # draws
XS = jnp.asarray(RNG.uniform(-2.0, 2.0, N))
YS = jnp.asarray(1.0 + 0.7 * np.asarray(XS) + NOISE * RNG.standard_normal(N))


def linear(x, y=None):
    """Bayesian linear regression with known noise: a Gaussian posterior (a full-rank q is exact)."""
    w = numpyro.sample("w", dist.Normal(jnp.zeros(2), 2.0).to_event(1))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Normal(w[0] + w[1] * x, NOISE), obs=y)


def posterior(x, y):
    """The exact posterior N(m, S) of ``linear``'s weights."""
    design = np.stack([np.ones(len(x)), np.asarray(x)], 1)
    cov = np.linalg.inv(np.eye(2) / 4.0 + design.T @ design / NOISE**2)
    return cov @ design.T @ np.asarray(y) / NOISE**2, cov


def exact_elpd_loo(x, y):
    """sum_i log p(y_i | y_-i), each a Gaussian predictive density in closed form."""
    total = 0.0
    for i in range(len(y)):
        m, cov = posterior(np.delete(x, i), np.delete(y, i))
        row = np.array([1.0, float(x[i])])
        total += stats.norm.logpdf(float(y[i]), row @ m, math.sqrt(NOISE**2 + row @ cov @ row))
    return total


@pytest.fixture(scope="module")
def fit():
    """The target and S draws of its exact posterior (what a full-rank q reaches: the slow test
    fits one); one number of draws throughout, so that the compiled operations are shared."""
    m, cov = posterior(XS, YS)
    w = m + np.random.default_rng(1).standard_normal((S, 2)) @ np.linalg.cholesky(cov).T
    return vijax.from_numpyro(linear, XS, YS), {"w": jnp.asarray(w)}


def test_pointwise_log_likelihood_is_the_gaussian_likelihood(fit):
    target, draws = fit
    ll = log_likelihood(target, draws)
    assert set(ll) == {"y"} and ll["y"].shape == (S, N)
    wn = np.asarray(draws["w"])
    want = stats.norm.logpdf(np.asarray(YS), wn[:, :1] + wn[:, 1:] * np.asarray(XS), NOISE)
    np.testing.assert_allclose(ll["y"], want, rtol=1e-10)
    chains = log_likelihood(target, {"w": draws["w"].reshape(2, S // 2, 2)})  # leading axes (chains, draws)
    np.testing.assert_allclose(chains["y"].reshape(S, N), ll["y"])
    np.testing.assert_allclose(observed_data(target)["y"], YS)


def test_subsampled_plate_gives_the_minibatch_terms_unscaled():
    x, t = jnp.linspace(-1.0, 1.0, 8), jnp.arange(8.0)
    target = vijax.from_numpyro(regression, x, t, subsample_size=2)
    draws = {"w": jnp.array([[0.5, 1.0]]), "noise": jnp.array([2.0])}
    ll = log_likelihood(target, draws, {"data": jnp.array([1, 6])})["t"]
    want = stats.norm.logpdf(np.asarray(t)[[1, 6]], 0.5 + np.asarray(x)[[1, 6]], 2.0)
    np.testing.assert_allclose(ll[0], want, rtol=1e-10)


def test_predictive_draws_follow_the_likelihood_at_each_draw():
    y = jnp.array([0.5, 1.5, 1.0])
    target = vijax.from_numpyro(normal_mean, y)
    mu = jnp.concatenate([jnp.full(S // 2, -2.0), jnp.full(S // 2, 3.0)])
    pred = predictive(target, {"mu": mu}, jax.random.PRNGKey(0))["y"]
    assert pred.shape == (S, 3)
    for half, centre in ((pred[: S // 2], -2.0), (pred[S // 2 :], 3.0)):  # y | mu ~ N(mu, 1), 3 S / 2 values
        assert abs(float(half.mean()) - centre) < 4 / math.sqrt(1.5 * S)
        assert abs(float(half.std()) - 1.0) < 4 * math.sqrt(0.5 / (1.5 * S))
    both = predictive(target, {"mu": mu}, jax.random.PRNGKey(1), sites=["y", "mu"])
    np.testing.assert_allclose(both["mu"], mu)  # a latent site returns its draws
    # new inputs through the batch: the prediction at x_new
    target = vijax.from_numpyro(linear, XS, YS)
    x_new = jnp.array([-1.0, 0.0, 2.0])
    w = jnp.tile(jnp.array([1.0, 0.5]), (S, 1))
    pred = predictive(target, {"w": w}, jax.random.PRNGKey(2), {"x": x_new, "y": None})["y"]
    assert pred.shape == (S, 3)
    np.testing.assert_allclose(pred.mean(0), 1.0 + 0.5 * x_new, atol=4 * NOISE / math.sqrt(S))


def test_tfp_pointwise_log_likelihood_and_predictive():
    joint = tfd.JointDistributionNamed(
        dict(
            mu=tfd.Normal(0.0, 10.0),
            sigma=tfd.HalfNormal(2.0),
            y=lambda mu, sigma: tfd.Sample(tfd.Normal(mu, sigma), 4),
        )
    )
    y = jnp.array([0.5, 1.5, 1.0, 2.5])
    target = vijax.from_tfp(joint, observed={"y": y})
    draws = {"mu": jnp.array([0.0, 1.0]), "sigma": jnp.array([1.0, 2.0])}
    ll = log_likelihood(target, draws)["y"]
    want = stats.norm.logpdf(np.asarray(y), np.array([[0.0], [1.0]]), np.array([[1.0], [2.0]]))
    np.testing.assert_allclose(ll, want, rtol=1e-6)
    part = joint.log_prob_parts(dict(mu=1.0, sigma=2.0, y=y))["y"]
    np.testing.assert_allclose(ll[1].sum(), part, rtol=1e-6)  # the terms the part's log_prob sums
    many = {"mu": jnp.full(S, 3.0), "sigma": jnp.full(S, 0.5)}
    pred = predictive(target, many, jax.random.PRNGKey(0))["y"]
    assert pred.shape == (S, 4)
    assert abs(float(pred.mean()) - 3.0) < 4 * 0.5 / math.sqrt(4 * S)
    np.testing.assert_allclose(observed_data(target)["y"], y)
    assert site_dims(target) == {"mu": (), "sigma": (), "y": ("y_dim_0",)}  # no plates: ArviZ's names


def test_to_arviz_of_a_target_and_its_loo_match_the_exact_leave_one_out(fit):
    target, draws = fit
    idata = vijax.to_arviz(draws, jax.random.PRNGKey(2), target=target, num_chains=2)
    for group in ("posterior", "posterior_predictive", "log_likelihood", "observed_data"):
        assert group in idata.groups(), group
    assert idata.posterior["w"].shape == (2, S // 2, 2)
    assert idata.posterior_predictive["y"].shape == idata.log_likelihood["y"].shape == (2, S // 2, N)
    np.testing.assert_allclose(idata.observed_data["y"], YS)
    np.testing.assert_allclose(idata.posterior["w"].values.reshape(S, 2), draws["w"], rtol=1e-6)
    # the plate names the data axis, as az.from_numpyro names it
    assert idata.log_likelihood["y"].dims == idata.posterior_predictive["y"].dims == ("chain", "draw", "data")
    assert idata.observed_data["y"].dims == ("data",) and idata.posterior["w"].dims == ("chain", "draw", "w_dim_0")
    # the predictive draws spread by the noise and the posterior: var = NOISE^2 + x' cov x
    m, cov = posterior(XS, YS)
    design = np.stack([np.ones(N), np.asarray(XS)], 1)
    want = NOISE**2 + np.einsum("ni,ij,nj->n", design, cov, design)
    var = idata.posterior_predictive["y"].values.reshape(S, N).var(0)
    np.testing.assert_allclose(var, want, rtol=4 * math.sqrt(2 / S))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = az.loo(idata, pointwise=True)
    exact = exact_elpd_loo(XS, YS)
    # PSIS-LOO of 4000 draws of the exact posterior: Monte Carlo error of order 0.01 per point
    assert float(np.max(loo.pareto_k)) < 0.5
    assert abs(float(loo.elpd_loo) - exact) < 0.1, (float(loo.elpd_loo), exact, float(loo.se))
    # restarts' chains: (C, S) leading axes, log-weights with them
    stacked = jax.tree.map(lambda a: a.reshape((4, S // 4) + a.shape[1:]), draws)
    chains = vijax.to_arviz(stacked, jax.random.PRNGKey(2), target=target, log_weights=jnp.zeros(S))
    assert chains.posterior["w"].shape == (4, S // 4, 2) and chains.sample_stats["log_weight"].shape == (4, S // 4)


@pytest.mark.slow
def test_loo_of_a_bbvi_fit_agrees_with_nuts():
    """bbvi full-rank fit of the linear regression against NumPyro's NUTS: elpd_loo within the
    reported standard errors (measured: -10.58 (SE 1.25) against NUTS -10.50 (SE 1.24); the exact
    leave-one-out elpd is -10.52)."""
    from numpyro.infer import MCMC, NUTS

    target = vijax.from_numpyro(linear, XS, YS)
    alg = bbvi(target, family="fullrank", schedule=0.02, num_samples=8)
    state = alg.init(jax.random.PRNGKey(0))

    def run(s, keys):
        return jax.lax.scan(lambda s, k: (alg.step(k, s, None)[0], None), s, keys)[0]

    state = jax.jit(run)(state, jax.random.split(jax.random.PRNGKey(1), 3000))
    idata = vijax.to_arviz(sample(alg, jax.random.PRNGKey(2), state, 4000), jax.random.PRNGKey(3), target=target)
    mcmc = MCMC(NUTS(linear), num_warmup=300, num_samples=1000, progress_bar=False)
    with jax.numpy_rank_promotion("allow"):  # NumPyro's and ArviZ's code broadcast by it
        mcmc.run(jax.random.PRNGKey(4), XS, YS)
        nuts = az.from_numpyro(mcmc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo_vi, loo_nuts = az.loo(idata), az.loo(nuts)
        table = az.compare({"vijax": idata, "nuts": nuts})
    assert abs(loo_vi.elpd_loo - loo_nuts.elpd_loo) < min(loo_vi.se, loo_nuts.se)
    assert abs(loo_vi.elpd_loo - exact_elpd_loo(XS, YS)) < 0.2
    print(
        f"elpd_loo vijax {loo_vi.elpd_loo:.3f} (SE {loo_vi.se:.3f}), NUTS {loo_nuts.elpd_loo:.3f} (SE {loo_nuts.se:.3f})"
    )
    assert set(table.index) == {"vijax", "nuts"}
    for group in ("posterior", "log_likelihood", "observed_data"):  # the same names and dims as NumPyro's
        for name in getattr(nuts, group).data_vars:
            assert getattr(idata, group)[name].dims == getattr(nuts, group)[name].dims, (group, name)
    # the posterior predictive check runs as on a NumPyro fit
    import matplotlib

    matplotlib.use("Agg")
    az.plot_ppc(idata, num_pp_samples=50)


def test_draws_outside_a_sites_support_are_named():
    """Draws a user gives (not from vijax's q) that are NaN or outside the site's support made the
    predictive draws NaN without a word; they are refused, naming the site, the count and the first."""
    target = vijax.from_numpyro(eight_schools, SIGMA, Y)
    draws = {"mu": jnp.zeros(4), "tau": jnp.ones(4), "theta_tilde": jnp.zeros((4, 8))}
    predictive(target, draws, jax.random.PRNGKey(0))
    with pytest.raises(
        ValueError, match=r"^draws\['mu'\]: 1 entry is not finite or outside the site's support \(real\)"
    ):
        predictive(target, {**draws, "mu": draws["mu"].at[2].set(jnp.nan)}, jax.random.PRNGKey(0))
    bad_tau = {**draws, "tau": -draws["tau"]}
    message = r"^draws\['tau'\]: 4 entries are not finite or outside the site's support \(positive\); the first, -1\.0, at \[0\]"
    with pytest.raises(ValueError, match=message):
        predictive(target, bad_tau, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=message):
        vijax.interop.complete_conditional(target, "mu", {n: v for n, v in bad_tau.items() if n != "mu"})


def test_site_dims_name_a_plates_axes():
    target = vijax.from_numpyro(eight_schools, SIGMA, Y)
    dims = site_dims(target)
    assert dims == {"mu": (), "tau": (), "theta_tilde": ("J",), "obs": ("J",)}


def test_bad_input_is_named():
    target = vijax.from_numpyro(linear, XS, YS)
    w = {"w": jnp.zeros((3, 2))}
    with pytest.raises(ValueError, match="sites"):
        predictive(target, w, jax.random.PRNGKey(0), sites=["z"])
    with pytest.raises(ValueError, match=r"draws\['v'\]"):
        predictive(target, {**w, "v": jnp.zeros(3)}, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="draws"):
        log_likelihood(target, {"w": jnp.zeros(2)})  # no draw axis
    with pytest.raises(ValueError, match="key"):
        predictive(target, w, None)

    def prior_only():
        numpyro.sample("z", dist.Normal(0.0, 1.0))

    bare = vijax.from_numpyro(prior_only)
    with pytest.raises(ValueError, match="target"):
        log_likelihood(bare, {"z": jnp.zeros(3)})
    with pytest.raises(ValueError, match="sites"):
        predictive(bare, {"z": jnp.zeros(3)}, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="target"):
        predictive(lambda p, b: 0.0, w, jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(0)
    for kw, name in [
        (dict(names=["a"]), "names"),
        (dict(num_draws=10), "num_draws"),
        (dict(num_chains=2, q_or_draws={"w": jnp.zeros((3, 2))}), "num_chains"),
        (dict(q_or_draws={"v": jnp.zeros((3, 2))}), "q_or_draws"),
        (dict(q_or_draws={"w": jnp.zeros((3, 5))}), "q_or_draws"),
        (dict(key=None), "key"),
    ]:
        args = {"q_or_draws": w, "key": key, "target": target, **kw}
        with pytest.raises(ValueError, match=name):
            vijax.to_arviz(args.pop("q_or_draws"), args.pop("key"), **args)
    with pytest.raises(ValueError, match="batch"):
        vijax.to_arviz(w, key, batch={"x": XS})


@pytest.mark.slow
def test_the_guide_example_runs():
    """The example of docs/numpyro_tfp.md's section on checks and comparisons, as written (slow:
    two full-rank fits compile, about 14 s of CPU; the pieces it runs are tested above)."""
    import matplotlib

    matplotlib.use("Agg")
    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "numpyro_tfp.md").read_text()
    section = text[text.index("## Checks and comparisons") :]
    code = section[section.index("```python\n") + len("```python\n") :]
    code = code[: code.index("```")]
    scope: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, "docs/numpyro_tfp.md", "exec"), scope)
    assert set(scope["table"].index) == {"elbo", "renyi"}
    # both fits are near the posterior: their elpd_loo agree within the reported standard error
    assert abs(scope["table"]["elpd_loo"].diff().iloc[-1]) < scope["table"]["se"].min()
    import matplotlib.pyplot as plt

    plt.close("all")


def _eight_schools_with_theta(sigma, y=None):
    """Eight schools with the school effects as a deterministic site."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("J", sigma.shape[0]):
        theta_tilde = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0))
        theta = numpyro.deterministic("theta", mu + tau * theta_tilde)
        numpyro.sample("obs", dist.Normal(theta, sigma), obs=y)


def test_to_arviz_puts_deterministic_sites_in_the_posterior():
    """A NumPyro deterministic site is a function of the draws: the posterior group holds it (named
    and dimensioned as az.from_numpyro does), equal to the function at every draw."""
    target = vijax.from_numpyro(_eight_schools_with_theta, SIGMA, Y)
    k = jax.random.split(jax.random.PRNGKey(3), 3)
    draws = {
        "mu": jax.random.normal(k[0], (40,)),
        "tau": jnp.exp(jax.random.normal(k[1], (40,))),
        "theta_tilde": jax.random.normal(k[2], (40, 8)),
    }
    idata = vijax.to_arviz(draws, jax.random.PRNGKey(4), target=target)
    theta = draws["mu"][:, None] + draws["tau"][:, None] * draws["theta_tilde"]
    np.testing.assert_allclose(idata.posterior["theta"].values[0], theta, rtol=1e-6)
    assert idata.posterior["theta"].dims == ("chain", "draw", "J")
    assert set(idata.posterior_predictive.data_vars) == {"obs"}
    assert set(idata.log_likelihood.data_vars) == {"obs"}


@pytest.mark.slow
def test_evaluations_under_a_callers_jit_give_the_concrete_values():
    """``sample``, ``log_weights``, ``predictive`` and ``log_likelihood`` called on concrete values
    and inside a caller's ``jit`` give the same values."""
    from vijax.inference import ngvi

    target = vijax.from_numpyro(eight_schools, SIGMA, Y)
    alg = ngvi(target)
    state = alg.init(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(7)

    def evaluate(key):
        draws = sample(alg, key, state, 37)
        weights = log_weights(alg, key, state, None, 37)
        return draws, predictive(target, draws, key), log_likelihood(target, draws), weights

    concrete, traced = evaluate(key), jax.jit(evaluate)(key)
    for got, want in zip(jax.tree_util.tree_leaves(traced), jax.tree_util.tree_leaves(concrete)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_to_arviz_of_a_target_holds_the_predictive_draws_and_log_likelihood():
    target = vijax.from_numpyro(eight_schools, SIGMA, Y)
    draws = {"mu": jnp.zeros(43), "tau": jnp.ones(43), "theta_tilde": jnp.zeros((43, 8))}
    idata = vijax.to_arviz(draws, jax.random.PRNGKey(0), target=target)
    assert idata.log_likelihood["obs"].shape == (1, 43, 8) and idata.posterior_predictive["obs"].shape == (1, 43, 8)


def _eight_schools_tfp():
    return tfd.JointDistributionNamed(
        dict(
            mu=tfd.Normal(jnp.float64(0.0), 5.0),
            tau=tfd.HalfCauchy(jnp.float64(0.0), 5.0),
            theta_tilde=tfd.Sample(tfd.Normal(jnp.float64(0.0), 1.0), 8),
            obs=lambda mu, tau, theta_tilde: tfd.Independent(tfd.Normal(mu + tau * theta_tilde, SIGMA), 1),
        )
    )


@pytest.mark.parametrize("library", ["numpyro", "tfp"])
@pytest.mark.slow
def test_predictive_draws_every_latent_site_from_the_given_draws(library):
    """Eight schools (three latent sites): at q's draws, ``predictive`` returns each latent site's
    given draws, site by site and bit for bit, and the replicates of ``obs`` are N(mu + tau
    theta_tilde, sigma) at those draws: their standardised residuals have mean 0 and standard
    deviation 1 within 4 standard errors (8 S values). A site drawn from its prior instead
    would fail both."""
    if library == "numpyro":
        target = vijax.from_numpyro(eight_schools, SIGMA, Y)
    else:
        target = vijax.from_tfp(_eight_schools_tfp(), observed={"obs": Y})
    alg = bbvi(target, family="meanfield")
    num = 500
    draws = sample(alg, jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0)), num)
    assert sorted(draws) == ["mu", "tau", "theta_tilde"]
    pred = predictive(target, draws, jax.random.PRNGKey(2), sites=["mu", "tau", "theta_tilde", "obs"])
    for name in ("mu", "tau", "theta_tilde"):
        np.testing.assert_array_equal(pred[name], draws[name])
    loc = draws["mu"][:, None] + draws["tau"][:, None] * draws["theta_tilde"]
    z = (np.asarray(pred["obs"]) - np.asarray(loc)) / np.asarray(SIGMA)
    count = z.size
    assert abs(z.mean()) < 4 / math.sqrt(count)
    assert abs(z.std() - 1.0) < 4 * math.sqrt(0.5 / count)
