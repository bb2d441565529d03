"""``discrete_bbvi``: Rao-Blackwellized score-function gradients for a target's discrete sites not summed out.

Its estimate of the ELBO's gradient in a Bernoulli q's logits is checked against the exact gradient, by enumerating
q's support on three Bernoulli sites in a plate (the continuous location held fixed as a model argument), and its
variance against the plain score estimator's (every element's learning signal the whole log-joint); with a
continuous site added, its gradient against NumPyro's ``TraceGraph_ELBO`` of the equivalent hand-written guide
(each mean over many keys, within stated standard errors); ``vijax.fit`` routes a model with a Bernoulli and a Poisson
site to it and recovers the mean-field optimum (a closed form and an enumeration); refusals name the site."""

import dataclasses
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from scipy import optimize, stats

import vijax
from vijax._validate import ArgumentError
from vijax.inference import bbvi, discrete_bbvi
from vijax.inference._discrete_bbvi import surrogate
from vijax.run import plan_fit

Y = jnp.array([0.5, 2.5, 3.5])
LOGITS = jnp.array([0.3, -0.5, 1.0])


def plate_model(y, mu):
    with numpyro.plate("data", 3):
        z = numpyro.sample("z", dist.Bernoulli(0.4))
        numpyro.sample("y", dist.Normal(mu * z, 1.0), obs=y)


def _gradients(targets, q, keys, num_samples):
    """(K, 3) for each target: the estimate's gradient in z's logits at each key (one program)."""

    def one(target, k):
        settings = dict(target=target, guide=None, num_samples=num_samples)
        return jax.grad(lambda q: surrogate(q, None, k, **settings)[0])(q)["discrete"]["z"].eta

    return jax.jit(jax.vmap(lambda k: [one(t, k) for t in targets]))(keys)


def test_estimate_is_the_exact_gradient_and_rao_blackwellization_lowers_its_variance():
    target = vijax.from_numpyro(plate_model, Y, 3.0)
    q = {"continuous": {}, "discrete": {"z": vijax.expfam.Bernoulli(LOGITS.astype(jnp.float64))}}
    support = jnp.array([[(c >> i) & 1 for i in range(3)] for c in range(8)], jnp.float64)  # {0, 1}^3

    def exact_elbo(logits):  # sum_z q(z) (log p(y, z) - log q(z))
        log_q = jnp.sum(jax.vmap(vijax.expfam.Bernoulli(logits).log_prob)(support), axis=1)
        log_p = jax.vmap(lambda z: target.log_prob({"z": z}, None))(support)
        return jnp.sum(jnp.exp(log_q) * (log_p - log_q))

    exact = jax.jit(jax.grad(exact_elbo))(LOGITS.astype(jnp.float64))
    keys = jax.random.split(jax.random.PRNGKey(0), 2000)

    def whole(params, batch):  # the plain estimator: each element's signal the whole log-joint
        return {"z": jnp.broadcast_to(target.log_prob(params, batch), (3,))}

    ours, plain = _gradients([target, dataclasses.replace(target, blanket_terms=whole)], q, keys, num_samples=4)
    se = ours.std(0) / math.sqrt(len(keys))
    np.testing.assert_array_less(np.abs(ours.mean(0) - exact), 4 * se)  # 4 standard errors per logit
    np.testing.assert_array_less(np.abs(plain.mean(0) - exact), 4 * plain.std(0) / math.sqrt(len(keys)))
    # the other elements' terms only add noise: removed, the variance falls by 1.8 to 6 times here
    np.testing.assert_array_less(1.3 * ours.var(0), plain.var(0))


def test_step_jits_once():
    alg = discrete_bbvi(vijax.from_numpyro(plate_model, Y, 3.0), schedule=0.1, num_samples=2)
    state = alg.init(jax.random.PRNGKey(0))
    chex.clear_trace_counter()
    step = jax.jit(chex.assert_max_traces(alg.step, n=1))
    for t in range(2):  # new keys and states of the same shapes: one trace
        state, info = step(jax.random.PRNGKey(t + 1), state, None)
    assert int(state.count) == 2 and bool(info.accepted) and np.isfinite(float(info.elbo))
    assert state.q_global["discrete"]["z"].eta.shape == (3,)


