"""``vijax.fit``: the route chosen per model (``plan_fit``, no fitting), refused routes and arguments, closed-form
posteriors (fast), the Posterior's pytree contract and methods, and NUTS references (``slow``)."""

import pickle

import pytest

numpyro = pytest.importorskip("numpyro")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
from numpyro.distributions.transforms import OrderedTransform  # noqa: E402

import vijax  # noqa: E402
from vijax.run import Posterior, compile_cache_dir, enable_compile_cache, plan_fit  # noqa: E402
from vijax.run._fit import EVAL_EVERY, MIN_PASSES  # noqa: E402

K = jnp.array([3.0, 1.0, 4.0, 2.0, 5.0])
EXPOSURE = jnp.array([1.0, 0.5, 2.0, 1.5, 1.0])


def gamma_poisson(exposure, k):
    rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
    with numpyro.plate("data", exposure.shape[0]):
        numpyro.sample("k", dist.Poisson(rate * exposure), obs=k)


def beta_bernoulli(y):
    p = numpyro.sample("p", dist.Beta(2.0, 3.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Bernoulli(p), obs=y)


def rate_and_weight(x, k):  # a conjugate Gamma rate beside a Normal weight that is not
    rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", k.shape[0]):
        numpyro.sample("k", dist.Poisson(rate * jnp.exp(w * x)), obs=k)


def logistic(x, y):
    w = numpyro.sample("w", dist.Normal(jnp.zeros(x.shape[1]), 1.0).to_event(1))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=x @ w), obs=y)


def ordered(y):  # an ordered vector: no exponential family matches its support
    base = dist.Normal(jnp.zeros(2), 3.0).to_event(1)
    c = numpyro.sample("c", dist.TransformedDistribution(base, OrderedTransform()))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(c[0] + c[1], 1.0), obs=y)


QUIET = dict(eval_every=10, progress=False)
X2 = jnp.array([[1.0, -0.5], [0.3, 1.2], [-1.0, 0.4], [0.8, 0.8], [-0.2, -1.5], [1.5, 0.1]])
Y2 = jnp.array([1.0, 1.0, 0.0, 1.0, 0.0, 1.0])


# ----------------------------------------------------------------------------- the plan


def test_plan_routes_each_model_by_its_structure():
    plan = plan_fit(gamma_poisson, EXPOSURE, K)
    assert plan.route == "conjugate" and plan.rows[0][:3] == ("rate", "Gamma", "closed form")
    plan = plan_fit(rate_and_weight, X2[:, 0], jnp.array([3.0, 1.0, 4.0, 2.0, 5.0, 2.0]))
    assert plan.route == "conjugate"
    assert {r.site: r.route for r in plan.rows} == {"rate": "closed form", "w": "ngvi"}
    assert "not linear" in [r for r in plan.rows if r.site == "w"][0].reason
    plan = plan_fit(logistic, X2, Y2)
    assert plan.route == "ngvi" and plan.rows[0][:3] == ("w", "Normal", "ngvi")
    plan = plan_fit(ordered, jnp.array([0.5, 1.0]))
    assert plan.route == "bbvi" and plan.rows[0].family == "Gaussian (fullrank)"
    assert "'other'" in plan.rows[0].reason
    text = str(plan)
    assert "route 'bbvi'" in text and "c" in text and "fullrank" in text


def test_forced_route_a_site_cannot_take_is_refused_naming_it():
    with pytest.raises(vijax.ArgumentError, match="route='ngvi': site 'c'") as e:
        plan_fit(ordered, jnp.array([0.5, 1.0]), route="ngvi")
    assert e.value.argument == "route"
    with pytest.raises(vijax.ArgumentError, match="route='conjugate': no site is conjugate; site 'w'"):
        plan_fit(logistic, X2, Y2, route="conjugate")
    assert plan_fit(logistic, X2, Y2, route="bbvi").route == "bbvi"
    assert plan_fit(logistic, X2, Y2, route="map").rows[0].family == "point (MAP)"


@pytest.mark.slow
@pytest.mark.parametrize("route", ["laplace", "map", "flow"])
def test_forced_routes_fit(route):
    """laplace, map_estimate and auto_flow's flow by route=: the means near the MAP point's (a flat-ish posterior:
    within 0.3 of each other in every coordinate)."""
    post = vijax.fit(logistic, X2, Y2, route=route, max_steps=300, eval_every=50, progress=False)
    ref = vijax.fit(logistic, X2, Y2, route="map", max_steps=300, eval_every=50, progress=False)
    assert post.plan.route == route
    np.testing.assert_allclose(post.summary()["w"]["mean"], ref.summary()["w"]["mean"], atol=0.3)


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        (dict(route="nuts"), "route"),
        (dict(tol=0.0), "tol"),
        (dict(tol=float("nan")), "tol"),
        (dict(max_steps=0), "max_steps"),
        (dict(max_steps=2.5), "max_steps"),
        (dict(eval_every=0), "eval_every"),
        (dict(seed=-1), "seed"),
        (dict(init="state"), "init"),
        (dict(objective="stl"), "objective"),
        (dict(family="meanfield"), "family"),  # every site in closed form: no family, no step size
        (dict(learning_rate=0.1), "learning_rate"),
        (dict(learning_rate=-0.1), "learning_rate"),
        (dict(learning_rate="fast"), "learning_rate"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs, argument):
    with pytest.raises(vijax.ArgumentError) as e:
        vijax.fit(gamma_poisson, EXPOSURE, K, progress=False, **kwargs)
    assert e.value.argument == argument


