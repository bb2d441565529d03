"""pLSA1 and pLSA2 by EM: one E-step and M-step against a dense brute-force numpy implementation,
monotone EM, the relation of pLSA1 to LSA (rank-K non-negative factorization, Eckart–Young, exact
recovery of a non-negative rank-K matrix), the fold-in's optimality conditions, and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.data import Corpus
from vijax.inference import em
from vijax.metrics import corpus_document_completion
from vijax.models import PLSA, PLSAParams

K, V = 3, 7


def _corpus(num_docs=6, seed=0):
    r = np.random.default_rng(seed)
    dense = r.poisson(1.5, (num_docs, V)).astype(float)
    dense[0, :] = 0.0  # an empty document
    dense[1, 0] = 9.0
    return dense, _from_dense(dense)


def _from_dense(dense):
    rows, cols = np.nonzero(dense)
    ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=dense.shape[0]))])
    return Corpus(
        ptr,
        cols,
        np.round(dense[rows, cols]) if np.all(dense == np.round(dense)) else dense[rows, cols],
        vocab_size=dense.shape[1],
        validate=bool(np.all(dense == np.round(dense))),
    )


def _random_params(variant, d, seed=1):
    r = np.random.default_rng(seed)
    eta = jnp.asarray(r.dirichlet(np.ones(V), K))
    if variant == "plsa1":
        return PLSAParams(jnp.asarray(r.dirichlet(np.ones(K))), jnp.asarray(r.dirichlet(np.ones(d), K)), eta)
    return PLSAParams(jnp.asarray(r.dirichlet(np.ones(K), d)), None, eta)


def _dense_em_step(variant, params, n, c):
    """The tutorial's E- and M-step over the dense (D, V, K) array of every pair (d, w)."""
    eta = np.asarray(params.word_probs)
    if variant == "plsa1":
        joint = (
            np.asarray(params.topic_probs)[None, None, :]
            * np.asarray(params.doc_probs).T[:, None, :]
            * eta.T[None, :, :]
        )
    else:
        joint = np.asarray(params.topic_probs)[:, None, :] * eta.T[None, :, :]
    p = joint.sum(-1)
    r = joint / p[..., None]
    ll = np.sum(n[n > 0] * np.log(p[n > 0]))
    nk_dw = n[..., None] * r
    n_dk, n_kw = nk_dw.sum(1), nk_dw.sum(0).T
    eta_new = (n_kw + c - 1) / (n_kw + c - 1).sum(1, keepdims=True)
    if variant == "plsa1":
        nk = n_dk.sum(0)
        return ll, (nk / nk.sum(), (n_dk / nk).T, eta_new)
    tot = n_dk.sum(1, keepdims=True)
    return ll, (np.where(tot > 0, n_dk / np.where(tot > 0, tot, 1), 1.0 / K), None, eta_new)


@pytest.mark.parametrize("variant,c", [("plsa1", 1.0), ("plsa2", 1.0), ("plsa2", 2.5)])
def test_em_step_equals_dense_brute_force(variant, c):
    dense, corpus = _corpus()
    model = PLSA(K, V, variant=variant, word_concentration=c)
    params = _random_params(variant, corpus.num_docs)
    ll, new = jax.jit(lambda p, b: (lambda s: (s[1], model.m_step(s[0])))(model.e_step(p, b)))(
        params, corpus.batch(np.arange(corpus.num_docs))
    )
    ref_ll, ref = _dense_em_step(variant, params, dense, c)
    np.testing.assert_allclose(ll, ref_ll, rtol=1e-12)  # float64
    for got, want in zip(new, ref):
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14)


def _fit(model, batch, steps, key=0):
    alg = em(model)
    state = jax.jit(alg.init)(jax.random.PRNGKey(key), batch)

    def body(state, key):
        state, info = alg.step(key, state, batch)
        return state, info.elbo

    return jax.jit(lambda s: jax.lax.scan(body, s, jax.random.split(jax.random.PRNGKey(1), steps)))(state)


def test_em_never_decreases_the_log_likelihood_and_both_variants_take_the_same_steps():
    """pLSA1 and pLSA2 parameterize one likelihood (the tutorial's eq. 2.91 = 2.92): from the same start,
    pLSA1's pi_k xi_kd / p(d) is pLSA2's p(z = k | d) and p(w | z) agree at every step."""
    _, corpus = _corpus(num_docs=12)
    batch = corpus.batch(np.arange(12))
    fits = {v: _fit(PLSA(K, V, variant=v, word_concentration=1.5), batch, 40) for v in ("plsa1", "plsa2")}
    for _, trace in fits.values():
        trace = np.asarray(trace)
        assert np.all(np.diff(trace) >= -1e-10 * np.abs(trace[1:])) and trace[-1] > trace[0]
    p1, p2 = fits["plsa1"][0].q_global, fits["plsa2"][0].q_global
    joint = np.asarray(p1.doc_probs).T * np.asarray(p1.topic_probs)[None]  # p(d, z) (D, K)
    full = corpus.doc_lengths > 0
    np.testing.assert_allclose(
        joint[full] / joint[full].sum(1, keepdims=True), np.asarray(p2.topic_probs)[full], rtol=1e-9
    )
    np.testing.assert_allclose(p1.word_probs, p2.word_probs, rtol=1e-9)  # float64, 40 steps


