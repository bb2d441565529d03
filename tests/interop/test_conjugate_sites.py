"""Conjugate sites found in a NumPyro model (``vijax.conjugate_sites``) and their closed-form update
(``vijax.interop.complete_conditional``): the verdicts on conjugate and non-conjugate sites with
their reasons, the refusal of a forced site that is not conjugate, and the update against the
analytic posteriors and complete conditionals (Gamma-Poisson, Normal mean, Dirichlet-categorical,
Beta-Bernoulli)."""

import re

import pytest

numpyro = pytest.importorskip("numpyro")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro.distributions as dist  # noqa: E402

import vijax  # noqa: E402
from vijax import expfam  # noqa: E402
from vijax._validate import ArgumentError  # noqa: E402
from vijax.interop import complete_conditional, conjugate_sites  # noqa: E402

KEY = jax.random.PRNGKey(0)
GROUP = jnp.array([0, 0, 1, 1, 1, 2])
Y = jnp.array([3.0, 1.0, 4.0, 2.0, 5.0, 0.0])
A, A0, B0 = 2.0, 3.0, 1.5


def poisson_rates(group, y):
    """Hierarchical Poisson: per-group Gamma(A, b) rates, b ~ Gamma(A0, B0), a Normal nuisance w
    that scales the counts through exp(w) (so it is not conjugate)."""
    b = numpyro.sample("b", dist.Gamma(A0, B0))
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("groups", 3):
        rates = numpyro.sample("rates", dist.Gamma(A, b))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Poisson(rates[group] * jnp.exp(0.0 * w)), obs=y)


def gamma_poisson(k):
    rate = numpyro.sample("rate", dist.Gamma(A, B0))
    with numpyro.plate("data", k.shape[0]):
        numpyro.sample("k", dist.Poisson(rate), obs=k)


def dirichlet_categorical(group, z):
    """Per-group category probabilities: a (2, 4) Dirichlet site, one simplex per group."""
    with numpyro.plate("groups", 2):
        probs = numpyro.sample("probs", dist.Dirichlet(jnp.array([1.0, 2.0, 0.5, 3.0])))
    with numpyro.plate("data", z.shape[0]):
        numpyro.sample("z", dist.Categorical(probs=probs[group]), obs=z)


def normal_mean(y):
    mu = numpyro.sample("mu", dist.Normal(1.0, 10.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 2.0), obs=y)


X = jnp.array([[1.0, -0.5], [1.0, 0.3], [1.0, 1.2], [1.0, -2.0]])
LABELS = jnp.array([0.0, 1.0, 1.0, 0.0])


def logistic(x, y):
    w = numpyro.sample("w", dist.Normal(jnp.zeros(2), 1.0).to_event(1))
    scale = numpyro.sample("scale", dist.LogNormal(0.0, 1.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=scale * (x @ w)), obs=y)


# the tests share their targets, so that a site's program compiled for one (per target, site and
# number of draws) serves the others
@pytest.fixture(scope="module")
def gamma_target():
    return vijax.from_numpyro(gamma_poisson, Y)


@pytest.fixture(scope="module")
def logistic_target():
    return vijax.from_numpyro(logistic, X, LABELS)


def test_gamma_rates_of_poisson_counts_are_conjugate_and_the_update_is_the_analytic_posterior(gamma_target):
    """One Gamma rate of Poisson counts: conjugate (gap at rounding level), and the update is the
    posterior Gamma(a + sum y, b + n) to 1e-6 (it is exact to rounding)."""
    target = gamma_target
    report = conjugate_sites(target, KEY, num_draws=1)
    site = report["rate"]
    assert (site.conjugate, site.family, site.prior, site.stats, site.reason) == (
        True,
        "Gamma",
        "Gamma",
        "[log x, x]",
        None,
    )
    assert site.gap <= site.tolerance == pytest.approx(1e4 * np.finfo(np.float64).eps)
    q = complete_conditional(target, "rate", {})
    assert isinstance(q, expfam.Gamma)
    np.testing.assert_allclose([q.concentration, q.rate], [A + float(Y.sum()), B0 + Y.shape[0]], rtol=1e-6)