@pytest.mark.slow  # TFP's import
def test_a_tfp_joint_needs_its_observed_parts():
    tfp = pytest.importorskip("tensorflow_probability.substrates.jax")
    tfd = tfp.distributions
    joint = tfd.JointDistributionNamed(dict(rate=tfd.Gamma(2.0, 1.0), k=lambda rate: tfd.Sample(tfd.Poisson(rate), 5)))
    with pytest.raises(vijax.ArgumentError) as e:
        plan_fit(joint)
    assert e.value.argument == "observed"
    assert plan_fit(joint, observed={"k": K}).route == "conjugate"


# ----------------------------------------------------------------------------- closed forms


def test_a_model_argument_the_model_fails_on_is_refused_by_its_name():
    """A NaN exposure makes a Poisson rate NumPyro's own check refuses; counts as a Python list fail the model's
    arithmetic (a TypeError): each error names the argument."""
    with pytest.raises(vijax.ArgumentError, match="exposure: holds 1 non-finite entry .* at flat index 1") as e:
        vijax.fit(gamma_poisson, EXPOSURE.at[1].set(jnp.nan), K, progress=False)
    assert e.value.argument == "exposure"
    with pytest.raises(vijax.ArgumentError, match=r"k: a Python list of numbers.*pass jnp.asarray\(k\)") as e:
        vijax.fit(gamma_poisson, EXPOSURE, [3.0, 1.0, 4.0, 2.0, 5.0], progress=False)
    assert e.value.argument == "k"


def test_new_arguments_the_model_fails_on_are_refused_naming_the_ones_kept(gamma_post):
    """Three exposures beside the fit's five counts: the arguments not given keep the fit's values."""
    with pytest.raises(vijax.ArgumentError, match=r"the model fails on the new arguments .* fit's values \(k\)") as e:
        gamma_post.log_likelihood(jax.random.PRNGKey(0), 5, EXPOSURE[:3])
    assert e.value.argument == "args"
    with pytest.raises(vijax.ArgumentError, match="num_samples must be an integer >= 10") as e:
        gamma_post.psis(num_samples=5)  # the Pareto fit's fewest draws
    assert e.value.argument == "num_samples"
    with pytest.raises(vijax.ArgumentError, match="num_samples must be an integer >= 2"):
        gamma_post.summary(num_samples=1)  # an sd of one draw: 0


@pytest.fixture(scope="module")
def gamma_post():
    return vijax.fit(gamma_poisson, EXPOSURE, K, max_steps=20, eval_every=10, progress=False)


def test_all_conjugate_fit_is_the_closed_form(gamma_post):
    """Gamma(2, 1) prior, k ~ Poisson(rate e): the posterior Gamma(2 + sum k, 1 + sum e), exactly."""
    q = gamma_post.state.q_global["rate"]
    np.testing.assert_allclose(q.concentration, 2.0 + float(K.sum()), rtol=1e-5)
    np.testing.assert_allclose(q.rate, 1.0 + float(EXPOSURE.sum()), rtol=1e-5)
    s = gamma_post.summary(num_samples=4000)["rate"]
    a, b = 2.0 + float(K.sum()), 1.0 + float(EXPOSURE.sum())
    sd = np.sqrt(a) / b
    assert abs(s["mean"] - a / b) < 4 * sd / np.sqrt(4000)  # 4 Monte Carlo standard errors
    assert abs(s["sd"] / sd - 1.0) < 0.05
    assert int(gamma_post.num_steps) == 20 and gamma_post.elbo.shape == (20,)


def test_closed_form_sweeps_are_checked_every_ten_and_stop_early():
    """CAVI sweeps (every site in closed form, full batch) check the stopping rule every 10 steps. After the first
    sweep q is the exact posterior Gamma(2 + sum k, 1 + sum e), where the ELBO's estimate log p - log q is log p(k) at
    every draw, so the fit stops at the first chance (``patience`` + 1 = 4 checks, 40 sweeps) on the docs' five
    counts too (with q's entropy in place of -log q the estimate's noise kept them at all 200 sweeps)."""
    post = vijax.fit(gamma_poisson, EXPOSURE, K, progress=False)
    assert int(post.num_steps) == 40 and bool(post.converged)
    a, b = 2.0 + float(K.sum()), 1.0 + float(EXPOSURE.sum())
    q = post.state.q_global["rate"]
    np.testing.assert_allclose([q.concentration, q.rate], [a, b], rtol=1e-5)
    assert np.ptp(np.asarray(post.elbo)[1:]) < 1e-4 * abs(float(post.elbo[-1]))


