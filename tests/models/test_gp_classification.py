"""GP classification (Khan et al. 2016, §6, app. D): the closed-form KL-proximal step against a numerical
argmin of the proximal objective, the gamma-tilde recursion against dense matrices, the ELBO,
the predictive and the input checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
import scipy.special
import scipy.stats

from vijax.models.gp_classification import (
    GPClassification,
    cholesky_from_params,
    expected_loglik,
    params_from_cholesky,
    se_kernel,
    to_pm1_labels,
)

N = 6


def _model(mean_update="exact", n=N, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    y = np.where(x[:, 0] + 0.3 * rng.normal(size=n) > 0, 1, 0)
    return GPClassification(x, y, log_lengthscale=0.2, log_scale=0.5, jitter=1e-2, mean_update=mean_update)


def _gauss_kl(m1, v1, m0, v0):
    """KL(N(m1, V1) || N(m0, V0)), dense."""
    d = m1.shape[0]
    l0 = jnp.linalg.cholesky(v0)
    a = jax.scipy.linalg.solve_triangular(l0, jnp.linalg.cholesky(v1), lower=True)
    b = jax.scipy.linalg.solve_triangular(l0, m1 - m0, lower=True)
    return 0.5 * (jnp.sum(a * a) + jnp.sum(b * b) - d + jnp.linalg.slogdet(v0)[1] - jnp.linalg.slogdet(v1)[1])


def _numeric_prox(model, q, grad, betas):
    """argmin_{m, L} alpha^T m + gamma^T diag(V)/2 + KL(q || p) + KL(q || q_k)/beta, V = L L^T,
    by scipy's trust-region Newton with jax derivatives (the oracle, independent of app. D)."""
    n = model.num_data
    vk = model.covariance(q)
    tril = np.tril_indices(n)

    def unpack(p):
        lo = jnp.zeros((n, n)).at[tril].set(p[n:])
        return p[:n], lo @ lo.T

    def obj(p, beta):
        m, v = unpack(p)
        return (
            grad.alpha @ m
            + 0.5 * grad.gamma @ jnp.diag(v)
            + _gauss_kl(m, v, jnp.zeros(n), model.K)
            + _gauss_kl(m, v, q.mean, vk) / beta
        )

    p0 = np.concatenate([np.asarray(q.mean), np.asarray(jnp.linalg.cholesky(vk))[tril]])
    f, g, h = jax.jit(obj), jax.jit(jax.grad(obj)), jax.jit(jax.hessian(obj))
    out = []
    for beta in betas:
        res = scipy.optimize.minimize(
            lambda p: float(f(p, beta)),
            p0,
            jac=lambda p: np.asarray(g(p, beta)),
            hess=lambda p: np.asarray(h(p, beta)),
            method="trust-exact",
            options={"gtol": 1e-12, "maxiter": 500},
        )
        assert np.max(np.abs(g(res.x, beta))) < 1e-7, res
        out.append(unpack(jnp.asarray(res.x)))
    return out


def _warm_state(model, steps=3):
    def body(k, q):
        return model.prox_step(q, jnp.stack([k % N, (k + 2) % N]), jax.random.PRNGKey(10 + k), 0.7, 50)

    return jax.jit(lambda q: jax.lax.fori_loop(0, steps, body, q))(model.init_variational(None))


