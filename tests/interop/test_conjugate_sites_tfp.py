"""Conjugate sites of a TFP joint distribution (``vijax.from_tfp``): the report site by site as for
the same model written in NumPyro, the closed-form update against the analytic complete
conditionals and against the NumPyro path's, a forced site that is not conjugate refused by name,
and ``conjugate_split`` on a TFP target reaching the exact posterior of its conjugate site."""

import pytest

numpyro = pytest.importorskip("numpyro")
tfp = pytest.importorskip("tensorflow_probability.substrates.jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro.distributions as dist  # noqa: E402

import vijax  # noqa: E402
from vijax._validate import ArgumentError  # noqa: E402
from vijax.inference import conjugate_split  # noqa: E402
from vijax.interop import SiteConjugacy, complete_conditional, complete_conditionals, conjugate_sites  # noqa: E402

tfd = tfp.distributions
KEY = jax.random.PRNGKey(0)
F64 = np.float64  # the joints' parameters in float64, as the NumPyro models' under the suite's x64
K = jnp.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
A, B = 2.0, 1.5

# a Gamma rate of Poisson counts, scaled by a Normal weight through a sigmoid (not conjugate)
rate_and_weight = tfd.JointDistributionNamed(
    dict(
        rate=tfd.Gamma(F64(A), F64(B)),
        w=tfd.Normal(F64(0.0), F64(1.0)),
        k=lambda rate, w: tfd.Sample(tfd.Poisson(rate * jax.nn.sigmoid(w)), K.shape[0]),
    )
)


def rate_and_weight_numpyro(k):
    rate = numpyro.sample("rate", dist.Gamma(A, B))
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", k.shape[0]):
        numpyro.sample("k", dist.Poisson(rate * jax.nn.sigmoid(w)), obs=k)


GROUP = jnp.array([0, 0, 0, 1, 1, 1, 1])
Z = jnp.array([0, 1, 1, 3, 3, 3, 2])
ALPHA = jnp.array([1.0, 2.0, 0.5, 3.0])
Y = jnp.array([0.5, 2.5, 1.0, -0.3])


@tfd.JointDistributionCoroutine
def mean_and_probs():
    """A Normal mean of Normal data of known scale 2, and per-group Dirichlets (a Sample of two) over
    categorical draws (an Independent of them)."""
    root = tfd.JointDistributionCoroutine.Root
    mu = yield root(tfd.Normal(F64(1.0), F64(10.0), name="mu"))
    probs = yield root(tfd.Sample(tfd.Dirichlet(ALPHA), 2, name="probs"))
    yield tfd.Independent(tfd.Categorical(probs=jnp.take(probs, GROUP, axis=-2)), 1, name="z")
    yield tfd.Sample(tfd.Normal(mu, F64(2.0)), Y.shape[0], name="y")


def mean_and_probs_numpyro(group, z, y):
    mu = numpyro.sample("mu", dist.Normal(1.0, 10.0))
    with numpyro.plate("groups", 2):
        probs = numpyro.sample("probs", dist.Dirichlet(ALPHA))
    with numpyro.plate("data", z.shape[0]):
        numpyro.sample("z", dist.Categorical(probs=probs[group]), obs=z)
    with numpyro.plate("ys", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 2.0), obs=y)


def _verdicts(report):
    return {n: (s.conjugate, s.family, s.stats) for n, s in report.items()}


@pytest.fixture(scope="module")
def rate_targets():
    return vijax.from_tfp(rate_and_weight, observed={"k": K}), vijax.from_numpyro(rate_and_weight_numpyro, K)


