"""Globals that interact in a derived conjugate model: x ~ N(mu, 1/tau), whose log-joint holds
products of mu's and tau's statistics (Bishop 2006, Pattern Recognition and Machine Learning,
§10.1.3). CAVI updates mu and tau in turn, reports the ELBO of the q it returns (checked against
a closed form), never decreases it, stays below log p(x) (quadrature, or the Normal-Gamma
evidence) and reaches the closed-form fixed point; SVI, SSVI and SSVI-A take the natural gradient
of every global at once, checked against SVI's update and the closed-form ELBO."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.special
import scipy.stats

from vijax import expfam
from vijax.inference import make_algorithm
from vijax.models import conjugate_model

RNG = np.random.default_rng(0)
X = RNG.normal(1.0, 2.0, 20)
N = X.size
M0, V0, A0, B0 = 0.0, 10.0, 2.0, 2.0  # mu ~ N(M0, V0), tau ~ Gamma(A0, B0) (shape, rate)
LAMBDA0 = 0.5  # Bishop's prior mu | tau ~ N(M0, 1 / (LAMBDA0 tau))


def gaussian(g, x):
    """log N(x | mu, 1/tau) in t(mu) = (mu, mu^2) and t(tau) = (log tau, tau)."""
    (mu, mu2), (log_tau, tau) = g["mu"], g["tau"]
    return 0.5 * log_tau - 0.5 * jnp.log(2 * jnp.pi) - 0.5 * tau * (x**2 - 2 * x * mu + mu2)


def priors():
    return {
        "mu": expfam.Normal.from_mean_variance(jnp.asarray(M0), jnp.asarray(V0)),
        "tau": expfam.Gamma.from_shape_rate(jnp.asarray(A0), jnp.asarray(B0)),
    }


def independent_model():
    """The independent priors N(M0, V0) and Gamma(A0, B0)."""
    return conjugate_model(lambda g, l, x: gaussian(g, x), priors=priors(), example=jnp.asarray(X))


def bishop_model():
    """Bishop's prior p(mu | tau) = N(M0, 1/(LAMBDA0 tau)) couples mu and tau, so it is a term of
    the log-joint, a 1/N share per datum (the N shares add up to it exactly), in place of the
    family prior N(M0, V0) given for mu (whose share is taken off)."""

    def log_joint(g, l, x):
        (mu, mu2), (log_tau, tau) = g["mu"], g["tau"]
        square = mu2 - 2 * M0 * mu + M0**2  # E[(mu - M0)^2]
        coupled = 0.5 * (jnp.log(LAMBDA0) + log_tau - jnp.log(2 * jnp.pi)) - 0.5 * LAMBDA0 * tau * square
        family = -0.5 * jnp.log(2 * jnp.pi * V0) - 0.5 * square / V0
        return gaussian(g, x) + (coupled - family) / N

    return conjugate_model(log_joint, priors=priors(), example=jnp.asarray(X))


def elbo_of(q, bishop=False):
    """E_q[log p(x, mu, tau)] + H[q] for q(mu) q(tau) in closed form (scipy)."""
    m, v = float(q["mu"].mean), float(q["mu"].variance)
    a, b = float(q["tau"].concentration), float(q["tau"].rate)
    e_tau, e_log_tau = a / b, scipy.special.digamma(a) - np.log(b)
    e_sq = np.sum((X - m) ** 2) + N * v
    data = 0.5 * N * (e_log_tau - np.log(2 * np.pi)) - 0.5 * e_tau * e_sq
    if bishop:
        prior_mu = 0.5 * (np.log(LAMBDA0) + e_log_tau - np.log(2 * np.pi)) - 0.5 * LAMBDA0 * e_tau * ((m - M0) ** 2 + v)
    else:
        prior_mu = -0.5 * np.log(2 * np.pi * V0) - 0.5 * ((m - M0) ** 2 + v) / V0
    prior_tau = A0 * np.log(B0) - scipy.special.gammaln(A0) + (A0 - 1) * e_log_tau - B0 * e_tau
    entropy = scipy.stats.norm(m, np.sqrt(v)).entropy() + scipy.stats.gamma(a, scale=1 / b).entropy()
    return data + prior_mu + prior_tau + entropy


def log_evidence_by_quadrature():
    """log p(x) under the independent priors: tau integrated out in closed form (a Gamma
    integral), p(x | mu) = (2 pi)^(-N/2) B0^A0 Gamma(A0 + N/2) / (Gamma(A0) (B0 + S(mu)/2)^(A0 + N/2))
    with S(mu) = sum (x - mu)^2, then mu by scipy's quad (relative error 1e-12)."""
    a = A0 + N / 2

    def log_marginal(mu):
        s = np.sum((X - mu) ** 2)
        return (
            -0.5 * N * np.log(2 * np.pi)
            + A0 * np.log(B0)
            + scipy.special.gammaln(a)
            - scipy.special.gammaln(A0)
            - a * np.log(B0 + 0.5 * s)
            + scipy.stats.norm.logpdf(mu, M0, np.sqrt(V0))
        )

    shift = -log_marginal(X.mean())  # the integrand is about 1 near its mode
    value, _ = scipy.integrate.quad(
        lambda mu: np.exp(log_marginal(mu) + shift), -20, 20, epsabs=0, epsrel=1e-12, limit=200
    )
    return np.log(value) - shift


