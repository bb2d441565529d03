"""DP mixtures by stick-breaking (both truncations, Gaussian and Bernoulli components): the stick
expectations against sampling, the ELBO against Monte Carlo and against the infinite sum written
out term by term, monotone CAVI, scikit-learn's dirichlet_process BayesianGaussianMixture, SVI and
SSVI-A by name, and bad input."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow_probability.substrates.jax as tfp
from scipy import special

from vijax import expfam
from vijax.inference import cavi, make_algorithm
from vijax.models import BernoulliMixture, DiagonalGMM, DPMixture, conjugate_elbo, conjugate_posterior

tfd = tfp.distributions
TRUNCS = ("blei_jordan", "kurihara")


def _gauss_data(seed=0, n=(12, 8)):
    r = np.random.default_rng(seed)
    return np.concatenate([r.normal(-4, 0.7, (n[0], 2)), r.normal(4, 0.5, (n[1], 2))])


def _bern_data(seed=0, n=40, d=8):
    r = np.random.default_rng(seed)
    protos = np.array([[1] * (d // 2) + [0] * (d - d // 2), [0] * (d // 2) + [1] * (d - d // 2)], float)
    z = r.integers(0, 2, n)
    flip = r.random((n, d)) < 0.1
    return np.abs(protos[z] - flip)


def _model(kind, trunc, t=4, x=None, **kw):
    if kind == "gauss":
        return DPMixture.gaussian_from_data(x, t, truncation=trunc, **kw)
    return DPMixture.bernoulli(t, x.shape[1], truncation=trunc, a=0.7, b=1.3, **kw)


def _perturbed(model, q):
    """Another q than the one the responsibilities come from (the ELBO checks hold at any q)."""
    sticks = expfam.Beta.from_concentrations(q[0].concentration1 * 1.3, q[0].concentration0 + 0.4)
    return sticks, jax.tree_util.tree_map(lambda a: a * 1.05, q[1])


@pytest.mark.parametrize("trunc", TRUNCS)
def test_expected_log_weights_equal_sampled_stick_breaking(trunc):
    """E[log pi_k] = E[log v_k] + sum_{j<k} E[log(1 - v_j)], against 40000 draws of the sticks."""
    model = DPMixture.bernoulli(4, 2, alpha=1.5, truncation=trunc)
    s = model.num_sticks
    sticks = expfam.Beta.from_concentrations(jnp.linspace(1.5, 4.0, s), jnp.linspace(3.0, 0.8, s))
    v = np.random.default_rng(0).beta(np.asarray(sticks.concentration1), np.asarray(sticks.concentration0), (40000, s))
    log_1m = np.cumsum(np.log1p(-v), 1)
    log_pi = np.log(v) + np.concatenate([np.zeros((v.shape[0], 1)), log_1m[:, :-1]], 1)
    if trunc == "blei_jordan":
        log_pi = np.concatenate([log_pi, log_1m[:, -1:]], 1)  # v_T = 1
    got = np.asarray(model.expected_log_weights(sticks.mean_params()))
    se = log_pi.std(0) / np.sqrt(v.shape[0])
    assert np.all(np.abs(log_pi.mean(0) - got) < 5 * se + 1e-12), (log_pi.mean(0), got)
    # E[pi_k] (expected_weights) against the same draws; they sum to one with the tail
    w = np.asarray(model.expected_weights((sticks, None)))
    np.testing.assert_allclose(w[: log_pi.shape[1]], np.exp(log_pi).mean(0), atol=5 * np.exp(log_pi).std(0).max() / 200)
    np.testing.assert_allclose(w.sum(), 1.0, rtol=1e-12)


@pytest.mark.slow  # over CI's per-test budget; test_elbo_equals_the_sum_written_out checks this ELBO in CI
def test_blei_jordan_elbo_equals_monte_carlo():
    """ELBO = E_q[log p(x, z, v, mu, tau) - log q(z, v, mu, tau)] with TFP densities (v_T = 1)."""
    x = jnp.asarray(_gauss_data(1, (6, 4)))
    model = _model("gauss", "blei_jordan", 3, np.asarray(x), alpha=1.7)
    q0 = model.init_globals(jax.random.PRNGKey(0), x)
    loc = model.local_step(expfam.tree_mean_params(q0), x)
    q = _perturbed(model, q0)
    elbo = conjugate_elbo(model.prior(), q, loc)
    phi, n, t = loc.local_params, x.shape[0], 3
    p0 = model.prior()

    def one(key):
        k1, k2, k3 = jax.random.split(key, 3)
        v = q[0].sample(k1)
        mt = q[1].sample(k2)
        mu, tau = mt[..., 0], mt[..., 1]
        vv = jnp.concatenate([v, jnp.ones(1)])
        log_pi = jnp.log(vv) + jnp.concatenate([jnp.zeros(1), jnp.cumsum(jnp.log1p(-v))])
        z = jax.random.categorical(k3, jnp.log(phi))
        log_p = (
            jnp.sum(tfd.Beta(1.0, model.alpha).log_prob(v))
            + jnp.sum(p0[1].log_prob(mt))
            + jnp.sum(log_pi[z])
            + jnp.sum(tfd.Normal(mu[z], jax.lax.rsqrt(tau[z])).log_prob(x))
        )
        log_q = jnp.sum(q[0].log_prob(v)) + jnp.sum(q[1].log_prob(mt)) + jnp.sum(jnp.log(phi[jnp.arange(n), z]))
        return log_p - log_q

    assert phi.shape == (n, t)
    vals = jax.jit(jax.vmap(one))(jax.random.split(jax.random.PRNGKey(5), 5000))
    mean, se = float(jnp.mean(vals)), float(jnp.std(vals) / np.sqrt(vals.shape[0]))
    assert abs(mean - float(elbo)) < 5 * se, (mean, float(elbo), se)


def _hand_log_lik(kind, family, x):
    """E[log p(x_n | eta_k)] (N, K) from the family's parameters, written out by hand."""
    if kind == "gauss":
        a, b, m, kappa = (np.asarray(u) for u in (family.concentration, family.rate, family.loc, family.kappa))
        e = (
            0.5 * (special.digamma(a) - np.log(b))[None]
            - 0.5 * np.log(2 * np.pi)
            - 0.5 * (a / b)[None] * (x[:, None, :] - m[None]) ** 2
            - 0.5 / kappa[None]
        )
        return e.sum(-1)
    a, b = np.asarray(family.concentration1), np.asarray(family.concentration0)
    e_log, e_log1m = special.digamma(a) - special.digamma(a + b), special.digamma(b) - special.digamma(a + b)
    return x @ e_log.T + (1 - x) @ e_log1m.T


