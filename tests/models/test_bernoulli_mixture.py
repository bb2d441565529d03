"""The DP mixture of Bernoullis (Hoffman & Blei 2015, §4.2): local step, CAVI, collapsed Gibbs, metrics, data."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

from vijax import expfam
from vijax.data import sample_bernoulli_mixture
from vijax.inference import cavi
from vijax.inference import CAVIState
from vijax.models import _bernoulli_gibbs as gibbs
from vijax.models import conjugate_elbo
from vijax.metrics import bernoulli_mixture_kl, components_used
from vijax.models.bernoulli_mixture import BernoulliMixture, map_assignments, mixture_log_prob
from vijax.testing import assert_trees_close


def _random_q(key, model, spread=5.0):
    k1, k2, k3 = jax.random.split(key, 3)
    kk, d = model.num_components, model.dim
    alpha = 0.5 + spread * jax.random.uniform(k1, (kk,))
    a = 0.5 + spread * jax.random.uniform(k2, (kk, d))
    b = 0.5 + spread * jax.random.uniform(k3, (kk, d))
    return expfam.Dirichlet.from_concentration(alpha), expfam.Beta.from_concentrations(a, b)


def _binary(key, n, d):
    return jax.random.bernoulli(key, 0.4, (n, d)).astype(jnp.float64)


def _numpy_mixture(rng, n, k, d):
    """Binary data from a k-component mixture with well-separated random profiles (NumPy)."""
    probs = rng.choice([0.1, 0.9], (k, d))
    z = rng.integers(0, k, n)
    return (rng.random((n, d)) < probs[z]).astype(float)


MODEL = BernoulliMixture(num_components=3, dim=4, alpha=1.5, a=0.7, b=1.3)


def test_local_step_matches_brute_force():
    q = _random_q(jax.random.PRNGKey(0), MODEL)
    y = _binary(jax.random.PRNGKey(1), 6, 4)
    alpha = np.asarray(q[0].concentration)
    a, b = np.asarray(q[1].concentration1), np.asarray(q[1].concentration0)
    e_log_pi = special.digamma(alpha) - special.digamma(alpha.sum())
    e_log_phi = special.digamma(a) - special.digamma(a + b)
    e_log_1m = special.digamma(b) - special.digamma(a + b)
    yn = np.asarray(y)
    logits = np.array(
        [
            [
                e_log_pi[k] + sum(yn[n, d] * e_log_phi[k, d] + (1 - yn[n, d]) * e_log_1m[k, d] for d in range(4))
                for k in range(3)
            ]
            for n in range(6)
        ]
    )
    r = np.exp(logits - special.logsumexp(logits, axis=1, keepdims=True))
    loc = MODEL.local_step(expfam.tree_mean_params(q), y, None)
    np.testing.assert_allclose(loc.local_params, r, rtol=1e-10)
    n_k = r.sum(0)
    ones = np.array([[sum(r[n, k] * yn[n, d] for n in range(6)) for d in range(4)] for k in range(3)])
    assert_trees_close(loc.suff_stats, ((n_k,), (ones, n_k[:, None] - ones)), rtol=1e-10)
    np.testing.assert_allclose(loc.local_terms, -np.sum(r * np.log(r)), rtol=1e-10)


def test_exact_method_is_the_conditional_given_a_sample():
    """At t(beta) of a sample, "exact" gives p(z_n = k | y_n, pi, phi) from Bayes' rule."""
    q = _random_q(jax.random.PRNGKey(2), MODEL)
    y = _binary(jax.random.PRNGKey(3), 5, 4)
    rng = np.random.default_rng(4)
    pi = rng.dirichlet(np.asarray(q[0].concentration))
    phi = rng.beta(np.asarray(q[1].concentration1), np.asarray(q[1].concentration0))
    view = ((jnp.log(pi),), (jnp.log(phi), jnp.log1p(-phi)))
    p, w, yn = np.asarray(phi), np.asarray(pi), np.asarray(y)
    joint = np.array([[w[k] * np.prod(p[k] ** yn[n] * (1 - p[k]) ** (1 - yn[n])) for k in range(3)] for n in range(5)])
    post = joint / joint.sum(1, keepdims=True)
    exact = MODEL.local_step(view, y, None, method="exact")
    np.testing.assert_allclose(exact.local_params, post, rtol=1e-9)
    assert_trees_close(exact, MODEL.local_step(view, y, None, method="meanfield"), rtol=1e-12)


