"""GMM models: ELBO against Blei et al. 2017, eq. (21) written out directly, against Monte Carlo, and the
diagonal model's M-step against scikit-learn."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow_probability.substrates.jax as tfp

from vijax import expfam
from vijax.models import DiagonalGMM, UnivariateGMM, conjugate_elbo, conjugate_elbo_terms, conjugate_posterior
from vijax.testing import matched_sklearn_bgmm, sklearn_to_q

tfd = tfp.distributions


def _elbo_eq21(x, m, s2, phi, sigma2):
    """Blei et al. 2017, eq. (21), every expectation written out by hand."""
    k = m.shape[0]
    e_log_p_mu = np.sum(-0.5 * np.log(2 * np.pi * sigma2) - (m**2 + s2) / (2 * sigma2))
    e_log_p_c = -x.shape[0] * np.log(k)
    e_log_lik = np.sum(phi * (-0.5 * np.log(2 * np.pi) - 0.5 * (x[:, None] ** 2 - 2 * x[:, None] * m + m**2 + s2)))
    e_log_q_c = np.sum(phi * np.log(phi))
    e_log_q_mu = np.sum(-0.5 * np.log(2 * np.pi * s2) - 0.5)
    return e_log_p_mu + e_log_p_c + e_log_lik - e_log_q_c - e_log_q_mu


def _univariate_case(seed):
    """40 points, K = 3, prior variance 5: the model, a q(mu), and the local step at another q."""
    x = np.random.default_rng(seed).normal(size=40) * 3
    model = UnivariateGMM(num_components=3, prior_variance=5.0)
    q_old = expfam.Normal.from_mean_variance(jnp.array([-2.0, 0.5, 3.0]), jnp.array([0.4, 1.0, 2.0]))
    loc = model.local_step(q_old.mean_params(), jnp.asarray(x))
    q = expfam.Normal.from_mean_variance(jnp.array([-1.0, 0.0, 2.0]), jnp.array([0.3, 0.7, 1.5]))
    return x, model, q, loc


def test_univariate_elbo_equals_eq21():
    x, model, q, loc = _univariate_case(0)
    ours = conjugate_elbo(model.prior(), q, loc)
    ref = _elbo_eq21(x, np.asarray(q.mean), np.asarray(q.variance), np.asarray(loc.local_params), 5.0)
    np.testing.assert_allclose(ours, ref, rtol=1e-10)


def test_elbo_terms_are_the_kl_by_tfp_and_a_data_term_that_alone_scales():
    """conjugate_elbo_terms: kl = KL(q(mu) || p(mu)) by TFP, independent of the scale; the data term
    is eq. (21) plus that KL at scale 1 and doubles at scale 2 (the svi guard tests it alone)."""
    x, model, q, loc = _univariate_case(3)
    data_term, kl = conjugate_elbo_terms(model.prior(), q, loc)
    kl_tfp = jnp.sum(tfd.kl_divergence(q.to_tfp(), tfd.Normal(0.0, np.sqrt(5.0))))
    np.testing.assert_allclose(kl, kl_tfp, rtol=1e-10)
    ref = _elbo_eq21(x, np.asarray(q.mean), np.asarray(q.variance), np.asarray(loc.local_params), 5.0)
    np.testing.assert_allclose(data_term, ref + kl_tfp, rtol=1e-10)
    data2, kl2 = conjugate_elbo_terms(model.prior(), q, loc, scale=2.0)
    np.testing.assert_allclose(data2, 2 * data_term, rtol=1e-12)
    np.testing.assert_allclose(kl2, kl, rtol=1e-12)
    np.testing.assert_allclose(conjugate_elbo(model.prior(), q, loc, scale=2.0), data2 - kl2, rtol=1e-12)


def test_univariate_global_update_is_eq34():
    """m_k = sum_i phi_ik x_i / (1/sigma^2 + sum_i phi_ik), s_k^2 = 1 / (1/sigma^2 + sum_i phi_ik)."""
    r = np.random.default_rng(1)
    x = r.normal(size=30)
    model = UnivariateGMM(num_components=4, prior_variance=2.0)
    loc = model.local_step(model.init_globals(jax.random.PRNGKey(0), x).mean_params(), jnp.asarray(x))
    q = conjugate_posterior(model.prior(), loc.suff_stats)
    phi = np.asarray(loc.local_params)
    denom = 1 / 2.0 + phi.sum(0)
    np.testing.assert_allclose(q.mean, phi.T @ x / denom, rtol=1e-10)
    np.testing.assert_allclose(q.variance, 1 / denom, rtol=1e-10)


@pytest.mark.slow  # over CI's per-test budget: the univariate ELBO is checked term by term in CI (eq. 21)
def test_diagonal_elbo_matches_monte_carlo():
    """ELBO = E_q[log p(x, z, pi, mu, tau) - log q(z, pi, mu, tau)], sampled with TFP densities."""
    r = np.random.default_rng(2)
    x = jnp.asarray(r.normal(size=(25, 2)))
    model = DiagonalGMM(num_components=3, dim=2, alpha0=2.0, loc0=0.0, kappa0=0.5, a0=2.0, b0=1.5)
    q0 = model.init_globals(jax.random.PRNGKey(0), x)
    loc = model.local_step(expfam.tree_mean_params(q0), x)
    q = jax.tree_util.tree_map(lambda a: a * 1.0, q0)  # evaluate at another q than the one used for phi
    q = (q[0], expfam.NormalGamma.from_params(q[1].loc + 0.3, q[1].kappa, q[1].concentration, q[1].rate * 1.2))
    elbo = conjugate_elbo(model.prior(), q, loc)
    phi = loc.local_params

    def one(key):
        k1, k2, k3 = jax.random.split(key, 3)
        pi = q[0].sample(k1)
        mt = q[1].sample(k2)
        mu, tau = mt[..., 0], mt[..., 1]
        z = jax.random.categorical(k3, jnp.log(phi))
        p0 = model.prior()
        log_p = (
            p0[0].log_prob(pi)
            + jnp.sum(p0[1].log_prob(mt))
            + jnp.sum(jnp.log(pi[z]))
            + jnp.sum(tfd.Normal(mu[z], jax.lax.rsqrt(tau[z])).log_prob(x))
        )
        log_q = q[0].log_prob(pi) + jnp.sum(q[1].log_prob(mt)) + jnp.sum(jnp.log(phi[jnp.arange(25), z]))
        return log_p - log_q

    vals = jax.jit(jax.vmap(one))(jax.random.split(jax.random.PRNGKey(5), 20000))
    mean, se = float(jnp.mean(vals)), float(jnp.std(vals) / np.sqrt(vals.shape[0]))
    assert abs(mean - float(elbo)) < 5 * se, (mean, float(elbo), se)


def test_diagonal_m_step_equals_sklearn():
    r = np.random.default_rng(3)
    x = np.concatenate([r.normal(-2, 1, (60, 3)), r.normal(2, 0.5, (40, 3))])
    model = DiagonalGMM.from_data(x, 4)
    resp = r.dirichlet(np.ones(4), size=100)
    est = matched_sklearn_bgmm(model, resp0=resp, max_iter=1)
    est._check_parameters(x)  # what fit() does first
    est._initialize_parameters(x, np.random.RandomState(0))
    q_ref = sklearn_to_q(est)
    q = model.posterior_from_responsibilities(jnp.asarray(x), jnp.asarray(resp))
    for a, b in zip(expfam.tree_natural_params(q), expfam.tree_natural_params(q_ref)):
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-10)


def test_predictive_is_normalized():
    """The 1-D predictive density integrates to one (trapezoid rule on a wide grid)."""
    model = DiagonalGMM(num_components=2, dim=1, a0=3.0, b0=2.0)
    q = model.init_globals(jax.random.PRNGKey(0), jnp.array([[-1.0], [2.0], [0.5]]))
    grid = jnp.linspace(-60, 60, 200001)[:, None]
    dens = jnp.exp(model.log_predictive(q, grid))
    np.testing.assert_allclose(jnp.trapezoid(dens, grid[:, 0]), 1.0, rtol=1e-4)
    um = UnivariateGMM(num_components=3)
    qu = um.init_globals(jax.random.PRNGKey(1))
    dens = jnp.exp(um.log_predictive(qu, grid[:, 0]))
    np.testing.assert_allclose(jnp.trapezoid(dens, grid[:, 0]), 1.0, rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(num_components=0, dim=2), "num_components"),
        (dict(num_components=2, dim=0), "dim"),
        (dict(num_components=2, dim=2, alpha0=-1.0), "alpha0"),
        (dict(num_components=2, dim=2, b0=0.0), "b0"),
        (dict(num_components=2, dim=2, kappa0=float("nan")), "kappa0"),
        (dict(num_components=2, dim=2, loc0=[0.0, 1.0, 2.0]), "loc0"),
    ],
)
def test_bad_hyperparameters_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        DiagonalGMM(**kwargs)


def test_bad_data_is_rejected():
    model = DiagonalGMM(num_components=2, dim=2)
    with pytest.raises(ValueError, match="x must have 2"):
        model.check_data(np.zeros(5))
    with pytest.raises(ValueError, match="columns"):
        model.check_data(np.zeros((5, 3)))
    with pytest.raises(ValueError, match="finite"):
        model.check_data(np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match="num_components"):
        UnivariateGMM(num_components=2.5)
    with pytest.raises(ValueError, match="prior_variance"):
        UnivariateGMM(num_components=2, prior_variance=-1.0)
    with pytest.raises(ValueError, match="finite"):
        UnivariateGMM(2).check_data(np.array([1.0, np.inf]))


def test_kmeanspp_seeds_cover_separated_clusters():
    """Four tight clusters 100 apart: k-means++ puts one seed in each (a uniform draw of 4 rows
    would miss a cluster with probability 1 - 4!/4^4 = 0.91)."""
    from vijax.models._components import kmeanspp_centers

    r = np.random.default_rng(0)
    centers = np.array([[0.0, 0.0], [100.0, 0.0], [0.0, 100.0], [100.0, 100.0]])
    x = jnp.asarray(np.repeat(centers, 50, axis=0) + r.normal(0, 0.1, (200, 2)))
    for seed in range(5):
        seeds = np.asarray(kmeanspp_centers(jax.random.PRNGKey(seed), x, 4))
        nearest = np.argmin(np.linalg.norm(seeds[:, None] - centers[None], axis=-1), axis=1)
        assert sorted(nearest.tolist()) == [0, 1, 2, 3]


def test_greedy_kmeanspp_seeds_one_per_cluster_more_often_than_plain():
    """Clusters of 1,000, 500 and 500 points, 5 apart (unit sds): the greedy seeding (the best of 2 + floor(ln 3) = 3
    candidates a step) puts one seed in each in 0.925 of 400 keys, plain k-means++ (one candidate) in 0.68. The
    bound 0.85 is 5.8 binomial sds below the first and 13 above the second."""
    from vijax.models._components import kmeanspp_centers

    centers = np.array([[0.0, 0.0], [5.0, 5.0], [0.0, 5.0]])
    x = jnp.asarray(np.repeat(centers, [1000, 500, 500], axis=0) + np.random.default_rng(0).normal(size=(2000, 2)))
    seeds = jax.vmap(lambda k: kmeanspp_centers(k, x, 3))(jax.random.split(jax.random.PRNGKey(0), 400))
    cluster = np.argmin(np.linalg.norm(np.asarray(seeds)[:, :, None] - centers[None, None], axis=-1), axis=2)
    assert np.mean([len(set(c)) == 3 for c in cluster.tolist()]) > 0.85


def test_point_estimates_and_log_predictive_of_a_fit_equal_their_values_inside_jit():
    """Called on a fitted q outside jit (a nested list of data too), the values of the same
    computation traced inside a user's jit."""
    x = np.random.default_rng(3).normal(size=(41, 3))
    model = DiagonalGMM.from_data(x, num_components=5)
    q = model.posterior_from_responsibilities(x, np.full((41, 5), 0.2))
    est = model.point_estimates(q)
    lp = model.log_predictive(q, x.tolist())
    inside = jax.jit(lambda q, x: (model.point_estimates(q), model.log_predictive(q, x)))(q, jnp.asarray(x))
    for a, b in zip(jax.tree_util.tree_leaves((est, lp)), jax.tree_util.tree_leaves(inside)):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert lp.shape == (41,) and est[0].shape == (5,) and est[1].shape == (5, 3)