@pytest.mark.slow
def test_gamma_rate_beside_a_sigmoid_weight_as_numpyro_finds_it_and_the_update_is_closed_form(rate_targets):
    """The report matches the NumPyro model's site by site; the rate given S draws of w is
    Gamma(a + sum k, b + n mean(sigmoid(w))) (the coefficient -(b + n sigmoid(w)) averaged), to
    1e-9 against the hand form and against the NumPyro path at the same draws."""
    target, twin = rate_targets
    report, twin_report = conjugate_sites(target, KEY), conjugate_sites(twin, KEY)
    assert (
        _verdicts(report)
        == _verdicts(twin_report)
        == {"rate": (True, "Gamma", "[log x, x]"), "w": (False, "Normal", "[x, x^2]")}
    )
    assert report["rate"].prior == "Gamma" and report["rate"].gap <= report["rate"].tolerance
    assert report["w"].reason.startswith("log-joint not linear in [x, x^2]") and report["w"].gap > 1e-6
    w = jnp.array([-0.7, 0.2, 1.5])
    q = complete_conditional(target, "rate", {"w": w})
    expected = [A + float(K.sum()), B + K.shape[0] * float(jnp.mean(jax.nn.sigmoid(w)))]
    np.testing.assert_allclose([q.concentration, q.rate], expected, rtol=1e-9)
    q_twin = complete_conditional(twin, "rate", {"w": w})
    np.testing.assert_allclose([q.concentration, q.rate], [q_twin.concentration, q_twin.rate], rtol=1e-9)


@pytest.mark.slow  # over CI's per-test budget: test_conjugate_sites checks the NumPyro refusal in CI
def test_forcing_a_site_that_is_not_conjugate_is_refused_naming_force_and_the_site(rate_targets):
    target, _ = rate_targets
    with pytest.raises(ArgumentError, match="force: site 'w' is not conditionally conjugate") as err:
        conjugate_sites(target, KEY, force=["w"])
    assert err.value.argument == "force" and err.value.value == "w"
    assert conjugate_sites(target, KEY, force="rate")["rate"].conjugate
    with pytest.raises(ArgumentError, match="site 'w' is not conditionally conjugate") as err:
        complete_conditional(target, "w", {"rate": jnp.array([2.0])})
    assert err.value.argument == "site"
    with pytest.raises(ArgumentError, match="as keyword arguments") as err:
        conjugate_sites(target, KEY, K)
    assert err.value.argument == "target_or_model"


@pytest.mark.slow
def test_coroutine_normal_mean_and_dirichlets_match_numpyro_and_the_closed_forms():
    """A JointDistributionCoroutine: mu's update is N's posterior (precision 1/100 + n/4, mean
    (1/100 + sum y/4) / precision), each group's Dirichlet adds its counts (a Sample of Dirichlets:
    the simplex stays last); the report and the updates equal the NumPyro model's. A batch of other
    observed values replaces the pinned ones."""
    target = vijax.from_tfp(mean_and_probs, observed={"z": Z, "y": Y})
    twin = vijax.from_numpyro(mean_and_probs_numpyro, GROUP, Z, Y)
    assert target.sites["probs"].shape == (2, 4)
    report, twin_report = conjugate_sites(target, KEY, num_draws=1), conjugate_sites(twin, KEY, num_draws=1)
    assert (
        _verdicts(report)
        == _verdicts(twin_report)
        == {"mu": (True, "Normal", "[x, x^2]"), "probs": (True, "Dirichlet", "[log x]")}
    )
    probs = jnp.full((1, 2, 4), 0.25)
    requests = {"mu": {"probs": probs}, "probs": {"mu": jnp.array([0.3])}}
    got, want = complete_conditionals(target, requests), complete_conditionals(twin, requests)
    precision = 1 / 100 + Y.shape[0] / 4
    np.testing.assert_allclose(
        [got["mu"].mean, got["mu"].variance], [(1 / 100 + float(Y.sum()) / 4) / precision, 1 / precision], rtol=1e-9
    )
    counts = jnp.stack([jnp.bincount(Z[:3], length=4), jnp.bincount(Z[3:], length=4)])
    np.testing.assert_allclose(got["probs"].concentration, ALPHA[None] + counts, rtol=1e-9)
    np.testing.assert_allclose(got["probs"].concentration, want["probs"].concentration, rtol=1e-9)
    np.testing.assert_allclose([got["mu"].mean, got["mu"].variance], [want["mu"].mean, want["mu"].variance], rtol=1e-9)
    y2 = Y + 1.0  # the batch: observed values in place of the pinned ones
    q = complete_conditional(target, "mu", {"probs": probs}, y=y2)
    np.testing.assert_allclose(q.mean, (1 / 100 + float(y2.sum()) / 4) / precision, rtol=1e-9)