def test_gibbs_local_step_is_unbiased():
    q = _random_q(jax.random.PRNGKey(6), MODEL, spread=1.0)
    y = _binary(jax.random.PRNGKey(7), 4, 4)
    view = expfam.tree_mean_params(q)
    m = 2000
    draws = jax.vmap(lambda k: MODEL.local_step(view, y, k, method="gibbs").suff_stats)(
        jax.random.split(jax.random.PRNGKey(8), m)
    )
    exact = MODEL.local_step(view, y, None).suff_stats
    for got, want in zip(jax.tree_util.tree_leaves(draws), jax.tree_util.tree_leaves(exact)):
        mean, se = np.mean(got, 0), np.std(got, 0) / np.sqrt(m)
        assert np.all(np.abs(mean - want) <= 4.5 * se + 1e-12)
    one_hot = MODEL.local_step(view, y, jax.random.PRNGKey(9), method="gibbs").local_params
    assert np.all(np.sum(one_hot, 1) == 1) and set(np.unique(one_hot)) <= {0.0, 1.0}
    with pytest.raises(ValueError, match="key"):
        MODEL.local_step(view, y, None, method="gibbs")


def test_cavi_equals_hand_computed_update():
    q0 = _random_q(jax.random.PRNGKey(10), MODEL)
    y = _binary(jax.random.PRNGKey(11), 7, 4)
    state, _ = cavi(MODEL).step(jax.random.PRNGKey(0), CAVIState(q0, jnp.zeros((), jnp.int32)), y)
    alpha = np.asarray(q0[0].concentration)
    a, b = np.asarray(q0[1].concentration1), np.asarray(q0[1].concentration0)
    lw = special.digamma(alpha) - special.digamma(alpha.sum())
    l1 = special.digamma(a) - special.digamma(a + b)
    l0 = special.digamma(b) - special.digamma(a + b)
    yn = np.asarray(y)
    logits = lw[None] + yn @ l1.T + (1 - yn) @ l0.T
    r = special.softmax(logits, axis=1)
    np.testing.assert_allclose(state.q_global[0].concentration, MODEL.alpha / 3 + r.sum(0), rtol=1e-10)
    np.testing.assert_allclose(state.q_global[1].concentration1, MODEL.a + r.T @ yn, rtol=1e-10)
    np.testing.assert_allclose(state.q_global[1].concentration0, MODEL.b + r.T @ (1 - yn), rtol=1e-10)


def test_elbo_equals_direct_expectation():
    """conjugate_elbo = E_q[log p(y, z, pi, phi)] - E_q[log q], written out term by term with scipy."""
    q = _random_q(jax.random.PRNGKey(12), MODEL)
    y = _binary(jax.random.PRNGKey(13), 5, 4)
    loc = MODEL.local_step(expfam.tree_mean_params(q), y, None)
    got = conjugate_elbo(MODEL.prior(), q, loc)
    alpha = np.asarray(q[0].concentration)
    a, b = np.asarray(q[1].concentration1), np.asarray(q[1].concentration0)
    lw = special.digamma(alpha) - special.digamma(alpha.sum())
    l1 = special.digamma(a) - special.digamma(a + b)
    l0 = special.digamma(b) - special.digamma(a + b)
    r, yn = np.asarray(loc.local_params), np.asarray(y)
    k0 = MODEL.alpha / 3
    e_log_p_pi = special.gammaln(3 * k0) - 3 * special.gammaln(k0) + (k0 - 1) * lw.sum()
    e_log_p_phi = np.sum(-special.betaln(MODEL.a, MODEL.b) + (MODEL.a - 1) * l1 + (MODEL.b - 1) * l0)
    e_log_lik = np.sum(r * (lw[None] + yn @ l1.T + (1 - yn) @ l0.T))
    entropy = -np.sum(r * np.log(r)) + stats.dirichlet(alpha).entropy() + np.sum(stats.beta(a, b).entropy())
    np.testing.assert_allclose(got, e_log_p_pi + e_log_p_phi + e_log_lik + entropy, rtol=1e-10)


def test_cavi_elbo_never_decreases():
    model = BernoulliMixture(num_components=6, dim=10, alpha=2.0)
    y = _numpy_mixture(np.random.default_rng(14), 80, 4, 10)
    alg = cavi(model)
    state = alg.init(jax.random.PRNGKey(15), y)
    step = jax.jit(alg.step)
    elbos = []
    for t in range(25):
        state, info = step(jax.random.PRNGKey(t), state, y)
        elbos.append(float(info.elbo))
    elbos = np.array(elbos)
    assert np.all(np.diff(elbos) >= -1e-10 * np.abs(elbos[1:]))
    assert elbos[-1] > elbos[0]


