"""The Normal-Wishart family and the full-covariance Bayesian GMM: mean parameters against
autodiff of the log-normalizer, log_prob against TFP's Wishart x MVN, Monte Carlo moments of both
samplers, the reparameterized draw's gradient against the closed form, the ELBO against a Monte
Carlo estimate, CAVI monotone and equal to scikit-learn's BayesianGaussianMixture(full) from the
same responsibilities, SVI/SSVI-A by name, bad input named."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import vijax
from vijax import expfam
from vijax.inference import GuardedState, _cavi
from vijax.models import FullGMM, conjugate_elbo

W = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


def _nw(batch=False):
    m = jnp.array([0.5, -1.0, 2.0])
    if batch:
        return expfam.NormalWishart.from_params(
            jnp.stack([m, -m]),
            jnp.array([1.7, 0.4]),
            jnp.stack([jnp.asarray(W), 0.5 * jnp.eye(3)]),
            jnp.array([5.5, 2.5]),
        )
    return expfam.NormalWishart.from_params(m, 1.7, jnp.asarray(W), 5.5)


def test_parameters_round_trip_and_mean_params_are_the_gradient_of_the_log_normalizer():
    q = _nw(batch=True)
    np.testing.assert_allclose(q.scale[0], W, rtol=1e-12)
    np.testing.assert_allclose(q.dof, [5.5, 2.5], rtol=1e-12)
    grad = jax.jit(jax.grad(lambda nat: jnp.sum(expfam.NormalWishart.from_natural(nat).log_normalizer())))(
        q.natural_params
    )
    for g, mp in zip(grad, jax.jit(lambda nat: expfam.NormalWishart.from_natural(nat).mean_params())(q.natural_params)):
        np.testing.assert_allclose(g, mp, rtol=1e-10, atol=1e-12)
    # Fisher-vector product (forward mode) is symmetric: <u, F v> = <v, F u>
    u = jax.tree_util.tree_map(lambda a: jax.random.normal(jax.random.PRNGKey(1), a.shape, a.dtype), q.natural_params)
    v = jax.tree_util.tree_map(lambda a: jax.random.normal(jax.random.PRNGKey(2), a.shape, a.dtype), q.natural_params)
    u = (u[0], u[1], 0.5 * (u[2] + jnp.swapaxes(u[2], -1, -2)), u[3])
    v = (v[0], v[1], 0.5 * (v[2] + jnp.swapaxes(v[2], -1, -2)), v[3])
    fvp = jax.jit(lambda nat, w: expfam.NormalWishart.from_natural(nat).fisher_vp(w))
    np.testing.assert_allclose(
        expfam.inner(q, u, fvp(q.natural_params, v)), expfam.inner(q, v, fvp(q.natural_params, u)), rtol=1e-9
    )


def test_inv_fisher_vp_is_the_pseudo_inverse_on_symmetric_directions():
    q = _nw(batch=True)
    keys = jax.random.split(jax.random.PRNGKey(7), 4)
    u = tuple(jax.random.normal(k, p.shape, p.dtype) for k, p in zip(keys, q.natural_params))
    back = jax.jit(lambda nat, w: (lambda f: f.inv_fisher_vp(f.fisher_vp(w)))(expfam.NormalWishart.from_natural(nat)))(
        q.natural_params, u
    )
    sym = 0.5 * (u[2] + jnp.swapaxes(u[2], -1, -2))
    for a, b in zip(back, (u[0], u[1], sym, u[3])):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


def test_log_prob_equals_tfp_wishart_times_normal():
    q = _nw()
    x = q.sample(jax.random.PRNGKey(0), (4,))
    with jax.numpy_rank_promotion("allow"):  # TFP's Wishart promotes ranks inside
        ref = jax.jit(lambda x: q.to_tfp().log_prob([x[..., :-1], x[..., -1]]))(x)
    np.testing.assert_allclose(jax.jit(q.log_prob)(x), ref, rtol=1e-9)


@pytest.mark.parametrize("sampler", ["sample", "reparam"])
def test_monte_carlo_mean_of_the_statistics_equals_the_mean_parameters(sampler):
    q = _nw()
    n = 40000
    if sampler == "sample":
        stats = q.sufficient_stats(q.sample(jax.random.PRNGKey(3), (n,)))
    else:
        stats = jax.jit(jax.vmap(lambda k: q.reparam_sample_and_stats(k)[1]))(
            jax.random.split(jax.random.PRNGKey(4), n)
        )
    for s, mp in zip(stats, q.mean_params()):
        se = np.asarray(jnp.std(s, 0)) / np.sqrt(n)
        assert np.all(np.abs(np.asarray(jnp.mean(s, 0)) - np.asarray(mp)) < 5 * se + 1e-12), (s.shape,)


@pytest.mark.slow
def test_reparameterized_gradient_is_unbiased_for_the_closed_form():
    """d/d eta of E[<c, t(x)>] = <c, mu(eta)> by the Bartlett draws (implicit chi-square derivative)
    against autodiff of the closed-form mean parameters."""
    q = _nw()
    c = (jnp.array([0.3, -0.2, 0.1]), jnp.array(0.05), jnp.asarray(0.1 * W), jnp.array(-0.4))

    def exact(nat):
        return expfam.inner(q, c, expfam.NormalWishart.from_natural(nat).mean_params())

    def one(nat, key):
        return expfam.inner(q, c, expfam.NormalWishart.from_natural(nat).reparam_sample_and_stats(key)[1])

    n = 20000
    grads = jax.jit(jax.vmap(jax.grad(one), in_axes=(None, 0)))(
        q.natural_params, jax.random.split(jax.random.PRNGKey(5), n)
    )
    for g, e in zip(grads, jax.grad(exact)(q.natural_params)):
        se = np.asarray(jnp.std(g, 0)) / np.sqrt(n)
        assert np.all(np.abs(np.asarray(jnp.mean(g, 0)) - np.asarray(e)) < 5 * se + 1e-9)


def _blobs(seed=0):
    r = np.random.default_rng(seed)
    return np.concatenate(
        [
            r.multivariate_normal([-3, 0], [[1.0, 0.8], [0.8, 1.0]], 150),
            r.multivariate_normal([3, 1], 0.3 * np.eye(2), 100),
            r.multivariate_normal([0, 4], np.diag([2.0, 0.2]), 100),
        ]
    )


@pytest.mark.slow
def test_elbo_equals_a_monte_carlo_estimate():
    x = jnp.asarray(_blobs()[::10])  # 35 points
    model = FullGMM.from_data(x, 3)
    q = model.posterior_from_responsibilities(x, np.random.default_rng(1).dirichlet(np.ones(3), size=35))
    loc = jax.jit(lambda q: model.local_step(expfam.tree_mean_params(q), x))(q)
    elbo = float(jax.jit(lambda q, loc: conjugate_elbo(model.prior(), q, loc))(q, loc))
    resp = loc.local_params
    prior = model.prior()

    def log_ratio(key):  # z marginalised against q(z) exactly; pi, mu, Lambda sampled
        k1, k2 = jax.random.split(key)
        pi = q[0].sample(k1)
        draw = q[1].sample(k2)
        lam, mu = draw[..., :-1], draw[..., -1]
        diff = x[:, None, :] - mu[None]
        log_n = (
            0.5 * jnp.linalg.slogdet(lam)[1][None]
            - jnp.log(2 * jnp.pi)
            - 0.5 * jnp.einsum("nkd,kde,nke->nk", diff, lam, diff)
        )
        e_log_joint_z = jnp.sum(resp * (jnp.log(pi)[None] + log_n)) - jnp.sum(resp * jnp.log(resp))
        return (
            e_log_joint_z
            + prior[0].log_prob(pi)
            + jnp.sum(prior[1].log_prob(draw))
            - q[0].log_prob(pi)
            - jnp.sum(q[1].log_prob(draw))
        )

    draws = np.asarray(jax.jit(jax.vmap(log_ratio))(jax.random.split(jax.random.PRNGKey(0), 20000)))
    se = draws.std() / np.sqrt(draws.size)
    assert abs(draws.mean() - elbo) < 5 * se, (draws.mean(), elbo, se)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # tol=0: it runs every iteration
def test_cavi_is_monotone_and_equals_scikit_learn_full_from_the_same_responsibilities():
    import sklearn.mixture as sklearn

    x = _blobs()
    k = 4
    model = FullGMM.from_data(x, k)
    resp0 = np.random.default_rng(2).dirichlet(np.ones(k), size=x.shape[0])

    class FromResp(sklearn.BayesianGaussianMixture):
        def _initialize_parameters(self, X, random_state, xp=None):
            self._initialize(X, resp0)

    iters = 25
    est = FromResp(
        n_components=k,
        covariance_type="full",
        weight_concentration_prior_type="dirichlet_distribution",
        weight_concentration_prior=1.0 / k,
        mean_precision_prior=1.0,
        reg_covar=0.0,
        max_iter=iters,
        tol=0.0,
    ).fit(x)
    alg = vijax.cavi(model)
    zero = jnp.zeros((), jnp.int32)
    state = GuardedState(_cavi.CAVIState(model.posterior_from_responsibilities(x, resp0), zero), zero)
    run = jax.jit(
        lambda s: jax.lax.scan(
            lambda c, kk: alg.step(kk, c, jnp.asarray(x)), s, jax.random.split(jax.random.PRNGKey(0), iters)
        )
    )
    state, info = run(state)
    elbo = np.asarray(info.elbo)
    assert np.all(np.diff(elbo) > -1e-9 * np.abs(elbo[1:]))
    # sklearn runs n_iter E/M rounds after its initial M-step: our iters steps after that start
    dirichlet, nw = state.q_global
    np.testing.assert_allclose(dirichlet.concentration, est.weight_concentration_, rtol=1e-6)
    np.testing.assert_allclose(nw.loc, est.means_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(nw.dof, est.degrees_of_freedom_, rtol=1e-6)
    np.testing.assert_allclose(nw.kappa, est.mean_precision_, rtol=1e-6)
    np.testing.assert_allclose(nw.scale_inv / nw.dof[:, None, None], est.covariances_, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", ["svi", "ssvi", "ssvi_a"])
@pytest.mark.slow
def test_stochastic_algorithms_run_by_name_and_find_the_clusters(name):
    x = jnp.asarray(_blobs())
    model = FullGMM.from_data(np.asarray(x), 3)
    alg = vijax.inference.make_algorithm(name, model, num_data=x.shape[0])  # rho_t = (1 + t)^-0.7
    state = alg.init(jax.random.PRNGKey(0), x)

    def body(s, key):
        k_batch, k_step = jax.random.split(key)
        batch = x[jax.random.choice(k_batch, x.shape[0], (50,), replace=False)]
        return alg.step(k_step, s, batch)

    state, info = jax.jit(lambda s: jax.lax.scan(body, s, jax.random.split(jax.random.PRNGKey(1), 100)))(state)
    assert np.all(np.isfinite(np.asarray(info.elbo)))
    w, means, _ = model.point_estimates(state.q_global)
    found = np.asarray(means)[np.asarray(w) > 0.1]
    for center in ([-3, 0], [3, 1], [0, 4]):
        assert np.min(np.linalg.norm(found - np.array(center), axis=1)) < 0.5, (name, found)


def test_log_predictive_integrates_to_one():
    model = FullGMM(num_components=2, dim=2, dof0=3.0, scale_inv0=np.array([[1.0, 0.3], [0.3, 2.0]]))
    q = model.init_globals(jax.random.PRNGKey(0), jnp.array([[-1.0, 0.0], [2.0, 1.0], [0.5, 0.5]]))
    g = jnp.linspace(-40, 40, 801)
    grid = jnp.stack(jnp.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    dens = jnp.exp(jax.jit(model.log_predictive)(q, grid)).reshape(801, 801)
    h = float(g[1] - g[0])
    np.testing.assert_allclose(float(jnp.sum(dens)) * h * h, 1.0, rtol=2e-3)  # Riemann sum, tails included


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_components=0, dim=2), "num_components"),
        (dict(num_components=2, dim=2, dof0=0.5), "dof0"),
        (dict(num_components=2, dim=2, scale_inv0=np.array([[1.0, 2.0], [2.0, 1.0]])), "scale_inv0"),
        (dict(num_components=2, dim=2, scale_inv0=np.eye(3)), "scale_inv0"),
        (dict(num_components=2, dim=2, kappa0=-1.0), "kappa0"),
        (dict(num_components=2, dim=2, loc0=[np.nan, 0]), "loc0"),
    ],
)
def test_bad_hyperparameters_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FullGMM(**kwargs)


def test_bad_family_parameters_and_data_are_named():
    with pytest.raises(ValueError, match="scale"):
        expfam.NormalWishart.from_params(jnp.zeros(2), 1.0, jnp.array([[1.0, 2.0], [2.0, 1.0]]), 3.0)
    with pytest.raises(ValueError, match="dof"):
        expfam.NormalWishart.from_params(jnp.zeros(3), 1.0, jnp.eye(3), 1.5)
    alg = vijax.cavi(FullGMM(num_components=2, dim=2))
    with pytest.raises(ValueError, match="x must have 2 columns"):
        alg.init(jax.random.PRNGKey(0), jnp.zeros((5, 3)))
    with pytest.raises(ValueError, match="x must be numeric and finite"):
        alg.init(jax.random.PRNGKey(0), jnp.full((5, 2), jnp.nan))
