"""GLMs with a Gaussian prior under PG-SVI (Khan et al. 2016, appendix E): the closed-form KL-proximal step
equals the numerical argmin of the proximal objective (same fixed stochastic gradient) to 1e-6,
for both linearisations, both likelihoods and several beta; Price/Bonnet gradients; bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.testing._argmin import newton_argmin
from vijax.expfam import kl_prox_closed_form, prox_objective
from vijax.models.glm import GLM

BETAS = [0.05, 1.0, 20.0]


def _data(likelihood, n=12, d=3, seed=0):
    r = np.random.default_rng(seed)
    x = r.normal(size=(n, d)) / np.sqrt(d)
    w = r.normal(size=d)
    if likelihood == "logistic":
        y = (r.uniform(size=n) < 1 / (1 + np.exp(-x @ w))).astype(float)
    else:
        y = r.poisson(np.exp(x @ w)).astype(float)
    return jnp.asarray(x), jnp.asarray(y)


def _mvn(theta, d):
    """q from an unconstrained vector: mean and a Cholesky factor of the covariance (log diagonal)."""
    m = theta[:d]
    tril = jnp.zeros((d, d)).at[jnp.tril_indices(d)].set(theta[d:])
    chol = tril - jnp.diag(jnp.diag(tril)) + jnp.diag(jnp.exp(jnp.diag(tril)))
    cov = chol @ chol.T
    prec = jnp.linalg.inv(cov)
    return m, cov, expfam.MultivariateNormal(prec @ m, -0.5 * prec)


def _theta0(q0, d):
    chol = np.linalg.cholesky(np.asarray(q0.covariance))
    l0 = chol.copy()
    l0[np.diag_indices(d)] = np.log(np.diag(chol))
    return np.concatenate([np.asarray(q0.mean), l0[np.tril_indices(d)]])


def _mean_objective(theta, q_k, prior, g, beta):
    return prox_objective(_mvn(theta, 3)[2], q_k, prior, g, beta)


def _moments_objective(theta, q_k, prior, lin, beta):
    gm, gv = lin
    m, cov, q = _mvn(theta, 3)
    return -(gm @ m + jnp.sum(gv * cov)) + q.kl(prior) + q.kl(q_k) / beta


# compiled once per module (the arguments are traced), shared by every case
_DERIVS = {
    name: (jax.jit(f), jax.jit(jax.grad(f)), None)
    for name, f in [("mean", _mean_objective), ("moments", _moments_objective)]
}


def _argmin(name, q0, *args):
    """Newton trust-region minimisation with exact JAX derivatives, from q0's moments."""
    f, g, _ = _DERIVS[name]
    res = newton_argmin(f, g, _theta0(q0, 3), *args, gtol=1e-12, maxiter=500)
    return _mvn(jnp.asarray(res.x), 3)


def _q_k(model, key):
    """A q_k away from the prior: jittered mean, a non-diagonal covariance."""
    d = model.dim
    a = jax.random.normal(key, (d, d)) * 0.3
    cov = 0.5 * jnp.eye(d) + a @ a.T
    m = jax.random.normal(jax.random.fold_in(key, 1), (d,)) * 0.5
    return expfam.MultivariateNormal.from_mean_covariance(m, cov)


