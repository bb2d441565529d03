"""SGRLD for LDA (Patterson and Teh 2013): the drift against jax.grad of the expanded-mean log
posterior, with the Gibbs E-step's expected counts against enumeration of a tiny document's topic
assignments (the drift of the marginal posterior, by Fisher's identity), the mirrored Langevin
dynamics' stationary law on the prior, one step against its formula, jit / vmap / keys, and the
held-out score improving over the initial topics on a tiny synthetic corpus."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import gammaln

from vijax.data import BowBatch, sample_lda_corpus
from vijax.inference import restarts, sgrld_lda, sgrld_schedule, sgrld_topics, topics_dirichlet
from vijax.inference.sgrld import drift
from vijax.models import LDA

K, V = 3, 4
ALPHA, ETA = 0.3, 0.7
DOC_IDS = np.array([0, 2, 3])  # one document: word 0 twice, words 2 and 3 once
DOC_COUNTS = np.array([2, 1, 1])


def _theta(seed=0):
    return jnp.asarray(np.random.default_rng(seed).gamma(2.0, 1.0, size=(K, V)))


def _log_posterior_given_counts(theta, n, eta):
    """log p(theta | w, z) up to a constant: Gamma(eta, 1) priors, sum_kw n_kw log pi_kw."""
    pi = theta / jnp.sum(theta, axis=-1, keepdims=True)
    return jnp.sum((eta - 1.0) * jnp.log(theta) - theta) + jnp.sum(n * jnp.log(pi))


def test_drift_is_the_preconditioned_gradient_plus_the_metric_term():
    """drift = theta * grad log p(theta | w, z) + 1 (G^-1 = diag(theta), d theta / d theta = 1)."""
    theta = _theta()
    n = jnp.asarray(np.random.default_rng(1).integers(0, 5, size=(K, V)).astype(float))
    grad = jax.grad(_log_posterior_given_counts)(theta, n, ETA)
    np.testing.assert_allclose(drift(theta, n, ETA), theta * grad + 1.0, rtol=1e-10, atol=1e-12)


def _tokens():
    return np.repeat(DOC_IDS, DOC_COUNTS)  # (N_d,) the document's tokens


def _log_marginal(theta):
    """log p(w_d | pi) with theta_d integrated out, by enumerating all K^N_d topic assignments."""
    pi = theta / jnp.sum(theta, axis=-1, keepdims=True)
    tokens = _tokens()
    zs = jnp.asarray(list(itertools.product(range(K), repeat=len(tokens))))  # (K^N, N)
    nk = jnp.sum(jax.nn.one_hot(zs, K), axis=1)  # (K^N, K)
    log_prior_z = (
        gammaln(K * ALPHA) - gammaln(K * ALPHA + len(tokens)) + jnp.sum(gammaln(ALPHA + nk) - gammaln(ALPHA), -1)
    )
    log_lik = jnp.sum(jnp.log(pi[zs, tokens[None, :]]), axis=-1)
    return jax.scipy.special.logsumexp(log_prior_z + log_lik), (zs, log_prior_z + log_lik)


def _exact_expected_counts(theta):
    """E[n_kw | w_d, pi, alpha] (K, V) by enumeration."""
    _, (zs, logp) = _log_marginal(theta)
    w = jnp.exp(logp - jax.scipy.special.logsumexp(logp))
    out = np.zeros((K, V))
    for z, p in zip(np.asarray(zs), np.asarray(w)):
        for k, v in zip(z, _tokens()):
            out[k, v] += p
    return out


def test_drift_with_expected_counts_is_the_marginal_posteriors_drift():
    """Fisher's identity: with n = E[n | w, pi, alpha] (enumerated), the drift equals
    theta * grad [log p(theta) + log p(w | theta)] + 1, the marginal log likelihood by enumeration."""
    theta = _theta(2)

    def log_post(t):
        return jnp.sum((ETA - 1.0) * jnp.log(t) - t) + _log_marginal(t)[0]

    want = theta * jax.grad(log_post)(theta) + 1.0
    np.testing.assert_allclose(drift(theta, _exact_expected_counts(theta), ETA), want, rtol=1e-9, atol=1e-12)


@pytest.mark.slow  # CI time budget; LDA's Gibbs E-step has its own enumeration test in CI (tests/models/test_lda.py)
def test_gibbs_expected_counts_match_enumeration():
    """The E-step SGRLD uses (LDA's collapsed Gibbs with the topics fixed at pi): its expected
    counts, averaged over 2,000 independent chains (rows of one batch, each with its own key) of
    10 kept sweeps after 10 burn-in sweeps, match the enumerated E[n_kw | w_d, pi, alpha] within
    0.03 (measured: 0.008; with 2 burn-in sweeps the start's bias shows, 0.05)."""
    theta = _theta(3)
    rows = 2000
    batch = BowBatch(
        jnp.tile(jnp.asarray(DOC_IDS)[None], (rows, 1)), jnp.tile(jnp.asarray(DOC_COUNTS)[None], (rows, 1))
    )
    model = LDA(K, V, alpha=ALPHA, eta=ETA, gibbs_sweeps=20, gibbs_burn_in=10)
    loc = model.local_step((jnp.log(sgrld_topics(theta)),), batch, jax.random.PRNGKey(0), method="gibbs")
    np.testing.assert_allclose(np.asarray(loc.suff_stats[0]) / rows, _exact_expected_counts(theta), atol=0.03)


def test_mirrored_dynamics_without_data_sample_the_gamma_prior():
    """With no counts the drift is eta - theta: the mirrored Euler scheme
    theta <- |theta + eps/2 (eta - theta) + sqrt(eps theta) xi| keeps Gamma(eta, 1) (mean eta,
    variance eta) up to O(eps): 4,000 chains, 2,000 steps of eps = 0.01, mean and variance within 5%."""
    eta, eps = 2.0, 0.01

    def one(theta, key):
        xi = jax.random.normal(key, theta.shape)
        return jnp.abs(
            theta + 0.5 * eps * drift(theta[:, None], jnp.zeros((4000, 1)), eta)[:, 0] + jnp.sqrt(eps * theta) * xi
        ), None

    theta, _ = jax.lax.scan(one, jnp.full((4000,), 0.5), jax.random.split(jax.random.PRNGKey(0), 2000))
    np.testing.assert_allclose([np.mean(theta), np.var(theta)], [eta, eta], rtol=0.05)


def _corpus():
    return sample_lda_corpus(
        0, num_docs=240, num_topics=3, vocab_size=30, alpha=0.1, eta=0.05, doc_length_mean=30.0
    ).corpus


def test_step_is_the_mirrored_langevin_update():
    """One (eager) step equals |theta + eps/2 drift(theta, N/S E[n], eta) + sqrt(eps theta) xi| with the
    E-step's counts at the step's Gibbs key and xi from its noise key (the key split in two)."""
    docs = _corpus()
    model = LDA(3, 30, alpha=0.1, eta=0.05, gibbs_sweeps=2, gibbs_burn_in=1)
    alg = sgrld_lda(model, num_data=240, schedule=0.3)
    state = alg.init(jax.random.PRNGKey(0))
    batch, key = docs.batch(range(20)), jax.random.PRNGKey(5)
    new, info = alg.step(key, state, batch)  # eager: shares the compiled E-step with the call below
    k_gibbs, k_noise = jax.random.split(key)
    theta = state.q_global
    (c,) = model.local_step((jnp.log(sgrld_topics(theta)),), batch, k_gibbs, method="gibbs").suff_stats
    xi = jax.random.normal(k_noise, theta.shape, theta.dtype)
    want = jnp.abs(theta + 0.15 * drift(theta, 12.0 * c, 0.05) + jnp.sqrt(0.3 * theta) * xi)
    np.testing.assert_allclose(new.q_global, want, rtol=1e-9)
    assert int(new.count) == 1 and bool(info.accepted) and float(info.step_size) == pytest.approx(0.3)
    again, _ = alg.step(key, state, batch)
    other, _ = alg.step(jax.random.PRNGKey(6), state, batch)
    assert np.array_equal(again.q_global, new.q_global) and not np.allclose(other.q_global, new.q_global)


@pytest.mark.slow  # CI time budget (compiles the whole step under vmap): run by `make test-slow`
def test_heldout_improves_over_the_initial_topics_under_restarts():
    """Two restarts in lock step (vmap), 20 jitted steps on a 3-topic corpus: each restart's
    held-out per-word log predictive (document completion, the sample's topics as the point
    estimate, ``topics_dirichlet``) beats the initial topics' by more than 0.3 nats (measured: about 0.8)."""
    docs = _corpus()
    train, test = docs.subset(np.arange(200)), docs.subset(np.arange(200, 240))
    observed, heldout = test.split_tokens(1, 0.5)
    ob, hb = observed.batch(np.arange(40)), heldout.batch(np.arange(40))
    model = LDA(3, 30, alpha=0.1, eta=0.05, gibbs_sweeps=3, gibbs_burn_in=1)
    alg = restarts(sgrld_lda(model, num_data=200, schedule=sgrld_schedule(0.5, 10.0, 0.6)), 2)

    def score(theta):
        return jnp.sum(model.log_predictive(topics_dirichlet(theta), ob, hb)) / jnp.sum(hb.counts)

    state = alg.init(jax.random.PRNGKey(0))
    before = np.array([score(t) for t in state.q_global])
    step = jax.jit(alg.step)
    for t in range(20):
        state, info = step(jax.random.PRNGKey(100 + t), state, train.batch(np.arange(10 * t, 10 * t + 10) % 200))
    after = np.array([score(t) for t in state.q_global])
    assert info.elbo.shape == (2,) and np.all(np.isfinite(after))
    assert np.all(after > before + 0.3), (before, after)


def test_topics_dirichlet_keeps_tiny_weights():
    """The Dirichlet's mean is the sample's topics, also for weights far below float32's epsilon."""
    theta = jnp.asarray([[1e-12, 1.0, 3.0], [2.0, 2.0, 1e-20]], jnp.float32)
    q = topics_dirichlet(theta)
    assert q.concentration.dtype == jnp.float32 and float(jnp.min(q.concentration)) >= 1.0
    np.testing.assert_allclose(LDA.expected_topics(q), sgrld_topics(theta), rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_data": 0}, "num_data"),
        ({"num_data": 10, "schedule": -1.0}, "schedule"),
        ({"num_data": 10, "ramp": 1}, "ramp"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sgrld_lda(LDA(2, 5), **kwargs)


def test_a_model_other_than_lda_is_refused():
    from vijax.models import UnivariateGMM

    with pytest.raises(ValueError, match="model"):
        sgrld_lda(UnivariateGMM(num_components=2), num_data=10)


def test_a_bad_batch_is_named_at_step():
    """The step's batch checks (checked_step): a word id out of range is refused before anything runs."""
    alg = sgrld_lda(LDA(2, 5), num_data=10)
    bad = BowBatch(jnp.asarray([[0, 7]]), jnp.asarray([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="word id"):
        alg.step(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0)), bad)