def test_beta_bernoulli_is_the_closed_form():
    """... and fit turns on the persistent compilation cache by default (the suite's folder, $VIJAX_COMPILE_CACHE)."""
    y = jnp.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0])
    enable_compile_cache(False)
    post = vijax.fit(beta_bernoulli, y, max_steps=10, eval_every=10, progress=False)
    assert jax.config.jax_compilation_cache_dir == compile_cache_dir(True)
    q = post.state.q_global["p"]
    np.testing.assert_allclose(np.asarray(q.natural_params), [2.0 + 5.0 - 1.0, 3.0 + 2.0 - 1.0], rtol=1e-5)


@pytest.mark.slow  # over CI's per-test budget
def test_posterior_methods(gamma_post):
    key = jax.random.PRNGKey(3)
    draws = gamma_post.sample(key, 50)
    assert draws["rate"].shape == (50,)
    pred = gamma_post.predictive(key, 50)
    assert pred["k"].shape == (50, 5)
    ll = gamma_post.log_likelihood(key, 50)
    np.testing.assert_allclose(
        ll["k"], dist.Poisson(draws["rate"][:, None] * EXPOSURE[None, :]).log_prob(K[None, :]), rtol=1e-5
    )
    for method in (gamma_post.sample, gamma_post.predictive, gamma_post.log_likelihood):  # a key is passed, never None
        with pytest.raises(vijax.ArgumentError, match="key must be a PRNG key") as e:
            method(None, 5)
        assert e.value.argument == "key"


@pytest.mark.slow  # ArviZ's import, and the programs of the groups
def test_posterior_to_arviz_and_psis(gamma_post):
    pytest.importorskip("arviz")
    idata = gamma_post.to_arviz(num_samples=100)
    for group in ("posterior", "posterior_predictive", "log_likelihood", "observed_data"):
        assert group in idata.groups()
    r = gamma_post.psis(num_samples=200)  # q is the posterior: equal float32 weights up to rounding, no tail
    assert r.khat == -np.inf and r.ok and r.ess == 200.0


def test_a_continuation_keeps_its_fits_settings_and_refuses_others_by_name(gamma_post):
    for kwargs, argument in (
        (dict(route="bbvi"), "route"),
        (dict(num_samples=4), "num_samples"),
        (dict(batch_size=2), "batch_size"),
    ):
        with pytest.raises(vijax.ArgumentError, match=f"{argument}.*init continues a fit") as e:
            vijax.fit(gamma_poisson, EXPOSURE, K, init=gamma_post, progress=False, **kwargs)
        assert e.value.argument == argument
    more = vijax.fit(
        gamma_poisson, EXPOSURE, K, init=gamma_post, route="conjugate", max_steps=10, eval_every=10, progress=False
    )
    assert int(more.num_steps) == 30  # the same route, as the plan names it: continued


@pytest.mark.slow  # over CI's per-test budget
def test_posterior_is_a_pytree_jit_vmap_and_continue(gamma_post):
    leaves, treedef = jax.tree.flatten(gamma_post)
    again = jax.tree.unflatten(treedef, leaves)
    assert isinstance(again, Posterior) and again.plan == gamma_post.plan

    @jax.jit
    def mean_rate(post, key):
        return jnp.mean(post.sample(key, 100)["rate"])

    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    means = jax.vmap(mean_rate, in_axes=(None, 0))(gamma_post, keys)
    assert means.shape == (3,) and np.all(np.abs(np.asarray(means) - 17.0 / 7.0) < 0.3)  # Gamma(17, 7)
    # posteriors of one model and data, route and settings stack, and vmap over the stack
    posts = [vijax.fit(gamma_poisson, EXPOSURE, K, seed=s, max_steps=10, eval_every=10, progress=False) for s in (1, 2)]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *posts)
    assert jax.vmap(mean_rate)(stacked, keys[:2]).shape == (2,)
    more = vijax.fit(gamma_poisson, EXPOSURE, K, init=posts[0], max_steps=10, eval_every=10, progress=False)
    assert int(more.num_steps) == 20 and more.elbo.shape == (20,)
    with pytest.raises(vijax.ArgumentError, match="init: a Posterior of this model and data"):
        vijax.fit(gamma_poisson, EXPOSURE, K + 1.0, init=posts[0], progress=False)


