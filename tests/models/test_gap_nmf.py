"""GaP-KL-NMF (Hoffman & Blei 2015, §4.3, eq. 12): the local step against a slow reference and against the
gradient of an independently written ELBO, its statistics against Monte Carlo, CAVI's ELBO, the
synthetic spectrogram generator, and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
from jax.scipy.special import digamma, gammaln

from vijax import expfam
from vijax.data._spectra import sample_speech_spectrogram, speech_like_dictionary
from vijax.inference import cavi, restarts, svi, schedules
from vijax.models._base import conjugate_elbo
from vijax.models.gap_nmf import GaPNMF

F, K, S = 12, 4, 20


def _data(key=0, s=S, f=F):
    """Counts from a small random NMF (not from the model's prior: any non-negative data will do)."""
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(key), 3)
    w = jax.random.gamma(k1, 0.5, (f, 3)) * 5.0
    h = jax.random.gamma(k2, 0.5, (3, s))
    return jax.random.poisson(k3, w @ h).astype(jnp.float64).T  # (S, F)


def _random_q(model, key=1):
    """A q(W, theta) with random, unequal shapes and rates (away from any fixed point)."""
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(key), 4)
    f, k = model.num_freqs, model.num_components
    q_w = expfam.Gamma.from_shape_rate(
        jax.random.uniform(k1, (f, k), minval=0.5, maxval=5.0), jax.random.uniform(k2, (f, k), minval=0.5, maxval=3.0)
    )
    q_t = expfam.Gamma.from_shape_rate(
        jax.random.uniform(k3, (k,), minval=0.5, maxval=5.0), jax.random.uniform(k4, (k,), minval=0.5, maxval=3.0)
    )
    return q_w, q_t


def _phi(q, gamma, rate):
    """phi_nfk ∝ exp(E log W_fk + E log theta_k + E log h_nk), formed explicitly (S, F, K)."""
    (elw, _), (elt, _) = expfam.tree_mean_params(q)
    elh = digamma(gamma) - jnp.log(rate)[None, :]
    return jax.nn.softmax(elw[None] + elt[None, None, :] + elh[:, None, :], axis=-1)


def _gamma_kl(a1, r1, a2, r2):
    """KL(Gamma(a1, r1) || Gamma(a2, r2)) written out (TFP's is 1e-7 off for shapes near 0.2)."""
    return (a1 - a2) * digamma(a1) - gammaln(a1) + gammaln(a2) + a2 * (jnp.log(r1) - jnp.log(r2)) + a1 * (r2 - r1) / r1


def _reference_elbo(model, q, y, gamma, rate, phi):
    """The mean-field ELBO written out term by term (explicit phi, closed-form Gamma KLs)."""
    (elw, ew), (elt, et) = expfam.tree_mean_params(q)
    elh, eh = digamma(gamma) - jnp.log(rate)[None, :], gamma / rate[None, :]
    z = y[..., None] * phi  # E[z_nfk]
    lik = (
        jnp.sum(z * (elw[None] + elt[None, None, :] + elh[:, None, :]))
        - jnp.sum(et[None, None, :] * ew[None] * eh[:, None, :])
        - jnp.sum(gammaln(y + 1.0))
        - jnp.sum(jnp.where(z > 0, z * jnp.log(jnp.where(phi > 0, phi, 1.0)), 0.0))
    )
    p_w, p_t = model.prior()
    kl_h = _gamma_kl(gamma, rate[None, :], model.b, model.b)
    kl_w = _gamma_kl(q[0].concentration, q[0].rate, p_w.concentration, p_w.rate)
    kl_t = _gamma_kl(q[1].concentration, q[1].rate, p_t.concentration, p_t.rate)
    return lik - jnp.sum(kl_h) - jnp.sum(kl_w) - jnp.sum(kl_t)