@pytest.mark.parametrize("likelihood", ["logistic", "poisson"])
@pytest.mark.parametrize("beta", BETAS)
def test_mean_param_step_is_argmin_of_prox_objective(likelihood, beta):
    x, y = _data(likelihood)
    model = GLM(3, likelihood, prior_mean=0.2, prior_var=2.0)
    q_k = _q_k(model, jax.random.PRNGKey(3))
    s = 5.0  # N / M
    g = model.loglik_grad(q_k, (x, y), jax.random.PRNGKey(4), 7)  # one fixed stochastic gradient
    g = jax.tree_util.tree_map(lambda a: s * a, g)
    prior = model.prior()
    closed = kl_prox_closed_form(q_k, prior, g, beta)
    _, _, num = _argmin("mean", q_k, q_k, prior, g, jnp.asarray(beta))
    np.testing.assert_allclose(closed.mean, num.mean, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(closed.covariance, num.covariance, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("likelihood", ["logistic", "poisson"])
@pytest.mark.parametrize("beta", BETAS)
def test_moments_step_is_argmin_of_its_prox_objective(likelihood, beta):
    """linearization="moments": f linearised in (m, V) as in the paper's derivation (appendix D/E)."""
    x, y = _data(likelihood, seed=1)
    model = GLM(3, likelihood, prior_mean=-0.1, prior_var=0.7, linearization="moments")
    q_k = _q_k(model, jax.random.PRNGKey(5))
    key, n = jax.random.PRNGKey(6), 60
    gm, gv = model.moment_grads(q_k, (x, y), key, 9)
    s = n / x.shape[0]
    prior = model.prior()

    closed = model.moments_prox_step(q_k, (x, y), key, beta, 9, n)
    _, _, num = _argmin("moments", q_k, q_k, prior, (s * gm, s * gv), jnp.asarray(beta))
    np.testing.assert_allclose(closed.mean, num.mean, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(closed.covariance, num.covariance, rtol=1e-6, atol=1e-7)


def test_poisson_moment_grads_match_autodiff_of_exact_expectation():
    """Poisson: E[log p] is closed form, so Price/Bonnet gradients must equal jax.grad of it."""
    x, y = _data("poisson", seed=2)
    model = GLM(3, "poisson")
    q = _q_k(model, jax.random.PRNGKey(0))
    gm, gv = model.moment_grads(q, (x, y), jax.random.PRNGKey(1), 1)
    noise = jnp.zeros((x.shape[0], 1))
    am, av = jax.grad(model.expected_loglik, argnums=(0, 1))(q.mean, q.covariance, (x, y), noise)
    np.testing.assert_allclose(gm, am, rtol=1e-10)
    np.testing.assert_allclose(gv, 0.5 * (av + av.T), rtol=1e-10, atol=1e-12)


def test_logistic_moment_grads_are_unbiased():
    """Logistic: Monte Carlo alpha, gamma against Gauss-Hermite quadrature (5 standard errors)."""
    x, y = _data("logistic", n=4, seed=3)
    model = GLM(3, "logistic")
    q = _q_k(model, jax.random.PRNGKey(2))
    alpha, gamma = model.marginal_grads(q, (x, y), jax.random.PRNGKey(3), 20000)
    t, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    am = np.asarray(x @ q.mean)
    sd = np.sqrt(np.asarray(jnp.sum((x @ q.covariance) * x, -1)))
    sig = 1 / (1 + np.exp(-(am[:, None] + sd[:, None] * t)))
    exact_alpha = np.asarray(y) - sig @ w
    exact_gamma = (sig * (1 - sig)) @ w
    # standard errors: sd of sigmoid <= 1/2, of sig(1-sig) <= 1/4
    assert np.all(np.abs(np.asarray(alpha) - exact_alpha) < 5 * 0.5 / np.sqrt(20000))
    assert np.all(np.abs(np.asarray(gamma) - exact_gamma) < 5 * 0.25 / np.sqrt(20000))


def test_bad_input():
    model = GLM(2, "logistic")
    x = np.zeros((3, 2))
    with pytest.raises(ValueError, match="labels"):
        model.check_data((x, np.array([0.0, 1.0, 2.0])))
    with pytest.raises(ValueError, match=r"\(y \+ 1\) / 2"):
        model.check_data((x, np.array([-1.0, 1.0, 1.0])))
    with pytest.raises(ValueError, match="features"):
        model.check_data((np.array([[0.0, np.nan]] * 3), np.array([0.0, 1.0, 1.0])))
    with pytest.raises(ValueError, match="x must have shape"):
        model.check_data((np.zeros((3, 4)), np.array([0.0, 1.0, 1.0])))
    with pytest.raises(ValueError, match="counts"):
        GLM(2, "poisson").check_data((x, np.array([0.0, 1.5, 2.0])))
    with pytest.raises(ValueError, match="likelihood"):
        GLM(2, "probit")
    with pytest.raises(ValueError, match="prior_var"):
        GLM(2, prior_var=0.0)
    with pytest.raises(ValueError, match="labels"):
        model.init_variational(jax.random.PRNGKey(0), (x, np.array([0.0, 3.0, 1.0])))