def test_hierarchical_poisson_every_gamma_is_conjugate_given_the_others_and_its_update_is_exact():
    """Per-group rates given b: Gamma(A + sum_g y, b + n_g); b given the rates: Gamma(A0 + 3 A,
    B0 + sum rates) at one draw of the others; averaged over S draws, the coefficients (linear in the
    draws) are those at the draws' mean. A Normal site that enters as exp(0 w) is conjugate too (the log-joint
    is its prior only)."""
    target = vijax.from_numpyro(poisson_rates, GROUP, Y)
    report = conjugate_sites(target, KEY, num_draws=3)
    assert {n: (s.conjugate, s.family) for n, s in report.items()} == {
        "b": (True, "Gamma"),
        "w": (True, "Normal"),
        "rates": (True, "Gamma"),
    }
    b = jnp.array([0.7, 1.9, 2.6])
    rates = jnp.array([[0.5, 1.0, 2.0], [1.5, 0.2, 3.0], [2.5, 2.0, 0.1]])
    w = jnp.array([0.3, -1.0, 2.0])
    q = complete_conditional(target, "rates", {"b": b, "w": w})
    sums = jnp.zeros(3).at[GROUP].add(Y)
    counts = jnp.zeros(3).at[GROUP].add(1.0)
    np.testing.assert_allclose(q.concentration, A + sums, rtol=1e-6)
    np.testing.assert_allclose(q.rate, jnp.mean(b) + counts, rtol=1e-6)
    q_b = complete_conditional(target, "b", {"rates": rates, "w": w})
    np.testing.assert_allclose([q_b.concentration, q_b.rate], [A0 + 3 * A, B0 + float(rates.sum(1).mean())], rtol=1e-6)
    q_1 = complete_conditional(target, "b", {"rates": rates[:1], "w": w[:1]})  # one draw: the complete conditional
    np.testing.assert_allclose([q_1.concentration, q_1.rate], [A0 + 3 * A, B0 + float(rates[0].sum())], rtol=1e-6)


def test_cavi_from_complete_conditionals_reaches_the_mean_field_fixed_point():
    """CAVI by complete_conditional inside a jitted sweep: each site's coefficients are linear in the
    other sites' values, so the update at the others' means is the exact CAVI update (E_q[c] =
    c(E_q[others])); after 60 sweeps q equals the fixed point of the mean-field equations
    E[rates_g] = (A + sum_g y) / (E[b] + n_g), E[b] = (A0 + 3 A) / (B0 + sum_g E[rates_g]), iterated
    by hand, to 1e-9."""
    target = vijax.from_numpyro(poisson_rates, GROUP, Y)
    w = jnp.zeros(1)  # w enters as exp(0 w): no other site's coefficients depend on it

    def mean(q):  # E[x], as one draw
        return q.mean_params()[1][None]

    @jax.jit
    def sweep(q_b):
        q_rates = complete_conditional(target, "rates", {"b": mean(q_b), "w": w})
        return complete_conditional(target, "b", {"rates": mean(q_rates), "w": w}), q_rates

    q_b = expfam.Gamma.from_shape_rate(A0, B0)
    for _ in range(60):
        q_b, q_rates = sweep(q_b)
    sums, counts = jnp.zeros(3).at[GROUP].add(Y), jnp.zeros(3).at[GROUP].add(1.0)
    mean_b = A0 / B0
    for _ in range(500):
        mean_rates = (A + sums) / (mean_b + counts)
        mean_b = (A0 + 3 * A) / (B0 + float(mean_rates.sum()))
    np.testing.assert_allclose(q_rates.concentration, A + sums, rtol=1e-9)
    np.testing.assert_allclose(q_rates.rate, mean_b + counts, rtol=1e-9)
    np.testing.assert_allclose([q_b.concentration, q_b.rate], [A0 + 3 * A, B0 + float(mean_rates.sum())], rtol=1e-9)