def mixed_model(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
    with numpyro.plate("data", 3):
        z = numpyro.sample("z", dist.Bernoulli(0.4))
        numpyro.sample("y", dist.Normal(mu * z, 1.0), obs=y)


def mixed_guide(y):
    loc, rho = numpyro.param("loc", 0.0), numpyro.param("rho", 0.0)
    numpyro.sample("mu", dist.Normal(loc, jax.nn.softplus(rho)))
    logits = numpyro.param("logits", jnp.zeros(3))
    with numpyro.plate("data", 3):
        numpyro.sample("z", dist.Bernoulli(logits=logits))


def test_gradient_matches_numpyro_trace_graph_elbo():
    """Both unbiased for the ELBO's gradient: their means over 2000 keys agree within 4 standard errors of the
    difference (q(mu) = N(1.5, softplus(-0.5)^2) and the logits ``LOGITS``; one draw per key for NumPyro, four with
    the leave-one-out baseline for vijax)."""
    target = vijax.from_numpyro(mixed_model, Y)
    alg = discrete_bbvi(target, num_samples=4)
    guide = alg.extras.guide
    q = {
        "continuous": {"loc": jnp.array([1.5]), "scale": jnp.array([-0.5])},
        "discrete": {"z": vijax.expfam.Bernoulli(LOGITS.astype(jnp.float64))},
    }
    keys = jax.random.split(jax.random.PRNGKey(1), 2000)
    settings = dict(target=target, guide=guide, num_samples=4)
    grad = jax.grad(lambda q, k: surrogate(q, None, k, **settings)[0])

    def ours(k):
        g = grad(q, k)
        return jnp.concatenate([g["continuous"]["loc"], g["continuous"]["scale"], g["discrete"]["z"].eta])

    elbo = numpyro.infer.TraceGraph_ELBO()
    params = {"loc": jnp.array(1.5), "rho": jnp.array(-0.5), "logits": LOGITS.astype(jnp.float64)}

    def theirs(k):
        with jax.numpy_rank_promotion("allow"):
            g = jax.grad(lambda p: -elbo.loss(k, p, mixed_model, mixed_guide, Y))(params)
        return jnp.concatenate([g["loc"][None], g["rho"][None], g["logits"]])

    a, b = jax.jit(jax.vmap(lambda k: (ours(k), theirs(k))))(keys)
    se = np.sqrt(a.var(0) / len(keys) + b.var(0) / len(keys))
    np.testing.assert_array_less(np.abs(a.mean(0) - b.mean(0)), 4 * se)


def fit_model(y, w, c):
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)
    z = numpyro.sample("z", dist.Bernoulli(0.3))
    numpyro.sample("w", dist.Normal(3.0 * z, 1.0), obs=w)
    n = numpyro.sample("n", dist.Poisson(3.0))
    numpyro.sample("c", dist.Poisson(n + 0.5), obs=c)


def test_fit_plans_the_score_route_for_discrete_sites():
    rows = {r.site: r for r in plan_fit(fit_model, jnp.array([1.0, 2.0, 3.0]), 2.0, 6.0).rows}
    assert (rows["z"].family, rows["z"].route) == ("Bernoulli", "score (Rao-Blackwellized)")
    assert "enumerate='parallel', is exact" in rows["z"].reason
    assert (rows["n"].family, rows["n"].route, rows["mu"].route) == (
        "Poisson",
        "score (Rao-Blackwellized)",
        "bbvi (reparam)",
    )


@pytest.mark.slow
def test_fit_recovers_the_mean_field_optimum():
    """The posterior factorizes into p(mu | y) p(z | w) p(n | c), so the mean-field optimum is p(mu | y) (a Gaussian),
    p(z | w) (a Bernoulli, in closed form) and the Poisson q(n) nearest p(n | c) in KL(q || p) (by enumerating n up
    to 60 and maximizing its ELBO over the rate). After 600 steps of Adam (0.05), q's means from 4000 draws: P(z = 1)
    within 0.03, E[n] within 5%, E[mu] within 0.15."""
    y, w, c = jnp.array([1.0, 2.0, 3.0]), 2.0, 6.0
    post = vijax.fit(fit_model, y, w, c, progress=False, seed=0, learning_rate=0.05, tol=None, max_steps=600)
    assert post.plan.route == "score"
    summary = post.summary()

    log_odds = math.log(0.3 / 0.7) + stats.norm.logpdf(w, 3.0) - stats.norm.logpdf(w, 0.0)
    n = np.arange(61)
    log_p = stats.poisson.logpmf(n, 3.0) + stats.poisson.logpmf(c, n + 0.5)

    def neg_elbo(log_rate):
        log_q = stats.poisson.logpmf(n, np.exp(log_rate))
        return -np.sum(np.exp(log_q) * (log_p - log_q))

    best_rate = math.exp(optimize.minimize_scalar(neg_elbo, bounds=(-3.0, 4.0), method="bounded").x)
    np.testing.assert_allclose(summary["z"]["mean"], 1.0 / (1.0 + math.exp(-log_odds)), atol=0.03)
    np.testing.assert_allclose(summary["n"]["mean"], best_rate, rtol=0.05)
    np.testing.assert_allclose(summary["mu"]["mean"], float(jnp.sum(y)) / (3.0 + 1e-2), atol=0.15)
    assert set(post.sample(jax.random.PRNGKey(0), 2)) == {"mu", "z", "n"}


