"""Correlated topic model under PG-SVI (Khan et al. 2016, §6.2, app. A.3): the log-sum-exp gradient and
Hessian against autodiff; the local KL-proximal steps (full and diagonal) against the generic
closed form and the numerical argmin of the proximal objective; the held-out predictive on a case
with a known answer; the global step's statistics; learning on a synthetic corpus; bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.testing._argmin import newton_argmin
from vijax.data import BowBatch
from vijax.inference._prox_svi import prox_svi
from vijax.metrics import corpus_document_completion
from vijax.expfam import kl_prox_closed_form, prox_objective
from vijax.models.ctm import CTM, CTMGlobals, LocalQ, psi_terms
from vijax.data import sample_ctm_corpus

K, V = 3, 12


def _setup(covariance="full", seed=0):
    r = np.random.default_rng(seed)
    topics = r.dirichlet(np.full(V, 0.5), size=K)
    a = r.normal(size=(K - 1, K - 1))
    sigma = a @ a.T / 2 + 0.5 * np.eye(K - 1)
    mu = np.array([0.3, -0.2])
    g = CTMGlobals(jnp.asarray(topics), jnp.asarray(mu), jnp.asarray(sigma + np.outer(mu, mu)))
    model0 = CTM(K, V, covariance=covariance, topic_smoothing=1e-300, cov_shrinkage=0.0)
    params = model0.params(g)
    ids = jnp.array([0, 3, 5, 7, 11])
    counts = jnp.array([2.0, 1.0, 4.0, 1.0, 3.0])
    return model0, params, ids, counts


def test_psi_gradient_and_hessian_match_autodiff():
    model, params, ids, counts = _setup()
    a = params.log_topics[:, ids]
    z = jax.random.normal(jax.random.PRNGKey(0), (4, K - 1))
    _, grad, hess, _ = psi_terms(z, a, counts)

    def psi(zz):
        return psi_terms(zz[None], a, counts)[0][0]

    np.testing.assert_allclose(grad, jax.jit(jax.vmap(jax.grad(psi)))(z), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hess, jax.jit(jax.vmap(jax.hessian(psi)))(z), rtol=1e-10, atol=1e-12)


def _q_k(params, covariance):
    m = params.mu + jnp.array([0.4, -0.5])
    if covariance == "full":
        return LocalQ(m, 0.8 * params.sigma)
    return LocalQ(m, 0.8 * jnp.diagonal(params.sigma))


@pytest.mark.parametrize("beta", [0.1, 1.0, 10.0])
def test_full_local_step_is_kl_prox_closed_form_and_argmin(beta):
    model, params, ids, counts = _setup("full")
    q = _q_k(params, "full")
    key = jax.random.PRNGKey(1)
    prec0 = jnp.linalg.inv(params.sigma)
    new = model.local_prox_step(q, params, prec0, params.log_topics[:, ids], counts, key, 8, beta)
    _, dm, dv = model.expected_loglik_grads(q, params.log_topics[:, ids], counts, key, 8)
    q_k = expfam.MultivariateNormal.from_mean_covariance(q.mean, q.cov)
    prior = expfam.MultivariateNormal.from_mean_covariance(params.mu, params.sigma)
    g = (dm - 2.0 * dv @ q.mean, dv)
    closed = kl_prox_closed_form(q_k, prior, g, beta)
    np.testing.assert_allclose(new.mean, closed.mean, rtol=1e-9)
    np.testing.assert_allclose(new.cov, closed.covariance, rtol=1e-9)

    c = np.linalg.cholesky(np.asarray(q.cov))
    t0 = np.array([*np.asarray(q.mean), np.log(c[0, 0]), c[1, 0], np.log(c[1, 1])])
    args = (q_k, prior, g, jnp.asarray(beta))
    res = newton_argmin(*_OBJ, t0, *args, gtol=1e-12)
    l = np.array([[np.exp(res.x[2]), 0.0], [res.x[3], np.exp(res.x[4])]])
    np.testing.assert_allclose(new.mean, res.x[:2], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(new.cov, l @ l.T, rtol=1e-6, atol=1e-8)


def _objective(theta, q_k, prior, g, beta):
    """The proximal objective over (m, log-Cholesky of the covariance), D = 2."""
    l = jnp.array([[jnp.exp(theta[2]), 0.0], [theta[3], jnp.exp(theta[4])]])
    prec = jnp.linalg.inv(l @ l.T)
    return prox_objective(expfam.MultivariateNormal(prec @ theta[:2], -0.5 * prec), q_k, prior, g, beta)


_OBJ = (jax.jit(_objective), jax.jit(jax.grad(_objective)))


@pytest.mark.parametrize("beta", [0.1, 1.0, 10.0])
def test_diagonal_local_step_is_kl_prox_closed_form(beta):
    """MF: h = KL to the prior's diagonal part; the off-diagonal precision terms are in f (exact gradient)."""
    model, params, ids, counts = _setup("diagonal")
    q = _q_k(params, "diagonal")
    key = jax.random.PRNGKey(2)
    prec0 = jnp.linalg.inv(params.sigma)
    new = model.local_prox_step(q, params, prec0, params.log_topics[:, ids], counts, key, 8, beta)
    _, dm, dv = model.expected_loglik_grads(q, params.log_topics[:, ids], counts, key, 8)
    d0 = jnp.diagonal(prec0)
    q_k = expfam.Normal.from_mean_variance(q.mean, q.cov)
    prior_diag = expfam.Normal(prec0 @ params.mu, -0.5 * d0)
    g = (dm - 2.0 * dv * q.mean - (prec0 - jnp.diag(d0)) @ q.mean, dv)
    closed = kl_prox_closed_form(q_k, prior_diag, g, beta)
    np.testing.assert_allclose(new.mean, closed.mean, rtol=1e-9)
    np.testing.assert_allclose(new.cov, closed.variance, rtol=1e-9)


