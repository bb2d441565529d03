"""LDA: each local step against an independent oracle (a numpy per-document loop, the ELBO written
out and by Monte Carlo, CVB0's fixed-point equations, exact enumeration of p(z | w, beta, alpha)
for Gibbs), padding and empty documents, CAVI monotonicity, SVI = CAVI at rho = 1, the JAX
contract and argument validation."""

import itertools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import digamma, gammaln, logsumexp

from tests.conftest import tol
from vijax import expfam
from vijax.data import BowBatch, Corpus
from vijax.inference import _cavi, cavi, schedules, svi
from vijax.models import LDA, ConditionallyConjugateModel, conjugate_elbo
from vijax.solvers import GIBBS_CHUNK, collapsed_gibbs_allocations, tile_shape
from vijax.testing import assert_trees_close

METHODS = ("meanfield", "cvb0", "gibbs")


def _corpus(seed, num_docs=12, k=3, v=15, doc_len=(4, 25), alpha=0.3, eta=0.3, extra_pad=0):
    """Documents drawn from LDA itself, as a zero-padded BowBatch (numpy arrays)."""
    r = np.random.default_rng(seed)
    beta = r.dirichlet(np.full(v, eta), k)
    docs = []
    for _ in range(num_docs):
        theta = r.dirichlet(np.full(k, alpha))
        c = r.multinomial(r.integers(*doc_len), theta @ beta)
        docs.append((np.flatnonzero(c), c[c > 0]))
    length = max(len(i) for i, _ in docs) + extra_pad
    ids = np.zeros((num_docs, length), np.int32)
    counts = np.zeros((num_docs, length))
    for d, (i, c) in enumerate(docs):
        ids[d, : len(i)], counts[d, : len(i)] = i, c
    return BowBatch(ids, counts), beta


def _as_jax(batch):
    return BowBatch(jnp.asarray(batch.word_ids), jnp.asarray(batch.counts))


def _random_q(seed, k, v, low=0.3, high=3.0):
    return expfam.Dirichlet.from_concentration(np.random.default_rng(seed).uniform(low, high, (k, v)))


def _np_meanfield(log_beta, ids, counts, alpha, tol=1e-13, max_iters=100000):
    """Blei et al. (2003) eq. 6-7 for one document, a plain numpy loop."""
    k = log_beta.shape[0]
    gamma = np.full(k, alpha + counts.sum() / k)
    for _ in range(max_iters):
        logits = (digamma(gamma) - digamma(gamma.sum()))[:, None] + log_beta[:, ids]  # (K, L)
        phi = np.exp(logits - logsumexp(logits, axis=0, keepdims=True))
        new = alpha + phi @ counts
        done = np.mean(np.abs(new - gamma)) < tol
        gamma = new
        if done:
            break
    logits = (digamma(gamma) - digamma(gamma.sum()))[:, None] + log_beta[:, ids]
    return gamma, np.exp(logits - logsumexp(logits, axis=0, keepdims=True))


# ------------------------------------------------------------------------------------ oracles
@pytest.mark.parametrize("num_docs", [12, 13])  # 13: the last block of 4 documents is padded
def test_meanfield_matches_numpy_reference(num_docs):
    batch, _ = _corpus(0, num_docs=num_docs)
    model = LDA(3, 15, alpha=0.3, eta=0.1, tol=1e-11, max_iters=10000)
    q = _random_q(1, 3, 15)
    (elb,) = q.mean_params()
    loc = model.local_step((elb,), _as_jax(batch))
    stats = np.zeros((3, 15))
    for d in range(batch.counts.shape[0]):
        m = batch.counts[d] > 0
        gamma, phi = _np_meanfield(np.asarray(elb), batch.word_ids[d, m], batch.counts[d, m], 0.3)
        np.testing.assert_allclose(loc.local_params[d], gamma, rtol=1e-8)
        np.add.at(stats.T, batch.word_ids[d, m], (phi * batch.counts[d, m]).T)
    np.testing.assert_allclose(loc.suff_stats[0], stats, rtol=1e-8, atol=1e-10)