def _same(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(la) == len(lb) and all(np.array_equal(x, y) for x, y in zip(la, lb))


def test_a_posterior_pickles_and_the_loaded_one_continues(gamma_post):
    """Loading builds the fit again from its pickled model (by reference) and data (by value): the same plan, the same
    draws for the same key; it stacks with the original, and continues from data that are equal, new objects."""
    loaded = pickle.loads(pickle.dumps(gamma_post))
    assert loaded.plan == gamma_post.plan and loaded.fitted == gamma_post.fitted
    key = jax.random.PRNGKey(4)
    assert _same(loaded.sample(key, 20), gamma_post.sample(key, 20))
    assert _same(dict(loaded.summary(key, 20)), dict(gamma_post.summary(key, 20)))
    assert jax.tree.map(lambda *x: jnp.stack(x), gamma_post, loaded).elbo.shape == (2, 20)
    more = vijax.fit(gamma_poisson, np.asarray(EXPOSURE), np.asarray(K), init=loaded, max_steps=10, **QUIET)
    assert int(more.num_steps) == 30 and more.elbo.shape == (30,)
    with pytest.raises(vijax.ArgumentError, match="init: a Posterior of this model and data"):
        vijax.fit(gamma_poisson, EXPOSURE, K + 1.0, init=loaded, **QUIET)


def test_a_vijax_model_posterior_pickles_and_continues_with_an_equal_model():
    from vijax.models import UnivariateGMM

    x = jnp.array([-5.2, -4.9, -5.1, 4.8, 5.3, 5.0])
    post = vijax.fit(UnivariateGMM(num_components=2), x, max_steps=10, **QUIET)
    loaded = pickle.loads(pickle.dumps(post))
    key = jax.random.PRNGKey(4)
    assert loaded.plan == post.plan and _same(loaded.sample(key, 20), post.sample(key, 20))
    more = vijax.fit(UnivariateGMM(num_components=2), np.asarray(x), init=loaded, max_steps=10, **QUIET)
    assert int(more.num_steps) == 20
    with pytest.raises(vijax.ArgumentError, match="init: a Posterior of this model and data"):
        vijax.fit(UnivariateGMM(num_components=3), x, init=loaded, **QUIET)


_LOAD_AND_CONTINUE = """
import pickle, sys, jax, numpy as np, vijax
from tests.run.test_fit import EXPOSURE, K, gamma_poisson
post = pickle.load(open(sys.argv[1], "rb"))
more = vijax.fit(gamma_poisson, EXPOSURE, K, init=post, max_steps=10, eval_every=10, progress=False)
print(float(post.summary(jax.random.PRNGKey(4), 100)["rate"]["mean"]), int(more.num_steps))
"""


@pytest.mark.slow  # a fresh process: its imports
def test_a_pickled_posterior_loads_and_continues_in_a_fresh_process(gamma_post, tmp_path):
    import os
    import pathlib
    import subprocess
    import sys

    path = tmp_path / "post.pkl"
    path.write_bytes(pickle.dumps(gamma_post))
    root = pathlib.Path(__file__).parents[2]
    out = subprocess.run(
        [sys.executable, "-c", _LOAD_AND_CONTINUE, str(path)],
        cwd=root,
        env={**os.environ, "JAX_ENABLE_X64": str(int(jax.config.jax_enable_x64))},  # this process's dtypes
        capture_output=True,
        text=True,
        check=True,
    )
    mean, steps = out.stdout.split()
    assert float(mean) == float(gamma_post.summary(jax.random.PRNGKey(4), 100)["rate"]["mean"]) and steps == "30"


def test_a_log_density_with_params_goes_to_bbvi():
    def log_density(params, batch):  # N(1, 0.5^2) in each coordinate: the batch's mean and sd
        return -0.5 * jnp.sum(((params["z"] - batch["mean"]) / batch["sd"]) ** 2)

    batch = {"mean": jnp.float32(1.0), "sd": jnp.float32(0.5)}
    post = vijax.fit(log_density, batch, params={"z": jnp.zeros(2)}, max_steps=1500, tol=None, progress=False)
    assert post.plan.route == "bbvi"
    s = post.summary(num_samples=4000)["z"]
    np.testing.assert_allclose(s["mean"], 1.0, atol=0.1)  # 0.2 posterior sd
    np.testing.assert_allclose(s["sd"], 0.5, rtol=0.15)
    assert post.psis().khat < 0.7  # the weights read the batch too: q is a Gaussian, as the target
    with pytest.raises(TypeError, match="Posterior: the model cannot be pickled .*define functions at module level"):
        pickle.dumps(post)  # a local function (as a lambda): a Posterior pickles what fit was given
    for args, kwargs, argument in [
        ((batch, batch), {}, "args"),  # one batch
        ((batch,), {"sd": 1.0}, "args"),
        ((), {"params": {"z": jnp.array([0.0, jnp.nan])}}, "params"),
        ((), {"params": {"z": jnp.zeros(2, jnp.int32)}}, "params"),
        ((), {"params": {}}, "params"),
    ]:
        with pytest.raises(vijax.ArgumentError) as e:
            vijax.fit(log_density, *args, **{"params": {"z": jnp.zeros(2)}, **kwargs})
        assert e.value.argument == argument


def test_a_continued_fit_reuses_its_compiled_step():
    traces = []

    def log_density(params, batch):  # N(1, 0.5^2); each trace of the step traces it
        traces.append(1)
        return -0.5 * jnp.sum(((params["z"] - 1.0) / 0.5) ** 2)

    post = vijax.fit(log_density, params={"z": jnp.zeros(2)}, max_steps=20, tol=None, **QUIET)
    before = len(traces)
    more = vijax.fit(log_density, params={"z": jnp.zeros(2)}, init=post, max_steps=20, tol=None, **QUIET)
    assert len(traces) == before and int(more.num_steps) == 40  # no trace: the first fit's chunk ran


def test_an_option_the_route_does_not_read_is_refused_by_name():
    """Each route's options (``_READS``): one it does not read is a user's mistake, not silently dropped."""
    with pytest.raises(vijax.ArgumentError, match="num_samples: this fit does not read it .route 'laplace'") as e:
        vijax.fit(logistic, X2, Y2, route="laplace", num_samples=4, progress=False)
    assert e.value.argument == "num_samples"
    with pytest.raises(vijax.ArgumentError, match="learning_rate: .*route 'ngvi'; it reads family, num_samples") as e:
        vijax.fit(logistic, X2, Y2, route="ngvi", learning_rate=0.1, progress=False)
    assert e.value.argument == "learning_rate"
    with pytest.raises(vijax.ArgumentError, match="family must be a pytree of exponential families, found a str") as e:
        vijax.fit(logistic, X2, Y2, route="ngvi", family="meanfield", progress=False)
    assert e.value.argument == "family"
    with pytest.raises(vijax.ArgumentError, match="family: .*vijax.models model's own CAVI") as e:
        vijax.fit(vijax.models.UnivariateGMM(num_components=2), jnp.zeros(10), family="meanfield", progress=False)
    assert e.value.argument == "family"
    plan = plan_fit(logistic, X2, Y2, route="bbvi", family="meanfield")  # read where the route reads it
    assert plan.route == "bbvi" and plan.rows[0].family == "Gaussian (meanfield)"


def test_a_vijax_model_takes_its_own_cavi():
    from vijax.models import UnivariateGMM

    x = jnp.concatenate([jnp.full(50, -5.0), jnp.full(50, 5.0)]) + 0.3 * jax.random.normal(
        jax.random.PRNGKey(0), (100,)
    )
    post = vijax.fit(UnivariateGMM(num_components=2), x, max_steps=30, eval_every=10, tol=None, progress=False)
    assert post.plan.route == "cavi" and post.plan.rows[0].family == "Normal"
    elbo = np.asarray(post.elbo)
    assert np.all(np.diff(elbo) > -1e-5 * np.abs(elbo[1:]))  # CAVI's ELBO does not decrease
    means = np.sort(np.asarray(post.summary()["params"]["mean"]))
    np.testing.assert_allclose(means, [-5.0, 5.0], atol=0.2)


def normal_gamma(y):  # unknown mean and precision, the Normal-Gamma prior
    tau = numpyro.sample("tau", dist.Gamma(3.0, 2.0))
    mu = numpyro.sample("mu", dist.Normal(1.0, 1.0 / jnp.sqrt(0.5 * tau)))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 1.0 / jnp.sqrt(tau)), obs=y)