@pytest.mark.slow
def test_expected_loglik_grads_are_unbiased_for_the_gradient():
    """Bonnet/Price (S = 5e3 draws) against the reparameterization gradient of the expectation
    (jax.grad through z = m + L(V) e, R = 5e4 other draws), within k = 4 standard errors of their
    difference: sqrt(var_B / S + var_R / R), the per-draw variances of both estimators computed
    from the R draws (the Bonnet/Price terms grad psi(z) and Hess psi(z) / 2, the
    reparameterization terms by jax.grad per draw)."""
    model, params, ids, counts = _setup("full")
    q = _q_k(params, "full")
    a = params.log_topics[:, ids]
    num_draws, num_ref, k = 5000, 50000, 4.0
    e = jax.random.normal(jax.random.PRNGKey(5), (num_ref, K - 1))

    def psi_at(m, cov, e):
        z = m[None, :] + e @ jnp.linalg.cholesky(cov).T
        return psi_terms(z, a, counts)[0]

    per_draw = jax.vmap(jax.grad(lambda m, cov, e1: psi_at(m, cov, e1[None])[0], argnums=(0, 1)), (None, None, 0))
    gm_draws, gv_draws = per_draw(q.mean, q.cov, e)
    gv_draws = 0.5 * (gv_draws + jnp.swapaxes(gv_draws, 1, 2))
    gm_ref, gv_ref = jnp.mean(gm_draws, 0), jnp.mean(gv_draws, 0)  # jax.grad of the mean of psi_at
    z_ref = q.mean[None, :] + e @ jnp.linalg.cholesky(q.cov).T
    _, grad, hess, _ = psi_terms(z_ref, a, counts)
    se_m = np.sqrt(np.var(grad, 0) / num_draws + np.var(gm_draws, 0) / num_ref)
    se_v = np.sqrt(np.var(0.5 * hess, 0) / num_draws + np.var(gv_draws, 0) / num_ref)
    _, dm, dv = model.expected_loglik_grads(q, a, counts, jax.random.PRNGKey(6), num_draws)
    np.testing.assert_array_less(np.abs(dm - gm_ref), k * se_m)
    np.testing.assert_array_less(np.abs(dv - gv_ref), k * se_v)


@pytest.mark.slow
def test_local_fits_stopped_early_under_a_broad_prior_spread_wider_than_their_fixed_point():
    """Why PG-SVI's Sigma grows (docs/prox_svi.md): under a broad prior (Sigma = 25 I, the true topics),
    15 local steps from the prior, with 200 draws per local gradient (so not Monte Carlo noise), leave
    the local means spread (trace of their covariance over 40 documents, summed over three corpora)
    more than twice as wide as 400 steps (10 draws) do. The M-step adds that spread to Sigma."""
    model = CTM(4, 30, covariance="diagonal", topic_smoothing=1e-12, cov_shrinkage=0.0)
    fit = jax.jit(
        lambda params, batch, steps, draws: model._fit_batch(params, batch, jax.random.PRNGKey(0), draws, steps).mean,
        static_argnums=(2, 3),
    )
    spread = {15: 0.0, 400: 0.0}
    for seed in range(3):
        corpus, truth = sample_ctm_corpus(seed, 40, 4, 30, doc_length=80)
        batch = corpus.batch(np.arange(40), length=80)
        params = model.params(CTMGlobals(jnp.asarray(truth["topics"]), jnp.zeros(3), 25.0 * jnp.eye(3)))
        for steps, draws in ((15, 200), (400, 10)):
            spread[steps] += float(np.trace(np.cov(np.asarray(fit(params, batch, steps, draws)).T)))
    assert spread[15] > 2.0 * spread[400]


def test_log_predictive_with_identical_topics_is_exact():
    """If every topic is the same distribution b, p(w | observed) = b_w whatever q is."""
    model = CTM(K, V, topic_smoothing=1e-300, eval_samples=50)
    b = np.random.default_rng(0).dirichlet(np.ones(V))
    g = CTMGlobals(jnp.asarray(np.tile(b, (K, 1))), jnp.zeros(K - 1), jnp.eye(K - 1))
    obs = BowBatch(jnp.array([[1, 2, 0], [4, 0, 0]]), jnp.array([[1.0, 2.0, 0.0], [3.0, 0.0, 0.0]]))
    held = BowBatch(jnp.array([[5, 6], [7, 0]]), jnp.array([[2.0, 1.0], [1.0, 0.0]]))
    lp = jax.jit(model.log_predictive)(g, obs, held)
    np.testing.assert_allclose(lp, [2 * np.log(b[5]) + np.log(b[6]), np.log(b[7])], rtol=1e-10)


