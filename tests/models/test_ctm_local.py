"""The correlated topic model's baseline local steps (Khan et al. 2016, Fig. 3): Laplace and
delta-method variational inference (Wang & Blei 2013) and the mean-field CTM (Blei & Lafferty
2007). Fixed points against jax.grad / jax.hessian, the delta method's expansion against finite
differences, the mean-field bound's monotone coordinate ascent, learning on a synthetic corpus,
bad option names."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import logsumexp

from vijax.data import sample_ctm_corpus
from vijax.inference._prox_svi import prox_svi
from vijax.metrics import corpus_document_completion
from vijax.models import ctm as L
from vijax.models.ctm import CTM

K, V = 4, 12


def _doc(seed=0):
    r = np.random.default_rng(seed)
    topics = r.dirichlet(np.full(V, 0.5), size=K)
    a = r.normal(size=(K - 1, K - 1))
    sigma = a @ a.T / 2 + 0.5 * np.eye(K - 1)
    mu = jnp.array([0.3, -0.2, 0.1])
    ids = jnp.array([0, 3, 5, 7, 11, 2])
    counts = jnp.array([2.0, 1.0, 4.0, 1.0, 3.0, 0.0])  # the last word is padding
    return mu, jnp.linalg.inv(jnp.asarray(sigma)), jnp.log(jnp.asarray(topics))[:, ids], counts


def _phi(a, z):
    return jax.nn.softmax(a.T + jnp.append(z, 0.0)[None, :], -1)


def test_laplace_mode_and_hessian():
    """At the returned mode the gradient of the log posterior (and of Wang & Blei's f with phi at
    its fixed point) is 0, and the covariance is -(jax.hessian of f)^-1 there."""

    @jax.jit
    def run(mu, prec0, a, counts):
        z, cov, resp = L.laplace_fit(mu, prec0, a, counts, 50)
        phi = _phi(a, z)
        return (
            z,
            cov,
            resp,
            phi,
            jax.grad(L.log_posterior)(z, mu, prec0, a, counts),
            jax.grad(L.laplace_objective)(z, phi, mu, prec0, a, counts),
            jax.hessian(L.laplace_objective)(z, phi, mu, prec0, a, counts),
            jax.hessian(L.log_posterior)(z, mu, prec0, a, counts),
        )

    mu, prec0, a, counts = _doc()
    z, cov, resp, phi, g_post, g_f, hess, hess_post = run(mu, prec0, a, counts)
    assert np.max(np.abs(z - mu)) > 0.1  # the words moved it from the prior mean
    np.testing.assert_allclose(g_post, 0.0, atol=1e-9)
    np.testing.assert_allclose(resp, counts[:, None] * phi, rtol=1e-12)
    np.testing.assert_allclose(g_f, 0.0, atol=1e-9)
    np.testing.assert_allclose(np.linalg.inv(cov), -hess, rtol=1e-9, atol=1e-12)
    assert np.all(np.linalg.eigvalsh(hess_post) < 0)  # a maximum of the marginal log posterior too


def test_delta_expansion_against_finite_differences():
    """The delta method's second-order term: C(m) against central second differences of
    lse((m, 0)); and the expansion's error against E_q[lse] (Gauss-Hermite quadrature) shrinks as
    V^2 (the Gaussian's third central moments vanish), a quarter when V halves."""
    m = jnp.array([0.4, -0.7, 0.2])
    h = 1e-4
    eye = np.eye(K - 1)

    def lse(x):
        return logsumexp(jnp.append(x, 0.0))

    lse = jax.jit(lse)
    fd = np.array(
        [
            [
                (lse(m + h * eye[i] + h * eye[j]) - lse(m + h * eye[i] - h * eye[j]))
                - (lse(m - h * eye[i] + h * eye[j]) - lse(m - h * eye[i] - h * eye[j]))
                for j in range(K - 1)
            ]
            for i in range(K - 1)
        ]
    ) / (4 * h * h)
    np.testing.assert_allclose(L.softmax_cov(m), fd, atol=1e-6)
    # E_q[lse] by a tensor Gauss-Hermite rule (12 nodes per axis: exact to degree 23)
    x, w = np.polynomial.hermite_e.hermegauss(12)
    grid = np.stack(np.meshgrid(x, x, x, indexing="ij"), -1).reshape(-1, 3)
    wts = np.prod(np.stack(np.meshgrid(w, w, w, indexing="ij"), -1).reshape(-1, 3), -1) / (2 * np.pi) ** 1.5
    v0 = jnp.array([[0.5, 0.1, 0.0], [0.1, 0.4, -0.1], [0.0, -0.1, 0.3]])

    @jax.jit
    def err(eps):
        z = m[None, :] + jnp.asarray(grid) @ jnp.linalg.cholesky(eps * v0).T
        return jnp.sum(jnp.asarray(wts) * jax.vmap(lse)(z)) - L.delta_lse(m, eps * v0)

    errs = np.array([float(err(eps)) for eps in (0.1, 0.05, 0.025)])
    np.testing.assert_allclose(errs[:-1] / errs[1:], 4.0, rtol=0.15)  # O(V^2): the Taylor remainder


def test_delta_fixed_point_is_stationary():
    """jax.grad of the delta-method bound J(m, V) in m and in V is 0 at the returned (m, V)."""

    @jax.jit
    def run(mu, prec0, a, counts):
        m, cov, _ = L.delta_fit(mu, prec0, a, counts, 50)
        grads = jax.grad(L.delta_objective, argnums=(0, 1))(m, cov, mu, prec0, a, counts)
        return grads, jax.grad(L.log_posterior)(m, mu, prec0, a, counts)

    (gm, gv), g_post = run(*_doc(1))
    np.testing.assert_allclose(gm, 0.0, atol=1e-9)
    np.testing.assert_allclose(gv, 0.0, atol=1e-9)
    assert np.max(np.abs(g_post)) > 1e-2  # the tr(C(m) V) term moves the mean off the posterior mode


def test_meanfield_bound_is_monotone_and_stationary():
    """Every coordinate update of a sweep (zeta, phi, lambda, zeta, nu2) raises the bound; at the
    fixed point jax.grad in (lambda, nu2, zeta) is 0 and phi is its closed form."""
    mu, prec0, a, counts = _doc(2)
    sweep = jax.jit(lambda s: L.mf_sweep(s, mu, prec0, a, counts, trace=True))
    s = jax.jit(L.mf_init)(mu, prec0, a, counts)
    trace = [float(jax.jit(L.mf_elbo)(*s, mu, prec0, a, counts))]
    for _ in range(200):  # linear convergence, about 0.9 per sweep here
        s, t = sweep(s)
        trace.extend(np.asarray(t).tolist())
    diffs = np.diff(trace)
    assert np.all(diffs >= -1e-12 * np.abs(trace[-1]))
    assert trace[-1] > trace[0] + 1.0
    lam, nu2, zeta, phi = s
    grads = jax.jit(jax.grad(L.mf_elbo, argnums=(0, 1, 2)))(lam, nu2, zeta, phi, mu, prec0, a, counts)
    for g in grads:
        np.testing.assert_allclose(g, 0.0, atol=1e-6)
    np.testing.assert_allclose(phi, _phi(a, lam), atol=1e-7)  # phi precedes lambda's update in a sweep
    # meanfield_fit's while_loop stops when a sweep moves lambda and nu2 by < 1e-7, near that point
    lam2, nu22, _ = jax.jit(L.meanfield_fit, static_argnums=4)(mu, prec0, a, counts, 400)
    np.testing.assert_allclose(lam2, lam, atol=1e-4)
    np.testing.assert_allclose(nu22, nu2, atol=1e-4)


def _learn(method, steps, seed=1):
    corpus, _ = sample_ctm_corpus(seed, 120, 3, 30, doc_length=50)
    train, test = corpus.subset(range(80)), corpus.subset(range(80, 120))
    obs, held = test.split_tokens(0)
    cov = "diagonal" if method == "meanfield" else "full"
    model = CTM(3, 30, covariance=cov, local_method=method, local_steps=30, eval_local_steps=30, eval_samples=100)
    alg = prox_svi(model, num_data=80, schedule=0.05, num_samples=4)
    state = alg.init(jax.random.PRNGKey(0))
    start = corpus_document_completion(model, state.q_global, obs, held, 40).per_word
    step = jax.jit(alg.step)
    idx = np.random.default_rng(0).integers(0, 80, (steps, 2))
    for t in range(steps):
        state, info = step(jax.random.PRNGKey(t), state, train.batch(idx[t], length=32))
    end = corpus_document_completion(model, state.q_global, obs, held, 40).per_word
    assert np.isfinite(float(info.elbo))
    return start, end


@pytest.mark.slow
@pytest.mark.parametrize("method", ["laplace", "delta", "meanfield"])
def test_baselines_improve_heldout_on_a_synthetic_corpus(method):
    """60 steps of stochastic variational EM (minibatches of 2, step 0.05) with each baseline's local
    step: the held-out per-word log-likelihood climbs by > 0.1 nats from the random start."""
    start, end = _learn(method, 60)
    assert end > start + 0.1


def test_bad_local_method():
    with pytest.raises(ValueError, match="local_method"):
        CTM(K, V, local_method="newton")
    with pytest.raises(ValueError, match="local_method"):
        CTM(K, V, local_method="meanfield")  # needs covariance="diagonal"
    with pytest.raises(ValueError, match="local_method"):
        CTM(K, V, covariance="diagonal", local_method="laplace")