def _slow_local_step(model, q, y, tol=1e-12, max_iters=20000):
    """Frame by frame, in NumPy, with phi formed at every iteration (the textbook updates)."""
    (elw, _), (elt, et) = (tuple(np.asarray(a) for a in p) for p in expfam.tree_mean_params(q))
    ew = np.asarray(q[0].mean_params()[1])
    rate = model.b + et * ew.sum(0)
    logb = elw + elt[None, :]
    out = []
    for yn in np.asarray(y):
        gamma = model.b + np.full(K, yn.sum() / K)
        for _ in range(max_iters):
            logphi = logb + (scipy.special.digamma(gamma) - np.log(rate))[None, :]
            phi = np.exp(logphi - logphi.max(1, keepdims=True))
            phi /= phi.sum(1, keepdims=True)
            new = model.b + yn @ phi
            done = np.max(np.abs(new - gamma)) < tol * np.mean(new)
            gamma = new
            if done:
                break
        out.append(gamma)
    return np.array(out), rate


@pytest.fixture(scope="module")
def setup():
    model = GaPNMF(K, F, tol=1e-13, max_iters=20000)
    y = _data()
    q = _random_q(model)
    loc = model.local_step(expfam.tree_mean_params(q), y)
    return model, y, q, loc


def test_prior_is_eq_12():
    model = GaPNMF(10, 7)  # the paper's a = 0.25, b = 0.2, alpha = 1, c = 1
    p_w, p_t = model.prior()
    assert p_w.batch_shape == (7, 10) and p_t.batch_shape == (10,)
    np.testing.assert_allclose(p_w.concentration, 0.25)
    np.testing.assert_allclose(p_w.rate, 0.25)
    np.testing.assert_allclose(p_t.concentration, 1.0 / 10)  # alpha / K
    np.testing.assert_allclose(p_t.rate, 1.0)  # alpha c
    p_t2 = GaPNMF(10, 7, alpha=2.0, c=3.0).prior()[1]
    np.testing.assert_allclose(p_t2.concentration, 0.2)
    np.testing.assert_allclose(p_t2.rate, 6.0)


@pytest.mark.slow
def test_local_fixed_point_matches_slow_reference(setup):
    model, y, q, loc = setup
    gamma_ref, rate_ref = _slow_local_step(model, q, y)
    np.testing.assert_allclose(loc.local_params.concentration, gamma_ref, rtol=1e-8)
    np.testing.assert_allclose(loc.local_params.rate, np.broadcast_to(rate_ref, (S, K)), rtol=1e-12)


def test_local_step_is_coordinate_optimal(setup):
    """d ELBO / d (gamma, log r) = 0 at the returned q(h) with phi at its optimum (envelope), and
    d ELBO / d (phi logits) = 0 with q(h) held: the fixed point is a stationary point of the ELBO."""
    model, y, q, loc = setup
    gamma, rate = loc.local_params.concentration, loc.local_params.rate[0]

    def l_h(log_gamma, log_rate):
        phi = jax.lax.stop_gradient(_phi(q, jnp.exp(log_gamma), jnp.exp(log_rate)))
        return _reference_elbo(model, q, y, jnp.exp(log_gamma), jnp.exp(log_rate), phi)

    lg, lr = jnp.log(gamma), jnp.log(rate)
    grad_h = jax.jit(jax.grad(l_h, argnums=(0, 1)))
    g_gamma, g_rate = grad_h(lg, lr)
    away = grad_h(lg + 0.1, lr + 0.1)  # the gradient away from the fixed point
    assert min(float(jnp.max(jnp.abs(g))) for g in away) > 0.1
    assert float(jnp.max(jnp.abs(g_gamma))) < 1e-6
    assert float(jnp.max(jnp.abs(g_rate))) < 1e-6

    logits0 = jnp.log(_phi(q, gamma, rate))
    g_phi = jax.jit(jax.grad(lambda lg: _reference_elbo(model, q, y, gamma, rate, jax.nn.softmax(lg, -1))))(logits0)
    assert float(jnp.max(jnp.abs(g_phi))) < 1e-8 * float(jnp.max(y))


def test_conjugate_elbo_is_the_mean_field_elbo(setup):
    """<s, E t> + local_terms - KL equals the term-by-term ELBO (the product term counted once)."""
    model, y, q, loc = setup
    gamma, rate = loc.local_params.concentration, loc.local_params.rate[0]
    ref = _reference_elbo(model, q, y, gamma, rate, _phi(q, gamma, rate))
    np.testing.assert_allclose(conjugate_elbo(model.prior(), q, loc), ref, rtol=1e-11)
    np.testing.assert_allclose(model.elbo(q, y), ref, rtol=1e-11)


