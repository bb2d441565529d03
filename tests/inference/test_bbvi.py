"""Black-box VI (vijax.inference.bbvi): every estimator's gradient is unbiased for the exact ELBO
gradient (closed form on a Gaussian target), the fits reach the exact posterior of a conjugate
Gaussian model, and bad input is named."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow_probability.substrates.jax as tfp
from jax.scipy.special import digamma

from vijax import inference as vi
from vijax import expfam
from vijax.inference import ALGORITHMS, bbvi, log_joint, make_algorithm
from vijax.inference._bbvi import _objective

D = 3
MU_P = jnp.array([0.5, -1.0, 2.0])
A = np.array([[1.0, 0.3, 0.0], [0.3, 2.0, -0.4], [0.0, -0.4, 1.5]])
PREC = jnp.asarray(A)
KEYS = jax.random.split(jax.random.PRNGKey(7), 4000)


def gaussian_target(params, batch):
    r = params["z"] - MU_P
    return -0.5 * r @ PREC @ r


def exact_elbo(guide, vparams):
    """E_q[log p] + H[q] in closed form for the Gaussian target."""
    q = guide.to_tfp(vparams)
    m, cov = q.mean(), q.covariance()
    r = m - MU_P
    return -0.5 * (jnp.trace(PREC @ cov) + r @ PREC @ r) + guide.entropy(vparams)


def mc_gradient(alg, vparams, estimator, entropy="analytic", num_samples=2, prior=None, joint=None):
    """Mean and standard error over 4000 keys of the estimator's gradient."""
    joint = joint or log_joint(gaussian_target)

    def grad(key):
        return jax.grad(
            lambda v: _objective(
                v,
                None,
                key,
                guide=vi.guide(alg),
                joint=joint,
                estimator=estimator,
                entropy=entropy,
                num_samples=num_samples,
                prior=prior,
            )[0]
        )(vparams)

    g = jax.jit(jax.vmap(grad))(KEYS)
    return (jax.tree.map(lambda x: np.mean(x, 0), g), jax.tree.map(lambda x: np.std(x, 0) / np.sqrt(x.shape[0]), g))


def start(alg):
    """A start away from the optimum (so that every gradient is far from zero)."""
    v = vi.guide(alg).init()
    return jax.tree.map(lambda x: x + 0.3 * jnp.sin(jnp.arange(x.size, dtype=x.dtype)).reshape(x.shape) - 0.2, v)


def assert_unbiased(mean, se, exact, k=5.0):
    for m, s, e in zip(
        jax.tree_util.tree_leaves(mean), jax.tree_util.tree_leaves(se), jax.tree_util.tree_leaves(exact)
    ):
        np.testing.assert_array_less(np.abs(m - np.asarray(e)), k * s + 1e-9)


@pytest.mark.parametrize(
    "family,estimator,entropy,num_samples",
    [
        ("meanfield", "reparam", "analytic", 2),
        ("meanfield", "reparam", "mc", 2),
        ("meanfield", "stl", "mc", 2),
        ("meanfield", "score", "analytic", 4),
        ("meanfield", "score", "mc", 4),
        ("fullrank", "reparam", "analytic", 2),
        ("fullrank", "stl", "mc", 2),
        ("lowrank", "reparam", "analytic", 2),
    ],
)
def test_gradient_estimators_are_unbiased(family, estimator, entropy, num_samples):
    alg = bbvi(gaussian_target, family=family, init_params={"z": jnp.zeros(D)}, rank=2)
    v = start(alg)
    exact = jax.grad(lambda p: exact_elbo(vi.guide(alg), p))(v)
    mean, se = mc_gradient(alg, v, estimator, entropy, num_samples)
    assert_unbiased(mean, se, exact)


def test_guides_entropy_and_log_prob_match_tfp():
    for family in ("meanfield", "fullrank", "lowrank"):
        alg = bbvi(gaussian_target, family=family, init_params={"z": jnp.zeros(D)}, rank=2)
        v = start(alg)
        q = vi.guide(alg).to_tfp(v)
        z = vi.guide(alg).sample(v, jax.random.PRNGKey(0))
        np.testing.assert_allclose(vi.guide(alg).entropy(v), q.entropy(), rtol=1e-10)
        np.testing.assert_allclose(vi.guide(alg).log_prob(v, z), q.log_prob(z), rtol=1e-10)