def test_univariate_gmm_start_and_log_predictive():
    """UnivariateGMM starts at distinct data points; its predictive is the closed form."""
    x = jnp.asarray(np.random.default_rng(4).normal(size=43), jnp.float32)
    model = UnivariateGMM(num_components=4)
    q = model.init_globals(jax.random.PRNGKey(0), x)
    lp = model.log_predictive(q, np.linspace(-3.0, 3.0, 29))
    assert set(np.asarray(q.mean).tolist()) <= set(np.asarray(x).tolist())  # distinct data points
    var = 1.0 + np.asarray(q.variance)
    grid = np.linspace(-3.0, 3.0, 29)[:, None]
    ref = np.log(np.mean(np.exp(-0.5 * (grid - np.asarray(q.mean)) ** 2 / var) / np.sqrt(2 * np.pi * var), axis=1))
    np.testing.assert_allclose(lp, ref, rtol=1e-5)


def test_log_predictive_and_the_data_start_refuse_bad_data_naming_x():
    """A NaN, a wrong width or a wrong number of dimensions is refused by name (the jitted
    evaluations and the jitted start would otherwise return NaN or broadcast silently)."""
    x = np.random.default_rng(5).normal(size=(20, 3))
    model = DiagonalGMM.from_data(x, num_components=2)
    q = model.posterior_from_responsibilities(x, np.full((20, 2), 0.5))
    with pytest.raises(ValueError, match="x must be numeric and finite"):
        model.log_predictive(q, np.full((2, 3), np.nan))
    with pytest.raises(ValueError, match=r"x must have 3 columns"):
        model.log_predictive(q, np.ones((2, 4)))
    with pytest.raises(ValueError, match=r"x must have 3 columns"):
        jax.jit(model.log_predictive)(q, jnp.ones((2, 4)))  # the width also of a traced x
    uni = UnivariateGMM(num_components=2)
    qu = uni.init_globals(jax.random.PRNGKey(0), np.arange(5.0))
    with pytest.raises(ValueError, match="x must be numeric and finite"):
        uni.log_predictive(qu, np.array([np.nan, 1.0]))
    with pytest.raises(ValueError, match=r"x must have 1 dimension"):
        uni.log_predictive(qu, np.ones((2, 2)))
    with pytest.raises(ValueError, match="x must be numeric and finite"):
        uni.init_globals(jax.random.PRNGKey(0), np.array([np.nan, 1.0, 2.0]))