def bishop_log_evidence():
    """log p(x) of the Normal-Gamma model in closed form (its exact posterior is Normal-Gamma)."""
    xbar = X.mean()
    lam, a = LAMBDA0 + N, A0 + N / 2
    b = B0 + 0.5 * np.sum((X - xbar) ** 2) + LAMBDA0 * N * (xbar - M0) ** 2 / (2 * lam)
    return (
        scipy.special.gammaln(a)
        - scipy.special.gammaln(A0)
        + A0 * np.log(B0)
        - a * np.log(b)
        + 0.5 * np.log(LAMBDA0 / lam)
        - 0.5 * N * np.log(2 * np.pi)
    )


def independent_fixed_point():
    """The coordinate updates of q(mu) q(tau) under independent priors, iterated to convergence:
    q(mu) = N(m, 1/k), k = 1/V0 + N E[tau], m = (M0/V0 + E[tau] sum x) / k;
    q(tau) = Gamma(A0 + N/2, B0 + (sum (x - m)^2 + N/k) / 2)."""
    e_tau, a = A0 / B0, A0 + N / 2
    for _ in range(500):
        k = 1 / V0 + N * e_tau
        m = (M0 / V0 + e_tau * X.sum()) / k
        b = B0 + 0.5 * (np.sum((X - m) ** 2) + N / k)
        e_tau = a / b
    return m, 1 / k, a, b


def bishop_fixed_point():
    """Bishop (2006) eq. 10.26-10.31 at their fixed point, in closed form: mu_N =
    (LAMBDA0 M0 + N xbar) / (LAMBDA0 + N), lambda_N = (LAMBDA0 + N) E[tau], a_N = A0 + (N + 1)/2,
    b_N = B0 + E_mu[sum (x - mu)^2 + LAMBDA0 (mu - M0)^2] / 2 = c + (N + LAMBDA0) / (2 lambda_N)
    = c + b_N / (2 a_N) with c the part without 1/lambda_N, so b_N = c / (1 - 1 / (2 a_N))."""
    mu_n = (LAMBDA0 * M0 + N * X.mean()) / (LAMBDA0 + N)
    a_n = A0 + (N + 1) / 2
    c = B0 + 0.5 * (np.sum((X - mu_n) ** 2) + LAMBDA0 * (mu_n - M0) ** 2)
    b_n = c / (1 - 1 / (2 * a_n))
    lambda_n = (LAMBDA0 + N) * a_n / b_n
    return mu_n, 1 / lambda_n, a_n, b_n


def q_params(q):
    return [float(q["mu"].mean), float(q["mu"].variance), float(q["tau"].concentration), float(q["tau"].rate)]


def run_cavi(model, steps):
    alg = make_algorithm("cavi", model)
    state, step, elbos = alg.init(jax.random.key(0), jnp.asarray(X)), jax.jit(alg.step), []
    for t in range(steps):
        state, info = step(jax.random.key(t), state, jnp.asarray(X))
        elbos.append(float(info.elbo))
        yield state, np.asarray(elbos)