@pytest.mark.parametrize("kind, trunc", [("gauss", "kurihara"), ("bern", "kurihara"), ("gauss", "blei_jordan")])
def test_elbo_equals_the_sum_written_out(kind, trunc):
    """Kurihara et al.: the closed-form tail against sum_{k=1}^{T+400} r_nk (E log pi_k + E log p(x_n | eta_k)
    - log r_nk) with q = prior beyond T, each term by hand (scipy digamma), r_nk the optimal
    responsibilities of the infinite model, minus KL of the T free sticks and components. Blei and
    Jordan: the same finite sum over k <= T with E[log v_T] = 0."""
    x = _gauss_data(2, (5, 4)) if kind == "gauss" else _bern_data(2, 9, 4)
    alpha, t = 0.9, 3
    kbig = t + 400 if trunc == "kurihara" else t
    model = _model(kind, trunc, t, x, alpha=alpha)
    q0 = model.init_globals(jax.random.PRNGKey(1), jnp.asarray(x))
    loc = model.local_step(expfam.tree_mean_params(q0), jnp.asarray(x))
    q = _perturbed(model, q0)
    elbo = float(conjugate_elbo(model.prior(), q, loc))

    # the responsibilities of the infinite model at q0, by hand
    def log_pi_terms(sticks):
        a, b = np.asarray(sticks.concentration1), np.asarray(sticks.concentration0)
        a = np.concatenate([a, np.ones(kbig - t)])
        b = np.concatenate([b, np.full(kbig - t, alpha)])
        e_log_v = special.digamma(a) - special.digamma(a + b)
        e_log_1m = special.digamma(b) - special.digamma(a + b)
        if trunc == "blei_jordan":  # v_T = 1
            e_log_v, e_log_1m = np.append(e_log_v, 0.0), np.append(e_log_1m, 0.0)
        return e_log_v + np.concatenate([[0.0], np.cumsum(e_log_1m)[:-1]])

    def log_lik(comps):
        inside = _hand_log_lik(kind, comps, x)
        prior = _hand_log_lik(kind, jax.tree_util.tree_map(lambda u: u[:1], model.prior()[1]), x)
        return np.concatenate([inside, np.repeat(prior, kbig - t, 1)], 1)

    logits0 = log_pi_terms(q0[0])[None] + log_lik(q0[1])
    log_r = logits0 - special.logsumexp(logits0, 1, keepdims=True)
    r = np.exp(log_r)
    np.testing.assert_allclose(loc.local_params[:, :t], r[:, :t], rtol=1e-10, atol=1e-14)
    if trunc == "kurihara":
        np.testing.assert_allclose(loc.local_params[:, t], r[:, t:].sum(1), rtol=1e-8)
    data_term = np.sum(r * (log_pi_terms(q[0])[None] + log_lik(q[1]) - log_r))
    kl = float(expfam.tree_kl(q, model.prior()))
    np.testing.assert_allclose(elbo, data_term - kl, rtol=1e-10)


