"""The variational Renyi bound of bbvi (``estimator="renyi"``; Li and Turner 2016, *Renyi Divergence
Variational Inference*): its closed form on a Gaussian target with a Gaussian q, its limits (alpha = 0:
the IWAE bound; alpha -> 1: the ELBO), its gradient, a fit, and bad orders."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

import vijax.inference as vi
from vijax.inference import bbvi
from vijax.inference._bbvi import vr_bound

LOG_Z, MU, SIGMA = 1.7, 1.0, 1.2  # p~(z) = Z N(z | MU, SIGMA^2)
M, S = 0.3, 0.8  # q = N(M, S^2)


def target(params, batch):
    return LOG_Z + jax.scipy.stats.norm.logpdf(params["z"][0], MU, SIGMA)


def renyi_divergence(alpha, m1, s1, m2, s2):
    """D_alpha(N(m1, s1^2) || N(m2, s2^2)) = (1 / (alpha - 1)) log int q^alpha p^(1 - alpha), in closed
    form (the Gaussian integral, needing s_a^2 = alpha s2^2 + (1 - alpha) s1^2 > 0)."""
    if alpha == 1.0:
        return math.log(s2 / s1) + (s1**2 + (m1 - m2) ** 2) / (2 * s2**2) - 0.5
    var = alpha * s2**2 + (1 - alpha) * s1**2
    return math.log(s2 / s1) + math.log(s2**2 / var) / (2 * (alpha - 1)) + alpha * (m1 - m2) ** 2 / (2 * var)


def closed_form_bound(alpha):
    return LOG_Z - renyi_divergence(alpha, M, S, MU, SIGMA)


def q_params(m=M, s=S):
    return {"loc": jnp.array([m]), "scale": jnp.array([math.log(math.expm1(s))])}


def algorithm(estimator="renyi", **kw):
    return bbvi(target, init_params={"z": jnp.zeros(1)}, estimator=estimator, **kw)


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0, 2.0])
def test_closed_form_renyi_divergence_matches_quadrature(alpha):
    def integrand(z):
        return stats.norm.pdf(z, M, S) ** alpha * stats.norm.pdf(z, MU, SIGMA) ** (1 - alpha)

    if alpha == 1.0:
        value = integrate.quad(
            lambda z: stats.norm.pdf(z, M, S) * (stats.norm.logpdf(z, M, S) - stats.norm.logpdf(z, MU, SIGMA)), -30, 30
        )[0]
    elif alpha == 0.0:
        value = 0.0  # D_0(q || p) = -log p(supp q) = 0 for full supports
    else:
        value = math.log(integrate.quad(integrand, -30, 30)[0]) / (alpha - 1)
    np.testing.assert_allclose(renyi_divergence(alpha, M, S, MU, SIGMA), value, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("alpha", [0.0, 0.5, 2.0])
def test_monte_carlo_bound_matches_the_closed_form(alpha):
    num = 50_000
    alg = algorithm(alpha=alpha, num_samples=num)
    value = float(vi.elbo(alg, jax.random.PRNGKey(0), q_params(), None))
    # the estimator's standard error by the delta method, from an independent draw of the log-weights
    z = np.random.default_rng(1).normal(M, S, num)
    log_w = LOG_Z + stats.norm.logpdf(z, MU, SIGMA) - stats.norm.logpdf(z, M, S)
    c = 1.0 - alpha
    u = np.exp(c * (log_w - log_w.mean()))
    se = np.std(u) / (abs(c) * np.mean(u) * math.sqrt(num))
    assert abs(value - closed_form_bound(alpha)) < 5 * se, (value, closed_form_bound(alpha), se)
    assert se < 0.02  # the check is sharp


def test_limits_alpha_zero_is_iwae_and_alpha_one_is_the_elbo():
    log_w = jnp.asarray(np.random.default_rng(2).normal(-3.0, 2.0, 64))
    iwae = jax.scipy.special.logsumexp(log_w) - math.log(64)
    # the general formula near the limits (not the special cases at exactly 0 and 1)
    np.testing.assert_allclose(vr_bound(log_w, 1e-9), iwae, rtol=1e-7)
    for a in (1 - 1e-7, 1 + 1e-7):
        np.testing.assert_allclose(vr_bound(log_w, a), jnp.mean(log_w), rtol=1e-6)
    # monotone non-increasing in alpha (Li and Turner 2016, Theorem 1 holds for the estimator too)
    values = [float(vr_bound(log_w, a)) for a in (0.0, 0.25, 0.5, 0.999, 1.0, 1.5, 3.0)]
    assert all(a >= b - 1e-12 for a, b in zip(values, values[1:])), values
    # at the same draws, the estimator of bbvi: alpha = 0 is "iwae", alpha = 1 the ELBO with a MC entropy
    key, q = jax.random.PRNGKey(3), q_params()
    at = lambda alg: vi.elbo(alg, key, q, None)  # noqa: E731
    np.testing.assert_allclose(
        at(algorithm(alpha=0.0, num_samples=16)), at(algorithm("iwae", num_samples=16)), rtol=1e-12
    )
    elbo_mc = algorithm("reparam", entropy="mc", num_samples=16)
    np.testing.assert_allclose(at(algorithm(alpha=1.0, num_samples=16)), at(elbo_mc), rtol=1e-12)


def test_gradient_at_alpha_one_is_the_elbo_gradient_and_finite_elsewhere():
    key, q = jax.random.PRNGKey(4), q_params()

    def grad(alg, v=q):
        return jax.jit(jax.grad(lambda v: vi.elbo(alg, key, v, None)))(v)

    g_elbo = grad(algorithm("reparam", entropy="mc", num_samples=8))
    g_one = grad(algorithm(alpha=1.0, num_samples=8))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-12), g_one, g_elbo)
    # q far from p: log-weights of order -1e5, no overflow, no NaN in the value or the gradient
    z = M + S * jnp.asarray(np.random.default_rng(4).normal(size=8))

    def bound(m, a):
        return vr_bound(-1e5 * (z - m) ** 2, a)

    for a in (0.0, 0.5, 1.0 - 1e-9, 2.0, 10.0):
        value, g = jax.value_and_grad(bound)(0.0, a)
        assert np.isfinite(value) and np.isfinite(g), (a, value, g)
    # continuous at the limit: the gradient of the general formula near alpha = 1 is the ELBO's
    g_mean = jax.grad(lambda m: jnp.mean(-((z - m) ** 2)))(0.3)
    for a in (1 - 1e-6, 1 + 1e-6):
        np.testing.assert_allclose(jax.grad(lambda m: vr_bound(-((z - m) ** 2), a))(0.3), g_mean, rtol=1e-4)


def test_gradient_at_alpha_one_is_unbiased_for_the_closed_form_elbo_gradient():
    def exact(v):
        m, s = v["loc"][0], jax.nn.softplus(v["scale"][0])
        kl = jnp.log(SIGMA / s) + (s**2 + (m - MU) ** 2) / (2 * SIGMA**2) - 0.5
        return LOG_Z - kl

    alg, q = algorithm(alpha=1.0, num_samples=4), q_params()
    grads = jax.jit(jax.vmap(lambda k: jax.grad(lambda v: vi.elbo(alg, k, v, None))(q)))(
        jax.random.split(jax.random.PRNGKey(5), 2000)
    )
    want = jax.grad(exact)(q)
    for name in ("loc", "scale"):
        g = np.asarray(grads[name])[:, 0]
        se = g.std() / math.sqrt(g.size)
        assert abs(g.mean() - float(want[name][0])) < 4 * se, (name, g.mean(), want[name], se)


def test_fit_reaches_the_posterior():
    alg = algorithm(alpha=0.5, num_samples=16, schedule=0.02)
    state = alg.init(jax.random.PRNGKey(6))
    step = jax.jit(alg.step)
    for t in range(600):
        state, info = step(jax.random.PRNGKey(100 + t), state, None)
    loc, scale = float(state.q_global["loc"][0]), float(jax.nn.softplus(state.q_global["scale"][0]))
    assert abs(loc - MU) < 0.1 and abs(scale - SIGMA) < 0.1, (loc, scale)
    assert abs(float(info.elbo) - LOG_Z) < 0.05  # at q = p the bound is log Z for every alpha


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(alpha=-0.5), "alpha"),
        (dict(alpha=float("inf")), "alpha"),
        (dict(alpha=True), "alpha"),
        (dict(alpha="half"), "alpha"),
        (dict(estimator="reparam", alpha=0.5), "alpha"),
        (dict(estimator="iwae", alpha=0.0), "alpha"),
    ],
)
def test_bad_alpha_is_refused_by_name(kw, match):
    with pytest.raises(ValueError, match=match):
        algorithm(**{"estimator": "renyi", **kw})


def test_default_alpha():
    alg = algorithm()
    assert vi.guide(alg) is not None and alg.extras.settings["alpha"] == 0.5