def test_dirichlet_over_categorical_draws_is_conjugate_and_its_update_adds_the_counts():
    """Each group's Dirichlet(alpha + the group's counts)."""
    group = jnp.array([0, 0, 0, 1, 1, 1, 1])
    z = jnp.array([0, 1, 1, 3, 3, 3, 2])
    target = vijax.from_numpyro(dirichlet_categorical, group, z)
    report = conjugate_sites(target, KEY, num_draws=1)
    assert (report["probs"].conjugate, report["probs"].family, report["probs"].stats) == (True, "Dirichlet", "[log x]")
    q = complete_conditional(target, "probs", {})
    counts = jnp.stack([jnp.bincount(z[:3], length=4), jnp.bincount(z[3:], length=4)])
    np.testing.assert_allclose(q.concentration, jnp.array([1.0, 2.0, 0.5, 3.0])[None] + counts, rtol=1e-6)


def test_normal_mean_with_known_scale_is_conjugate_and_its_update_is_the_analytic_posterior():
    """mu ~ N(1, 10^2), y ~ N(mu, 2^2): posterior precision 1/100 + n/4, mean (1/100 + sum y/4) / it."""
    y = jnp.array([0.5, 2.5, 1.0, -0.3])
    target = vijax.from_numpyro(normal_mean, y)
    report = conjugate_sites(target, KEY, num_draws=1)
    assert (report["mu"].conjugate, report["mu"].family, report["mu"].stats) == (True, "Normal", "[x, x^2]")
    q = complete_conditional(target, "mu", {})
    precision = 1 / 100 + y.shape[0] / 4
    np.testing.assert_allclose(
        [q.mean, q.variance], [(1 / 100 + float(y.sum()) / 4) / precision, 1 / precision], rtol=1e-6
    )


def test_beta_probability_of_bernoulli_draws_is_conjugate_and_its_update_is_the_analytic_posterior():
    """p ~ Beta(2, 3), y ~ Bernoulli(p): posterior Beta(2 + sum y, 3 + n - sum y)."""

    def beta_bernoulli(y):
        p = numpyro.sample("p", dist.Beta(2.0, 3.0))
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.Bernoulli(probs=p), obs=y)

    target = vijax.from_numpyro(beta_bernoulli, LABELS)
    report = conjugate_sites(target, KEY, num_draws=1)
    assert (report["p"].conjugate, report["p"].family, report["p"].stats) == (True, "Beta", "[log x, log(1 - x)]")
    q = complete_conditional(target, "p", {})
    ones = float(LABELS.sum())
    np.testing.assert_allclose(
        [q.concentration1, q.concentration0], [2.0 + ones, 3.0 + LABELS.shape[0] - ones], rtol=1e-6
    )


def test_logistic_regression_coefficient_is_not_conjugate_with_the_reason(logistic_target):
    """A Normal coefficient under a Bernoulli-logit likelihood: not linear in [x, x^2], a gap far
    above the tolerance; a LogNormal site has no family (named in the reason)."""
    report = conjugate_sites(logistic_target, KEY)
    w = report["w"]
    assert (w.conjugate, w.family) == (False, "Normal")
    assert w.gap > 1e6 * w.tolerance
    assert w.reason.startswith("log-joint not linear in [x, x^2] (Normal's statistics of 'w'): secant gap")
    scale = report["scale"]
    assert (scale.conjugate, scale.family, scale.prior) == (False, None, "LogNormal")
    assert "its prior is a LogNormal" in scale.reason


def test_interacting_elements_and_a_step_function_are_not_conjugate():
    """A linear regression's weights in one Normal site: each weight is conjugate given the other,
    but the products w0 w1 make the site's complete conditional a correlated Normal, not a product
    of Normals (the reason says so); Poisson(floor(r) + 1) has a zero gradient in the floor but is
    not linear: the values' gap finds both."""

    def regression(x, t):
        w = numpyro.sample("w", dist.Normal(jnp.zeros(2), 2.0).to_event(1))
        with numpyro.plate("data", t.shape[0]):
            numpyro.sample("t", dist.Normal(x @ w, 0.5), obs=t)

    def step(k):
        r = numpyro.sample("r", dist.Gamma(2.0, 1.0))
        with numpyro.plate("data", k.shape[0]):
            numpyro.sample("k", dist.Poisson(jnp.floor(r) + 1.0), obs=k)

    w = conjugate_sites(regression, KEY, X, LABELS)["w"]
    r = conjugate_sites(step, KEY, Y)["r"]
    for site in (w, r):
        assert not site.conjugate and site.gap > 1e3 * site.tolerance, site
    assert "its elements interact" in w.reason and "its elements interact" not in r.reason