def test_expfam_guide_gradient_is_unbiased():
    """q = Gamma drawn by inversion (implicit derivatives); target Gamma(3, 2) unnormalized."""

    def target(params, batch):
        return 2.0 * jnp.sum(jnp.log(params)) - 2.0 * jnp.sum(params)

    alg = bbvi(target, family=expfam.Gamma.from_shape_rate(jnp.array([1.5, 4.0]), jnp.array([1.0, 3.0])))
    v = vi.guide(alg).init()

    def exact(vp):
        q = vi.guide(alg).q(vp)
        e_log, e_x = q.mean_params()
        return jnp.sum(2.0 * e_log - 2.0 * e_x) + jnp.sum(q.entropy())

    mean, se = mc_gradient(alg, v, "reparam", joint=log_joint(target))
    assert_unbiased(mean, se, jax.grad(exact)(v))
    a, b = vi.guide(alg).q(v).concentration, vi.guide(alg).q(v).rate  # the closed form's own check
    np.testing.assert_allclose(vi.guide(alg).q(v).mean_params()[0], digamma(a) - jnp.log(b), rtol=1e-12)


def test_iwae_bound_lies_between_elbo_and_evidence_and_is_exact_at_the_posterior():
    log_z = 0.5 * D * np.log(2 * np.pi) - 0.5 * np.linalg.slogdet(A)[1]  # of the unnormalized target
    alg = bbvi(gaussian_target, family="fullrank", init_params={"z": jnp.zeros(D)}, estimator="iwae", num_samples=8)
    v = start(alg)
    joint = log_joint(gaussian_target)
    bounds = jax.jit(
        jax.vmap(
            lambda k: _objective(
                v, None, k, guide=vi.guide(alg), joint=joint, estimator="iwae", entropy="mc", num_samples=8, prior=None
            )[1]
        )
    )(KEYS[:1000])
    se = np.std(bounds) / np.sqrt(bounds.shape[0])
    assert float(exact_elbo(vi.guide(alg), v)) + 3 * se < float(np.mean(bounds)) < log_z
    chol = np.linalg.cholesky(np.linalg.inv(A))
    d = np.diag(chol)
    post = {"loc": MU_P, "scale": jnp.asarray(np.log(np.expm1(d))), "chol": jnp.asarray(chol / d[:, None])}
    at_post = jax.vmap(
        lambda k: _objective(
            post, None, k, guide=vi.guide(alg), joint=joint, estimator="iwae", entropy="mc", num_samples=8, prior=None
        )[1]
    )(KEYS[:10])
    np.testing.assert_allclose(at_post, log_z, rtol=1e-10)


def conjugate_model(rng=np.random.default_rng(0)):
    """y_i ~ N(theta, I), theta ~ N(0, I): the posterior is N(sum y / (n + 1), I / (n + 1))."""
    y = jnp.asarray(rng.normal(1.0, 1.0, (20, D)))

    def log_lik(params, batch):
        return -0.5 * jnp.sum((batch - params["t"][None, :]) ** 2)

    def log_prior(params):
        return -0.5 * jnp.sum(params["t"] ** 2)

    return y, log_lik, log_prior, np.asarray(y.sum(0)) / 21.0, 1.0 / 21.0


@pytest.mark.parametrize("family", ["meanfield", "fullrank"])
def test_stl_reaches_the_exact_posterior(family):
    y, log_lik, log_prior, mean, var = conjugate_model()
    alg = bbvi(
        log_lik,
        family=family,
        init_params={"t": jnp.zeros(D)},
        estimator="stl",
        num_samples=2,
        log_prior=log_prior,
        schedule=0.05,
    )
    state = alg.init(jax.random.PRNGKey(0), y)
    steps = jax.jit(lambda s, ks: jax.lax.scan(lambda c, k: alg.step(k, c, y), s, ks))
    state, info = steps(state, jax.random.split(jax.random.PRNGKey(1), 1500))  # 1500 steps, Adam 0.05
    q = vi.guide(alg).to_tfp(state.q_global)
    np.testing.assert_allclose(q.mean(), mean, atol=0.01 * np.sqrt(var))
    np.testing.assert_allclose(q.covariance(), var * np.eye(D), atol=0.01 * var)
    assert bool(np.all(info.accepted))