def test_global_targets_are_coordinate_optima(setup):
    """eta_W + s_W maximises the ELBO over q(W) with q(theta) and the locals held (and likewise
    for theta): the gradient of the reference ELBO in q(W)'s natural parameters vanishes there."""
    model, y, q, loc = setup
    gamma, rate = loc.local_params.concentration, loc.local_params.rate[0]
    phi = _phi(q, gamma, rate)
    eta_w, eta_t = expfam.tree_natural_params(model.prior())
    (s_w, s_t) = loc.suff_stats
    new_w = tuple(e + s for e, s in zip(eta_w, s_w))
    new_t = tuple(e + s for e, s in zip(eta_t, s_t))

    def l_w(nat):
        return _reference_elbo(model, (expfam.Gamma(*nat), q[1]), y, gamma, rate, phi)

    def l_t(nat):
        return _reference_elbo(model, (q[0], expfam.Gamma(*nat)), y, gamma, rate, phi)

    for fn, opt, old in ((l_w, new_w, q[0].natural_params), (l_t, new_t, q[1].natural_params)):
        g_opt = jax.grad(fn)(opt)
        g_old = jax.grad(fn)(old)
        big = max(float(jnp.max(jnp.abs(g))) for g in g_old)
        assert big > 1e-2
        assert max(float(jnp.max(jnp.abs(g))) for g in g_opt) < 1e-7 * big


def test_suff_stats_match_monte_carlo(setup):
    """s_W = (sum_n E z, -E theta sum_n E h), s_theta = (sum_fn E z, -sum_f E W sum_n E h), by
    drawing z_nf ~ Multinomial(y_nf, phi_nf) and h ~ q(h): every entry within 5 standard errors
    (computed from the exact variances: binomial y phi (1 - phi) summed over n, gamma / r^2)."""
    model, y, q, loc = setup
    gamma, rate = np.asarray(loc.local_params.concentration), np.asarray(loc.local_params.rate[0])
    phi = np.asarray(_phi(q, jnp.asarray(gamma), jnp.asarray(rate)))
    (_, ew), (_, et) = expfam.tree_mean_params(q)
    ew, et = np.asarray(ew), np.asarray(et)
    rng = np.random.default_rng(0)
    draws = 2000
    yi = np.asarray(y).astype(int)
    z_w = np.array([rng.multinomial(yi, phi).sum(0) for _ in range(draws)])  # (draws, F, K)
    hs = rng.gamma(gamma, 1.0 / rate[None, :], size=(draws, S, K)).sum(1)  # (draws, K)
    var_z = np.sum(yi[..., None] * phi * (1 - phi), axis=0)  # (F, K); the z_fk of one n are independent over n
    var_zt = np.sum(var_z, 0)  # z_:k summed over the independent cells (n, f)
    var_h = np.sum(gamma / rate[None, :] ** 2, axis=0)  # (K,)
    (s_w, s_t) = loc.suff_stats
    checks = [
        (z_w.mean(0), s_w[0], var_z),
        (-et[None, :] * hs.mean(0)[None, :], s_w[1], et[None, :] ** 2 * var_h[None, :] * np.ones((F, 1))),
        (z_w.sum(1).mean(0), s_t[0], var_zt),
        (-ew.sum(0) * hs.mean(0), s_t[1], ew.sum(0) ** 2 * var_h),
    ]
    for i, (mc, exact, var) in enumerate(checks):
        se = np.sqrt(var / draws)
        assert np.all(np.abs(mc - np.asarray(exact)) <= 5 * se + 1e-12), i


@pytest.mark.slow
def test_cavi_elbo_never_decreases():
    """The generic CAVI step updates W and theta together (a Jacobi step, see docs/gap_nmf.md);
    on this problem both its reported ELBO and the exact ELBO of each new q never decrease
    (20 steps, float64), and the two agree once the steps become small."""
    model, y = GaPNMF(6, F), _data(3, s=30)  # one model and shape for these tests: one compilation
    alg = cavi(model)
    state = alg.init(jax.random.PRNGKey(0), y)
    step, elbo = jax.jit(alg.step), jax.jit(model.elbo)
    reported, exact = [], [float(elbo(state.q_global, y))]
    for i in range(20):
        state, info = step(jax.random.PRNGKey(i), state, y)
        reported.append(float(info.elbo))
        exact.append(float(elbo(state.q_global, y)))
    for trace in (reported, exact):
        assert np.all(np.diff(trace) >= -1e-9 * abs(trace[-1])), np.diff(trace).min()
    assert exact[-1] > exact[0] + 10.0
    np.testing.assert_allclose(reported[-1], exact[-1], rtol=1e-3)


