"""PG-SVI with non-Gaussian q and conjugate priors (Gamma, Dirichlet): the closed-form KL-proximal
step r lambda + (1 - r)(eta + g) equals the numerical argmin of the proximal objective written in the
natural parameters (same fixed Monte Carlo gradient) to 1e-6; the mean-parameter gradient is that of
the expected log-likelihood; runs against a quadrature posterior; bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.testing._argmin import newton_argmin
from vijax.inference._prox_svi import prox_svi
from vijax.expfam import kl_prox_closed_form, mean_param_grad, prox_objective
from vijax.models.expfam_prox import NoisyDirichletMultinomial, PoissonGammaSoftplus

BETAS = [0.05, 1.0, 20.0]


def _gamma_from(u):
    return expfam.Gamma(jnp.exp(u[0]) - 1.0, -jnp.exp(u[1]))  # (shape, rate) = exp(u)


def _dirichlet_from(u):
    return expfam.Dirichlet(jnp.exp(u) - 1.0)


def _gamma_obj(u, q_k, prior, g, beta):
    return prox_objective(_gamma_from(u), q_k, prior, g, beta)


def _dirichlet_obj(u, q_k, prior, g, beta):
    return prox_objective(_dirichlet_from(u), q_k, prior, g, beta)


_DERIVS = {
    name: (jax.jit(f), jax.jit(jax.grad(f)), None) for name, f in [("gamma", _gamma_obj), ("dirichlet", _dirichlet_obj)]
}


def _argmin(name, u0, *args):
    f, g, _ = _DERIVS[name]
    res = newton_argmin(f, g, u0, *args, gtol=1e-13)
    return jnp.asarray(res.x)


@pytest.mark.parametrize("beta", BETAS)
def test_gamma_softplus_step_is_argmin_in_natural_parameters(beta):
    model = PoissonGammaSoftplus(1, prior_shape=3.0, prior_rate=2.0)
    x, y, _ = model.sample_data(jax.random.PRNGKey(0), 10, theta=jnp.array([1.5]))
    q_k = expfam.Gamma.from_shape_rate(jnp.array([4.0]), jnp.array([3.0]))
    g = model.loglik_grad(q_k, (x, y), jax.random.PRNGKey(1), 16)
    g = jax.tree_util.tree_map(lambda a: 3.0 * a, g)  # N / M = 3
    prior = model.prior()
    closed = kl_prox_closed_form(q_k, prior, g, beta)
    assert bool(jnp.all(closed.is_valid()))
    u0 = np.log(np.array([4.0, 3.0]))
    u = _argmin("gamma", u0, q_k, prior, g, jnp.asarray(beta))
    num = _gamma_from(u)
    for a, b in zip(closed.natural_params, num.natural_params):
        np.testing.assert_allclose(a[0], b, rtol=1e-6)


@pytest.mark.parametrize("beta", BETAS)
def test_noisy_dirichlet_step_is_argmin_in_natural_parameters(beta):
    model = NoisyDirichletMultinomial(3, noise=0.2, prior_concentration=1.5)
    counts, _ = model.sample_data(jax.random.PRNGKey(0), 4, draws=5, theta=jnp.array([0.6, 0.3, 0.1]))
    q_k = expfam.Dirichlet.from_concentration(jnp.array([3.0, 2.0, 1.5]))
    g = model.loglik_grad(q_k, counts, jax.random.PRNGKey(1), 16)
    g = jax.tree_util.tree_map(lambda a: 2.0 * a, g)
    prior = model.prior()
    closed = kl_prox_closed_form(q_k, prior, g, beta)
    assert bool(jnp.all(closed.is_valid()))
    u = _argmin("dirichlet", np.log([3.0, 2.0, 1.5]), q_k, prior, g, jnp.asarray(beta))
    np.testing.assert_allclose(closed.eta, _dirichlet_from(u).eta, rtol=1e-6)


def test_mean_param_grad_chain_rule():
    """For a function of the mean parameters alone, mean_param_grad returns its gradient exactly."""
    q = expfam.Gamma.from_shape_rate(jnp.array([2.0, 5.0]), jnp.array([1.0, 3.0]))
    w1, w2 = jnp.array([0.3, -1.2]), jnp.array([2.0, 0.5])

    def fn(qq):
        m1, m2 = qq.mean_params()
        return jnp.sum(w1 * m1 + w2 * m2**2)

    g1, g2 = mean_param_grad(fn, q)
    np.testing.assert_allclose(g1, w1, rtol=1e-10)
    np.testing.assert_allclose(g2, 2 * w2 * q.mean_params()[1], rtol=1e-10)


def test_dirichlet_noise_zero_gradient_is_counts_on_average():
    """eps = 0 is the conjugate Dirichlet-multinomial: E[g_hat] = sum_n c_n (5 standard errors)."""
    model = NoisyDirichletMultinomial(3, noise=0.0)
    counts = jnp.array([[3.0, 1.0, 0.0], [2.0, 2.0, 4.0]])
    q = expfam.Dirichlet.from_concentration(jnp.array([2.0, 3.0, 4.0]))
    grads = jax.vmap(lambda k: model.loglik_grad(q, counts, k, 50)[0])(jax.random.split(jax.random.PRNGKey(0), 200))
    mean, se = jnp.mean(grads, 0), jnp.std(grads, 0) / np.sqrt(200)
    assert np.all(np.abs(np.asarray(mean - jnp.sum(counts, 0))) < 5 * np.asarray(se) + 1e-9)


@pytest.mark.slow
def test_poisson_gamma_prox_svi_matches_quadrature_posterior():
    """D = 1: the PG-SVI Gamma fit's mean and E[log theta] against the exact posterior by
    quadrature (within 2 %; Gamma is not the exact posterior, and the gradient is Monte Carlo)."""
    model = PoissonGammaSoftplus(1, prior_shape=2.0, prior_rate=1.0)
    x, y, _ = model.sample_data(jax.random.PRNGKey(3), 200, theta=jnp.array([2.0]))
    alg = prox_svi(model, num_data=200, schedule=0.5, num_samples=16)
    step = jax.jit(alg.step)
    state = alg.init(jax.random.PRNGKey(0), (x, y))
    idx = np.random.default_rng(0).integers(0, 200, (400, 20))
    means = []
    for t in range(400):
        state, info = step(jax.random.PRNGKey(t), state, (x[idx[t]], y[idx[t]]))
        if t >= 200:
            means.append(np.asarray(state.q_global.mean_params()[1]))
    grid = np.linspace(1e-3, 6, 20001)
    logp = (
        1.0 * np.log(grid)
        - 1.0 * grid
        + np.sum(
            np.asarray(y)[:, None] * np.log(np.log1p(np.exp(np.asarray(x) @ grid[None, :])))
            - np.log1p(np.exp(np.asarray(x) @ grid[None, :])),
            0,
        )
    )
    w = np.exp(logp - logp.max())
    w /= w.sum()
    post_mean = np.sum(w * grid)
    np.testing.assert_allclose(np.mean(means), post_mean, rtol=0.02)
    assert int(info.num_damped) == 0


def test_bad_input():
    with pytest.raises(ValueError, match="features"):
        PoissonGammaSoftplus(1).check_data((np.array([[np.inf]]), np.array([1.0])))
    with pytest.raises(ValueError, match="counts"):
        PoissonGammaSoftplus(1).check_data((np.array([[1.0]]), np.array([-1.0])))
    with pytest.raises(ValueError, match="noise"):
        NoisyDirichletMultinomial(3, noise=1.0)
    with pytest.raises(ValueError, match="counts"):
        NoisyDirichletMultinomial(3).check_data(np.array([[1.0, 0.5, 2.0]]))
    with pytest.raises(ValueError, match="prior_rate"):
        PoissonGammaSoftplus(2, prior_rate=-1.0)