def test_a_float32_process_is_checked_in_float64():
    """log p = y w x - exp(w x) with x within +-0.1 is nearly quadratic in w: a gap (1e-5 to 1.6e-4
    at five keys) under the float32 tolerance (1e4 ulps, 1.2e-3), which the check, run in float64
    whatever the process's setting, finds; the update comes back in the process's float32."""

    def weak(x, y):
        w = numpyro.sample("w", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.Poisson(jnp.exp(w * x)), obs=y)

    with jax.enable_x64(False):
        site = conjugate_sites(weak, KEY, jnp.array([0.05, -0.1, 0.025, 0.075]), jnp.array([1.0, 0.0, 2.0, 1.0]))["w"]
        q = complete_conditional(gamma_poisson, "rate", {}, jnp.asarray(Y, jnp.float32))
    assert not site.conjugate and site.tolerance == pytest.approx(1e4 * np.finfo(np.float64).eps)
    assert site.gap < 1e4 * np.finfo(np.float32).eps
    assert q.concentration.dtype == jnp.float32
    np.testing.assert_allclose([q.concentration, q.rate], [A + float(Y.sum()), B0 + Y.shape[0]], rtol=1e-6)


def test_a_float32_site_whose_bijector_makes_default_dtype_arrays_is_checked():
    """NumPyro's CorrCholesky transform scatters the site's values into zeros of the default dtype: the check's
    float64 reads the model's start in float64 (float32 values into float64 zeros: a TypeError before), and
    ``fit``'s plan sends the site, with no family, to bbvi."""

    def correlated(y):
        chol = numpyro.sample("L", dist.LKJCholesky(2, 2.0))
        numpyro.sample("y", dist.MultivariateNormal(jnp.zeros(2), scale_tril=chol), obs=y)

    y = jnp.asarray(np.random.default_rng(1).normal(size=(30, 2)), jnp.float32)
    with jax.enable_x64(False):
        site = conjugate_sites(correlated, KEY, y)["L"]
        plan = vijax.run.plan_fit(correlated, y)
    assert not site.conjugate and site.reason.startswith("its prior is a LKJCholesky")
    assert plan.route == "bbvi" and [r.site for r in plan.rows] == ["L"]


def test_arguments_are_checked_naming_them():
    """Refused before any compilation: positional arguments with a target, a bad num_draws, draws
    of another shape, without a common draw axis, or not a dict (a TFP target is taken:
    ``test_conjugate_sites_tfp.py``)."""
    target = vijax.from_numpyro(poisson_rates, GROUP, Y)
    cases = [
        (lambda: conjugate_sites(target, KEY, 1.0), "target_or_model", "as keyword arguments"),
        (lambda: conjugate_sites(3.0, KEY), "target_or_model", "must be a NumPyro model"),
        (lambda: conjugate_sites(target, KEY, num_draws=0), "num_draws", "num_draws must be an int >= 1"),
        (lambda: conjugate_sites(target, KEY, force=[1]), "force", "1 is not a latent site"),
        (lambda: complete_conditional(target, "nope", {}), "site", "'nope' is not a latent site"),
        (lambda: complete_conditional(target, "rates", [1.0]), "draws", "draws must be a dict"),
        (
            lambda: complete_conditional(target, "rates", {"b": jnp.ones(2), "w": jnp.ones(3)}),
            "draws",
            "the same leading",
        ),
        (
            lambda: complete_conditional(target, "b", {"rates": jnp.ones((2, 4)), "w": jnp.ones(2)}),
            "draws",
            r"draws\['rates'\]: shape \(2, 4\), expected \(draws, \*\(3,\)\)",
        ),
        (
            lambda: complete_conditional(target, "w", {"b": jnp.ones(2), "rates": jnp.ones((2, 3))}, bad=1),
            "batch",
            "no such argument",
        ),
    ]
    for call, argument, match in cases:
        with pytest.raises(ArgumentError, match=match) as err:
            call()
        assert err.value.argument == argument, (argument, err.value)