X = jnp.array([-1.5, -0.5, 0.3, 1.2, 2.0, -2.2, 0.8, 1.7])
T = jnp.array([0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0])

# the rate's part does not touch the logistic weight's: its q is its exact posterior
separate = tfd.JointDistributionNamed(
    dict(
        rate=tfd.Gamma(F64(2.0), F64(1.0)),
        w=tfd.Normal(F64(0.0), F64(2.0)),
        y=lambda rate: tfd.Sample(tfd.Poisson(rate), K.shape[0]),
        t=lambda w: tfd.Independent(tfd.Bernoulli(logits=w[..., None] * X, dtype=T.dtype), 1),
    )
)


@pytest.fixture(scope="module")
def separate_report():
    target = vijax.from_tfp(separate, observed={"y": K, "t": T})
    report = conjugate_sites(target, jax.random.PRNGKey(1))
    assert {n: s.conjugate for n, s in report.items()} == {"rate": True, "w": False}
    return target, report


def _check_split(target, report, rest, **options):
    """200 steps in one jitted scan: the rate's q is Gamma(2 + sum k, 1 + n) to 1e-9, every step
    accepted, the ELBO finite."""
    alg = conjugate_split(target, report, rest=rest, **options)
    state = alg.init(jax.random.PRNGKey(0))
    body = lambda s, k: alg.step(k, s, None)  # noqa: E731
    state, infos = jax.jit(lambda s, ks: jax.lax.scan(body, s, ks))(state, jax.random.split(jax.random.PRNGKey(2), 200))
    q = state.q_global["rate"]
    np.testing.assert_allclose([q.concentration, q.rate], [2.0 + float(K.sum()), 1.0 + K.shape[0]], rtol=1e-9)
    assert bool(jnp.all(infos.accepted)) and bool(jnp.all(jnp.isfinite(infos.elbo))) and int(state.num_rejected) == 0
    return state


@pytest.mark.slow
def test_conjugate_split_on_a_tfp_target_reaches_the_exact_posterior_of_its_conjugate_site(separate_report):
    """``rest="ngvi"``: the weight's q a Normal by natural gradients beside the rate's closed form."""
    state = _check_split(*separate_report, "ngvi")
    assert isinstance(state.rest.q_global["w"], vijax.expfam.Normal)


@pytest.mark.slow
def test_conjugate_split_with_a_bbvi_rest_on_a_tfp_target(separate_report):
    """``rest="bbvi"``: the weight mapped by its TFP bijector (Identity), beside the rate's closed form."""
    _check_split(*separate_report, "bbvi", learning_rate=0.01)


@pytest.mark.slow
def test_a_tfp_rest_site_of_another_support_is_refused_with_bbvi():
    """A rest site of support "other" (a bounded Uniform: its bounds could be other sites' values) is
    refused with ``rest="bbvi"``, naming ``rest``."""
    bounded = tfd.JointDistributionNamed(
        dict(
            rate=tfd.Gamma(F64(2.0), F64(1.0)),
            u=tfd.Uniform(F64(0.0), F64(5.0)),
            y=lambda rate, u: tfd.Sample(tfd.Poisson(rate * u), K.shape[0]),
        )
    )
    target = vijax.from_tfp(bounded, observed={"y": K})
    assert target.sites["u"].support == "other"
    report = {
        "rate": SiteConjugacy("rate", True, "Gamma", "Gamma", "[log x, x]", 0.0, 2.2e-12, None),
        "u": SiteConjugacy("u", False, None, "Uniform", None, float("nan"), float("nan"), "no family"),
    }
    with pytest.raises(ArgumentError, match=r"rest='bbvi': the TFP sites \['u'\]") as err:
        conjugate_split(target, report)
    assert err.value.argument == "rest"
