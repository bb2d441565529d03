"""The Student-t mixture by EM: its log-likelihood against scipy's multivariate t, monotone EM, the
EM fixed point as a stationary point of the exact log-likelihood (jax.grad), the Gaussian-mixture
limit of large degrees of freedom (closed form), the degrees-of-freedom root find, and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from vijax.inference import em, restarts
from vijax.models import StudentTMixture, StudentTMixtureParams
from vijax.models.student_t_mixture import dof_equation, solve_dof

K, D = 2, 2


def _data(n=120, seed=0):
    r = np.random.default_rng(seed)
    return np.concatenate([r.standard_t(3.0, (n // 2, D)) * 0.8 + 4.0, r.standard_t(3.0, (n - n // 2, D)) - 4.0])


def _params(seed=1):
    r = np.random.default_rng(seed)
    a = r.normal(size=(K, D, D))
    cov = a @ np.swapaxes(a, 1, 2) + np.eye(D)
    return StudentTMixtureParams(
        jnp.asarray([0.3, 0.7]), jnp.asarray(r.normal(size=(K, D)) * 3), jnp.asarray(cov), jnp.asarray([2.5, 7.0])
    )


def _fit(model, x, steps, num_restarts=2):
    alg = restarts(em(model), num_restarts)  # the EM step under vmap, starts in lock step
    state = jax.jit(alg.init)(jax.random.PRNGKey(0), x)

    def body(state, key):
        state, info = alg.step(key, state, x)
        return state, info.log_likelihood

    return jax.jit(lambda s: jax.lax.scan(body, s, jax.random.split(jax.random.PRNGKey(1), steps)))(state)


def test_log_likelihood_equals_scipy_multivariate_t_mixture():
    x, p = _data(), _params()
    ref = logsumexp(
        [
            np.log(p.weights[k])
            + stats.multivariate_t.logpdf(x, np.asarray(p.means[k]), np.asarray(p.covariances[k]), df=float(p.dofs[k]))
            for k in range(K)
        ],
        axis=0,
    )
    np.testing.assert_allclose(StudentTMixture(K, D).log_likelihood(p, x), ref, rtol=1e-10)  # float64


def test_em_is_monotone_and_its_fixed_point_is_stationary():
    """Two starts by vmap (``restarts``): each trace non-decreasing; each end point a stationary point."""
    x = jnp.asarray(_data())
    model = StudentTMixture(K, D, dof=5.0, reg_covar=0.0)
    state, lls = _fit(model, x, 100)
    lls = np.asarray(lls)  # (steps, restarts)
    assert np.all(np.diff(lls, axis=0) >= -1e-9 * np.abs(lls[1:]))  # EM never decreases the log-likelihood

    def exact(means, logits, chol_raw, log_dofs):  # the closed-form mixture log-likelihood, unconstrained
        chol = jnp.tril(chol_raw)
        cov = chol @ jnp.swapaxes(chol, -1, -2)
        q = StudentTMixtureParams(jax.nn.softmax(logits), means, cov, jnp.exp(log_dofs))
        lp, _ = model._component_log_probs(q, x)
        return jnp.sum(jax.nn.logsumexp(lp, -1))

    grad = jax.jit(jax.grad(exact, argnums=(0, 1, 2, 3)))
    for i in range(lls.shape[1]):
        p = jax.tree_util.tree_map(lambda a: a[i], state.q_global)
        assert np.all(np.asarray(p.dofs) > 1.0) and np.all(np.asarray(p.dofs) < 50.0)  # t(3) data: finite dofs
        grads = grad(p.means, jnp.log(p.weights), jnp.linalg.cholesky(p.covariances), jnp.log(p.dofs))
        # stationary after 100 EM steps: every gradient below 1e-6 per data point (N = 120)
        for g in grads:
            assert np.max(np.abs(np.asarray(g))) / x.shape[0] < 1e-6


def test_large_dofs_give_the_gaussian_mixture_em_step():
    x, p = _data(), _params()
    p = p._replace(dofs=jnp.full((K,), 1e9))
    model = StudentTMixture(K, D, dof=1e9, learn_dof=False, reg_covar=0.0)
    ll, new = jax.jit(lambda p, x: (lambda s: (s[1], model.m_step(s[0])))(model.e_step(p, x)))(p, jnp.asarray(x))
    # the Gaussian mixture's E- and M-step (the tutorial's §GMM), written out
    lg = np.stack(
        [np.log(p.weights[k]) + stats.multivariate_normal.logpdf(x, p.means[k], p.covariances[k]) for k in range(K)], 1
    )
    r = np.exp(lg - logsumexp(lg, 1, keepdims=True))
    nk = r.sum(0)
    mu = r.T @ x / nk[:, None]
    cov = np.stack([(r[:, k, None] * (x - mu[k])).T @ (x - mu[k]) / nk[k] for k in range(K)])
    np.testing.assert_allclose(ll, logsumexp(lg, 1).sum(), rtol=1e-7)  # O(delta / nu) = 1e-8 relative
    np.testing.assert_allclose(new.weights, nk / len(x), rtol=1e-6)
    np.testing.assert_allclose(new.means, mu, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(new.covariances, cov, rtol=1e-6, atol=1e-7)


def test_dof_root_find():
    c = jnp.asarray([-1.05, -1.5, -3.0, -1.0 - 1e-9])
    nu = jax.jit(jax.vmap(lambda a: solve_dof(a, (0.5, 1000.0), 60)))(c)
    np.testing.assert_allclose(dof_equation(nu[:3], c[:3]), 0.0, atol=1e-10)  # the root, to float64 precision
    np.testing.assert_allclose(nu[3], 1000.0, rtol=1e-12)  # root beyond the upper bound: clipped to it


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="num_components"):
        StudentTMixture(0, D)
    with pytest.raises(ValueError, match="dof"):
        StudentTMixture(K, D, dof=0.0)
    with pytest.raises(ValueError, match="dof_bounds"):
        StudentTMixture(K, D, dof_bounds=(5.0, 1.0))
    model, p = StudentTMixture(K, D), _params()
    with pytest.raises(ValueError, match="x"):
        model.log_likelihood(p, np.full((3, D), np.nan))
    with pytest.raises(ValueError, match="x"):
        model.check_data(np.zeros((3, D + 1)))
    with pytest.raises(ValueError, match="covariances"):
        model.log_likelihood(p._replace(covariances=-p.covariances), _data())
    with pytest.raises(ValueError, match="dofs"):
        model.check_params(p._replace(dofs=-p.dofs))


def test_sampler_draws_heavy_tailed_t_components():
    """One component with nu = 6: covariance nu / (nu - 2) Sigma, within k = 4 standard errors of
    the sample covariance of n = 2e5 draws. The standard errors are exact: x = sqrt(W) y with
    y ~ N(0, Sigma) and W = nu / chi2_nu, E W = nu / (nu - 2), E W^2 = nu^2 / ((nu - 2)(nu - 4)),
    so Var(x_i x_j) = E W^2 (S_ii S_jj + 2 S_ij^2) - (E W)^2 S_ij^2 (Isserlis)."""
    from vijax.data import sample_student_t_mixture

    n, nu, k = 200_000, 6.0, 4.0
    s = sample_student_t_mixture(0, n, 1, 2, dof=nu)
    sig = np.asarray(s.scales[0])
    ew, ew2 = nu / (nu - 2), nu**2 / ((nu - 2) * (nu - 4))
    var = ew2 * (np.outer(np.diag(sig), np.diag(sig)) + 2 * sig**2) - ew**2 * sig**2
    se = np.sqrt(var / n)
    np.testing.assert_array_less(np.abs(np.cov(s.x.T) - ew * sig), k * se)
    assert s.dof == 6.0 and s.x.shape == (200_000, 2) and np.all(s.z == 0)