def test_forcing_a_site_that_is_not_conjugate_is_refused_naming_it(gamma_target, logistic_target):
    with pytest.raises(ArgumentError, match="force: site 'w' is not conditionally conjugate") as err:
        conjugate_sites(logistic_target, KEY, force=["w"])
    assert err.value.argument == "force" and err.value.value == "w"
    with pytest.raises(ArgumentError, match="'nope' is not a latent site"):
        conjugate_sites(gamma_target, KEY, force=["nope"])
    assert conjugate_sites(gamma_target, KEY, force="rate", num_draws=1)["rate"].conjugate
    with pytest.raises(ArgumentError, match="site 'w' is not conditionally conjugate") as err:
        complete_conditional(logistic_target, "w", {"scale": jnp.ones(2)})
    assert err.value.argument == "site"
    with pytest.raises(ArgumentError, match=r"draws: no values of the other latent sites \['scale'\]"):
        complete_conditional(logistic, "w", {}, X, LABELS)


def test_a_target_with_a_subsampled_plate_takes_the_batch_and_scales_the_update():
    """From a target, the batch gives the plate's indices: the update holds N / M times the
    minibatch's sum, the model's own scaling (Gamma(a + N/M sum y_batch, b + N))."""

    def model(k, subsample_size=None):
        rate = numpyro.sample("rate", dist.Gamma(A, B0))
        with numpyro.plate("data", k.shape[0], subsample_size=subsample_size) as idx:
            numpyro.sample("k", dist.Poisson(rate), obs=k[idx])

    target = vijax.from_numpyro(model, Y, subsample_size=2)
    idx = jnp.array([2, 4])
    assert vijax.conjugate_sites(target, KEY, num_draws=1, data=idx)["rate"].conjugate
    q = complete_conditional(target, "rate", {}, data=idx)
    np.testing.assert_allclose([q.concentration, q.rate], [A + 3.0 * float(Y[idx].sum()), B0 + 6.0], rtol=1e-6)
    with pytest.raises(ArgumentError, match="a target takes its batch as keyword arguments"):
        conjugate_sites(target, KEY, idx)


def test_complete_conditionals_are_each_sites_complete_conditional(logistic_target):
    """Several sites' updates in one program give each site's ``complete_conditional`` (float64
    fits, cast to the process's float type: equal to float32 rounding), and a site that is not
    conjugate at the draws is refused by name as ``complete_conditional`` refuses it."""
    from vijax.interop import complete_conditionals

    target = vijax.from_numpyro(poisson_rates, GROUP, Y)
    draws = {"b": jnp.array([1.2, 0.7]), "w": jnp.array([0.1, -0.3]), "rates": jnp.array([[1.0, 2.0, 0.5]] * 2)}
    requests = {n: {m: v for m, v in draws.items() if m != n} for n in ("rates", "b")}
    both = complete_conditionals(target, requests)
    assert list(both) == ["rates", "b"]
    for n, q in both.items():
        one = complete_conditional(target, n, requests[n])
        for a, b in zip(expfam.tree_natural_params(q), expfam.tree_natural_params(one)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=0.0)
    # b ~ Gamma(A0, B0) with Gamma(A, b) rates: natural parameters (A0 - 1 + 3 A, -(B0 + sum rates)), mean over draws
    np.testing.assert_allclose(
        np.asarray(expfam.tree_natural_params(both["b"])), [A0 - 1 + 3 * A, -(B0 + 3.5)], rtol=1e-5
    )
    with pytest.raises(ArgumentError, match="'w' is not conditionally conjugate"):
        complete_conditionals(logistic_target, {"w": {"scale": jnp.array([1.5])}})
    with pytest.raises(ArgumentError, match="requests"):
        complete_conditionals(target, [("b", draws)])