def subsampled_discrete(y):
    with numpyro.plate("data", 4, subsample_size=2):
        numpyro.sample("z", dist.Bernoulli(0.5))


def shifted_discrete():
    numpyro.sample("z", dist.DiscreteUniform(1, 4))  # {1, ..., 4}: no q family


def enumerated_and_discrete():
    numpyro.sample("k", dist.Poisson(2.0))
    numpyro.sample("z", dist.Bernoulli(0.5), infer={"enumerate": "parallel"})


def continuous_only(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def test_refusals_name_the_discrete_site():
    target = vijax.from_numpyro(plate_model, Y, 3.0)
    with pytest.raises(ArgumentError, match=r"site 'z': a discrete latent site .*bbvi fits continuous sites only"):
        bbvi(target)
    with pytest.raises(ArgumentError, match=r"route='ngvi': site 'z' is discrete .* only route 'score'"):
        plan_fit(target, route="ngvi")
    continuous = vijax.from_numpyro(continuous_only, 1.0)
    with pytest.raises(ArgumentError, match=r"route='score': the model has no discrete latent site"):
        plan_fit(continuous, route="score")
    with pytest.raises(ArgumentError, match=r"discrete_bbvi fits a target with discrete latent sites"):
        discrete_bbvi(continuous)
    with pytest.raises(ArgumentError, match=r"num_samples >= 2"):
        discrete_bbvi(target, num_samples=1)
    with pytest.raises(ArgumentError, match=r"target\.log_prob|site 'z': a discrete latent site"):
        target.log_prob({}, None)
    for model, args, match in [
        (subsampled_discrete, (Y,), r"^site 'z': a discrete latent site .* inside the subsampled plate 'data'"),
        (shifted_discrete, (), r"^site 'z': a discrete latent site \(DiscreteUniform.* has no q family"),
        (enumerated_and_discrete, (), r"^site 'k': a discrete latent site not summed out, in a model with sites"),
    ]:
        with pytest.raises(ArgumentError, match=match):
            vijax.from_numpyro(model, *args)


def test_predictive_log_likelihood_and_arviz_take_the_discrete_sites_draws():
    """At given draws of z: the pointwise log-likelihood is scipy's Normal density at mu z (also in to_arviz's
    log_likelihood group), and the predictive's draws of y have mean mu z (1,000 draws, within 4 standard errors)."""
    target = vijax.from_numpyro(plate_model, Y, 3.0)
    z = jnp.tile(jnp.array([1.0, 0.0, 1.0]), (1000, 1))
    loglik = vijax.interop.log_likelihood(target, {"z": z[:2]})["y"]
    np.testing.assert_allclose(loglik, np.tile(stats.norm.logpdf(Y, 3.0 * z[0], 1.0), (2, 1)), rtol=1e-6)
    y = vijax.predictive(target, {"z": z}, jax.random.PRNGKey(0), {"y": None})["y"]
    assert y.shape == (1000, 3)
    np.testing.assert_allclose(np.mean(y, 0), 3.0 * z[0], atol=4 / np.sqrt(1000))
    idata = vijax.to_arviz({"z": z[:50]}, jax.random.PRNGKey(1), target=target)  # as Posterior.to_arviz
    np.testing.assert_allclose(idata.log_likelihood["y"].values[0], np.tile(np.asarray(loglik[0]), (50, 1)), rtol=1e-6)