@pytest.mark.slow  # over CI's per-test budget: each block's update is checked to be its coordinate optimum in CI
def test_block_coordinate_ascent_is_monotone():
    """Locals, then q(W) alone, then locals, then q(theta) alone: each move is an exact coordinate
    optimum, so the exact ELBO rises at every move (the guaranteed-monotone mean-field schedule)."""
    model, y = GaPNMF(6, F), _data(3, s=30)
    q = model.init_globals(jax.random.PRNGKey(1), y)
    eta_w, eta_t = expfam.tree_natural_params(model.prior())
    elbo = jax.jit(model.elbo)
    suff_stats = jax.jit(lambda q, y: model.local_step(expfam.tree_mean_params(q), y).suff_stats)
    values = [float(elbo(q, y))]
    for _ in range(8):
        for block in (0, 1):
            s = suff_stats(q, y)[block]
            eta = (eta_w, eta_t)[block]
            new = expfam.Gamma(*(e + st for e, st in zip(eta, s)))
            q = (new, q[1]) if block == 0 else (q[0], new)
            values.append(float(elbo(q, y)))
    assert np.all(np.diff(values) >= -1e-9 * abs(values[-1])), np.diff(values).min()
    assert values[-1] > values[0]


@pytest.mark.slow  # over CI's per-test budget: the conjugate ELBO is checked against the mean-field one in CI
def test_svi_reports_the_exact_elbo_and_runs_under_vmap():
    model, y = GaPNMF(6, F), _data(3, s=30)
    alg = svi(model, num_data=30, schedule=schedules.robbins_monro(1.0, tau=2.0, kappa=0.7))
    state = alg.init(jax.random.PRNGKey(0), y)
    q0 = state.q_global
    state, info = jax.jit(alg.step)(jax.random.PRNGKey(1), state, y)
    np.testing.assert_allclose(info.elbo, model.elbo(q0, y), rtol=1e-10)  # at the pre-update q
    par = restarts(cavi(model), 3)
    st = par.init(jax.random.PRNGKey(2), y)
    st, info = jax.jit(par.step)(jax.random.PRNGKey(3), st, y)
    assert info.elbo.shape == (3,) and np.all(np.isfinite(info.elbo))
    assert len(np.unique(np.asarray(info.elbo))) == 3


def test_sampled_view_with_zero_draws_is_finite():
    """SSVI passes t of a draw; theta ~ Gamma(alpha/K, .) draws underflow to 0 (log = -inf):
    such components get no counts and the statistics stay finite."""
    model = GaPNMF(K, F)
    y = _data(6)
    w = jax.random.gamma(jax.random.PRNGKey(0), 1.0, (F, K))
    theta = jnp.array([2.0, 0.0, 1.0, 0.0])
    with np.errstate(divide="ignore"):
        view = ((jnp.log(w), w), (jnp.log(theta), theta))
    loc = model.local_step(view, y)
    for leaf in jax.tree_util.tree_leaves(loc):
        assert np.all(np.isfinite(np.asarray(leaf)))
    np.testing.assert_allclose(loc.suff_stats[1][0][jnp.array([1, 3])], 0.0, atol=1e-12)
    np.testing.assert_allclose(jnp.sum(loc.suff_stats[1][0]), jnp.sum(y), rtol=1e-10)  # every count allocated


