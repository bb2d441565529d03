"""SSVI and SSVI-A (Hoffman & Blei 2015, Algorithm 1, eq. 7-11)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import gammainc, polygamma

from vijax import expfam
from vijax.data import sample_lda_corpus
from vijax.inference import restarts, schedules
from vijax.expfam._inversion import sample_log_gamma
from vijax.inference._ssvi import SSVIInfo, SSVIState, ssvi
from vijax.metrics import corpus_document_completion
from vijax.models import LDA, DiagonalGMM, UnivariateGMM

K, V, S = 3, 30, 8
KEY = jax.random.PRNGKey(7)
ONE = lambda count: jnp.asarray(1.0)  # noqa: E731  rho = 1


@pytest.fixture(scope="module")
def corpus():
    return sample_lda_corpus(
        0, num_docs=200, num_topics=K, vocab_size=V, alpha=0.1, eta=0.05, doc_length_mean=40.0
    ).corpus


def _q0(lam):
    return expfam.Dirichlet.from_concentration(lam)


def test_one_ssvi_step_with_rho_one_is_the_hand_written_eq11_update(corpus):
    """lambda' = eta + V(beta, lambda) (N/S) c (eq. 11, rho = 1) for LDA, with V written out by
    hand from appendix C: eq. 28 for J^T c, with dR-hat/dlambda = -(dP/da)/p (eq. 23, dP/da by
    autodiff of the regularized incomplete gamma function) and a dense solve of the Fisher
    matrix diag(psi'(lambda)) - psi'(sum lambda) 1 1^T (not the O(V) inv_fisher_vp).

    V c is negative for words absent from the batch (E[V c] = c only on average), so a large eta
    (100) keeps this rho = 1 step inside the domain, where the guard leaves it untouched."""
    model = LDA(K, V, alpha=0.5, eta=100.0)
    batch = corpus.batch(range(S))
    num_data = 16
    lam = 1.0 + jax.random.uniform(jax.random.PRNGKey(3), (K, V)) * 5.0
    state = SSVIState(_q0(lam), jnp.zeros((), jnp.int32))
    alg = ssvi(model, num_data=num_data, schedule=ONE, mode="full")
    new, info = jax.jit(alg.step)(KEY, state, batch)

    key_beta, key_local = jax.random.split(KEY)
    log_g = sample_log_gamma(key_beta, lam)
    g = jnp.exp(log_g)
    beta = g / jnp.sum(g, -1, keepdims=True)
    (c,) = model.local_step((jnp.log(beta),), batch, key_local, "meanfield").suff_stats
    dp_da = jax.grad(lambda a: jnp.sum(gammainc(a, g)))(lam)
    dens = jnp.exp((lam - 1.0) * log_g - g - jax.scipy.special.gammaln(lam))
    dg = -dp_da / dens  # eq. 23
    # eq. 28 transposed: J^T c = dg * (c / beta - sum_v c_v) / sum_v g_v
    jtc = dg * (c / beta - jnp.sum(c, -1, keepdims=True)) / jnp.sum(g, -1, keepdims=True)
    fisher = jax.vmap(jnp.diag)(polygamma(1, lam)) - polygamma(1, jnp.sum(lam, -1))[:, None, None]
    vc = jnp.linalg.solve(fisher, jtc[..., None])[..., 0]
    expected = (100.0 - 1.0) + (num_data / S) * vc  # natural parameter eta - 1 + V (N/S) c
    assert int(info.num_damped) == 0
    np.testing.assert_allclose(new.q_global.eta, expected, rtol=1e-6, atol=1e-8)
    assert float(info.rho) == 1.0 and int(new.count) == 1


@pytest.mark.slow
def test_ssvi_a_step_with_rho_one_and_the_ramp(corpus):
    """SSVI-A (eq. 10) with rho = 1: lambda' = eta + (N_t/S) c at the draw; with ramp=True
    N_0 = S, so the first step uses c itself."""
    model = LDA(K, V, alpha=0.5, eta=0.3)
    batch = corpus.batch(range(S))
    lam = 1.0 + jax.random.uniform(jax.random.PRNGKey(4), (K, V))
    state = SSVIState(_q0(lam), jnp.zeros((), jnp.int32))
    key_beta, key_local = jax.random.split(KEY)
    log_g = sample_log_gamma(key_beta, lam)
    log_beta = log_g - jax.nn.logsumexp(log_g, -1, keepdims=True)
    (c,) = model.local_step((log_beta,), batch, key_local, "meanfield").suff_stats
    for ramp, mult in ((False, 100 / S), (True, 1.0)):
        new, _ = jax.jit(ssvi(model, num_data=100, schedule=ONE, mode="approx", ramp=ramp).step)(KEY, state, batch)
        np.testing.assert_allclose(new.q_global.eta, (0.3 - 1.0) + mult * c, rtol=1e-9)


def test_domain_safeguard_is_counted(corpus):
    """A huge N/S makes V (N/S) c negative somewhere (V c need not be >= 0, unlike SVI's c):
    the full step would leave the Dirichlet domain; the damped update stays valid and finite
    and the damped topics are counted."""
    model = LDA(K, V, alpha=0.5, eta=0.3)
    batch = corpus.batch(range(S))
    lam = 1.0 + jax.random.uniform(jax.random.PRNGKey(5), (K, V))
    state = SSVIState(_q0(lam), jnp.zeros((), jnp.int32))
    new, info = jax.jit(ssvi(model, num_data=10**7, schedule=ONE, mode="full").step)(KEY, state, batch)
    assert int(info.num_damped) > 0
    assert bool(jnp.all(new.q_global.is_valid())) and bool(jnp.all(jnp.isfinite(new.q_global.eta)))


@pytest.mark.slow
def test_steps_jit_vmap_and_do_not_retrace(corpus):
    """SSVI under jit traces once for three steps; SSVI-A vmaps over restarts (one key each)."""
    model = LDA(K, V, alpha=0.5, eta=0.3)
    batch = corpus.batch(range(S))
    traces = []
    alg = ssvi(model, num_data=200, mode="full", local="cvb0")

    def counted(key, state, b):
        traces.append(1)
        return alg.step(key, state, b)

    step = jax.jit(counted)
    state = alg.init(KEY)
    for t in range(3):
        state, info = step(jax.random.fold_in(KEY, t), state, batch)
    assert len(traces) == 1
    assert isinstance(info.inner, SSVIInfo) and np.isfinite(float(info.elbo)) and int(state.count) == 3
    many = restarts(ssvi(model, num_data=200, mode="approx", local="cvb0"), 2)
    st, inf = jax.jit(many.step)(KEY, many.init(KEY), batch)
    assert st.q_global.eta.shape == (2, K, V) and inf.elbo.shape == (2,)
    assert not np.allclose(st.q_global.eta[0], st.q_global.eta[1])


def test_ssvi_recovers_a_conjugate_posterior():
    """With one mixture component the local step does not depend on beta, so E[V s] = s and the
    fixed point of both updates is the exact Normal posterior of the mean. 2000 steps with
    rho_t = (t + 10)^-0.7; the natural parameters averaged over the last 1000 iterates give the
    posterior mean within 0.25 posterior sd and the variance within 10%. (SSVI's V s is noisy
    here: its per-draw sd is about 1.4 times s, so the iterates' sd stays near 7% at this rho;
    SSVI-A is SVI for this model and is exact.)"""
    x = jax.random.normal(jax.random.PRNGKey(0), (40,)) + 2.0
    model = UnivariateGMM(num_components=1, prior_variance=4.0)
    post_var = 1.0 / (1.0 / 4.0 + 40.0)
    post_mean = post_var * jnp.sum(x)
    sched = schedules.robbins_monro(1.0, tau=10.0, kappa=0.7)
    for mode in ("full", "approx"):
        alg = ssvi(model, num_data=40, schedule=sched, mode=mode)
        state = alg.init(KEY, x)

        def body(state, key, alg=alg):
            state, info = alg.step(key, state, x)
            return state, (state.q_global.natural_params, info.num_damped)

        _, (nat, damped) = jax.jit(lambda s: jax.lax.scan(body, s, jax.random.split(KEY, 2000)))(state)
        q = expfam.Normal.from_natural(tuple(jnp.mean(p[1000:], 0) for p in nat))
        assert int(jnp.sum(damped[1000:])) == 0  # SSVI's V s may leave the domain in early steps only
        np.testing.assert_allclose(q.mean, post_mean, atol=0.25 * np.sqrt(post_var))
        np.testing.assert_allclose(q.variance, post_var, rtol=0.10)


@pytest.mark.parametrize("mode", ["full", "approx"])
@pytest.mark.slow
def test_ssvi_improves_heldout_log_predictive_on_synthetic_lda(mode):
    """A tiny synthetic corpus (K = 3 topics, V = 30 words, 300 documents): 60 minibatch steps of
    16 documents raise the held-out per-word log predictive (document completion) above that of
    the random start by more than 0.05 nats."""
    sample = sample_lda_corpus(1, num_docs=340, num_topics=K, vocab_size=V, alpha=0.2, eta=0.1, doc_length_mean=50.0)
    train, test = sample.corpus.split_documents(0, 40 / 340)
    observed, heldout = test.split_tokens(0)
    model = LDA(K, V, alpha=0.2, eta=0.1)
    alg = ssvi(model, num_data=train.num_docs, mode=mode, schedule=schedules.robbins_monro(1.0, tau=4.0, kappa=0.7))
    state = alg.init(KEY)
    before = corpus_document_completion(model, state.q_global, observed, heldout, 40)
    rng = np.random.default_rng(0)
    batches = [train.batch(rng.choice(train.num_docs, 16, replace=False), length=32) for _ in range(60)]
    stacked = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *batches)
    state, info = jax.jit(
        lambda s: jax.lax.scan(lambda st, xs: alg.step(xs[1], st, xs[0]), s, (stacked, jax.random.split(KEY, 60)))
    )(state)
    after = corpus_document_completion(model, state.q_global, observed, heldout, 40)
    per_word = lambda r: r.log_prob / r.num_tokens  # noqa: E731
    assert per_word(after) > per_word(before) + 0.05, (per_word(before), per_word(after))
    assert np.all(np.isfinite(info.elbo))


@pytest.mark.slow
def test_ssvi_a_step_follows_its_own_draw_and_ssvis_does_not(corpus):
    """The term SSVI-A neglects (eq. 9) on LDA: over 300 draws at one lambda, the deviation of
    SSVI-A's rho = 1 update from its mean goes with the draw's own deviation log beta - E_q[log beta]
    (pooled correlation over draws and the entries with lambda > 1: +0.16; asserted > 0.08), and
    SSVI's update, with V applied at the same draw, does not (-0.004; asserted |corr| < 0.04).
    docs/lda.md ("Why SSVI-A trails SSVI here") has the same measurement at the size of lda_ssvi.
    eta = 10^4 keeps SSVI's steps inside the domain (no damping); the local step does not use it."""
    model = LDA(K, V, alpha=0.1, eta=1e4)
    batch = corpus.batch(range(64))
    lam = 0.01 + 600.0 * jax.random.dirichlet(jax.random.PRNGKey(0), jnp.full((V,), 0.3), (K,))
    state = SSVIState(_q0(lam), jnp.zeros((), jnp.int32))
    keys = jax.random.split(KEY, 300)
    elog = expfam.tree_mean_params(state.q_global)[0]

    def draw_deviation(key):  # the draw of the step with this key (its key_beta)
        log_g = sample_log_gamma(jax.random.split(key)[0], lam)
        return log_g - jax.nn.logsumexp(log_g, -1, keepdims=True) - elog

    dev = jax.vmap(draw_deviation)(keys)
    keep = jnp.broadcast_to(lam > 1.0, dev.shape)

    def correlation(mode):
        step = ssvi(model, num_data=64, schedule=ONE, mode=mode).step
        new, info = jax.jit(jax.vmap(lambda k: step(k, state, batch)))(keys)
        assert int(jnp.sum(info.num_damped)) == 0
        x = new.q_global.eta - jnp.mean(new.q_global.eta, 0, keepdims=True)
        dx = jnp.sum(jnp.where(keep, dev * x, 0.0))
        return float(dx / jnp.sqrt(jnp.sum(jnp.where(keep, dev**2, 0.0)) * jnp.sum(jnp.where(keep, x**2, 0.0))))

    approx, full = correlation("approx"), correlation("full")
    assert approx > 0.08, approx
    assert abs(full) < 0.04, full


def test_bad_arguments_raise_before_compilation():
    model = LDA(K, V)
    with pytest.raises(ValueError, match="mode"):
        ssvi(model, num_data=10, mode="exact")
    with pytest.raises(ValueError, match="num_data"):
        ssvi(model, num_data=0)
    with pytest.raises(ValueError, match="local='exact'"):
        ssvi(model, num_data=10, local="exact")
    with pytest.raises(ValueError, match="ramp"):
        ssvi(model, num_data=10, ramp="yes")
    with pytest.raises(ValueError, match="schedule"):
        ssvi(model, num_data=10, schedule="0.5")
    ssvi(DiagonalGMM(num_components=2, dim=2), num_data=10)  # NormalGamma draws by inversion: accepted