@pytest.mark.parametrize("bishop", [False, True], ids=["independent priors", "Bishop's prior"])
def test_cavi_reports_the_elbo_of_its_q_never_decreasing_below_the_evidence_to_the_closed_form_fixed_point(bishop):
    """Every reported ELBO is the closed-form ELBO of the returned q (1e-9 relative), never lower
    than the step before (1e-12 relative), below log p(x) (quadrature, or the exact
    Normal-Gamma evidence); after 40 steps q equals the closed-form fixed point to 1e-8."""
    model = bishop_model() if bishop else independent_model()
    assert model.global_blocks(jnp.asarray(X)) == ({"mu": True, "tau": False}, {"mu": False, "tau": True})
    for state, elbos in run_cavi(model, 40):
        np.testing.assert_allclose(elbos[-1], elbo_of(state.q_global, bishop), rtol=1e-9)
    assert np.all(np.diff(elbos) >= -1e-12 * np.abs(elbos[1:])), elbos
    assert elbos[-1] - elbos[0] > 0.5  # it did climb (from the data-dependent start)
    evidence = bishop_log_evidence() if bishop else log_evidence_by_quadrature()
    assert np.all(elbos < evidence), (elbos.max(), evidence)
    assert evidence - elbos[-1] < 0.1  # the mean-field gap of this posterior, small
    expected = bishop_fixed_point() if bishop else independent_fixed_point()
    np.testing.assert_allclose(q_params(state.q_global), expected, rtol=1e-8)


def test_svi_reports_the_elbo_of_its_q_and_reaches_the_cavi_fixed_point():
    """SVI's step is the natural gradient of every global at once (the Fisher information of
    q(mu) q(tau) is block diagonal): its reported ELBO is the closed-form ELBO of the pre-update q
    (1e-9 relative), and with the whole data set and rho = 0.5 it reaches CAVI's fixed point
    (1e-8 relative after 150 steps)."""
    alg = make_algorithm("svi", independent_model(), num_data=N, schedule=0.5)
    state, step = alg.init(jax.random.key(0), jnp.asarray(X)), jax.jit(alg.step)
    for t in range(150):
        before = state.q_global
        state, info = step(jax.random.key(t), state, jnp.asarray(X))
        if t < 3:
            np.testing.assert_allclose(float(info.elbo), elbo_of(before), rtol=1e-9)
    np.testing.assert_allclose(q_params(state.q_global), independent_fixed_point(), rtol=1e-8)


@pytest.mark.parametrize("name", ["ssvi", "ssvi_a"])
def test_ssvi_is_on_average_the_natural_gradient_step_and_its_elbo_unbiased(name):
    """Without locals the structured ELBO is the mean-field one, and tau's statistics are linear
    in the draw of mu's (and the reverse), independent of the other's draw: over 2000 draws, with
    rho = 1 on the whole data set, the mean SSVI (V-product, E[V] = I) and SSVI-A update equals
    the natural-gradient (CAVI-at-once) target lambda = eta + s(E_q[t]) in closed form, and the
    mean one-draw ELBO the closed-form ELBO, both within 5 standard errors."""
    q = {
        "mu": expfam.Normal.from_mean_variance(jnp.asarray(0.8), jnp.asarray(0.3)),
        "tau": expfam.Gamma.from_shape_rate(jnp.asarray(12.0), jnp.asarray(40.0)),
    }
    e_mu, e_mu2 = float(q["mu"].mean), float(q["mu"].mean ** 2 + q["mu"].variance)
    e_tau = float(q["tau"].concentration / q["tau"].rate)
    eta = expfam.tree_natural_params(priors())
    want = [  # eta + sum_n grad f_n: tau (x mu - mu^2 / 2) and (log tau / 2, -(x^2 - 2 x mu + mu^2) / 2)
        float(eta["mu"][0]) + e_tau * X.sum(),
        float(eta["mu"][1]) - 0.5 * N * e_tau,
        float(eta["tau"][0]) + 0.5 * N,
        float(eta["tau"][1]) - 0.5 * np.sum(X**2 - 2 * X * e_mu + e_mu2),
    ]
    alg = make_algorithm(name, independent_model(), num_data=N, schedule=1.0)
    state = alg.init(jax.random.key(0))._replace(q_global=q)
    x = jnp.asarray(X)
    new, info = jax.jit(jax.vmap(lambda k: alg.step(k, state, x)))(jax.random.split(jax.random.key(3), 2000))
    got = [new.q_global["mu"].eta1, new.q_global["mu"].eta2, new.q_global["tau"].eta1, new.q_global["tau"].eta2]
    for g, w in zip(got, want):
        mean, se = float(jnp.mean(g)), float(jnp.std(g)) / np.sqrt(g.size)
        assert abs(mean - w) <= 5 * se + 1e-9 * abs(w), (name, mean, w, se)
    mean, se = float(jnp.mean(info.elbo)), float(jnp.std(info.elbo)) / np.sqrt(info.elbo.size)
    assert abs(mean - elbo_of(q)) <= 5 * se, (mean, elbo_of(q), se)


