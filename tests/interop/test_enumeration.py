"""Discrete latent sites summed out of a NumPyro target (``infer={"enumerate": "parallel"}``):
the marginal log-density against brute-force enumeration, a subsampled plate's N / M scale applied
after the sum, the marginal pointwise log-likelihood, posterior draws of the summed-out sites,
a bbvi fit against quadrature, and the errors naming a site."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import optax
import pytest
from numpyro import handlers

import vijax
from vijax.inference import bbvi, sample

Y = jnp.array([-1.0, 0.3, 2.5])


def two_level_mixture(y, subsample_size=None):
    """A global discrete switch ``c`` (outside every plate) and local assignments ``z`` (in the
    data plate), both summed out."""
    w = numpyro.sample("w", dist.Dirichlet(jnp.ones(2)))
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0).expand([2]).to_event(1))
    c = numpyro.sample("c", dist.Bernoulli(0.3), infer={"enumerate": "parallel"})
    with numpyro.plate("data", y.shape[0], subsample_size=subsample_size) as idx:
        z = numpyro.sample("z", dist.Categorical(w), infer={"enumerate": "parallel"})
        numpyro.sample("y", dist.Normal(mu[z] + 2.0 * c, 1.0), obs=y[idx])


def mixture(y, subsample_size=None):
    w = numpyro.sample("w", dist.Dirichlet(jnp.ones(2)))
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0).expand([2]).to_event(1))
    with numpyro.plate("data", y.shape[0], subsample_size=subsample_size) as idx:
        z = numpyro.sample("z", dist.Categorical(w), infer={"enumerate": "parallel"})
        numpyro.sample("y", dist.Normal(mu[z], 1.0), obs=y[idx])


PARAMS = {"w": jnp.array([0.3, 0.7]), "mu": jnp.array([-1.0, 2.0])}


def _brute_force(params, y):
    """log p(y, w, mu) by summing p(y, w, mu, c, z) over all 2 * 2^N values of (c, z)."""
    values = jnp.array([(c, *z) for c in (0, 1) for z in itertools.product(range(2), repeat=y.shape[0])])

    def one(v):
        return numpyro.infer.util.log_density(two_level_mixture, (y,), {}, {**params, "c": v[0], "z": v[1:]})[0]

    return float(jax.scipy.special.logsumexp(jax.vmap(one)(values)))


@pytest.mark.slow
def test_the_marginal_log_density_is_the_sum_over_every_assignment():
    """log_prob against brute-force enumeration of the 16 values of (c, z) (rtol 1e-10, float64),
    log_density is log_prob plus the log-Jacobian of the target's transform, and both jit and
    differentiate to finite values; the summed-out sites are listed, not fitted."""
    target = vijax.from_numpyro(two_level_mixture, Y)
    assert list(target.sites) == ["w", "mu"] and target.enumerated == ("c", "z")
    np.testing.assert_allclose(float(target.log_prob(PARAMS)), _brute_force(PARAMS, Y), rtol=1e-10)
    u = target.unconstrain(PARAMS)
    _, log_det = target.transform(u)
    value, grad = jax.jit(jax.value_and_grad(lambda u: target.log_density(u, None)))(u)
    np.testing.assert_allclose(float(value), _brute_force(PARAMS, Y) + float(log_det), rtol=1e-10)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree_util.tree_leaves(grad))


def test_the_start_traces_a_summed_out_site_at_itsfirst_support_value(monkeypatch):
    """From_numpyro's start does not draw a summed-out site (a Categorical's sampler that raises is
    never called): its value in the start's trace is its support's first value at each element
    (0 for a Categorical or a Bernoulli, ``low`` for a DiscreteUniform; shape
    ``sample_shape + batch_shape``), so the start compiles no random bits for it."""
    from vijax.interop._numpyro import first_support_value

    cat = dist.Categorical(jnp.full((4, 3), 1.0 / 3))
    np.testing.assert_array_equal(first_support_value(cat, (2,)), np.zeros((2, 4), np.int32))
    uniform = dist.DiscreteUniform(2, 4).expand([3])
    np.testing.assert_array_equal(first_support_value(uniform, ()), [2, 2, 2])
    np.testing.assert_array_equal(first_support_value(dist.Bernoulli(0.3), ()), 0)

    def no_draw(*args, **kwargs):
        raise AssertionError("the start drew a summed-out site")

    monkeypatch.setattr(dist.CategoricalProbs, "sample", no_draw)
    monkeypatch.setattr(dist.BernoulliProbs, "sample", no_draw)
    start = vijax.from_numpyro(two_level_mixture, Y + 0.25).init_params  # data of its own: a fresh start
    assert set(start) == {"w", "mu"} and all(bool(jnp.all(jnp.isfinite(v))) for v in start.values())


def test_a_subsampled_plate_scales_the_summed_terms_by_n_over_m():
    """With the data plate subsampled (M = 2 of N = 6), the log-joint averaged over the minibatches
    of a partition equals the full log-joint (rtol 1e-10): the N / M scale multiplies
    log sum_z p(z) p(y | z), not p(z) p(y | z) inside the sum (which NumPyro's own enumerated
    log_density does, and which is off by about 0.9 nats here). A site summed out outside the
    subsampled plate (the global switch c) would put N / M inside its sum: refused by name."""
    y = jnp.array([-1.0, 0.3, 2.5, 1.7, -2.0, 0.1])
    full = vijax.from_numpyro(mixture, y)
    sub = vijax.from_numpyro(mixture, y, subsample_size=2)
    assert sub.plates == {"data": (6, 2)}
    minibatch = jax.jit(lambda idx: sub.log_prob(PARAMS, {"data": idx}))
    averaged = np.mean([float(minibatch(jnp.array(i))) for i in ([0, 1], [2, 3], [4, 5])])
    np.testing.assert_allclose(averaged, float(full.log_prob(PARAMS)), rtol=1e-10)
    switch = vijax.from_numpyro(two_level_mixture, y, subsample_size=2)
    with pytest.raises(ValueError, match="site 'c': summed out outside the subsampled plate 'data'"):
        switch.log_prob(PARAMS, {"data": jnp.array([0, 1])})


@pytest.mark.slow
def test_log_likelihood_sums_the_assignment_out_and_predictive_draws_it_from_its_posterior():
    """At 2,000 draws of (w, mu), two distinct ones: the pointwise log-likelihood is
    log sum_k w_k N(y_i; mu_k, 1) per point and draw (rtol 1e-10), and ``to_arviz`` holds it;
    ``predictive(sites=["z"])`` draws each assignment from p(z_i | y_i, w, mu): over each
    1,000 draws the frequencies are within 0.05 of the exact probabilities (binomial sd at most
    0.016); the default predictive draws the observed site only."""
    target = vijax.from_numpyro(mixture, Y)
    two = {"w": jnp.array([[0.3, 0.7], [0.5, 0.5]]), "mu": jnp.array([[-1.0, 2.0], [0.0, 1.0]])}
    draws = {n: jnp.repeat(v, 1000, axis=0) for n, v in two.items()}
    log_joint = jnp.log(two["w"])[:, :, None] + dist.Normal(two["mu"][:, :, None], 1.0).log_prob(Y[None, None, :])
    idata = vijax.metrics.to_arviz(draws, key=jax.random.PRNGKey(2), target=target)
    ll = np.asarray(idata.log_likelihood["y"]).reshape(2, 1000, 3)
    np.testing.assert_allclose(
        ll, np.repeat(jax.scipy.special.logsumexp(log_joint, axis=1)[:, None], 1000, 1), rtol=1e-10
    )
    assert np.asarray(idata.posterior_predictive["y"]).size == 2000 * 3
    out = vijax.predictive(target, draws, jax.random.PRNGKey(1), sites=["z", "y"])
    frequencies = np.mean(np.asarray(out["z"]).reshape(2, 1000, 3), axis=1)
    np.testing.assert_allclose(frequencies, jax.nn.softmax(log_joint, axis=1)[:, 1], atol=0.05)
    assert set(vijax.predictive(target, draws, jax.random.PRNGKey(0))) == {"y"}


def signal_and_background(y):
    """Each point is background N(0, 1) or signal N(mu, 1), with probability 1/2 each."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    with numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Bernoulli(0.5), infer={"enumerate": "parallel"})
        numpyro.sample("y", dist.Normal(mu * z, 1.0), obs=y)