@pytest.mark.slow  # over CI's per-test budget
def test_normal_with_unknown_mean_and_precision_is_near_the_closed_form():
    """Both sites conjugate (CAVI sweeps): means within 0.3 sd of the exact Normal-Gamma posterior (Bishop 2006,
    §2.3.6: m_n = (k0 m0 + n ybar) / (k0 + n), a_n = a0 + n / 2, b_n = b0 + (S + k0 n (ybar - m0)^2 / (k0 + n)) / 2,
    mu's marginal a Student t, sd^2 = b_n / (k_n (a_n - 1)))."""
    y = jnp.array([2.1, 0.4, 1.7, 3.0, 1.2, 2.6, 0.9, 1.8])
    post = vijax.fit(normal_gamma, y, progress=False)
    assert post.plan.route == "conjugate" and {r.route for r in post.plan.rows} == {"closed form"}
    yn, n, k0, m0, a0, b0 = np.asarray(y, np.float64), 8, 0.5, 1.0, 3.0, 2.0
    kn, mn, an = k0 + n, (k0 * m0 + n * yn.mean()) / (k0 + n), a0 + n / 2
    bn = b0 + 0.5 * (np.sum((yn - yn.mean()) ** 2) + k0 * n * (yn.mean() - m0) ** 2 / kn)
    s = post.summary(num_samples=4000)
    assert abs(float(s["mu"]["mean"]) - mn) < 0.3 * np.sqrt(bn / (kn * (an - 1)))
    assert abs(float(s["tau"]["mean"]) - an / bn) < 0.3 * np.sqrt(an) / bn


# ----------------------------------------------------------------------------- against NUTS (slow)


def _nuts_draws(model, *args, seed=0):
    """NumPyro NUTS (2 chains x 1000 after 500 warmup): the draws by site."""
    from numpyro.infer import MCMC, NUTS

    mcmc = MCMC(
        NUTS(model), num_warmup=500, num_samples=1000, num_chains=2, chain_method="vectorized", progress_bar=False
    )
    with jax.numpy_rank_promotion("allow"):  # NumPyro's code broadcasts by it
        mcmc.run(jax.random.PRNGKey(seed), *args)
    return {n: np.asarray(v, np.float64) for n, v in mcmc.get_samples().items()}