@pytest.mark.slow
def test_closed_form_step_is_the_argmin_of_the_proximal_objective():
    """For several beta_k and one fixed stochastic gradient (200 MC draws, minibatch {1, 4})."""
    model = _model()
    q = _warm_state(model)
    batch = jnp.array([1, 4])
    grad = model.loglik_grad(q, batch, jax.random.PRNGKey(3), 200)
    betas = [0.05, 0.5, 2.0, 20.0]
    for beta, (m_star, v_star) in zip(betas, _numeric_prox(model, q, grad, betas)):
        q_new = model.prox_step_from_gradient(q, grad, beta)
        np.testing.assert_allclose(q_new.mean, m_star, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(model.covariance(q_new), v_star, rtol=1e-6, atol=1e-7)
    # and the same key gives the same gradient inside prox_step
    q_new2 = model.prox_step(q, batch, jax.random.PRNGKey(3), 2.0, 200)
    np.testing.assert_allclose(q_new2.mean, model.prox_step_from_gradient(q, grad, 2.0).mean, rtol=1e-12)


def test_paper_mean_update_differs_only_at_second_order():
    """mean_update='paper' (eq. 19, A_k) shares the V update and moves m by O((1 - r) gamma) less."""
    exact, paper = _model("exact"), _model("paper")
    q = _warm_state(exact)
    grad = exact.loglik_grad(q, jnp.array([2]), jax.random.PRNGKey(0), 100)
    a, b = exact.prox_step_from_gradient(q, grad, 0.5), paper.prox_step_from_gradient(q, grad, 0.5)
    np.testing.assert_array_equal(a.gamma_tilde, b.gamma_tilde)
    step = np.max(np.abs(a.mean - q.mean))
    assert 0 < np.max(np.abs(a.mean - b.mean)) < 0.5 * step


def test_paper_mean_update_is_the_natural_parameter_step():
    """mean_update='paper' (eq. 19, A_k) is exactly the KL-proximal step with f linearised in the mean
    parameters (m, m m^T + V): V_{k+1}^{-1} m_{k+1} = r V_k^{-1} m_k + (1 - r)(-alpha + diag(gamma) m_k)
    (the form of the reference code's Figure 2 runs), checked with dense matrices over several steps."""
    model = _model("paper")
    q = model.init_variational(None)
    kinv = np.linalg.inv(np.asarray(model.K))
    prec = kinv.copy()
    loglik_grad = jax.jit(lambda q, b, key: model.loglik_grad(q, b, key, 64))
    step = jax.jit(model.prox_step_from_gradient)
    for k, beta in enumerate([0.3, 1.0, 0.1, 3.0, 0.5]):
        grad = loglik_grad(q, jnp.array([k % N, (k + 3) % N]), jax.random.PRNGKey(k))
        r, m = 1 / (1 + beta), np.asarray(q.mean)
        eta1 = r * prec @ m + (1 - r) * (-np.asarray(grad.alpha) + np.asarray(grad.gamma) * m)
        prec = r * prec + (1 - r) * (kinv + np.diag(np.asarray(grad.gamma)))
        q = step(q, grad, beta)
        np.testing.assert_allclose(q.mean, np.linalg.solve(prec, eta1), rtol=1e-9, atol=1e-11)


def test_minibatch_gradients_average_to_the_full_gradient():
    """The N/M scaling: over the four minibatches of 3 that partition 12 examples, the mean of the
    scaled gradients equals the full-batch gradient (quadrature, so exactly)."""
    model = _model(n=12)
    q = model.init_variational(None)
    grads = jax.jit(jax.vmap(lambda b: model.loglik_grad(q, b, None, None)))  # one program per M
    full, parts = grads(jnp.arange(12)[None]), grads(jnp.arange(12).reshape(4, 3))
    for name in ("alpha", "gamma"):
        assert np.max(np.abs(getattr(full, name))) > 0.1
        np.testing.assert_allclose(np.mean(getattr(parts, name), 0), getattr(full, name)[0], rtol=1e-12, atol=1e-14)


def test_gamma_tilde_recursion_matches_dense_natural_parameter_updates():
    """Several steps: V^{-1}_{k+1} = r V_k^{-1} + (1-r)(K^{-1} + diag gamma) and
    V^{-1}_{k+1} m_{k+1} = r V_k^{-1} m_k - (1-r) alpha, with dense matrices (eq. 17-18)."""
    model = _model()
    q = model.init_variational(None)
    kinv = np.linalg.inv(np.asarray(model.K))
    prec, eta1 = kinv.copy(), np.zeros(N)
    for k, beta in enumerate([0.3, 1.0, 0.1, 3.0]):
        batch = jnp.array([k, (k + 3) % N])
        grad = model.loglik_grad(q, batch, jax.random.PRNGKey(k), 64)
        r = 1 / (1 + beta)
        # eta1 uses r V_k^{-1} + (1 - r) K^{-1} as the metric of the mean: P~ m_{k+1} = r V_k^{-1} m_k - (1-r) alpha
        pt = r * prec + (1 - r) * kinv
        m_next = np.linalg.solve(pt, r * prec @ np.asarray(q.mean) - (1 - r) * np.asarray(grad.alpha))
        prec = pt + (1 - r) * np.diag(np.asarray(grad.gamma))
        q = model.prox_step_from_gradient(q, grad, beta)
        np.testing.assert_allclose(q.mean, m_next, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(np.linalg.inv(np.asarray(model.covariance(q))), prec, rtol=1e-7, atol=1e-8)
    assert eta1 is not None


def test_marginals_and_kl_match_dense_formulas():
    model = _model()
    q = _warm_state(model)
    v = np.asarray(model.covariance(q))
    idx = jnp.array([0, 2, 5])
    m_b, v_b = model.marginals(q, idx)
    np.testing.assert_allclose(v_b, np.diag(v)[np.asarray(idx)], rtol=1e-10)
    np.testing.assert_allclose(
        model.kl_to_prior(q), _gauss_kl(q.mean, jnp.asarray(v), jnp.zeros(N), model.K), rtol=1e-10
    )
    # dense V from the definition V^{-1} = K^{-1} + diag(gamma_tilde)
    np.testing.assert_allclose(
        np.linalg.inv(np.linalg.inv(np.asarray(model.K)) + np.diag(q.gamma_tilde)), v, rtol=1e-8, atol=1e-10
    )


@pytest.mark.slow
def test_expected_loglik_quadrature_mc_and_gradients():
    m, v, y = jnp.array([0.3, -1.0]), jnp.array([0.5, 2.0]), jnp.array([1.0, -1.0])
    # scipy quadrature oracle
    for i in range(2):
        ref = scipy.integrate.quad(
            lambda z: -np.logaddexp(0, -float(y[i]) * z) * scipy.stats.norm.pdf(z, float(m[i]), np.sqrt(float(v[i]))),
            -30,
            30,
        )[0]
        np.testing.assert_allclose(expected_loglik(m, v, y)[i], ref, rtol=1e-8)
    # wide Gaussians (the Sonar prior has variance e^12): against a dense trapezoid rule on the
    # remainder after the closed-form part; 32-point Gauss-Hermite would be off by ~1 here
    for mi, vi, yi in [(0.1, 1e5, 1.0), (3.0, 1e4, -1.0), (0.5, 148.0, 1.0)]:
        z = np.linspace(-60, 60, 2_000_001)
        sd = np.sqrt(vi)
        dens = scipy.stats.norm.pdf(z, mi, sd)
        rest = np.trapezoid(-(np.logaddexp(0, -yi * z) - np.maximum(-yi * z, 0)) * dens, z)
        mu = yi * mi
        closed = mu * scipy.stats.norm.cdf(-mu / sd) - sd * scipy.stats.norm.pdf(mu / sd)
        got = expected_loglik(jnp.array([mi]), jnp.array([vi]), jnp.array([yi]))[0]
        np.testing.assert_allclose(got, closed + rest, rtol=1e-9)
        d2 = jax.grad(lambda b: expected_loglik(jnp.array([mi]), b, jnp.array([yi]))[0])(jnp.array([vi]))[0]
        np.testing.assert_allclose(
            d2, np.trapezoid(-0.5 * scipy.special.expit(z) * scipy.special.expit(-z) * dens, z), rtol=1e-7
        )
    # the custom (Bonnet/Price) derivatives of the quadrature equal autodiff of the exact integral
    f = lambda a, b: jnp.sum(expected_loglik(a, b, y))
    gm, gv = jax.grad(f, (0, 1))(m, v)
    eps = 1e-5
    for i in range(2):
        e = jnp.zeros(2).at[i].set(eps)
        np.testing.assert_allclose(gm[i], (f(m + e, v) - f(m - e, v)) / (2 * eps), rtol=1e-6)
        np.testing.assert_allclose(gv[i], (f(m, v + e) - f(m, v - e)) / (2 * eps), rtol=1e-6)
    # Monte Carlo within 5 standard errors
    s = 20000
    mc = expected_loglik(m, v, y, jax.random.PRNGKey(0), s)
    z = m[:, None] + jnp.sqrt(v)[:, None] * jax.random.normal(jax.random.PRNGKey(0), (2, s))
    se = np.std(-np.logaddexp(0, -np.asarray(y)[:, None] * np.asarray(z)), axis=1) / np.sqrt(s)
    assert np.all(np.abs(np.asarray(mc - expected_loglik(m, v, y))) < 5 * se)


def test_elbo_params_matches_elbo_and_gradient_steps_agree():
    model = _model()
    q = _warm_state(model)
    v = model.covariance(q)
    params = params_from_cholesky(q.mean, jnp.linalg.cholesky(v))
    np.testing.assert_allclose(cholesky_from_params(params), jnp.linalg.cholesky(v), rtol=1e-12)
    np.testing.assert_allclose(model.elbo_params(params), model.elbo(q), rtol=1e-9)
    idx = jnp.array([1, 3])
    np.testing.assert_allclose(
        model.elbo_params(params, idx, jax.random.PRNGKey(1), 30),
        model.elbo(q, idx, jax.random.PRNGKey(1), 30),
        rtol=1e-9,
    )
    x_new = np.random.default_rng(5).normal(size=(4, 2))
    np.testing.assert_allclose(model.predict_proba_params(params, x_new), model.predict_proba(q, x_new), rtol=1e-8)


def test_pg_with_exact_gradients_increases_the_elbo_and_converges():
    """Batch PG (quadrature gradients, beta = 1) on 6 points: the ELBO rises monotonically and the
    fixed point has zero ELBO gradient (the optimum, checked with the (m, L) parametrisation)."""
    model = _model()
    q = model.init_variational(None)

    def body(q, _):
        q = model.prox_step(q, jnp.arange(N), None, 1.0, None)
        return q, model.elbo(q)

    q, elbos = jax.jit(lambda q: jax.lax.scan(body, q, None, length=200))(q)
    assert np.all(np.diff(np.asarray(elbos)) > -1e-9) and elbos[-1] > model.elbo(model.init_variational(None))
    params = params_from_cholesky(q.mean, jnp.linalg.cholesky(model.covariance(q)))
    g = jax.grad(model.elbo_params)(params)
    assert np.max(np.abs(g["m"])) < 1e-6 and np.max(np.abs(jnp.tril(g["L"]))) < 1e-6


def test_predictive_against_sampling():
    model = _model()
    q = _warm_state(model)
    xt = np.random.default_rng(2).normal(size=(3, 2))
    mu, var = model.latent_predictive(q, xt)
    # joint Gaussian of (z, z*) under the prior, conditioned through q: z* | z ~ N(k*^T K^-1 z, ...)
    ks = np.asarray(se_kernel(model.x, jnp.asarray(xt), 0.2, 0.5))
    kinv = np.linalg.inv(np.asarray(model.K))
    v = np.asarray(model.covariance(q))
    a = kinv @ ks
    np.testing.assert_allclose(mu, a.T @ np.asarray(q.mean), rtol=1e-8)
    np.testing.assert_allclose(var, np.exp(1.0) - np.sum(ks * a, 0) + np.sum(a * (v @ a), 0), rtol=1e-8)
    p = model.predict_proba(q, xt)
    z = np.asarray(mu)[:, None] + np.sqrt(np.asarray(var))[:, None] * np.random.default_rng(0).normal(size=(3, 200000))
    np.testing.assert_allclose(p, np.mean(1 / (1 + np.exp(-z)), 1), atol=5e-3)
    ll = model.log_loss(q, xt, np.array([1, 0, 1]))
    pp = np.asarray(p)
    np.testing.assert_allclose(ll, -np.mean(np.log2([pp[0], 1 - pp[1], pp[2]])), rtol=1e-10)


def test_step_jits_once_and_vmaps_over_keys():
    model = _model()
    q = model.init_variational(None)
    traces = []

    def f(q, key):
        traces.append(1)
        return model.prox_step(q, jnp.array([0, 1]), key, 0.5, 16)

    jf = jax.jit(f)
    q1 = jf(q, jax.random.PRNGKey(0))
    jf(q1, jax.random.PRNGKey(1))
    assert len(traces) == 1
    qs = jax.jit(jax.vmap(jf, in_axes=(None, 0)))(q, jax.random.split(jax.random.PRNGKey(0), 3))
    assert qs.mean.shape == (3, N)


def test_bad_input():
    x = np.zeros((3, 2))
    with pytest.raises(ValueError, match="y"):
        GPClassification(x, np.array([0, 1, 2]), 0.0, 0.0)
    with pytest.raises(ValueError, match="x"):
        GPClassification(np.array([[0.0, np.nan], [1, 1], [2, 2]]), np.array([0, 1, 1]), 0.0, 0.0)
    with pytest.raises(ValueError, match="jitter"):
        GPClassification(x, np.array([0, 1, 1]), 0.0, 0.0, jitter=-1.0)
    model = _model()
    q = model.init_variational(None)
    for beta in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="beta"):
            model.prox_step(q, jnp.array([0]), None, beta, None)
    with pytest.raises(ValueError, match="batch"):
        model.prox_step(q, jnp.array([N]), None, 1.0, None)
    with pytest.raises(ValueError, match="num_samples"):
        model.prox_step(q, jnp.array([0]), jax.random.PRNGKey(0), 1.0, 0)
    np.testing.assert_array_equal(to_pm1_labels([0, 1, 1]), [-1.0, 1.0, 1.0])
    np.testing.assert_array_equal(to_pm1_labels([-1, 1]), [-1.0, 1.0])
    with pytest.raises(ValueError, match="labels"):
        to_pm1_labels([-1, 0, 1])