@pytest.mark.slow
def test_squarem_and_plain_iterations_share_the_fixed_point_and_squarem_gets_closer():
    """accelerate=True (SQUAREM) and False (default) reach the same gamma at a tight tolerance on
    these documents (not guaranteed in general: see LDA._meanfield); at the default
    tolerance (1e-3, both stopping one update away from a point that update barely moves) the
    accelerated gamma is closer to the exact fixed point, on documents long enough to need many
    iterations. max_iters < 3 (no room for a cycle) is the plain iteration."""
    batch, _ = _corpus(3, num_docs=16, k=8, v=60, doc_len=(60, 300), alpha=0.1, eta=0.05)
    q = _random_q(4, 8, 60, low=0.05, high=2.0)
    view, data = (q.mean_params()[0],), _as_jax(batch)

    def gamma(**kw):
        return np.asarray(LDA(8, 60, alpha=0.1, **kw).local_step(view, data).local_params)

    exact = gamma(tol=1e-12, max_iters=20000, accelerate=False)
    np.testing.assert_allclose(gamma(tol=1e-12, max_iters=20000, accelerate=True), exact, rtol=1e-8)
    err_plain = np.abs(gamma(accelerate=False) - exact).mean()
    err_squarem = np.abs(gamma(accelerate=True) - exact).mean()
    assert err_squarem < err_plain, (err_squarem, err_plain)
    np.testing.assert_array_equal(gamma(max_iters=2, accelerate=True), gamma(max_iters=2, accelerate=False))


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_meanfield_iterations_never_lower_the_elbo_with_or_without_squarem():
    """The per-document ELBO (phi optimal given gamma) after i evaluations of the update, i = 3, 6,
    ..., never falls as i grows: coordinate ascent for the plain iteration, the objective check on
    every extrapolation for SQUAREM (a cycle whose extrapolated point lowers it ends at two plain
    updates instead). Documents long enough that extrapolations overshoot (projected to gamma >=
    alpha) and are sometimes rejected; tol tiny so that nothing stops early."""
    batch, _ = _corpus(5, num_docs=8, k=8, v=60, doc_len=(40, 300), alpha=0.1, eta=0.05)
    view, data = (_random_q(6, 8, 60, low=0.05, high=2.0).mean_params()[0],), _as_jax(batch)
    log_beta = np.asarray(view[0])

    def objective(gamma, d):  # sum_w n_w log sum_k exp(E[log theta_k] + log beta_kw) - KL(Dir(gamma) || Dir(alpha))
        m = batch.counts[d] > 0
        e_log_theta = digamma(gamma) - digamma(gamma.sum())
        z = logsumexp(e_log_theta[:, None] + log_beta[:, batch.word_ids[d, m]], axis=0)
        kl = (
            gammaln(gamma.sum())
            - gammaln(gamma).sum()
            + np.sum((gamma - 0.1) * e_log_theta)
            - gammaln(0.8)
            + 8 * gammaln(0.1)
        )
        return np.sum(batch.counts[d, m] * z) - kl

    for accelerate in (False, True):
        gammas = [
            np.asarray(
                LDA(8, 60, alpha=0.1, tol=0.0, max_iters=i, accelerate=accelerate).local_step(view, data).local_params
            )
            for i in range(3, 25, 3)
        ]
        elbos = np.array([[objective(g[d], d) for d in range(8)] for g in gammas])
        steps = np.diff(elbos, axis=0)
        assert np.all(steps >= -1e-9 * np.abs(elbos[1:])), (accelerate, steps.min())
        assert np.all(elbos[-1] > elbos[0])


def test_squarem_reaches_the_plain_fixed_point_where_unguarded_extrapolation_jumps_basins():
    """Six tokens over three random topics (the document of the completion reference test where a
    first extrapolation at full length lands in another basin, ELBO -18.770 against -18.579): with
    the step bound starting at 1 and growing only after steps that reached it, SQUAREM stays in the
    plain iteration's basin and agrees with it to the tolerance."""
    topics = np.random.default_rng(1).uniform(0.2, 5.0, (3, 25))
    topics /= topics.sum(axis=1, keepdims=True)
    data = BowBatch(jnp.asarray([[2, 6, 16]], jnp.int32), jnp.asarray([[1.0, 2.0, 3.0]]))
    ids = np.asarray(data.word_ids[0])
    for accelerate in (False, True):
        loc = LDA(3, 25, alpha=0.2, tol=1e-11, max_iters=10000, accelerate=accelerate).local_step(
            (np.log(topics),), data
        )
        ref, _ = _np_meanfield(np.log(topics), ids, np.asarray(data.counts[0]), 0.2)
        np.testing.assert_allclose(loc.local_params[0], ref, rtol=1e-7)