def mixture_elbo(q, r, x):
    """The ELBO of q(mu) q(tau) prod_n q(z_n) (responsibilities r) for the mixture of the test
    below, in closed form (scipy)."""
    m, v = np.asarray(q["mu"].mean), np.asarray(q["mu"].variance)
    a, b = np.asarray(q["tau"].concentration), np.asarray(q["tau"].rate)
    e_tau, e_log_tau = a / b, scipy.special.digamma(a) - np.log(b)
    x, r = np.asarray(x)[:, None], np.asarray(r)
    per_k = 0.5 * (e_log_tau - np.log(2 * np.pi)) - 0.5 * e_tau * ((x - m) ** 2 + v) - np.log(2.0)
    prior = np.sum(-0.5 * np.log(2 * np.pi * 10.0) - 0.5 * (m**2 + v) / 10.0)
    prior += np.sum(2 * np.log(2.0) - scipy.special.gammaln(2.0) + e_log_tau - 2 * e_tau)
    entropy = np.sum(scipy.stats.norm(m, np.sqrt(v)).entropy() + scipy.stats.gamma(a, scale=1 / b).entropy())
    entropy -= np.sum(np.where(r > 0, r * np.log(np.where(r > 0, r, 1.0)), 0.0))
    return np.sum(r * per_k) + prior + entropy


@pytest.mark.slow
def test_cavi_with_locals_and_globals_that_interact_never_decreases_its_elbo():
    """A two-component mixture with a mean mu_k and a precision tau_k per component as separate
    globals (they interact) and a local assignment z: the step updates mu after a local step, then
    tau after another. Over 30 steps the reported ELBO never decreases (1e-12 relative), and it is
    the closed-form ELBO of the returned q with the second local step's locals, those at (new mu,
    old tau) (1e-9 relative); q with its own optimal locals is no lower."""
    from vijax.models import Local, conjugate_elbo

    x = jnp.asarray(np.concatenate([RNG.normal(-3.0, 0.5, 25), RNG.normal(2.0, 1.5, 25)]))

    def log_joint(g, l, x):
        (mu, mu2), (log_tau, tau), (z,) = g["mu"], g["tau"], l["z"]
        per_k = 0.5 * log_tau - 0.5 * jnp.log(2 * jnp.pi) - 0.5 * tau * (x**2 - 2 * x * mu + mu2) - jnp.log(2.0)
        return jnp.sum(z * per_k)

    model = conjugate_model(
        log_joint,
        priors={
            "mu": expfam.Normal.from_mean_variance(jnp.zeros(2), 10 * jnp.ones(2)),
            "tau": expfam.Gamma.from_shape_rate(2 * jnp.ones(2), 2 * jnp.ones(2)),
        },
        locals=lambda x: {"z": Local(expfam.Categorical.from_logits(jnp.zeros(2)))},
        example=x,
    )
    assert model.global_blocks(x) == ({"mu": True, "tau": False}, {"mu": False, "tau": True})
    alg = make_algorithm("cavi", model)
    state, step, elbos = alg.init(jax.random.key(0), x), jax.jit(alg.step), []
    for t in range(30):
        before = state.q_global
        state, info = step(jax.random.key(t), state, x)
        elbos.append(float(info.elbo))
    elbos, q = np.asarray(elbos), state.q_global
    assert np.all(np.diff(elbos) >= -1e-12 * np.abs(elbos[1:])), elbos
    assert elbos[-1] - elbos[0] > 1.0  # it did climb
    middle = {"mu": q["mu"], "tau": before["tau"]}
    r = model.local_step(expfam.tree_mean_params(middle), x).local_params["z"].probs
    np.testing.assert_allclose(elbos[-1], mixture_elbo(q, r, x), rtol=1e-9)
    fresh = conjugate_elbo(model.prior(), q, model.local_step(expfam.tree_mean_params(q), x))
    assert float(fresh) >= elbos[-1] - 1e-9 * abs(elbos[-1])