def _by_location(draws):
    """A mixture's draws with the components ordered by their location in each draw (no label switching)."""
    order = np.argsort(draws["loc"], axis=-1)
    return {n: np.take_along_axis(np.asarray(v, np.float64), order, axis=-1) for n, v in draws.items()}


def _assert_near_nuts(post, model, *args, within=0.3, canonical=lambda d: d):
    ref = canonical(_nuts_draws(model, *args))
    vi = canonical(post.sample(jax.random.PRNGKey(7), 20_000))
    for name, v in vi.items():
        dz = (np.mean(v, 0) - ref[name].mean(0)) / ref[name].std(0)
        assert np.all(np.abs(dz) < within), (name, dz)


def poisson_regression(x, y):
    b = numpyro.sample("b", dist.Normal(0.0, 2.0))
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Poisson(jnp.exp(b + w * x)), obs=y)


def hierarchical_linear(group, x, y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    sigma_a = numpyro.sample("sigma_a", dist.HalfNormal(2.0))
    slope = numpyro.sample("slope", dist.Normal(0.0, 2.0))
    with numpyro.plate("groups", 4):
        a = numpyro.sample("a", dist.Normal(mu, sigma_a))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Normal(a[group] + slope * x, 0.5), obs=y)


def gmm(y):
    w = numpyro.sample("w", dist.Dirichlet(jnp.ones(2)))
    loc = numpyro.sample("loc", dist.Normal(jnp.array([-1.0, 1.0]), 3.0).to_event(1))
    with numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Categorical(w), infer={"enumerate": "parallel"})
        numpyro.sample("y", dist.Normal(loc[z], 1.0), obs=y)


def _data(name):
    rng = np.random.default_rng(0)
    if name == "eight_schools":
        from tests.interop._models import SIGMA, Y, eight_schools

        return eight_schools, (SIGMA, Y)
    if name == "poisson_regression":
        x = rng.normal(size=40)
        return poisson_regression, (jnp.asarray(x), jnp.asarray(rng.poisson(np.exp(0.5 + 0.7 * x)), jnp.float32))
    if name == "logistic":
        x = rng.normal(size=(60, 3))
        p = 1.0 / (1.0 + np.exp(-(x @ np.array([-0.7, 0.9, 1.4]))))
        return logistic, (jnp.asarray(x), jnp.asarray(rng.random(60) < p, jnp.float32))
    if name == "hierarchical_linear":
        group, x = rng.integers(0, 4, 40), rng.normal(size=40)
        y = np.array([0.5, 1.0, -0.5, 2.0])[group] + 0.8 * x + 0.5 * rng.normal(size=40)
        return hierarchical_linear, (jnp.asarray(group), jnp.asarray(x), jnp.asarray(y))
    y = np.concatenate([rng.normal(-2.0, 1.0, 30), rng.normal(2.5, 1.0, 30)])
    return gmm, (jnp.asarray(y),)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["eight_schools", "poisson_regression", "logistic", "hierarchical_linear", "gmm"])
def test_fit_means_within_0_3_sd_of_nuts(name):
    model, args = _data(name)
    post = vijax.fit(model, *args, progress=False)
    _assert_near_nuts(post, model, *args, canonical=_by_location if name == "gmm" else lambda d: d)


def subsampled(exposure, k, subsample_size=None):
    rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
    with numpyro.plate("data", exposure.shape[0], subsample_size=subsample_size) as idx:
        numpyro.sample("k", dist.Poisson(rate * exposure[idx]), obs=k[idx])


SUB_E = jnp.linspace(0.5, 1.5, 2000)
SUB_K = jax.random.poisson(jax.random.PRNGKey(2), 2.0 * SUB_E).astype(jnp.float32)


@pytest.fixture(scope="module")
def subsampled_post():
    """Minibatches of 20 of 2,000 counts, 1,000 steps: 10 passes."""
    return vijax.fit(subsampled, SUB_E, SUB_K, subsample_size=20, max_steps=1000, tol=None, progress=False)


def test_a_subsampled_fit_averages_passes_over_the_data(subsampled_post):
    """Minibatches of 20 of 2,000 counts: each pass of 100 steps visits every count once (``epoch_batches``), and q
    is the average of the iterates (``averaged``): its mean within 0.1 posterior sd of the closed-form Gamma's and
    its sd within 10 % after 10 passes (the last iterate: 0.14 sd off)."""
    post, e, k = subsampled_post, SUB_E, SUB_K
    a, b = 2.0 + float(k.sum()), 1.0 + float(e.sum())
    q, last = post.state.q_global["rate"], post.state.inner.q_global["rate"]
    shape, rate = float(q.concentration), float(q.rate)
    assert abs(shape / rate - a / b) < 0.1 * np.sqrt(a) / b
    assert abs(np.sqrt(shape) / rate / (np.sqrt(a) / b) - 1.0) < 0.1
    assert abs(float(last.concentration / last.rate) - a / b) > 0.1 * np.sqrt(a) / b  # the last iterate: not yet
    one_pass = jax.vmap(lambda t: post.fitted.batch_fn(None, t)["data"])(jnp.arange(100, 200))
    assert sorted(np.asarray(one_pass).ravel().tolist()) == list(range(2000))


