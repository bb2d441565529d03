"""``amortized``: an encoder's q(z_i | x_i) for the local sites of a subsampled plate, a Gaussian for the global
ones. The model x_i ~ N(mu + z_i, 1), z_i ~ N(0, 1), mu ~ N(0, 10^2), N = 200 points in minibatches of M = 20, has
the mean-field optimum in closed form: q(z_i) = N((x_i - m) / 2, 1/2), linear in x_i, and q(mu) = N(m, 1 / (N +
1/100)) with m = sum(x) / (N + 1/50), the mean of p(mu | x) (x_i ~ N(mu, 2)). Its ELBO estimate is checked against
NumPyro's ``Trace_ELBO`` of the equivalent hand-written guide; the other algorithms, ``fit``'s forced routes and
bad encoders are refused, naming the local site or the argument."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import optax
import pytest
from numpyro import handlers
from scipy import stats

import vijax
from vijax._compile import setup_jit
from vijax.inference import amortized, bbvi, conjugate_split, empirical_bayes, laplace, map_estimate, ngvi, sample
from vijax.models import mlp

N, M = 200, 20
X = jnp.asarray(np.random.default_rng(0).normal(1.0, np.sqrt(2.0), N))


def model(x):
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    with numpyro.plate("data", N, subsample_size=M) as idx:
        z = numpyro.sample("z", dist.Normal(0.0, 1.0))
        numpyro.sample("x", dist.Normal(mu + z, 1.0), obs=x[idx])


def _batch(key, t=None):
    return {"data": jax.random.choice(key, N, (M,), replace=False)}


@pytest.fixture(scope="module")
def target():
    return vijax.from_numpyro(model, X)


def test_the_target_lists_the_local_site_and_the_encoder_reads_the_batchs_data(target):
    batch = {"data": jnp.arange(M) * 3}
    assert list(target.sites) == ["mu"] and list(target.locals) == ["z"]
    site, plate = target.locals["z"]
    assert plate == "data" and site.shape == (M,) and "z" not in target.init_params
    np.testing.assert_array_equal(jax.jit(target.local_inputs)(batch)["data"], X[batch["data"]][:, None])
    # the model's N / M scaling of the local site's log-density, as NumPyro's log_density gives it
    mu, z = 0.3, np.linspace(-1.0, 1.0, M)
    x = np.asarray(X)[np.arange(M) * 3]
    expected = stats.norm.logpdf(mu, 0.0, 10.0) + N / M * np.sum(stats.norm.logpdf(z) + stats.norm.logpdf(x, mu + z))
    np.testing.assert_allclose(jax.jit(target.log_density)({"mu": mu, "z": z}, batch), expected, rtol=1e-6)


def test_fits_the_closed_form_mean_field_optimum(target):
    """Two seeds, each 3,000 Adam steps (cosine-decayed rate from 0.05) of two draws and a linear encoder, as one
    jitted scan of the vmapped step: q(mu)'s mean within 0.02 (a fifth of its sd) of m, its sd within 10% of
    1 / sqrt(N + 1/100) (p(mu | x)'s own sd, 1 / sqrt(N/2 + 1/100), is sqrt(2) larger: q(mu) q(z) is mean-field),
    and q(z_i | x_i) within 0.03 of N((x_i - m) / 2, 1/2)."""
    steps, seeds = 3000, 2
    alg = amortized(
        target,
        encoder=mlp(jax.random.PRNGKey(1), (1, 2)),
        schedule=optax.cosine_decay_schedule(0.05, steps, alpha=0.01),
        num_samples=2,
    )

    @setup_jit  # XLA's quick CPU settings: the program runs in a fraction of its compile time
    def fit(key):
        def one(states, t):
            k_batch, k_step = jax.random.split(jax.random.fold_in(key, t))
            keys = jax.random.split(k_step, seeds)
            return jax.vmap(alg.step, (0, 0, None))(keys, states, _batch(k_batch))[0], None

        states = jax.vmap(alg.init)(jax.random.split(key, seeds))
        return jax.lax.scan(one, states, jnp.arange(steps))[0]

    states = fit(jax.random.PRNGKey(0))
    m = float(jnp.sum(X)) / (N + 0.02)
    for i in range(seeds):
        state = jax.tree.map(lambda x: x[i], states)
        q = state.q_global["globals"]  # q(mu) = N(loc, softplus(scale)^2)
        assert abs(float(q["loc"][0]) - m) < 0.02
        np.testing.assert_allclose(float(jax.nn.softplus(q["scale"][0])), 1.0 / np.sqrt(N + 0.01), rtol=0.1)
        loc, scale = alg.extras.local_q(state, {"data": jnp.arange(M)})["z"]
        np.testing.assert_allclose(loc, (X[:M] - m) / 2.0, atol=0.03)
        np.testing.assert_allclose(scale, np.sqrt(0.5), atol=0.03)
    draws = sample(alg, jax.random.PRNGKey(3), state, 4)  # the global sites only, constrained
    assert list(draws) == ["mu"] and draws["mu"].shape == (4,)


def test_the_elbo_is_numpyros_trace_elbo_of_the_same_guide(target):
    """At fixed q(mu) = N(0.7, 0.3^2) and encoder (mean, log sd) = x (0.4, -0.2) + (-0.3, -0.5) on a fixed minibatch,
    the mean of 4,000 estimates L against 4,000 of NumPyro's Trace_ELBO (one particle each): equal within four
    standard errors of their difference."""
    alg = amortized(target, encoder=mlp(jax.random.PRNGKey(1), (1, 2)), family="meanfield")
    w, b = jnp.array([[0.4, -0.2]]), jnp.array([-0.3, -0.5])
    q = {
        "globals": {"loc": jnp.array([0.7]), "scale": jnp.array([0.3 + np.log(-np.expm1(-0.3))])},
        "encoders": {"data": [{"w": w, "b": b}]},
    }
    idx = jnp.asarray(np.arange(M) * 7 % N)

    def guide(x):
        numpyro.sample("mu", dist.Normal(0.7, 0.3))
        with numpyro.plate("data", N, subsample_size=M) as i:
            h = x[i][:, None] @ w + b[None, :]
            numpyro.sample("z", dist.Normal(h[:, 0], jnp.exp(h[:, 1])))

    fixed = lambda fn: handlers.substitute(fn, data={"data": idx})  # noqa: E731
    keys = jax.random.split(jax.random.PRNGKey(5), 4000)
    ours = setup_jit(jax.vmap(lambda k: alg.extras.elbo(k, q, {"data": idx})))(keys)
    trace_elbo = numpyro.infer.Trace_ELBO()
    theirs = -setup_jit(jax.vmap(lambda k: trace_elbo.loss(k, {}, fixed(model), fixed(guide), X)))(keys)
    se = np.sqrt(np.var(ours) / ours.size + np.var(theirs) / theirs.size)
    assert abs(float(jnp.mean(ours) - jnp.mean(theirs))) < 4 * se, (float(jnp.mean(ours)), float(jnp.mean(theirs)), se)


@pytest.mark.parametrize(
    "factory",
    [bbvi, ngvi, map_estimate, laplace, lambda t: conjugate_split(t, {}), lambda t: empirical_bayes(bbvi, t)],
    ids=["bbvi", "ngvi", "map_estimate", "laplace", "conjugate_split", "empirical_bayes"],
)
def test_algorithms_of_global_sites_refuse_a_target_with_local_sites(target, factory):
    """When built, naming the local site; the target's log-density too, evaluated without the site's values."""
    match = r"^site 'z': a local latent site inside the subsampled plate 'data'"
    with pytest.raises(ValueError, match=match):
        factory(target)
    with pytest.raises(ValueError, match=match):
        target.log_density(dict(target.init_params), _batch(jax.random.PRNGKey(0)))


def test_fit_routes_local_sites_to_amortized_and_refuses_another_route(target):
    plan = vijax.run.plan_fit(target)
    assert plan.route == "amortized" and [(r.site, r.route) for r in plan.rows] == [
        ("mu", "amortized"),
        ("z", "amortized"),
    ]
    with pytest.raises(ValueError, match=r"^route='bbvi': site 'z' is local to the subsampled plate 'data'"):
        vijax.fit(target, route="bbvi", progress=False)


def test_bad_encoders_and_targets_are_refused_by_name(target):
    with pytest.raises(ValueError, match=r"^encoder must be None, a vijax.models.Network"):
        amortized(target, encoder="mlp")
    with pytest.raises(ValueError, match=r"^encoder must map one datum of shape \(1,\) to shape \(2,\)"):
        amortized(target, encoder=mlp(jax.random.PRNGKey(0), (1, 3)))
    with pytest.raises(ValueError, match=r"^encoder\['rows'\]: no subsampled plate 'rows' holds a local site"):
        amortized(target, encoder={"rows": mlp(jax.random.PRNGKey(0), (1, 2))})
    without = vijax.from_numpyro(
        lambda y: numpyro.sample("y", dist.Normal(numpyro.sample("m", dist.Normal()), 1), obs=y), 0.5
    )
    with pytest.raises(ValueError, match=r"^route='amortized': the model has no local latent site"):
        vijax.run.plan_fit(without, route="amortized")
    with pytest.raises(ValueError, match=r"^target: amortized fits a target with local latent sites"):
        amortized(without)
    eqx = pytest.importorskip("equinox")
    amortized(target, encoder=eqx.nn.Linear(1, 2, key=jax.random.PRNGKey(2)))  # a user's module maps (1,) to (2,)
    with pytest.raises(ValueError, match=r"^encoder must map one datum of shape \(1,\) to shape \(2,\)"):
        amortized(target, encoder=eqx.nn.Linear(1, 3, key=jax.random.PRNGKey(2)))


@pytest.mark.slow
def test_fit_runs_the_amortized_route_end_to_end():
    """``vijax.fit`` of the model (its default MLP encoder, eight draws a step, Adam at 0.01, Stan's stopping rule):
    q(mu)'s mean within one sd of q (0.07) of m; the summary holds the global site only, ``local_q`` gives the
    local one at a batch's points, and what needs the local sites' draws is refused."""
    post = vijax.fit(model, X, progress=False)
    summary = post.summary()
    assert list(summary) == ["mu"]
    assert abs(float(summary["mu"]["mean"]) - float(jnp.sum(X)) / (N + 0.02)) < 0.07
    loc, scale = post.local_q({"data": jnp.arange(M)})["z"]
    assert loc.shape == scale.shape == (M,)
    with pytest.raises(ValueError, match=r"^predictive: not offered for route 'amortized'"):
        post.predictive(jax.random.PRNGKey(0), 4)
    with pytest.raises(ValueError, match=r"^psis: not offered for route 'amortized'"):
        post.psis()