def test_minibatch_scaling_and_analytic_kl():
    y, log_lik, log_prior, mean, var = conjugate_model()
    joint = log_joint(log_lik, log_prior=log_prior, num_data=20)
    p = {"t": jnp.array([0.1, 0.2, 0.3])}
    np.testing.assert_allclose(joint(p, y[:5]), 4.0 * log_lik(p, y[:5]) + log_prior(p), rtol=1e-12)
    # the analytic-KL ELBO equals the whole-joint ELBO with an analytic entropy up to log N(0, I)'s constant
    prior = tfp.distributions.MultivariateNormalDiag(jnp.zeros(D), jnp.ones(D))
    with_kl = bbvi(log_lik, init_params={"t": jnp.zeros(D)}, prior=prior, num_samples=3)
    whole = bbvi(log_lik, init_params={"t": jnp.zeros(D)}, log_prior=log_prior, num_samples=3)
    v = start(whole)
    kw = dict(entropy="analytic", num_samples=3, estimator="reparam")
    const = -0.5 * D * np.log(2 * np.pi)  # E[ELBO with KL] - E[ELBO with the unnormalized log_prior]
    ea = jax.jit(
        jax.vmap(lambda k: _objective(v, y, k, guide=vi.guide(with_kl), joint=log_joint(log_lik), prior=prior, **kw)[1])
    )
    eb = jax.jit(
        jax.vmap(
            lambda k: _objective(
                v, y, k, guide=vi.guide(whole), joint=log_joint(log_lik, log_prior=log_prior), prior=None, **kw
            )[1]
        )
    )
    diff = ea(KEYS[:2000]) - eb(KEYS[:2000])
    assert abs(float(np.mean(diff)) - const) < 5 * float(np.std(diff)) / np.sqrt(2000) + 1e-9


def test_bijectors_map_to_the_support_and_log_weights_are_exact_at_the_posterior():
    """A positive parameter through Softplus; q pushed forward has the Jacobian in its weights."""
    y, log_lik, log_prior, mean, var = conjugate_model()
    b = tfp.bijectors.Softplus()
    alg = bbvi(
        lambda p, batch: -0.5 * jnp.sum((batch - p["t"][None, :]) ** 2) + jnp.log(p["s"]) - p["s"],
        init_params={"t": jnp.zeros(D), "s": jnp.ones(())},
        bijectors={"t": None, "s": b},
        num_samples=2,
        log_prior=log_prior,
    )
    state = alg.init(jax.random.PRNGKey(0), y)
    draws = vi.sample(alg, jax.random.PRNGKey(1), state, 50)
    assert draws["s"].shape == (50,) and bool(np.all(draws["s"] > 0)) and draws["t"].shape == (50, D)
    np.testing.assert_allclose(vi.guide(alg).mean(state.q_global)["s"], 1.0, rtol=1e-10)
    # Gaussian target in t only, q exact there: weights vary only through s
    lw = vi.log_weights(alg, jax.random.PRNGKey(2), state, y, 20)
    assert lw.shape == (20,) and bool(np.all(np.isfinite(lw)))


def test_step_is_pure_jits_once_and_vmaps_over_seeds():
    y, log_lik, log_prior, mean, var = conjugate_model()
    alg = bbvi(log_lik, init_params={"t": jnp.zeros(D)}, log_prior=log_prior, num_samples=2, schedule=0.1)
    state = alg.init(jax.random.PRNGKey(0))
    keys = jax.random.split(jax.random.PRNGKey(1), 3)
    batched = jax.vmap(alg.step, in_axes=(0, None, None))(keys, state, y)
    for i in range(3):
        one = jax.jit(alg.step)(keys[i], state, y)
        np.testing.assert_allclose(batched[0].q_global["loc"][i], one[0].q_global["loc"], rtol=1e-10)
        np.testing.assert_allclose(batched[1].elbo[i], one[1].elbo, rtol=1e-10)
    assert not np.allclose(batched[1].elbo[0], batched[1].elbo[1])  # each seed its own draws


def test_a_non_finite_step_is_rejected_and_counted():
    def ld(params, batch):  # NaN once the draw's first coordinate passes 0.5
        z = params["z"]
        return jnp.where(z[0] > 0.5, jnp.nan, -0.5 * jnp.sum(z**2))

    alg = bbvi(ld, init_params={"z": jnp.zeros(2)}, init_scale=1.0, num_samples=8, schedule=0.1)
    state = alg.init(jax.random.PRNGKey(0))
    new, info = jax.jit(alg.step)(jax.random.PRNGKey(1), state, None)
    assert not bool(info.accepted) and int(new.num_rejected) == 1 and int(new.count) == 1
    for a, b in zip(
        jax.tree_util.tree_leaves((new.q_global, new.opt_state)),
        jax.tree_util.tree_leaves((state.q_global, state.opt_state)),
    ):
        np.testing.assert_array_equal(a, b)