def test_a_subsampled_fit_checks_itself_on_the_whole_data(subsampled_post):
    """Its steps read minibatches, but its predictive, log-likelihood, ArviZ data and PSIS are of all 2,000 counts:
    the log-likelihood is scipy's Poisson log-pmf at each draw of the rate, PSIS's k-hat that of a q within 10 % of
    the exact Gamma (below 0.5); new arguments without the plate's indices, or with indices past their size, are
    refused, naming the plate."""
    post, e, k = subsampled_post, SUB_E, SUB_K
    key = jax.random.PRNGKey(5)
    rate = post.sample(key, 4)["rate"]  # log_likelihood draws q with its key
    ll = post.log_likelihood(key, 4)["k"]
    assert ll.shape == (4, 2000)
    expected = stats.poisson.logpmf(np.asarray(k), np.asarray(rate)[:, None] * np.asarray(e))
    np.testing.assert_allclose(np.asarray(ll), expected, rtol=1e-4)
    assert post.predictive(key, 4)["k"].shape == (4, 2000)
    assert post.to_arviz(num_samples=10).log_likelihood["k"].shape == (1, 10, 2000)
    assert post.psis().khat < 0.5
    with pytest.raises(vijax.ArgumentError, match="'data'.*jnp.arange"):
        post.predictive(key, 4, e[:5], k[:5])
    assert post.predictive(key, 4, e[:5], k[:5], data=jnp.arange(5))["k"].shape == (4, 5)
    with pytest.raises(ValueError, match=r"batch\['data'\] 5 at \[5\] is out of range \[0, 5\)"):
        post.predictive(key, 4, e[:5], k[:5], data=jnp.arange(10))  # the new arguments' plate holds 5 points


def test_a_subsampled_fit_stops_after_its_passes():
    """With its defaults, a fit on minibatches of 20 of 2,000 counts may stop only after ``MIN_PASSES`` passes (its
    ELBO levels off within the first): it stops at the first check there, within 0.1 posterior sd of the closed form;
    a continuation counts the passes made, and stops at its first checks."""
    pass_steps = 100
    post = vijax.fit(subsampled, SUB_E, SUB_K, subsample_size=20, progress=False)
    steps = int(post.num_steps)
    assert bool(post.converged) and steps == MIN_PASSES * pass_steps
    a, b = 2.0 + float(SUB_K.sum()), 1.0 + float(SUB_E.sum())
    assert abs(float(post.summary()["rate"]["mean"]) - a / b) < 0.1 * np.sqrt(a) / b
    more = vijax.fit(subsampled, SUB_E, SUB_K, subsample_size=20, init=post, progress=False)
    assert bool(more.converged) and int(more.num_steps) - steps == 4 * EVAL_EVERY  # patience + 1 checks


def test_a_models_model_on_minibatches_waits_its_passes():
    """A ``vijax.models`` model with ``batch_size=20`` on 2,000 counts: SVI on passes over the data, averaged, stops
    after ``MIN_PASSES`` passes (2,000 steps) within 0.1 posterior sd of the CAVI fit on the whole data (a
    one-component Gamma–Poisson mixture: q's Gamma is the exact posterior of the rate)."""
    model = vijax.models.Mixture(vijax.models.GammaPoisson(1), vijax.models.DirichletWeights(1))
    k = jax.random.poisson(jax.random.PRNGKey(0), 3.0, (2000, 1)).astype(jnp.float32)
    full = vijax.fit(model, k, progress=False)
    sub = vijax.fit(model, k, batch_size=20, progress=False)
    assert sub.plan.route == "svi" and bool(sub.converged) and int(sub.num_steps) == 2000

    def mean_sd(q):  # a Gamma's natural parameters (shape - 1, -rate)
        shape, rate = float(np.ravel(q.eta1)[0]) + 1.0, -float(np.ravel(q.eta2)[0])
        return shape / rate, np.sqrt(shape) / rate

    (m_full, sd), (m_sub, _) = mean_sd(full.state.q_global[1]), mean_sd(sub.state.q_global[1])
    assert abs(m_sub - m_full) < 0.1 * sd


@pytest.mark.slow
def test_a_subsampled_plate_draws_its_indices():
    """Minibatches of 10 of 100 counts: the mean within 0.3 sd of the posterior Gamma(2 + sum k, 1 + sum e)."""
    e = jnp.linspace(0.5, 1.5, 100)
    k = jax.random.poisson(jax.random.PRNGKey(2), 2.0 * e).astype(jnp.float32)
    post = vijax.fit(subsampled, e, k, subsample_size=10, progress=False)
    a, b = 2.0 + float(k.sum()), 1.0 + float(e.sum())
    assert abs(float(post.summary()["rate"]["mean"]) - a / b) < 0.3 * np.sqrt(a) / b