@pytest.mark.slow
def test_meanfield_length_buckets_match_the_reference_and_ignore_document_order():
    """A batch of very unequal documents (one with 220 distinct words, the rest 3 to 60, padded to
    L = 256 with interleaved zero slots), packed into several tiles of chunks: every
    document's gamma and the statistics equal the per-document numpy reference, and permuting the
    documents permutes gamma and leaves the statistics and local terms unchanged at the default
    tolerance (each document stops at its own convergence, whatever its block)."""
    r = np.random.default_rng(30)
    k, v, s, length = 3, 400, 11, 256
    beta = r.dirichlet(np.full(v, 0.3), k)
    ids = np.zeros((s, length), np.int32)
    counts = np.zeros((s, length))
    for d, n_words in enumerate([220, 3, 40, 60, 7, 0, 25, 12, 50, 5, 33]):
        words = r.choice(v, n_words, replace=False, p=r.dirichlet(np.full(k, 0.3)) @ beta)
        slots = np.sort(r.choice(length, n_words, replace=False)) if n_words < 100 else np.arange(n_words)
        ids[d, slots], counts[d, slots] = words, r.integers(1, 4, n_words)
    ids[counts == 0] = r.integers(0, v, int(np.sum(counts == 0)))  # padding slots with arbitrary ids
    lengths = [int(np.nonzero(c)[0].max()) + 1 if c.any() else 0 for c in counts]
    assert sum(-(-m // 32) for m in lengths) > 2 * tile_shape(length)[0]  # several tiles of 32-slot chunks
    q = _random_q(31, k, v)
    (elb,) = q.mean_params()
    model = LDA(k, v, alpha=0.3, tol=1e-11, max_iters=10000)
    loc = model.local_step((elb,), BowBatch(jnp.asarray(ids), jnp.asarray(counts)))
    stats = np.zeros((k, v))
    for d in range(s):
        m = counts[d] > 0
        gamma, phi = _np_meanfield(np.asarray(elb), ids[d, m], counts[d, m], 0.3)
        np.testing.assert_allclose(loc.local_params[d], gamma, rtol=1e-8)
        np.add.at(stats.T, ids[d, m], (phi * counts[d, m]).T)
    np.testing.assert_allclose(loc.suff_stats[0], stats, rtol=1e-8, atol=1e-10)

    loose = LDA(k, v, alpha=0.3)  # tol 1e-3: results depend on when each document stops
    perm = r.permutation(s)
    a = loose.local_step((elb,), BowBatch(jnp.asarray(ids), jnp.asarray(counts)))
    b = loose.local_step((elb,), BowBatch(jnp.asarray(ids[perm]), jnp.asarray(counts[perm])))
    np.testing.assert_allclose(b.local_params, a.local_params[perm], rtol=1e-10)
    assert_trees_close(a.suff_stats, b.suff_stats, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.local_terms, b.local_terms, rtol=1e-10)

    # the tile size (one tile of the whole batch, as on an accelerator, or many small ones) changes
    # nothing either, for both tiled E-steps: each document stops on its own
    batch = BowBatch(jnp.asarray(ids), jnp.asarray(counts))
    for method in ("meanfield", "cvb0"):
        ref = LDA(k, v, alpha=0.3, tile_slots=512).local_step((elb,), batch, method=method)
        for slots in (64, 32768):
            got = LDA(k, v, alpha=0.3, tile_slots=slots).local_step((elb,), batch, method=method)
            np.testing.assert_allclose(got.local_params, ref.local_params, rtol=1e-10)
            assert_trees_close(got.suff_stats, ref.suff_stats, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(got.local_terms, ref.local_terms, rtol=1e-10)
    with pytest.raises(ValueError, match="tile_slots"):
        LDA(k, v, tile_slots=0)


def _elbo_written_out(model, q, batch, gamma, phi_of_doc):
    """Blei et al. (2003) eq. 15 plus the topics' terms, every expectation by hand."""
    lam = np.asarray(q.concentration)
    k, v = lam.shape
    a, e = model.alpha, model.eta
    elb = digamma(lam) - digamma(lam.sum(1, keepdims=True))
    total = np.sum(gammaln(v * e) - v * gammaln(e) + (e - 1) * elb.sum(1))  # E log p(beta)
    total -= np.sum(gammaln(lam.sum(1)) - gammaln(lam).sum(1) + ((lam - 1) * elb).sum(1))  # E log q(beta)
    for d in range(batch.counts.shape[0]):
        g = gamma[d]
        elt = digamma(g) - digamma(g.sum())
        total += gammaln(k * a) - k * gammaln(a) + (a - 1) * elt.sum()
        total -= gammaln(g.sum()) - gammaln(g).sum() + ((g - 1) * elt).sum()
        m = batch.counts[d] > 0
        ids, n, phi = batch.word_ids[d, m], batch.counts[d, m], phi_of_doc(d)  # phi (K, L_d)
        total += np.sum(n * phi * (elt[:, None] + elb[:, ids] - np.log(phi)))
    return total


def test_meanfield_elbo_is_the_written_out_elbo():
    batch, _ = _corpus(2)
    model = LDA(3, 15, alpha=0.4, eta=0.2, tol=1e-12, max_iters=10000)
    q_local = _random_q(3, 3, 15)
    loc = model.local_step(q_local.mean_params(), _as_jax(batch))
    q = _random_q(4, 3, 15)  # the ELBO at another q(beta) than the one the locals were fitted to
    elb = np.asarray(q_local.mean_params()[0])

    def phi_of_doc(d):
        m = batch.counts[d] > 0
        return _np_meanfield(elb, batch.word_ids[d, m], batch.counts[d, m], 0.4, tol=1e-14)[1]

    ref = _elbo_written_out(model, q, batch, np.asarray(loc.local_params), phi_of_doc)
    np.testing.assert_allclose(conjugate_elbo(model.prior(), q, loc), ref, rtol=1e-10)


@pytest.mark.slow  # over CI's per-test budget: the ELBO equals the written-out sum in CI
def test_meanfield_elbo_matches_monte_carlo():
    """E_q[log p(w, z, theta, beta) - log q(z, theta, beta)] over 5000 draws of (beta, theta, z),
    within 5 standard errors."""
    batch, _ = _corpus(5, num_docs=3, k=2, v=5, doc_len=(3, 7))
    model = LDA(2, 5, alpha=0.7, eta=0.5, tol=1e-12, max_iters=5000)
    q = _random_q(6, 2, 5, 1.0, 4.0)
    loc = model.local_step(q.mean_params(), _as_jax(batch))
    elbo = float(conjugate_elbo(model.prior(), q, loc))
    gamma = loc.local_params
    (elb,) = q.mean_params()
    # tokens: (doc, word) of every token, and its q(z) = phi of its slot
    tok_doc, tok_word = [], []
    for d in range(3):
        for w, n in zip(batch.word_ids[d], batch.counts[d]):
            tok_doc += [d] * int(n)
            tok_word += [int(w)] * int(n)
    tok_doc, tok_word = jnp.array(tok_doc), jnp.array(tok_word)
    e_log_theta = jax.scipy.special.digamma(gamma) - jax.scipy.special.digamma(jnp.sum(gamma, -1, keepdims=True))
    tok_phi = jax.nn.softmax(e_log_theta[tok_doc] + elb.T[tok_word], axis=-1)  # (T, K)
    prior_beta = model.prior()
    prior_theta = expfam.Dirichlet.from_concentration(jnp.full((3, 2), 0.7))
    q_theta = expfam.Dirichlet.from_concentration(gamma)

    def one(key):
        kb, kt, kz = jax.random.split(key, 3)
        beta, theta = q.sample(kb), q_theta.sample(kt)
        z = jax.random.categorical(kz, jnp.log(tok_phi))
        log_p = (
            jnp.sum(prior_beta.log_prob(beta))
            + jnp.sum(prior_theta.log_prob(theta))
            + jnp.sum(jnp.log(theta[tok_doc, z]))
            + jnp.sum(jnp.log(beta[z, tok_word]))
        )
        log_q = (
            jnp.sum(q.log_prob(beta))
            + jnp.sum(q_theta.log_prob(theta))
            + jnp.sum(jnp.log(tok_phi[jnp.arange(z.shape[0]), z]))
        )
        return log_p - log_q

    vals = jax.jit(jax.vmap(one))(jax.random.split(jax.random.PRNGKey(7), 5000))
    mean, se = float(jnp.mean(vals)), float(jnp.std(vals)) / np.sqrt(vals.shape[0])
    assert abs(mean - elbo) < 5 * se, (mean, elbo, se)


def test_cvb0_fixed_point_equations_hold():
    """At convergence g_dwk = (alpha + N_dk - g_dwk) b_kw / sum_j (alpha + N_dj - g_dwj) b_jw, with
    g recovered from the statistics of one-document batches (c_kw = n_dw g_dwk)."""
    batch, _ = _corpus(8, num_docs=4)
    model = LDA(3, 15, alpha=0.2, eta=0.1, tol=1e-13, cvb0_iters=20000)
    (elb,) = _random_q(9, 3, 15).mean_params()
    step = jax.jit(lambda b: model.local_step((elb,), b, None, "cvb0"))
    b_kw = np.exp(np.asarray(elb))
    for d in range(4):
        m = batch.counts[d] > 0
        ids, n = batch.word_ids[d, m], batch.counts[d, m]
        loc = step(BowBatch(jnp.asarray(ids[None]), jnp.asarray(n[None])))
        g = np.asarray(loc.suff_stats[0])[:, ids] / n  # (K, L)
        np.testing.assert_allclose(g.sum(0), 1.0, rtol=1e-12)
        n_k = np.asarray(loc.local_params[0]) - 0.2
        np.testing.assert_allclose(n_k, g @ n, rtol=1e-10)
        rhs = (0.2 + n_k[:, None] - g) * b_kw[:, ids]
        np.testing.assert_allclose(g, rhs / rhs.sum(0), rtol=1e-8, atol=1e-12)


def test_gibbs_matches_exact_enumeration():
    """Tokens w = (0, 0, 2) (word 0 twice, so the within-slot bookkeeping is exercised), K = 3:
    E[c_kv | w, b, alpha] by enumerating the 27 assignments of p(z | w) ∝ prod_n b_{z_n w_n}
    prod_k Gamma(alpha + N_k) / Gamma(alpha). 2000 independent chains, 25 kept sweeps each; every
    entry within 5 standard errors (over chains) of the exact value."""
    alpha = 0.5
    (elb,) = _random_q(10, 3, 3, 0.5, 3.0).mean_params()
    b = np.exp(np.asarray(elb))
    tokens = [0, 0, 2]
    exact, total = np.zeros((3, 3)), 0.0
    for z in itertools.product(range(3), repeat=3):
        nk = np.bincount(z, minlength=3)
        wgt = np.prod([b[zz, w] for zz, w in zip(z, tokens)]) * np.exp(np.sum(gammaln(alpha + nk) - gammaln(alpha)))
        for zz, w in zip(z, tokens):
            exact[zz, w] += wgt
        total += wgt
    exact /= total
    model = LDA(3, 3, alpha=alpha, gibbs_sweeps=30, gibbs_burn_in=5)
    batch = BowBatch(jnp.array([[0, 2]]), jnp.array([[2.0, 1.0]]))
    run = jax.jit(jax.vmap(lambda key: model.local_step((elb,), batch, key, "gibbs").suff_stats[0]))
    est = run(jax.random.split(jax.random.PRNGKey(11), 2000))
    mean, se = np.asarray(jnp.mean(est, 0)), np.asarray(jnp.std(est, 0)) / np.sqrt(est.shape[0])
    assert np.all(np.abs(mean - exact) <= 5 * se + 1e-12), (mean, exact, se)
    assert np.all(se[:, [0, 2]] > 0)  # the test has teeth: the estimates do vary


# ------------------------------------------------------------------------------------ bookkeeping
@pytest.mark.parametrize("method", METHODS)
def test_suff_stats_sum_to_token_counts(method):
    batch, _ = _corpus(12)
    model = LDA(3, 15, alpha=0.3)
    loc = model.local_step(_random_q(13, 3, 15).mean_params(), _as_jax(batch), jax.random.PRNGKey(0), method)
    (stats,) = loc.suff_stats
    assert stats.shape == (3, 15) and np.all(np.asarray(stats) >= 0)
    np.testing.assert_allclose(jnp.sum(stats), batch.counts.sum(), rtol=1e-10)
    # per word: sum_k c_kv is the corpus count of v
    np.testing.assert_allclose(
        jnp.sum(stats, 0), np.bincount(batch.word_ids.ravel(), batch.counts.ravel(), 15), rtol=1e-10, atol=1e-10
    )
    np.testing.assert_allclose(jnp.sum(loc.local_params, 1), 3 * 0.3 + batch.counts.sum(1), rtol=1e-10)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.slow
def test_padding_slots_and_empty_documents_contribute_nothing(method):
    """Zero-count slots (with arbitrary word ids) interleaved with the real ones, and appended empty
    documents, change neither the statistics, nor the local terms, nor the real documents' gamma."""
    batch, _ = _corpus(14, num_docs=6)
    s, length = batch.counts.shape
    r = np.random.default_rng(0)
    ids = np.zeros((s + 2, 2 * length), np.int32)
    counts = np.zeros((s + 2, 2 * length))
    ids[:s, ::2], counts[:s, ::2] = batch.word_ids, batch.counts
    ids[:, 1::2] = r.integers(0, 15, (s + 2, length))
    ids[s:] = r.integers(0, 15, (2, 2 * length))
    padded = BowBatch(jnp.asarray(ids), jnp.asarray(counts))
    model = LDA(3, 15, alpha=0.3)
    view = _random_q(15, 3, 15).mean_params()
    key = jax.random.PRNGKey(3)
    a = model.local_step(view, _as_jax(batch), key, method)
    b = model.local_step(view, padded, key, method)
    assert_trees_close(a.suff_stats, b.suff_stats, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.local_terms, b.local_terms, rtol=1e-10)
    np.testing.assert_allclose(a.local_params, b.local_params[:s], rtol=1e-10)
    np.testing.assert_allclose(b.local_params[s:], 0.3, rtol=1e-12)
    # documents without a word slot, (S, 0), as Corpus.batch(bucket=False) cuts for empty documents:
    # their q(theta) is the prior, no statistics, no ELBO (before: "zero-size array to reduction")
    empty = Corpus(np.zeros(4, np.int64), np.zeros(0, np.int32), np.zeros(0)).batch([0, 1, 2], bucket=False)
    assert empty.word_ids.shape == (3, 0)
    model.check_data(empty)
    c = model.local_step(view, empty, key, method)
    assert float(jnp.max(jnp.abs(c.suff_stats[0]))) == 0.0 and abs(float(c.local_terms)) < 1e-10
    np.testing.assert_allclose(c.local_params, 0.3, rtol=1e-12)
    if method == "meanfield":
        alg = svi(model, num_data=4)
        state = alg.init(jax.random.PRNGKey(0))
        new, info = alg.step(key, state, empty)
        assert bool(info.accepted) and float(info.step_size) == 0.0 and np.isfinite(float(info.elbo))
        assert_trees_close(new.q_global, state.q_global, rtol=0, atol=0)


@pytest.mark.parametrize("method", METHODS)
def test_runs_in_both_dtypes_and_stays_finite_for_extreme_topics(method, dtype):
    """Topics with log-probabilities down to -1e4 or -inf (the log of a sampled beta can be that
    small, or a sampled beta exactly 0) give finite statistics that still sum to the token count, in float32 as in float64."""
    batch, _ = _corpus(16)
    model = LDA(3, 15, alpha=0.05, dtype=dtype)
    r = np.random.default_rng(1)
    log_beta = -r.uniform(0, 1, (3, 15)) * np.array([[1.0], [50.0], [1e4]])
    log_beta[1, :4] = -np.inf  # exact zeros of a sampled beta
    log_beta[:, 5] = -np.inf  # a word no topic can emit
    log_beta = jnp.asarray(log_beta, dtype)
    loc = model.local_step((log_beta,), _as_jax(batch), jax.random.PRNGKey(0), method)
    assert loc.suff_stats[0].dtype == jnp.dtype(dtype)
    assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree_util.tree_leaves(loc))
    np.testing.assert_allclose(jnp.sum(loc.suff_stats[0]), batch.counts.sum(), rtol=tol(dtype, 1e-10, 1e-5))
    if method == "meanfield" and dtype == "float32":
        ref = LDA(3, 15, alpha=0.05).local_step((log_beta.astype(jnp.float64),), _as_jax(batch))
        assert np.all(np.isfinite(np.asarray(ref.local_params)))
        np.testing.assert_allclose(loc.local_params, ref.local_params, rtol=1e-3, atol=1e-3)


@pytest.mark.slow
def test_gibbs_padding_inactive_tokens_and_other_documents_change_nothing():
    """Document 0 alone, with zero-count slots (arbitrary words and weights) interleaved and
    appended, and next to a document with many more tokens (more token steps, where document 0's
    tokens are inactive): its real slots get exactly the same counts, its padding slots none."""
    r = np.random.default_rng(6)
    k = 4
    w0, n0 = np.array([2, 7, 3]), np.array([3.0, 1.0, 4.0])
    beta = r.dirichlet(np.ones(9), k)
    model = LDA(k, 9, alpha=0.2, gibbs_sweeps=5, gibbs_burn_in=2)
    view = (jnp.asarray(np.log(beta)),)
    key = jax.random.PRNGKey(7)
    gibbs = jax.jit(lambda logb, n, key, alpha: collapsed_gibbs_allocations(logb, n, key, alpha, 5, 2))

    def per_slot(ids, n):
        (c,) = model.local_step(view, BowBatch(jnp.asarray(ids), jnp.asarray(n)), key, "gibbs").suff_stats
        return c, gibbs(jnp.take(view[0].T, jnp.asarray(ids), axis=0), jnp.asarray(n), key, jnp.asarray(0.2))

    c_alone, a_alone = per_slot(w0[None], n0[None])
    long_ids = np.arange(9)[None]
    long_n = np.full((1, 9), 3 * GIBBS_CHUNK // 9 + 1.0)  # more than 3 chunks of tokens
    ids2 = np.zeros((2, 9), np.int64)
    n2 = np.zeros((2, 9))
    real = [1, 4, 5]  # doc 0's slots in the padded batch, in the same order
    ids2[0] = [8, w0[0], 1, 0, w0[1], w0[2], 6, 4, 2]
    n2[0, real] = n0
    ids2[1], n2[1] = long_ids[0], long_n[0]
    _, a_both = per_slot(ids2, n2)
    np.testing.assert_array_equal(a_both[0, np.asarray(real)], a_alone[0])
    np.testing.assert_array_equal(np.delete(np.asarray(a_both[0]), real, axis=0), 0.0)
    # the statistics of document 0 alone are its counts' allocation
    np.testing.assert_allclose(np.asarray(c_alone)[:, w0].sum(0), n0, rtol=1e-12)


def test_gibbs_zero_weight_topics_are_never_drawn():
    """A topic whose weight b is exactly zero for every word (log b at the floor of a sampled beta
    with zeros) gets no token, whatever alpha; the last topic is the one that a rounding of the
    inverse CDF to its total would pick."""
    k, v = 3, 5
    beta = np.full((k, v), 1.0 / v)
    beta[k - 1] = 0.0
    beta[k - 1, 0] = 1.0  # topic 2 owns word 0 only
    with np.errstate(divide="ignore"):
        view = (jnp.asarray(np.log(beta)),)
    model = LDA(k, v, alpha=5.0, gibbs_sweeps=3, gibbs_burn_in=1)
    batch = BowBatch(
        jnp.array([[1, 2, 3, 4], [1, 3, 0, 0]]), jnp.array([[30.0, 20.0, 10.0, 5.0], [7.0, 9.0, 0.0, 0.0]])
    )
    keys = jax.random.split(jax.random.PRNGKey(8), 20)
    stats = jax.jit(jax.vmap(lambda kk: model.local_step(view, batch, kk, "gibbs").suff_stats[0]))(keys)
    assert np.all(np.isfinite(np.asarray(stats)))
    np.testing.assert_array_equal(np.asarray(stats)[:, k - 1, :], 0.0)


# ------------------------------------------------------------------------------------ algorithms
def test_cavi_meanfield_elbo_never_decreases():
    batch, _ = _corpus(17, num_docs=30, k=3, v=20)
    model = LDA(3, 20, alpha=0.3, eta=0.2, tol=1e-12, max_iters=5000)
    alg = cavi(model)
    data = _as_jax(batch)
    state = alg.init(jax.random.PRNGKey(0), data)
    step = jax.jit(alg.step)
    elbos = []
    for t in range(30):
        state, info = step(jax.random.PRNGKey(t), state, data)
        elbos.append(float(info.elbo))
    elbos = np.array(elbos)
    assert np.all(np.diff(elbos) >= -1e-9 * np.abs(elbos[1:])), np.diff(elbos).min()
    assert elbos[-1] > elbos[0] + 1.0


@pytest.mark.parametrize("method", METHODS)
def test_svi_full_batch_rho_one_equals_cavi_step(method):
    batch, _ = _corpus(18)
    data = _as_jax(batch)
    model = LDA(3, 15, alpha=0.3)
    a_cavi = cavi(model, local=method)
    a_svi = svi(model, num_data=data.word_ids.shape[0], schedule=schedules.constant(1.0), local=method)
    s1, i1 = a_cavi.step(jax.random.PRNGKey(1), a_cavi.init(jax.random.PRNGKey(0), data), data)
    s2, _ = a_svi.step(jax.random.PRNGKey(1), a_svi.init(jax.random.PRNGKey(0), data), data)
    assert_trees_close(s1.q_global, s2.q_global, rtol=1e-12, atol=1e-12)
    assert np.isfinite(float(i1.elbo))


@pytest.mark.slow
def test_compiles_once_and_vmaps_over_keys():
    batch, _ = _corpus(19)
    data = _as_jax(batch)
    model = LDA(3, 15, alpha=0.3, gibbs_sweeps=4, gibbs_burn_in=2)
    view = _random_q(20, 3, 15).mean_params()
    local = jax.jit(chex.assert_max_traces(lambda v, b, k: model.local_step(v, b, k, "gibbs"), n=1))
    outs = [local(view, data, jax.random.PRNGKey(t)).suff_stats[0] for t in range(3)]
    assert not np.allclose(outs[0], outs[1])  # the key matters
    np.testing.assert_array_equal(outs[0], local(view, data, jax.random.PRNGKey(0)).suff_stats[0])  # and only it
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    many = jax.jit(jax.vmap(lambda k: model.local_step(view, data, k, "gibbs").suff_stats[0]))(keys)
    assert many.shape == (4, 3, 15)
    np.testing.assert_allclose(many[1], model.local_step(view, data, keys[1], "gibbs").suff_stats[0], rtol=1e-12)

    alg = cavi(model, local="meanfield")  # restarts in lock step: vmap of the whole CAVI step
    step = jax.jit(chex.assert_max_traces(alg.step, n=1))
    states = jax.vmap(lambda k: alg.init(k, data))(keys)
    vstep = jax.jit(jax.vmap(step, in_axes=(0, 0, None)))
    for t in range(2):
        states, infos = vstep(jax.random.split(jax.random.PRNGKey(t), 4), states, data)
    assert infos.elbo.shape == (4,) and np.all(np.isfinite(infos.elbo))


def test_init_globals_is_online_lda_start():
    model = LDA(4, 500, init_scale=2.0)
    q = model.init_globals(jax.random.PRNGKey(0))
    assert isinstance(model, ConditionallyConjugateModel)
    assert isinstance(q, expfam.Dirichlet) and q.batch_shape == (4,)
    lam = np.asarray(q.concentration)
    np.testing.assert_allclose(lam.mean(), 2.0, rtol=0.01)  # 2000 draws: se of the mean ~ 0.2 / 45
    np.testing.assert_allclose(lam.std(), 0.2, rtol=0.1)
    assert_trees_close(q, model.init_globals(jax.random.PRNGKey(0)))
    assert model.prior().batch_shape == (4,)
    np.testing.assert_allclose(model.prior().concentration, 0.01)


def test_init_globals_is_one_draw_per_key():
    """A key gives the same start eagerly, jitted and in a vmapped batch of keys (restarts)."""
    model = LDA(7, 33, init_scale=3.0)
    key = jax.random.PRNGKey(11)
    q = model.init_globals(key)
    keys = jax.random.split(jax.random.PRNGKey(12), 3)
    batch = jax.vmap(model.init_globals)(keys)
    for i in range(3):
        np.testing.assert_array_equal(batch.natural_params[0][i], model.init_globals(keys[i]).natural_params[0])
    np.testing.assert_array_equal(jax.jit(model.init_globals)(key).natural_params[0], q.natural_params[0])
    assert not np.allclose(batch.natural_params[0][0], batch.natural_params[0][1])
    typed = model.init_globals(jax.random.key(11))  # a typed key: its data seeds the draw
    assert typed.batch_shape == (7,) and np.all(np.isfinite(typed.natural_params[0]))


def test_kl_theta_is_the_dirichlet_kl():
    from vijax.models.lda import _kl_theta

    gamma = jnp.exp(jax.random.normal(jax.random.PRNGKey(0), (5, 4))) * 3.0
    alpha = jnp.asarray(0.3)
    want = expfam.Dirichlet.from_concentration(gamma).kl(expfam.Dirichlet.from_concentration(jnp.full((5, 4), 0.3)))
    np.testing.assert_allclose(_kl_theta(gamma, alpha), want, rtol=tol(gamma.dtype), atol=tol(gamma.dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_kl_theta_and_the_estep_terms_match_scipy(dtype):
    # _kl_theta and the E-step's objective take psi and log Gamma of [gamma, sum gamma] from one
    # series (vijax.expfam.digamma_and_gammaln): the closed form evaluated by scipy in float64
    from scipy.special import digamma as sp_psi
    from scipy.special import gammaln as sp_gammaln

    from vijax.models.lda import _kl_theta, _theta_terms

    g = np.random.default_rng(1).gamma(0.5, 4.0, (256, 50)) + 0.1
    gamma, alpha = jnp.asarray(g, dtype), jnp.asarray(0.1, dtype)
    e_log_theta = sp_psi(g) - sp_psi(g.sum(-1, keepdims=True))
    kl = (
        sp_gammaln(g.sum(-1))
        - sp_gammaln(g).sum(-1)
        + 50 * sp_gammaln(0.1)
        - sp_gammaln(5.0)
        + ((g - 0.1) * e_log_theta).sum(-1)
    )
    rtol = 1e-5 if dtype == "float32" else 1e-12
    got_e, got_terms = jax.jit(_theta_terms)(gamma, alpha)
    np.testing.assert_allclose(np.asarray(jax.jit(_kl_theta)(gamma, alpha)), kl, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(np.asarray(got_e), e_log_theta, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(np.asarray(got_terms), kl - 50 * sp_gammaln(0.1) + sp_gammaln(5.0), rtol=rtol, atol=rtol)


# ------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_topics=0), "num_topics"),
        (dict(num_topics=2.5), "num_topics"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(alpha=0.0), "alpha"),
        (dict(alpha=-1.0), "alpha"),
        (dict(alpha="big"), "alpha"),
        (dict(alpha=[0.1, 0.2]), "alpha"),
        (dict(eta=0.0), "eta"),
        (dict(eta=float("nan")), "eta"),
        (dict(max_iters=0), "max_iters"),
        (dict(tol=-1e-3), "tol"),
        (dict(cvb0_iters=0), "cvb0_iters"),
        (dict(gibbs_sweeps=0), "gibbs_sweeps"),
        (dict(gibbs_sweeps=3, gibbs_burn_in=3), "gibbs_burn_in"),
        (dict(init_scale=0.0), "init_scale"),
        (dict(dtype="int32"), "dtype"),
        (dict(dtype="no-such-type"), "dtype"),
        (dict(accelerate="yes"), "accelerate"),
    ],
)
def test_bad_model_arguments(kwargs, match):
    args = dict(num_topics=2, vocab_size=5)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        LDA(**args)


@pytest.mark.parametrize(
    "ids, counts, match",
    [
        ([[0, 1]], [[1.0, -1.0]], "counts must be >= 0"),
        ([[0, 1]], [[1.5, 1.0]], "integer-valued"),
        ([[0, 1]], [[1.0, np.nan]], "finite"),
        ([[0, 5]], [[1.0, 1.0]], "word_ids"),
        ([[-1, 0]], [[1.0, 1.0]], "word_ids"),
        (np.array([[0.0, 1.0]]), [[1.0, 1.0]], "word_ids"),
        ([[0, 1, 2]], [[1.0, 1.0]], "same shape"),
        ([0, 1], [1.0, 1.0], "2-D"),
    ],
)
def test_bad_data(ids, counts, match):
    model = LDA(2, 5)
    bad = BowBatch(np.asarray(ids), np.asarray(counts))
    with pytest.raises(ValueError, match=match):
        model.check_data(bad)
    with pytest.raises(ValueError):
        _cavi.init(jax.random.PRNGKey(0), bad, model=model)


def test_empty_documents_are_valid_data_and_bad_calls_are_named():
    model = LDA(2, 5)
    model.check_data(BowBatch(np.zeros((2, 3), np.int32), np.zeros((2, 3))))
    view = model.prior().mean_params()
    batch = BowBatch(jnp.array([[0, 1]]), jnp.array([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="key"):
        model.local_step(view, batch, None, "gibbs")
    with pytest.raises(ValueError, match="method"):
        model.local_step(view, batch, None, "exact")
    with pytest.raises(ValueError, match="globals_view"):
        model.local_step((jnp.zeros((3, 5)),), batch)
    bad_batches = [  # a bare call runs the steps' value checks (no silent clip, no NaN)
        (
            BowBatch(jnp.array([[0, 7]]), jnp.array([[1.0, 2.0]])),
            r"batch word id 7 at \[0, 1\] is out of range \[0, 5\)",
        ),
        (BowBatch(jnp.array([[0, 1]]), jnp.array([[1.0, jnp.nan]])), r"batch count nan at \[0, 1\]"),
        (BowBatch(jnp.array([[0, 1]]), jnp.array([[-2.0, 1.0]])), r"batch count -2.0 at \[0, 0\]"),
    ]
    for method in model.local_methods:
        for bad, match in bad_batches:
            with pytest.raises(ValueError, match=match):
                model.local_step(view, bad, jax.random.PRNGKey(0), method)


# ------------------------------------------------------------------ the largest concentrations
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.slow
def test_init_scale_at_the_precision_bound_gives_a_negative_elbo_and_beyond_it_is_refused(dtype):
    """The ELBO is <= log p(w) <= 0; its Dirichlet KL is formed from terms of size lambda log lambda
    that cancel, with a relative error ~ 2 eps lambda. init_scale = 1.5e35 (float32) passed the
    old overflow bound (1.6e35) and one svi / ssvi / ssvi_a step reported ELBO +5e30, accepted.
    At the bound 2^-10 / eps the KL is within 1 % of float64's and every step's ELBO negative."""
    from vijax.inference import ssvi, ssvi_a
    from vijax.models.lda import concentration_bounds, largest_precise_concentration

    high = largest_precise_concentration(dtype)
    assert high == {jnp.float32: 8192.0, jnp.float64: 2.0**42}[dtype]
    low = concentration_bounds("eta", dtype)[0]
    for scale in (np.nextafter(high, np.inf), 1.5e35, np.nextafter(low, 0.0), 1e-30):
        with pytest.raises(ValueError, match=rf"^init_scale must be a finite number in \[{low:.6g}, "):
            LDA(2, 6, init_scale=scale, dtype=dtype)
    LDA(2, 6, init_scale=low, dtype=dtype)
    if dtype == jnp.float64:
        return  # below: float32, against float64
    model = LDA(2, 6, init_scale=high, dtype=jnp.float32)
    q0 = model.init_globals(jax.random.PRNGKey(0))
    kl32 = float(expfam.tree_kl(q0, model.prior()))
    q64 = expfam.Dirichlet.from_concentration(np.asarray(q0.concentration, np.float64))
    kl64 = float(expfam.tree_kl(q64, LDA(2, 6, dtype=jnp.float64).prior()))
    assert abs(kl32 / kl64 - 1) < 0.01
    batch = BowBatch(jnp.array([[0, 1, 2], [3, 4, 5]]), jnp.array([[1.0, 2.0, 1.0], [2.0, 1.0, 3.0]]))
    for name, make in (("svi", svi), ("ssvi", ssvi), ("ssvi_a", ssvi_a)):
        alg = make(model, num_data=2)
        _, info = jax.jit(alg.step)(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0)), batch)
        assert bool(info.accepted) and -2 * kl64 < float(info.elbo) < -kl64 / 2, name


@pytest.mark.parametrize(
    "values, name",
    [
        ({"alpha": -1.0}, "alpha"),
        ({"alpha": 0.0}, "alpha"),
        ({"eta": 1e30}, "eta"),
        ({"eta": 1e-30}, "eta"),  # eta - 1 == -1: a prior of concentration 0, every step NaN
        ({"alpha": 1e-310}, "alpha"),  # subnormal
        ({"alpha": [0.1, 0.5, np.nan]}, "alpha"),  # a grid's points
        ({"alpha": 0.1, "eta": np.array([0.01, 1e30])}, "eta"),
        ({"alpha": "0.1"}, "alpha"),
        ({"beta": 0.1}, "beta"),
    ],
)
def test_check_hyperparameters_names_the_bad_value(values, name):
    """The one validator of alpha and eta: the constructor, ``hyper`` dicts of host numbers and
    ``hyperparameter_grid``'s points. eta = 1e30 was accepted, its ELBO noise."""
    model = LDA(2, 5)
    with pytest.raises(ValueError, match=rf"^{name} "):
        model.check_hyperparameters(values)
    if set(values) <= {"alpha", "eta"} and all(np.ndim(v) == 0 for v in values.values()):
        with pytest.raises(ValueError, match=rf"^{name} "):
            LDA(2, 5, **values)
        batch = BowBatch(jnp.array([[0, 1]]), jnp.array([[1.0, 2.0]]))
        with pytest.raises(ValueError, match=rf"^{name} "):
            model.local_step(model.prior().mean_params(), batch, hyper=values)
    model.check_hyperparameters({"alpha": [1e-300, 0.1, 2.0**42], "eta": jnp.float32(0.5)})
    with pytest.raises(ValueError, match=r"^eta must be a finite number in \[6\.10352e-05, 8192\] in float32"):
        LDA(2, 5, dtype=jnp.float32).check_hyperparameters({"eta": [0.1, 1e4]})
    jax.jit(lambda a: model.check_hyperparameters({"alpha": a}) or a)(0.1)  # traced values pass