def test_plsa1_and_lsa():
    """pLSA1's fitted joint is Xi^T diag(pi) H, a rank-K product of non-negative normalized factors
    (the probabilistic U_K Sigma_K V_K^T); by Eckart–Young the truncated SVD of LSA is at least as close
    in Frobenius norm, while pLSA1 is the one fitted in KL; on an exactly non-negative rank-K matrix both
    recover it."""
    dense, corpus = _corpus(num_docs=10, seed=3)
    model = PLSA(K, V, variant="plsa1")
    state, _ = _fit(model, corpus.batch(np.arange(10)), 200)
    p = state.q_global
    joint = np.asarray(model.joint_matrix(p))
    sv = np.linalg.svd(joint, compute_uv=False)
    assert np.all(sv[K:] < 1e-12 * sv[0])  # rank <= K
    for f in (p.topic_probs, p.doc_probs, p.word_probs):
        assert np.all(np.asarray(f) >= 0) and np.allclose(np.asarray(f).sum(-1), 1.0, atol=1e-12)
    emp = dense / dense.sum()
    u, s, vt = np.linalg.svd(emp)
    lsa = (u[:, :K] * s[:K]) @ vt[:K]
    assert np.linalg.norm(emp - lsa) <= np.linalg.norm(emp - joint) + 1e-12  # Eckart–Young

    # an exactly non-negative rank-K joint, as fractional counts; EM reaches it from this start in 500 steps
    # (it is the global maximum, but EM can crawl along plateaus: other starts take up to 5000 steps)
    r = np.random.default_rng(5)
    truth = (r.dirichlet(np.ones(10), K).T * r.dirichlet(np.ones(K))[None]) @ r.dirichlet(np.full(V, 0.5), K)
    exact = _from_dense(1000.0 * truth)
    state, _ = _fit(model, exact.batch(np.arange(10)), 500)
    fitted = np.asarray(model.joint_matrix(state.q_global))
    assert np.sum(truth * np.log(truth / fitted)) < 1e-9  # KL(truth || pLSA1 fit), nats
    np.testing.assert_allclose(fitted, truth, atol=1e-6)
    u, s, vt = np.linalg.svd(truth)
    np.testing.assert_allclose((u[:, :K] * s[:K]) @ vt[:K], truth, atol=1e-12)  # LSA's rank-K SVD: exact


def test_fold_in_reaches_the_optimum_of_the_concave_objective():
    """At the maximum of sum_w n_w log sum_k theta_k eta_kw over the simplex, the gradient
    g_k = sum_w n_w eta_kw / p_w equals N_d where theta_k > 0 and is at most N_d elsewhere (KKT)."""
    dense, corpus = _corpus()
    model = PLSA(K, V, variant="plsa2", fold_in_iters=2000)
    params = _random_params("plsa2", corpus.num_docs)
    theta = np.asarray(model.fold_in(params, corpus.batch(np.arange(corpus.num_docs))))
    eta = np.asarray(params.word_probs)
    np.testing.assert_allclose(theta[0], 1.0 / K)  # the empty document keeps its start
    for d in range(1, corpus.num_docs):
        g = eta @ (dense[d] / (theta[d] @ eta)) / dense[d].sum()
        assert np.all(g <= 1.0 + 1e-3)
        np.testing.assert_allclose(g[theta[d] > 1e-3], 1.0, atol=1e-3)
    obs, held = corpus.split_tokens(0, 0.5)
    res = corpus_document_completion(model, params, obs, held, batch_docs=4)  # the metric LDA is scored by
    lp = model.log_predictive(params, obs.batch(np.arange(6)), held.batch(np.arange(6)))
    theta_obs = np.asarray(model.fold_in(params, obs.batch(np.arange(6))))
    hd = np.zeros((6, V))
    for d in range(6):
        ids, cnt = held.document(d)
        hd[d, ids] = cnt
    ref = np.sum(np.where(hd > 0, hd * np.log(theta_obs @ eta), 0.0), 1)
    np.testing.assert_allclose(lp, ref, rtol=1e-12)
    keep = (obs.doc_lengths > 0) & (held.doc_lengths > 0)
    np.testing.assert_allclose(res.log_prob, ref[keep].sum(), rtol=1e-12)
    assert res.num_tokens == held.doc_lengths[keep].sum()


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="num_topics"):
        PLSA(0, V)
    with pytest.raises(ValueError, match="variant"):
        PLSA(K, V, variant="plsa3")
    with pytest.raises(ValueError, match="word_concentration"):
        PLSA(K, V, word_concentration=0.5)
    model = PLSA(K, V)
    ids, cnt = np.array([[0, V]]), np.array([[1.0, 2.0]])
    with pytest.raises(ValueError, match="word_ids"):
        model.check_data((ids, cnt))
    with pytest.raises(ValueError, match="counts"):
        model.check_data((np.array([[0, 1]]), np.array([[1.0, -2.0]])))
    with pytest.raises(ValueError, match="batch"):
        model.init_params(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="batch"):  # parameters of 3 documents, a corpus of 1
        model.e_step(_random_params("plsa1", 3), (np.array([[0, 1]]), np.array([[1.0, 2.0]])))
    with pytest.raises(ValueError, match="variant"):
        PLSA(K, V, variant="plsa2").joint_matrix(_random_params("plsa2", 3))