def test_log_predictive_is_expected_likelihood_under_q():
    """sum_k E[pi_k] prod_d E[...] (the plug-in of posterior means) = E_q[p(y | pi, phi)], by Monte Carlo."""
    q = _random_q(jax.random.PRNGKey(16), MODEL, spread=3.0)
    y = _binary(jax.random.PRNGKey(17), 3, 4)
    m, rng = 40000, np.random.default_rng(18)
    pis = rng.dirichlet(np.asarray(q[0].concentration), m)  # (m, K)
    phis = rng.beta(np.asarray(q[1].concentration1), np.asarray(q[1].concentration0), (m, 3, 4))
    yn = np.asarray(y)
    comp = np.prod(np.where(yn[None, :, None, :] == 1, phis[:, None], 1 - phis[:, None]), -1)  # (m, N, K)
    lik = np.sum(pis[:, None, :] * comp, -1)  # (m, N)
    mean, se = np.mean(lik, 0), np.std(lik, 0) / np.sqrt(m)
    got = np.exp(MODEL.log_predictive(q, y))
    assert np.all(np.abs(got - mean) <= 4.5 * se)


def test_view_with_log_zero_gives_no_nan():
    """A sampled pi_k or phi_kd that underflowed to 0 or 1 (log = -inf) must not poison the E-step."""
    q = _random_q(jax.random.PRNGKey(20), MODEL)
    (lw,), (l1, l0) = expfam.tree_mean_params(q)
    view = ((lw.at[0].set(-jnp.inf),), (l1.at[1, 0].set(-jnp.inf), l0.at[2, 1].set(-jnp.inf)))
    y = jnp.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    loc = MODEL.local_step(view, y, None, method="exact")
    r = np.asarray(loc.local_params)
    assert np.all(np.isfinite(r)) and np.all(np.isfinite(loc.local_terms))
    assert np.all(r[:, 0] == 0)  # pi_0 = 0
    assert r[0, 1] == 0 and r[2, 1] == 0  # phi_10 = 0 but y_n0 = 1
    assert r[1, 2] == 0  # 1 - phi_21 = 0 but y_11 = 0


# -- collapsed Gibbs ---------------------------------------------------------------------------
def _log_marginal(model, y, z):
    """log p(y, z) by the Dirichlet-multinomial and Beta-Bernoulli closed forms, in NumPy/SciPy."""
    k, (n, d) = model.num_components, y.shape
    ak = model.alpha / k
    counts = np.bincount(z, minlength=k)
    out = special.gammaln(model.alpha) - special.gammaln(n + model.alpha)
    out += np.sum(special.gammaln(counts + ak) - special.gammaln(ak))
    for j in range(k):
        c = y[z == j].sum(0) if counts[j] else np.zeros(d)
        out += np.sum(special.betaln(model.a + c, model.b + counts[j] - c) - special.betaln(model.a, model.b))
    return out


GIBBS_MODEL = BernoulliMixture(num_components=3, dim=4, alpha=1.2, a=0.8, b=1.5)


def _counts(model, y, z):
    z = np.asarray(z)
    counts = np.bincount(z, minlength=model.num_components).astype(float)
    ones = np.stack([y[z == j].sum(0) if counts[j] else np.zeros(y.shape[1]) for j in range(model.num_components)])
    return counts, ones


def test_collapsed_conditional_is_ratio_of_marginal_likelihoods():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, (5, 4)).astype(float)
    z = np.array([0, 2, 2, 1, 0])
    for n in range(5):
        brute = np.array([_log_marginal(GIBBS_MODEL, y, np.where(np.arange(5) == n, k, z)) for k in range(3)])
        brute -= special.logsumexp(brute)
        others = np.arange(5) != n
        counts, ones = _counts(GIBBS_MODEL, y[others], z[others])
        log_one, log_zero = np.log(ones + GIBBS_MODEL.a), np.log(counts[:, None] - ones + GIBBS_MODEL.b)
        got = gibbs.conditional_logits(
            GIBBS_MODEL, jnp.asarray(counts), jnp.asarray(log_one), jnp.asarray(log_zero), jnp.asarray(y[n])
        )
        np.testing.assert_allclose(jax.nn.log_softmax(got), brute, rtol=1e-10)
    counts, ones = _counts(GIBBS_MODEL, y, z)
    np.testing.assert_allclose(
        gibbs.collapsed_log_joint(GIBBS_MODEL, jnp.asarray(counts), jnp.asarray(ones)),
        _log_marginal(GIBBS_MODEL, y, z),
        rtol=1e-10,
    )