def test_registered_and_made_by_name():
    assert "bbvi" in ALGORITHMS and "ngvi" in ALGORITHMS
    alg = make_algorithm("bbvi", gaussian_target, schedule=0.01, init_params={"z": jnp.zeros(D)}, family="fullrank")
    state, info = alg.step(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0)), None)
    assert state.q_global["chol"].shape == (D, D) and np.isfinite(float(info.elbo))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(num_samples=0), "num_samples"),
        (dict(estimator="score", num_samples=1), "num_samples"),
        (dict(estimator="vimco"), "estimator"),
        (dict(family="fullrnak"), "family"),
        (dict(bijectors={"w": None}), "bijectors"),
        (dict(init_params={"z": jnp.array([1, 2])}), "init_params"),
        (dict(init_params={"z": jnp.array([jnp.nan, 1.0])}), "init_params"),
        (dict(init_params={"z": -jnp.ones(2)}, bijectors={"z": tfp.bijectors.Exp()}), "support"),
        (dict(family=expfam.Categorical.from_probs(jnp.array([0.5, 0.5]))), "family"),
        (dict(estimator="iwae", prior=tfp.distributions.Normal(0.0, 1.0)), "prior"),
        (dict(log_prior=lambda p: 0.0, prior=tfp.distributions.Normal(0.0, 1.0)), "exclusive"),
        (dict(optimizer="adamw"), "adamw"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    args = dict(init_params={"z": jnp.zeros(2)})
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        bbvi(gaussian_target if "init_params" not in kwargs else (lambda p, b: jnp.sum(p["z"])), **args)


def test_bad_log_densities_are_named():
    with pytest.raises(ValueError, match="float scalar"):
        alg = bbvi(lambda p, b: p["z"], init_params={"z": jnp.zeros(2)})
        alg.step(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0)), None)
    with pytest.raises(ValueError, match="not finite"):
        bbvi(lambda p, b: jnp.sum(jnp.log(p["z"] - 5.0)), init_params={"z": jnp.zeros(2)}).init(
            jax.random.PRNGKey(0), jnp.zeros(1)
        )
    with pytest.raises(ValueError, match="bijector"):  # finite at the centre, not at draws of q
        bbvi(lambda p, b: jnp.sum(jnp.log(p["z"])), init_params={"z": jnp.full(2, 0.05)}, init_scale=1.0).init(
            jax.random.PRNGKey(0), jnp.zeros(1)
        )
    with pytest.raises(ValueError, match="key"):
        bbvi(gaussian_target, init_params={"z": jnp.zeros(D)}).init(None)
    with pytest.raises(ValueError, match="function"):
        bbvi("not a function", init_params={"z": jnp.zeros(D)})


@pytest.mark.slow
def test_a_network_parameter_pytree_is_fitted_whole():
    """A Bayesian MLP written as a nested parameter dict (the shape of a Flax ``params`` tree):
    q's mean keeps the structure, and a few full-rank steps raise the exact-data ELBO estimate."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(40, 2)))
    y = jnp.asarray((x[:, 0] * x[:, 1] > 0).astype(float))
    params = {"hidden": {"w": jnp.zeros((2, 4)), "b": jnp.zeros(4)}, "out": {"w": jnp.zeros(4), "b": jnp.zeros(())}}

    def log_density(p, batch):
        xb, yb = batch
        h = jnp.tanh(xb @ p["hidden"]["w"] + p["hidden"]["b"][None, :])
        logits = h @ p["out"]["w"] + p["out"]["b"]
        prior = sum(jnp.sum(v**2) for v in jax.tree_util.tree_leaves(p))
        return jnp.sum(yb * logits - jnp.logaddexp(0.0, logits)) - 0.5 * prior

    alg = bbvi(log_density, family="fullrank", init_params=params, init_scale=0.5, num_samples=4, schedule=0.05)
    state0 = alg.init(jax.random.PRNGKey(0), (x, y))
    assert vi.guide(alg).dim == 17 and state0.q_global["chol"].shape == (17, 17)
    steps = jax.jit(lambda s, ks: jax.lax.scan(lambda c, k: alg.step(k, c, (x, y)), s, ks))
    state, info = steps(state0, jax.random.split(jax.random.PRNGKey(1), 300))
    mean = vi.guide(alg).mean(state.q_global)
    assert jax.tree_util.tree_structure(mean) == jax.tree_util.tree_structure(params)
    elbo = jax.jit(lambda s: jnp.mean(vi.log_weights(alg, jax.random.PRNGKey(2), s, (x, y), 4000)))  # 4000-draw ELBO
    assert float(elbo(state)) > float(elbo(state0)) + 1.0