def test_the_report_of_a_three_site_model():
    target = vijax.from_numpyro(poisson_rates, GROUP, Y)
    report = conjugate_sites(target, KEY)
    assert [(n, r.conjugate) for n, r in report.items()] == [
        ("b", True),
        ("w", True),
        ("rates", True),
    ]  # w enters as exp(0 w)


def test_complete_conditionals_on_concrete_draws_are_the_closed_forms():
    """The start of ``conjugate_split``: every site's complete conditional at concrete draws."""
    from vijax.interop import complete_conditionals

    group, y = jnp.arange(17) % 7, jnp.arange(17.0) % 5

    def model(group, y):
        b = numpyro.sample("b", dist.Gamma(A0, B0))
        with numpyro.plate("groups", 7):
            rates = numpyro.sample("rates", dist.Gamma(A, b))
        with numpyro.plate("data", 17):
            numpyro.sample("y", dist.Poisson(rates[group]), obs=y)

    target = vijax.from_numpyro(model, group, y)
    draws = {"b": np.full((3,), 1.5, np.float32), "rates": np.full((3, 7), 2.0, np.float32)}
    requests = {"b": {"rates": draws["rates"]}, "rates": {"b": draws["b"]}}
    q = complete_conditionals(target, requests)
    counts = np.bincount(np.asarray(group), weights=np.asarray(y), minlength=7)
    np.testing.assert_allclose(q["rates"].concentration, A + counts, rtol=1e-6)
    np.testing.assert_allclose(q["b"].concentration, A0 + 7 * A, rtol=1e-6)
    np.testing.assert_allclose(q["b"].rate, B0 + 7 * 2.0, rtol=1e-6)


def scale_site(y):
    """A Normal site used as a scale: the log-joint is not finite where s <= 0."""
    s = numpyro.sample("s", dist.Normal(1.0, 1.0))
    numpyro.sample("y", dist.Normal(0.0, s), obs=y)


def gamma_with_factor(k):
    """Gamma(2, 1) rate of Poisson counts and a factor +(n + 2) x: linear in x, but the rate of
    the complete conditional is 1 + n - (n + 2) = -1."""
    rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
    numpyro.factor("push", (k.shape[0] + 2.0) * rate)
    with numpyro.plate("data", k.shape[0]):
        numpyro.sample("k", dist.Poisson(rate), obs=k)


def normal_with_factor():
    """N(0, 1) and a factor +x^2: quadratic in x, precision 1 - 2 = -1."""
    x = numpyro.sample("x", dist.Normal(0.0, 1.0))
    numpyro.factor("push", x**2)


@pytest.mark.parametrize(
    "model, args, site, why",
    [
        (scale_site, (jnp.array(0.5),), "s", "log-joint not finite at a point checked"),
        (gamma_with_factor, (Y,), "rate", r"its complete conditional is improper: .* Gamma with shape 17 and rate -1 "),
        (normal_with_factor, (), "x", r"its complete conditional is improper: .* Normal with precision -1 "),
    ],
)
def test_a_site_without_a_proper_complete_conditional_is_not_conjugate_and_refused(model, args, site, why):
    """A log-joint not finite at a point checked (a Normal site as a scale), or linear in the
    statistics with coefficients outside the family's domain (a factor that outgrows the prior):
    reported not conjugate with the reason, refused when forced, refused by complete_conditional,
    each naming the site."""
    target = vijax.from_numpyro(model, *args)
    report = conjugate_sites(target, KEY, num_draws=1)[site]
    assert not report.conjugate and report.family is not None
    assert re.search(why, report.reason), report.reason
    with pytest.raises(ArgumentError, match=f"force: site {site!r} is not conditionally conjugate: {why}") as err:
        conjugate_sites(target, KEY, force=[site], num_draws=1)
    assert err.value.value == site
    with pytest.raises(ArgumentError, match=f"site {site!r}") as err:
        complete_conditional(target, site, {})
    assert err.value.argument == "site" and re.search(why.replace("log-joint ", ""), str(err.value)), err.value