@pytest.mark.parametrize(
    "bad",
    [
        lambda y: y.at[0, 0].set(-1.0),
        lambda y: y.at[1, 2].set(jnp.nan),
        lambda y: y.at[0, 1].set(jnp.inf),
        lambda y: y[:, :-1],
        lambda y: y[0],
        lambda y: y[:0],
    ],
)
def test_bad_spectrogram_raises(bad):
    model = GaPNMF(K, F)
    with pytest.raises(ValueError, match="batch"):
        model.check_data(bad(_data()))
    with pytest.raises(ValueError, match="batch"):
        cavi(model).init(jax.random.PRNGKey(0), bad(_data()))


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"a": 0.0}, "a"),
        ({"b": -1.0}, "b"),
        ({"alpha": jnp.nan}, "alpha"),
        ({"c": 0.0}, "c"),
        ({"num_components": 0}, "num_components"),
        ({"tol": -1.0}, "tol"),
        ({"max_iters": 0}, "max_iters"),
        ({"dtype": "int32"}, "dtype"),
    ],
)
def test_bad_hyperparameters_raise(kw, name):
    args = {"num_components": K, "num_freqs": F, **kw}
    with pytest.raises(ValueError, match=name):
        GaPNMF(**args)


def test_bad_view_and_method_raise():
    model = GaPNMF(K, F)
    view = expfam.tree_mean_params(_random_q(model))
    with pytest.raises(ValueError, match="globals_view"):
        model.local_step((view[0], (view[1][0][:-1], view[1][1])), _data())
    with pytest.raises(ValueError, match="gibbs"):
        model.local_step(view, _data(), method="gibbs")


# ---------------------------------------------------------------------------------- the data
def test_speech_dictionary_is_harmonic():
    """Every column peaks at ``peak``, is positive, and is a comb: at the bins nearest the
    partials j f0 below 4 kHz that stand above the floor, it is typically over 10 times larger
    than halfway between them."""
    w, f0 = speech_like_dictionary(jax.random.PRNGKey(0), 257, 20, peak=7.0)
    w, f0 = np.asarray(w), np.asarray(f0)
    assert w.shape == (257, 20) and np.all(w > 0)
    np.testing.assert_allclose(w.max(0), 7.0, rtol=1e-12)
    assert np.all((f0 >= 90.0) & (f0 <= 260.0))
    bin_hz = 8000.0 / 256
    for k in range(20):
        j = np.arange(1, int(4000 / f0[k]))
        on = w[np.round(j * f0[k] / bin_hz).astype(int), k]
        off = w[np.round((j + 0.5) * f0[k] / bin_hz).astype(int), k]
        audible = on > 0.01 * 7.0  # above the -50 dB floor, where the comb shows
        assert audible.sum() >= 3
        assert np.median(on[audible] / off[audible]) > 10.0
    c = np.corrcoef(w.T)
    assert np.median(c[np.triu_indices(20, 1)]) < 0.5  # columns are distinguishable


def test_speech_spectrogram_moments():
    """H ~ Gamma(0.2, 0.2): mean 1, variance 5; Y ~ Poisson(W H): E[Y - W H] = 0 and
    Var[Y - WH] = E[WH], checked within 5 standard errors."""
    d = sample_speech_spectrogram(jax.random.PRNGKey(1), 5, 8, 3000)
    y, w, h = (np.asarray(a) for a in (d.y, d.w, d.h))
    assert y.shape == (5, 3000) and w.shape == (5, 8) and h.shape == (8, 3000)
    assert np.all(y == np.round(y)) and np.all(y >= 0)
    n = h.size
    assert abs(h.mean() - 1.0) < 5 * h.std() / np.sqrt(n)
    assert abs(h.var() - 5.0) < 0.15 * 5.0  # the variance of a Gamma(0.2) sample variance is large; 15%
    lam = w @ h
    resid = (y - lam) / np.sqrt(np.maximum(lam, 1e-12))
    mask = lam > 1.0
    assert abs(resid[mask].mean()) < 5 / np.sqrt(mask.sum())
    assert abs(resid[mask].var() - 1.0) < 0.05
    d2 = sample_speech_spectrogram(jax.random.PRNGKey(1), 5, 8, 3000)
    np.testing.assert_array_equal(np.asarray(d2.y), y)  # a function of the key


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"num_freqs": 1}, "num_freqs"),
        ({"num_atoms": 0}, "num_atoms"),
        ({"num_frames": 0}, "num_frames"),
        ({"shape": 0.0}, "shape"),
        ({"rate": -1.0}, "rate"),
        ({"peak": 0.0}, "peak"),
    ],
)
def test_spectrogram_bad_arguments_raise(kw, name):
    with pytest.raises(ValueError, match=name):
        sample_speech_spectrogram(jax.random.PRNGKey(0), **kw)