def linear_regression(x, y):  # known noise: the posterior is Gaussian, Laplace's q exact
    w = numpyro.sample("w", dist.Normal(0.0, 2.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Normal(w * x, 0.5), obs=y)


def offset_regression(x, y):  # an empirical-Bayes offset b: given it, the posterior of w is Gaussian
    b = numpyro.param("b", 0.0)
    w = numpyro.sample("w", dist.Normal(0.0, 2.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Normal(w * x + b, 0.5), obs=y)


OFFSET_X = jnp.linspace(0.0, 2.0, 8)
OFFSET_Y = 0.7 * OFFSET_X + 1.0 + 0.1 * jnp.sin(7.0 * OFFSET_X)


def _offset_reference():
    """Type-II maximum likelihood b (y ~ N(b 1, 0.5^2 I + 2^2 x x^T), generalized least squares) and the posterior
    mean and sd of w given it."""
    x, y = np.asarray(OFFSET_X, np.float64), np.asarray(OFFSET_Y, np.float64)
    cov_inv = np.linalg.inv(0.25 * np.eye(x.size) + 4.0 * np.outer(x, x))
    one = np.ones(x.size)
    b = one @ cov_inv @ y / (one @ cov_inv @ one)
    precision = x @ x / 0.25 + 1.0 / 4.0
    return b, x @ (y - b) / 0.25 / precision, precision**-0.5


def test_a_param_is_fitted_by_empirical_bayes_and_used_by_the_posterior():
    """The default route (w in closed form) fits b by maximizing the ELBO until the stopping rule: b within 0.05 of
    its type-II maximum likelihood value (measured 0.002-0.014 over five seeds), w's mean within 0.3 posterior sd;
    predictions use the fitted b."""
    b_ref, w_ref, w_sd = _offset_reference()
    post = vijax.fit(offset_regression, OFFSET_X, OFFSET_Y, progress=False)
    assert [(r.site, r.route) for r in post.plan.rows] == [("w", "closed form"), ("b", "empirical Bayes")]
    assert abs(float(post.params["b"]) - b_ref) < 0.05
    assert abs(float(post.summary()["w"]["mean"]) - w_ref) < 0.3 * w_sd
    y0 = post.predictive(jax.random.PRNGKey(0), 4000, jnp.zeros(1), None)["y"]  # at x = 0: N(b, 0.5^2)
    assert abs(float(jnp.mean(y0)) - float(post.params["b"])) < 4 * 0.5 / np.sqrt(4000)


def test_a_param_beside_a_discrete_site_is_refused_by_name():
    def mixture(y):
        p = numpyro.param("p", 0.5, constraint=dist.constraints.unit_interval)
        with numpyro.plate("data", y.shape[0]):
            c = numpyro.sample("c", dist.Bernoulli(p))
            numpyro.sample("y", dist.Normal(2.0 * c, 1.0), obs=y)

    with pytest.raises(vijax.ArgumentError, match="site 'p': a numpyro.param, .*route 'score'"):
        vijax.fit(mixture, jnp.linspace(-1.0, 1.0, 8), progress=False)


def test_laplace_psis_weighs_with_the_fitted_params():
    """PSIS of Laplace's q (log p(x, u) - log q(u), u ~ q on the unconstrained space) where the posterior is
    Gaussian: Laplace maximizes b with the point (at its type-II maximum likelihood value: the model is Gaussian in
    w), q is exact given b, and every weight is equal, an ESS of all the draws, where log p uses the fitted b as q
    does (at b's start the log-weights would be linear in w)."""
    b_ref, _, _ = _offset_reference()
    post = vijax.fit(offset_regression, OFFSET_X, OFFSET_Y, route="laplace", max_steps=1000, progress=False)
    np.testing.assert_allclose(float(post.params["b"]), b_ref, atol=2e-3)
    np.testing.assert_allclose(post.psis(num_samples=200).ess, 200.0, rtol=1e-4)


def test_psis_of_a_map_fit_is_refused_with_the_reason():
    x = jnp.linspace(-1.0, 1.0, 8)
    post = vijax.fit(linear_regression, x, 0.7 * x, route="map", max_steps=50, eval_every=50, progress=False)
    with pytest.raises(vijax.ArgumentError, match="psis: route 'map' is a point estimate, .*route 'laplace'"):
        post.psis()


@pytest.mark.slow  # a second fit: over CI's per-test budget
def test_laplace_psis_of_a_skewed_posterior_has_unequal_weights():
    """A Gamma posterior of five counts (a positive site: the Jacobian counts) is skewed: Laplace's q is not exact."""
    post = vijax.fit(gamma_poisson, EXPOSURE, K, route="laplace", max_steps=200, eval_every=50, progress=False)
    result = post.psis(num_samples=200)
    assert np.isfinite(result.khat) and result.ess < 199.0