def test_gibbs_state_stays_consistent():
    y = _numpy_mixture(np.random.default_rng(21), 40, 5, 6)
    model = BernoulliMixture(num_components=7, dim=6, alpha=3.0)
    alg = gibbs.collapsed_gibbs(model, burn_in=2)
    state = alg.init(jax.random.PRNGKey(22), y)
    step = jax.jit(alg.step)
    for t in range(4):
        state, info = step(jax.random.PRNGKey(t), state, jnp.asarray(y))
    counts, ones = _counts(model, y, state.z)
    np.testing.assert_allclose(state.counts, counts)
    np.testing.assert_allclose(state.ones, ones)
    np.testing.assert_allclose(state.log_one, np.log(ones + model.a), rtol=1e-12)
    np.testing.assert_allclose(state.log_zero, np.log(counts[:, None] - ones + model.b), rtol=1e-12)
    np.testing.assert_allclose(info.elbo, _log_marginal(model, y, np.asarray(state.z)), rtol=1e-10)
    assert int(state.count) == 5 and int(state.num_kept) == 3  # first pass + 4 sweeps, 2 burnt
    w, p = gibbs.point_estimates(model, state)
    np.testing.assert_allclose(np.sum(w), 1.0, rtol=1e-12)
    assert np.all((p > 0) & (p < 1))


def test_gibbs_samples_the_exact_posterior():
    """Tiny problem: the frequencies of z over many independent chains match p(z | y) by enumeration."""
    y = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    model = BernoulliMixture(num_components=2, dim=3, alpha=1.0, a=0.5, b=0.5)
    configs = np.array(list(itertools.product(range(2), repeat=3)))
    log_p = np.array([_log_marginal(model, y, z) for z in configs])
    exact = np.exp(log_p - special.logsumexp(log_p))
    alg = gibbs.collapsed_gibbs(model)
    chains = 4000

    def run(key):
        k0, k1 = jax.random.split(key)
        state = alg.init(k0, jnp.asarray(y))
        state, _ = jax.lax.scan(lambda s, k: (alg.step(k, s, jnp.asarray(y))[0], None), state, jax.random.split(k1, 8))
        return state.z

    z = np.asarray(jax.jit(jax.vmap(run))(jax.random.split(jax.random.PRNGKey(23), chains)))
    index = z @ np.array([4, 2, 1])
    freq = np.bincount(index, minlength=8) / chains
    se = np.sqrt(exact * (1 - exact) / chains)
    assert np.all(np.abs(freq - exact) <= 4.5 * se + 1e-3), (freq, exact)


# -- metrics -------------------------------------------------------------------------------------
def test_mixture_log_prob_and_components_used():
    w = jnp.array([0.6, 0.4, 0.0])
    p = jnp.array([[0.9, 0.1], [0.2, 0.7], [0.5, 0.5]])
    y = jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    brute = [np.log(sum(w[k] * np.prod(p[k] ** yy * (1 - p[k]) ** (1 - yy)) for k in range(3))) for yy in np.asarray(y)]
    np.testing.assert_allclose(mixture_log_prob(w, p, y), brute, rtol=1e-12)
    np.testing.assert_allclose(
        np.sum(np.exp(mixture_log_prob(w, p, jnp.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])))),
        1.0,
        rtol=1e-12,
    )
    # (1,1): 0.6 * .9 * .1 = .054 < 0.4 * .2 * .7 = .056; (0,0): .054 < 0.4 * .8 * .3 = .096
    np.testing.assert_array_equal(map_assignments(w, p, y), [0, 1, 1, 1])
    assert components_used(w, p, y) == 2  # the weightless component is never the most probable