def test_bbvi_on_a_summed_out_target_matches_quadrature():
    """bbvi's Gaussian on mu, the assignments summed out, against the posterior of mu by quadrature
    on 4,001 points: mean within 0.1 posterior sd and sd within 10% (measured: 0.005 sd and 0.3%
    off; the posterior is close to Gaussian at N = 40)."""
    key_z, key_y = jax.random.split(jax.random.PRNGKey(0))
    z = jax.random.bernoulli(key_z, 0.5, (40,))
    y = 2.0 * z + jax.random.normal(key_y, (40,))
    target = vijax.from_numpyro(signal_and_background, y)
    grid = jnp.linspace(-4.0, 8.0, 4001)
    log_post = jax.vmap(lambda m: target.log_prob({"mu": m}))(grid)
    p = jnp.exp(log_post - jnp.max(log_post))
    p = p / jnp.sum(p)
    mean = float(jnp.sum(p * grid))
    sd = float(jnp.sqrt(jnp.sum(p * (grid - mean) ** 2)))
    schedule = optax.cosine_decay_schedule(0.05, 400, alpha=0.05)
    alg = bbvi(target, family="meanfield", schedule=schedule, num_samples=8, estimator="stl")

    def body(state, k):
        return alg.step(k, state, None)[0], None

    run = jax.jit(lambda k: jax.lax.scan(body, alg.init(jax.random.PRNGKey(1)), jax.random.split(k, 400))[0])
    state = run(jax.random.PRNGKey(2))
    draws = sample(alg, jax.random.PRNGKey(3), state, 4000)["mu"]
    m, s = float(jnp.mean(draws)), float(jnp.std(draws))
    assert abs(m - mean) < 0.1 * sd and abs(s / sd - 1.0) < 0.1, (m, s, mean, sd)