def test_posterior_from_responsibilities_equals_the_traced_m_step_and_names_bad_input():
    """Outside jit the M-step from given responsibilities (another library's start) has the values
    of the traced M-step; a resp or x of the wrong shape, or with NaN or negative entries, raises
    naming it."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(30, 2))
    resp = rng.dirichlet(np.ones(3), 30)
    model = DiagonalGMM.from_data(x, num_components=3)
    q = model.posterior_from_responsibilities(x, resp)
    want = jax.jit(lambda xx, rr: model.posterior_from_responsibilities(xx, rr))(jnp.asarray(x), jnp.asarray(resp))
    chex.assert_trees_all_close(q, want, rtol=1e-12, atol=0.0)
    np.testing.assert_allclose(np.asarray(model.features(x)), np.concatenate([x, x**2], axis=1), rtol=1e-12)
    with pytest.raises(ValueError, match=r"resp must have shape \(30, 3\)"):
        model.posterior_from_responsibilities(x, resp[:, :2])
    with pytest.raises(ValueError, match="resp must be finite"):
        model.posterior_from_responsibilities(x, np.where(np.arange(3) == 1, np.nan, resp))
    with pytest.raises(ValueError, match="resp must be >= 0"):
        model.posterior_from_responsibilities(x, resp - 0.5)
    with pytest.raises(ValueError, match="x must"):
        model.posterior_from_responsibilities(x[:, :1], resp)