@pytest.mark.parametrize("kind, trunc", list(itertools.product(["gauss", "bern"], TRUNCS)))
def test_cavi_elbo_never_decreases(kind, trunc):
    x = jnp.asarray(_gauss_data(3) if kind == "gauss" else _bern_data(3))
    model = _model(kind, trunc, 5, np.asarray(x), alpha=2.0)
    alg = cavi(model)
    state = alg.init(jax.random.PRNGKey(4), x)
    step = jax.jit(alg.step)
    elbos = []
    for i in range(12):
        state, info = step(jax.random.PRNGKey(i), state, x)
        elbos.append(float(info.elbo))
    elbos = np.array(elbos)
    assert np.all(np.diff(elbos) >= -1e-10 * np.abs(elbos[1:])), np.diff(elbos).min()
    assert elbos[-1] > elbos[0]


def test_tutorial_closed_form_at_the_optimal_responsibilities():
    """At the optimal r the data term is sum_n log S_n (Raise your ELBO, eq. 13 and the line after),
    S_n with the tail s_{n,T+1} / (1 - exp(psi(beta) - psi(alpha + beta))), here Beta(1, alpha)."""
    x = jnp.asarray(_bern_data(5, 12, 4))
    model = DPMixture.bernoulli(3, 4, alpha=2.5, truncation="kurihara")
    q = model.init_globals(jax.random.PRNGKey(2), x)
    view = expfam.tree_mean_params(q)
    loc = model.local_step(view, x)
    elbo = conjugate_elbo(model.prior(), q, loc) + expfam.tree_kl(q, model.prior())
    y = np.asarray(x)
    log_s = np.asarray(model.expected_log_weights(view[0]))[None] + _hand_log_lik("bern", q[1], y)
    prior_ll = _hand_log_lik("bern", jax.tree_util.tree_map(lambda u: u[:1], model.prior()[1]), y)[:, 0]
    a = 2.5
    log_s_t1 = np.sum(np.asarray(view[0][1])) + special.digamma(1) - special.digamma(1 + a) + prior_ll
    s = np.exp(log_s).sum(1) + np.exp(log_s_t1) / (1 - np.exp(special.digamma(a) - special.digamma(1 + a)))
    np.testing.assert_allclose(float(elbo), np.sum(np.log(s)), rtol=1e-10)