def marked_sequential():
    numpyro.sample("coin", dist.Bernoulli(0.3), infer={"enumerate": "sequential"})
    numpyro.sample("x", dist.Normal(0.0, 1.0))


def scaled_by_hand(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with handlers.scale(scale=3.0), numpyro.plate("data", y.shape[0]):
        z = numpyro.sample("z", dist.Bernoulli(0.5), infer={"enumerate": "parallel"})
        numpyro.sample("y", dist.Normal(mu * z, 1.0), obs=y)


def only_discrete(y):
    z = numpyro.sample("z", dist.Bernoulli(0.5), infer={"enumerate": "parallel"})
    numpyro.sample("y", dist.Normal(z, 1.0), obs=y)


def test_sites_that_cannot_be_summed_out_are_named():
    with pytest.raises(ValueError, match="site 'coin': .*finite support, marked enumerate='sequential'"):
        vijax.from_numpyro(marked_sequential)
    target = vijax.from_numpyro(scaled_by_hand, Y)
    with pytest.raises(ValueError, match="site 'z': scaled by 3.0 where its subsampled plates give 1.0"):
        target.log_prob({"mu": 0.5})
    with pytest.raises(ValueError, match=r"no continuous latent sample site .*summed out: \['z'\]"):
        vijax.from_numpyro(only_discrete, 0.3)


@pytest.mark.slow
def test_a_dirichlet_categorical_mixture_against_nuts():
    """Three groups of 100 points at -4, 0, 4; the assignments summed out by both: vijax's ngvi with
    its automatic families (a Dirichlet on the weights, Normals on the locations) against NumPyro's
    NUTS on the same enumerated model (1,000 draws after 500 of warm-up), the components sorted by
    location in each draw (both stay in one labelling): posterior means within 0.25 NUTS posterior
    sd and sds within 30% (a mean-field q on a posterior whose correlations are small here;
    measured: means within 0.04 sd, sds 0.96-1.08 of NUTS')."""
    from numpyro.infer import MCMC, NUTS

    rng = np.random.default_rng(0)
    y = jnp.asarray(np.concatenate([rng.normal(m, 1.0, 100) for m in (-4.0, 0.0, 4.0)]))

    def three(y):
        w = numpyro.sample("w", dist.Dirichlet(jnp.ones(3)))
        mu = numpyro.sample("mu", dist.Normal(jnp.array([-1.0, 0.0, 1.0]), 5.0).to_event(1))
        with numpyro.plate("data", y.shape[0]):
            z = numpyro.sample("z", dist.Categorical(w), infer={"enumerate": "parallel"})
            numpyro.sample("y", dist.Normal(mu[z], 1.0), obs=y)

    mcmc = MCMC(NUTS(three), num_warmup=500, num_samples=1000, progress_bar=False)
    with jax.numpy_rank_promotion("allow"):  # NumPyro's code broadcasts by rank promotion
        mcmc.run(jax.random.PRNGKey(0), y)
    nuts = mcmc.get_samples()
    target = vijax.from_numpyro(three, y)
    alg = vijax.inference.ngvi(target, num_samples=16)

    def body(state, k):
        return alg.step(k, state, None)[0], None

    state = jax.jit(lambda k: jax.lax.scan(body, alg.init(jax.random.PRNGKey(1)), jax.random.split(k, 600))[0])(
        jax.random.PRNGKey(2)
    )
    ours = sample(alg, jax.random.PRNGKey(3), state, 4000)

    def summary(draws):
        order = jnp.argsort(draws["mu"], axis=1)
        mu, w = jnp.take_along_axis(draws["mu"], order, 1), jnp.take_along_axis(draws["w"], order, 1)
        both = jnp.concatenate([mu, w], axis=1)
        return np.asarray(jnp.mean(both, 0)), np.asarray(jnp.std(both, 0))

    (m_vi, s_vi), (m_nuts, s_nuts) = summary(ours), summary(nuts)
    assert np.all(np.abs(m_vi - m_nuts) < 0.25 * s_nuts), (m_vi, m_nuts, s_nuts)
    assert np.all(np.abs(s_vi / s_nuts - 1.0) < 0.3), (s_vi, s_nuts)