def test_vague_gamma_priors_are_conjugate_and_give_the_posterior(dtype):
    """Gamma(a, a) rates of Poisson counts with a = 1e-2 and 1e-3: the prior's median (e^-49, e^-539)
    does not move the check's points out of reach of the statistics; the update is Gamma(a + sum y,
    a + n). In float32 the draws of Gamma(1e-3, 1e-3) underflow to 0 (the start, formerly refused as
    not finite, is moved off the support's boundary); the check runs in float64 either way."""
    for a in (1e-2, 1e-3):

        def vague(k, a=a):
            rate = numpyro.sample("rate", dist.Gamma(a, a))
            with numpyro.plate("data", k.shape[0]):
                numpyro.sample("k", dist.Poisson(rate), obs=k)

        with jax.enable_x64(dtype == "float64"):
            target = vijax.from_numpyro(vague, np.asarray(Y, dtype))
            assert conjugate_sites(target, KEY)["rate"].conjugate
            q = complete_conditional(target, "rate", {})
        assert q.concentration.dtype == np.dtype(dtype)
        expected = [a + float(Y.sum()), a + Y.shape[0]]
        np.testing.assert_allclose([q.concentration, q.rate], expected, rtol=1e-6 if dtype == "float64" else 1e-5)


def test_complete_conditional_of_a_model_on_traced_data_is_refused_and_a_target_takes_it():
    """Inside jit with the model's data traced: refused, naming target_or_model and the way out; a
    target built outside takes the traced data as its batch."""

    @jax.jit
    def of_model(k):
        return complete_conditional(gamma_poisson, "rate", {}, k)

    with pytest.raises(ArgumentError, match="build it outside") as err:
        of_model(Y)
    assert err.value.argument == "target_or_model"
    target = vijax.from_numpyro(gamma_poisson, Y)
    q = jax.jit(lambda k: complete_conditional(target, "rate", {}, k=k))(Y[:3])
    np.testing.assert_allclose([q.concentration, q.rate], [A + float(Y[:3].sum()), B0 + 3], rtol=1e-6)


def test_the_two_statistics_least_squares_is_as_accurate_as_lapacks():
    """The closed-form QR of the scalar families' (n, 2) systems: in float64 equal to numpy's lstsq; in float32 as
    close to it as JAX's lstsq in float32 (LAPACK: the largest and the median relative error), on consistent systems
    (a conjugate site's) and noisy ones, with rows as far apart as the check's points and as close as 1e-2."""
    from vijax.interop._conjugate_sites import _least_squares

    rng = np.random.default_rng(0)
    u = rng.uniform(-7.0, 7.0, (200, 3))
    u[:50, 1] = u[:50, 0] + 1e-2
    a = np.stack([np.ones_like(u), np.exp(u)], axis=-1)  # a Gamma's d(log x, x)/du at x = e^u
    c = rng.normal(size=(200, 2))
    for b in (np.einsum("end,ed->en", a, c), np.einsum("end,ed->en", a, c) + rng.normal(size=(200, 3))):
        want = np.stack([np.linalg.lstsq(a_e, b_e, rcond=None)[0] for a_e, b_e in zip(a, b)])
        with jax.enable_x64(True):
            got = np.asarray(_least_squares(jnp.asarray(a), jnp.asarray(b)))
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-8 * np.abs(want).max())
        a32, b32 = jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)
        lapack = np.asarray(jax.vmap(lambda a_e, b_e: jnp.linalg.lstsq(a_e, b_e)[0])(a32, b32), np.float64)
        ours = np.asarray(_least_squares(a32, b32), np.float64)
        scale = np.abs(want).max(axis=1)
        err_ours, err_lapack = np.abs(ours - want).max(axis=1) / scale, np.abs(lapack - want).max(axis=1) / scale
        assert err_ours.max() <= err_lapack.max() and np.median(err_ours) <= 2.0 * np.median(err_lapack)