@pytest.mark.parametrize("trunc", TRUNCS)
def test_m_step_equals_sklearn_dirichlet_process(trunc):
    """From the same responsibilities: scikit-learn's weight_concentration_ (1 + N_k, alpha + sum_{j>k} N_j)
    on every stick we keep (T - 1 for v_T = 1, all T for Kurihara et al. with no tail mass) and its
    components, to 1e-10."""
    from vijax.testing import matched_sklearn_bgmm, sklearn_to_q

    x = _gauss_data(6, (30, 20))
    t, alpha = 4, 0.7
    model = DPMixture.gaussian_from_data(x, t, alpha=alpha, truncation=trunc)
    resp = np.random.default_rng(7).dirichlet(np.ones(t), size=x.shape[0])
    est = matched_sklearn_bgmm(
        model.components,
        resp0=resp,
        max_iter=1,
        weight_concentration_prior_type="dirichlet_process",
        weight_concentration_prior=alpha,
    )
    est._check_parameters(x)
    est._initialize_parameters(x, np.random.RandomState(0))
    q = model.posterior_from_responsibilities(x, resp)
    g1, g2 = est.weight_concentration_
    s = model.num_sticks
    np.testing.assert_allclose(q[0].concentration1, g1[:s], rtol=1e-10)
    np.testing.assert_allclose(q[0].concentration0, g2[:s], rtol=1e-10)
    ng_ref = sklearn_to_q(_as_dirichlet(est))[1]
    for u, v in zip(expfam.tree_natural_params(q[1]), expfam.tree_natural_params(ng_ref)):
        np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-10)


def _as_dirichlet(est):
    """``sklearn_to_q`` reads a Dirichlet weight concentration: give it the sticks' first parameters
    (only the Normal-Gamma part is compared)."""
    import copy

    e = copy.copy(est)
    e.weight_concentration_ = np.asarray(est.weight_concentration_[0])
    return e


@pytest.mark.slow
def test_blei_jordan_fit_equals_sklearn_on_separated_clusters():
    """Full fits from the same initial responsibilities. The models differ only in the last stick
    (scikit-learn keeps q(v_T) = Beta(1 + N_T, alpha), we set v_T = 1); with T = 6 on three
    well-separated clusters the extra components empty out in both and the fits agree."""
    from vijax.testing import matched_sklearn_bgmm

    r = np.random.default_rng(8)
    x = np.concatenate([r.normal(-10, 1, (60, 2)), r.normal(0, 1, (50, 2)), r.normal(10, 1, (40, 2))])
    t, alpha = 6, 0.5
    model = DPMixture.gaussian_from_data(x, t, alpha=alpha)
    resp = np.zeros((x.shape[0], t))
    resp[np.arange(x.shape[0]), np.repeat([0, 1, 2], [60, 50, 40])] = 0.9
    resp[:, 3:] = 0.1 / 3
    est = matched_sklearn_bgmm(
        model.components,
        resp0=resp,
        max_iter=500,
        tol=1e-12,
        weight_concentration_prior_type="dirichlet_process",
        weight_concentration_prior=alpha,
    )
    est.fit(x)
    q = model.posterior_from_responsibilities(x, resp)
    xj = jnp.asarray(x)
    step = jax.jit(
        lambda q: conjugate_posterior(model.prior(), model.local_step(expfam.tree_mean_params(q), xj).suff_stats)
    )
    for _ in range(500):
        q = step(q)
    np.testing.assert_allclose(q[1].loc[:3], est.means_[:3], atol=1e-4)
    np.testing.assert_allclose(q[0].concentration1[:3], est.weight_concentration_[0][:3], rtol=1e-4)


@pytest.mark.parametrize(
    "name, kind, trunc",
    [
        pytest.param("svi", "bern", "kurihara", marks=pytest.mark.slow),
        ("ssvi_a", "bern", "blei_jordan"),
        pytest.param("svi", "gauss", "blei_jordan", marks=pytest.mark.slow),
        pytest.param("ssvi_a", "bern", "kurihara", marks=pytest.mark.slow),
    ],
)
def test_svi_and_ssvi_a_by_name_find_the_clusters(name, kind, trunc):
    """Full-batch steps by name on two separated clusters with T = 6: no component mixes the
    clusters and at most three hold two data or more (SSVI-A's draws can split a cluster, as
    Hoffman and Blei 2015, §4.2 find it uses more components than mean-field)."""
    x = jnp.asarray(_gauss_data(9, (40, 30)) if kind == "gauss" else _bern_data(9, 80, 10))
    model = _model(kind, trunc, 6, np.asarray(x), alpha=1.0)
    alg = make_algorithm(name, model, num_data=x.shape[0], schedule=0.5)
    state = alg.init(jax.random.PRNGKey(10), x)
    step = jax.jit(alg.step)
    for i in range(40):
        state, info = step(jax.random.PRNGKey(100 + i), state, x)
    assert np.isfinite(float(info.elbo))
    loc = model.local_step(expfam.tree_mean_params(state.q_global), x)
    truth = np.asarray(x[:, 0] < 0) if kind == "gauss" else np.asarray(x[:, :5].sum(1) > 2.5)  # the prototype's half
    z = np.argmax(np.asarray(loc.local_params), 1)
    assert not set(z[truth]) & set(z[~truth])  # no component mixes the two clusters
    assert 2 <= model.clusters_found(loc.local_params, min_count=2.0) <= 3