# -- data and bad input --------------------------------------------------------------------------
def test_generator_follows_the_model():
    k, d, n = 40, 50, 20000
    data = sample_bernoulli_mixture(jax.random.PRNGKey(28), n, k, d, alpha=30.0, a=2.0, b=0.5)
    z, y = np.asarray(data.z), np.asarray(data.y)
    assert set(np.unique(y)) <= {0.0, 1.0} and data.y.shape == (n, d)
    # phi_kd ~ Beta(a, b) and pi_k ~ Beta(alpha / K, alpha - alpha / K) (the Dirichlet's marginal)
    assert stats.kstest(np.asarray(data.probs).ravel(), stats.beta(2.0, 0.5).cdf).pvalue > 1e-3
    assert stats.kstest(np.asarray(data.weights), stats.beta(30.0 / k, 30.0 - 30.0 / k).cdf).pvalue > 1e-3
    np.testing.assert_allclose(np.sum(data.weights), 1.0, rtol=1e-12)
    freq = np.bincount(z, minlength=k) / n
    w = np.asarray(data.weights)
    assert np.all(np.abs(freq - w) <= 4.5 * np.sqrt(w * (1 - w) / n) + 1e-12)
    for j in np.unique(z):
        rows, p = y[z == j], np.asarray(data.probs[j])
        assert np.all(np.abs(rows.mean(0) - p) <= 5 * np.sqrt(p * (1 - p) / len(rows)) + 1e-12)
    again = sample_bernoulli_mixture(jax.random.PRNGKey(28), n, k, d, alpha=30.0, a=2.0, b=0.5)
    np.testing.assert_array_equal(again.y, data.y)


def test_bad_input():
    model = BernoulliMixture(num_components=3, dim=2)
    with pytest.raises(ValueError, match="y"):
        model.check_data(np.array([[0.0, 2.0]]))
    with pytest.raises(ValueError, match="y"):
        model.check_data(np.array([[0.0, 0.5]]))
    with pytest.raises(ValueError, match="y"):
        model.check_data(np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match="y"):
        model.check_data(np.zeros((4, 3)))
    model.check_data(np.array([[True, False]]))
    with pytest.raises(ValueError, match="y"):
        cavi(model).init(jax.random.PRNGKey(0), np.array([[0.0, 3.0]]))
    with pytest.raises(ValueError, match="y"):
        gibbs.collapsed_gibbs(model).init(jax.random.PRNGKey(0), np.array([[0.0, -1.0]]))
    for kwargs, name in (
        ({"num_components": 0, "dim": 2}, "num_components"),
        ({"num_components": 2, "dim": 0}, "dim"),
        ({"num_components": 2, "dim": 2, "alpha": -1.0}, "alpha"),
        ({"num_components": 2, "dim": 2, "a": 0.0}, "a"),
        ({"num_components": 2, "dim": 2, "b": float("inf")}, "b"),
    ):
        with pytest.raises(ValueError, match=name):
            BernoulliMixture(**kwargs)
    with pytest.raises(ValueError, match="method"):
        model.local_step(expfam.tree_mean_params(model.prior()), jnp.zeros((2, 2)), None, method="cvb0")
    with pytest.raises(ValueError, match="num_points"):
        sample_bernoulli_mixture(jax.random.PRNGKey(0), 0)
    with pytest.raises(ValueError, match="alpha"):
        sample_bernoulli_mixture(jax.random.PRNGKey(0), 10, alpha=0.0)
    with pytest.raises(ValueError, match="burn_in"):
        gibbs.collapsed_gibbs(model, burn_in=-1)
    with pytest.raises(ValueError, match="num_samples"):
        bernoulli_mixture_kl(
            jax.random.PRNGKey(0), jnp.ones(2) / 2, jnp.full((2, 2), 0.5), jnp.ones(2) / 2, jnp.full((2, 2), 0.5), 1
        )


def test_local_step_jits_and_vmaps_over_views():
    model = BernoulliMixture(num_components=4, dim=3)
    y = _binary(jax.random.PRNGKey(29), 5, 3)
    rng = np.random.default_rng(30)
    qs = (
        expfam.Dirichlet.from_concentration(rng.uniform(0.5, 5, (3, 4))),
        expfam.Beta.from_concentrations(rng.uniform(0.5, 5, (3, 4, 3)), rng.uniform(0.5, 5, (3, 4, 3))),
    )
    views = jax.vmap(expfam.tree_mean_params)(qs)
    out = jax.jit(jax.vmap(lambda v: model.local_step(v, y, None)))(views)
    one = model.local_step(jax.tree_util.tree_map(lambda a: a[1], views), y, None)
    assert_trees_close(jax.tree_util.tree_map(lambda a: a[1], out), one, rtol=1e-12)