@pytest.mark.slow
def test_global_step_statistics():
    """beta -> inf (r = 0): mean_stats = the batch average of the local means; the topic-word
    statistics split each word's count among topics (column sums = (N/M) * counts)."""
    corpus, _ = sample_ctm_corpus(0, 6, K, V, doc_length=30)
    model = CTM(K, V, local_steps=5)
    g = model.init_variational(jax.random.PRNGKey(0))
    batch = corpus.batch([0, 1, 2])
    new, elbo = jax.jit(model.prox_step, static_argnums=(4, 5))(g, batch, jax.random.PRNGKey(1), 1e12, 4, 30)
    words = np.zeros(V)
    np.add.at(words, np.asarray(batch.word_ids).ravel(), np.asarray(batch.counts).ravel())
    np.testing.assert_allclose(np.asarray(new.topic_stats).sum(0), 10.0 * words, rtol=1e-6, atol=1e-8)
    qs = jax.jit(model._fit_batch, static_argnums=(3, 4))(
        model.params(g), batch, jax.random.split(jax.random.PRNGKey(1), 3)[0], 4, 5
    )
    np.testing.assert_allclose(new.mean_stats, jnp.mean(qs.mean, 0), rtol=1e-6)
    assert np.isfinite(float(elbo))
    # two empty rows (a Minibatcher's padding) are not documents: N / S still counts the 3 with words
    padded = corpus.batch([0, 1, 2], num_rows=5, length=batch.word_ids.shape[1])
    new_p, _ = jax.jit(model.prox_step, static_argnums=(4, 5))(g, padded, jax.random.PRNGKey(1), 1e12, 4, 30)
    np.testing.assert_allclose(np.asarray(new_p.topic_stats).sum(0), 10.0 * words, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(new_p.mean_stats, new.mean_stats, rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("covariance", ["full", "diagonal"])
def test_pg_svi_learns_a_synthetic_corpus(covariance):
    """300 steps (minibatches of 2, step 0.05): the held-out per-word log-likelihood climbs by > 0.3
    nats from the random start and ends within 0.35 nats of the generating parameters' score."""
    corpus, truth = sample_ctm_corpus(1, 240, 4, 60, doc_length=60)
    train, test = corpus.subset(range(120)), corpus.subset(range(120, 200))
    obs, held = test.split_tokens(0)
    model = CTM(4, 60, covariance=covariance, eval_samples=200, eval_local_steps=20)
    alg = prox_svi(model, num_data=120, schedule=0.05, num_samples=8)
    state = alg.init(jax.random.PRNGKey(0))
    start = corpus_document_completion(model, state.q_global, obs, held, 40).per_word
    step = jax.jit(alg.step)
    idx = np.random.default_rng(0).integers(0, 120, (300, 2))
    for t in range(300):
        state, info = step(jax.random.PRNGKey(t), state, train.batch(idx[t], length=64))
    end = corpus_document_completion(model, state.q_global, obs, held, 40).per_word
    g_true = CTMGlobals(jnp.asarray(truth["topics"]), jnp.zeros(3), jnp.asarray(truth["sigma"]))
    ref = corpus_document_completion(
        CTM(4, 60, topic_smoothing=1e-12, cov_shrinkage=0.0, eval_samples=200, eval_local_steps=20),
        g_true,
        obs,
        held,
        40,
    ).per_word
    assert end > start + 0.3
    assert end > ref - 0.35
    assert np.isfinite(float(info.elbo))


def test_bad_input():
    model = CTM(K, V)
    with pytest.raises(ValueError, match="word_ids"):
        model.check_data(BowBatch(np.array([[0, V]]), np.array([[1.0, 1.0]])))
    with pytest.raises(ValueError, match="counts"):
        model.check_data(BowBatch(np.array([[0, 1]]), np.array([[1.0, -1.0]])))
    with pytest.raises(ValueError, match="counts"):
        model.check_data(BowBatch(np.array([[0, 1]]), np.array([[1.0, np.nan]])))
    with pytest.raises(ValueError, match="covariance"):
        CTM(K, V, covariance="banded")
    with pytest.raises(ValueError, match="cov_shrinkage"):
        CTM(K, V, cov_shrinkage=2.0)
    with pytest.raises(ValueError, match="num_topics"):
        CTM(1, V)
    with pytest.raises(ValueError, match="schedule"):
        prox_svi(model, num_data=10, schedule=0.0)
    # num_data below the batch's documents (with a token) is refused at step, naming num_data
    alg = prox_svi(model, num_data=2, schedule=1.0)
    state = alg.init(jax.random.PRNGKey(0))
    three = BowBatch(np.array([[0, 1], [2, 3], [4, 5]]), np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"^num_data = 2 is smaller than the batch's number of rows with data"):
        alg.step(jax.random.PRNGKey(1), state, three)