@pytest.mark.slow  # over CI's per-test budget: Normal-Gamma draws by inversion are tested in test_inversion
def test_ssvi_a_on_gaussian_components_takes_a_finite_step():
    model = DPMixture.gaussian(3, 2)  # Normal-Gamma components draw by inversion
    alg = make_algorithm("ssvi_a", model, num_data=10)
    x = jnp.asarray(np.random.default_rng(0).normal(size=(10, 2)))
    _, info = alg.step(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0), x), x)
    assert np.isfinite(float(info.elbo))


@pytest.mark.parametrize("trunc", TRUNCS)
def test_gaussian_predictive_integrates_to_one(trunc):
    """1-D: the trapezoid rule on a wide grid (Student-t components, the tail's prior predictive)."""
    model = DPMixture.gaussian(3, 1, alpha=0.8, truncation=trunc, a0=3.0, b0=2.0)
    q = model.init_globals(jax.random.PRNGKey(0), jnp.array([[-1.0], [2.0], [0.5], [4.0]]))
    grid = jnp.linspace(-80, 80, 100001)[:, None]
    dens = jnp.exp(model.log_predictive(q, grid))
    np.testing.assert_allclose(jnp.trapezoid(dens, grid[:, 0]), 1.0, rtol=1e-4)


@pytest.mark.parametrize("trunc", TRUNCS)
def test_bernoulli_predictive_sums_to_one(trunc):
    """sum over all 2^D binary vectors of p(y | q) = 1 (the tail's prior predictive included)."""
    y = _bern_data(11, 20, 4)
    model = DPMixture.bernoulli(3, 4, alpha=1.2, truncation=trunc)
    q = model.init_globals(jax.random.PRNGKey(3), jnp.asarray(y))
    grid = np.array(list(itertools.product([0.0, 1.0], repeat=4)))
    np.testing.assert_allclose(np.exp(np.asarray(model.log_predictive(q, grid))).sum(), 1.0, rtol=1e-10)


def test_truncation_one():
    """T = 1: no free stick for v_T = 1 (one component takes everything); one stick plus the tail
    for Kurihara et al."""
    y = jnp.asarray(_bern_data(12, 10, 4))
    for trunc, s in (("blei_jordan", 0), ("kurihara", 1)):
        model = DPMixture.bernoulli(1, 4, truncation=trunc)
        assert model.prior()[0].batch_shape == (s,)
        state, info = jax.jit(cavi(model).step)(jax.random.PRNGKey(1), cavi(model).init(jax.random.PRNGKey(0), y), y)
        assert np.isfinite(float(info.elbo))


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="truncation_level"):
        DPMixture.gaussian(0, 2)
    with pytest.raises(ValueError, match="truncation_level"):
        DPMixture.bernoulli(2.5, 2)
    with pytest.raises(ValueError, match="alpha"):
        DPMixture.bernoulli(3, 2, alpha=0.0)
    with pytest.raises(ValueError, match="alpha"):
        DPMixture.gaussian(3, 2, alpha=-1.0)
    with pytest.raises(ValueError, match="truncation"):
        DPMixture.bernoulli(3, 2, truncation="sethuraman")
    with pytest.raises(ValueError, match="components"):
        DPMixture("gaussian")
    with pytest.raises(ValueError, match="y"):
        DPMixture.bernoulli(3, 2).check_data(np.array([[0.0, 2.0]]))
    with pytest.raises(ValueError, match="method"):
        m = DPMixture.bernoulli(3, 2)
        m.local_step(expfam.tree_mean_params(m.prior()), jnp.zeros((2, 2)), method="gibbs")
    assert isinstance(DPMixture.bernoulli(3, 2).components, BernoulliMixture)
    assert isinstance(DPMixture.gaussian(3, 2).components, DiagonalGMM)
