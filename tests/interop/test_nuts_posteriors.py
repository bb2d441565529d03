"""NumPyro models as users write them, fitted by vijax and compared with NumPyro's own NUTS on the
same model: eight schools (non-centred), a hierarchical Poisson model whose Gamma sites
``conjugate_sites`` finds and ``conjugate_split`` fits in closed form, and a logistic regression
(against exact moments by quadrature too). Slow: each runs NUTS (compiling it is most of the time).

Tolerances. NUTS' moments carry a Monte Carlo standard error sd / sqrt(ESS) (checked below 0.05 sd
for the means; the sd's own relative error is about 1 / sqrt(2 ESS), under 3%), and q's moments
come from 20,000 independent draws (0.007 sd). Beyond that the gap is q's family: a Gaussian on the
unconstrained space cannot hold a skewed or heavy-tailed posterior (the scale of eight schools), and
a mean-field q, as the conjugate split's is between its sites, under-disperses wherever the
posterior correlates its factors (Blei, Kucukelbir and McAuliffe 2017, *Variational Inference: A
Review for Statisticians*, §1 and §2.3, Figure 1: variational inference generally underestimates
the posterior variance). Each test states its bounds and the figures measured: in the suite's
settings, and over three fits and three NUTS runs with other keys ("spread")."""

import pytest

numpyro = pytest.importorskip("numpyro")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
import optax  # noqa: E402

import vijax  # noqa: E402
from numpyro.diagnostics import effective_sample_size, split_gelman_rubin  # noqa: E402

from vijax.inference import bbvi, conjugate_split, sample, schedules  # noqa: E402

from tests.interop._models import SIGMA, Y, eight_schools  # noqa: E402

VI_DRAWS = 20_000


def _nuts(model, *args, seed, warmup=500, samples=1000, chains=2, target_accept=0.8):
    """NumPyro NUTS on the model itself: its draws by site, (chains, draws, ...), and the number of
    divergent transitions."""
    from numpyro.infer import MCMC, NUTS

    mcmc = MCMC(
        NUTS(model, target_accept_prob=target_accept),
        num_warmup=warmup,
        num_samples=samples,
        num_chains=chains,
        chain_method="vectorized",
        progress_bar=False,
    )
    with jax.numpy_rank_promotion("allow"):  # NumPyro's code broadcasts by it
        mcmc.run(jax.random.PRNGKey(seed), *args, extra_fields=("diverging",))
    by_chain = {n: np.asarray(v, np.float64) for n, v in mcmc.get_samples(group_by_chain=True).items()}
    return by_chain, int(np.sum(mcmc.get_extra_fields()["diverging"]))


def _fit(alg, num_steps, seed):
    """``num_steps`` steps of ``alg`` in one compiled scan; then VI_DRAWS draws of q (constrained)."""

    def run(key):
        k_init, k_steps, k_draws = jax.random.split(key, 3)
        state = alg.init(k_init)
        state, elbos = jax.lax.scan(lambda s, k: alg.step(k, s, None)[:2], state, jax.random.split(k_steps, num_steps))
        return state, sample(alg, k_draws, state, VI_DRAWS)

    state, draws = jax.jit(run)(jax.random.PRNGKey(seed))
    return state, {n: np.asarray(v, np.float64) for n, v in draws.items()}


def _compare(name, vi, by_chain):
    """(mean_q - mean_NUTS) / sd_NUTS, sd_q / sd_NUTS and NUTS' MCSE / sd = 1 / sqrt(ESS), per
    element of a site, after checking NUTS' R-hat (< 1.01) and MCSE (< 0.05 sd)."""
    ref = by_chain.reshape((-1,) + by_chain.shape[2:])
    mcse = 1.0 / np.sqrt(np.asarray(effective_sample_size(by_chain), np.float64))
    rhat = np.asarray(split_gelman_rubin(by_chain), np.float64)
    m, s = ref.mean(0), ref.std(0)
    dz = (vi.mean(0) - m) / s
    ratio = vi.std(0) / s
    for i in np.ndindex(np.shape(m)):
        label = name + ("" if not i else str(list(i)))
        print(
            f"{label:16s} vijax {vi.mean(0)[i]:8.3f} ({vi.std(0)[i]:6.3f})  NUTS {m[i]:8.3f} ({s[i]:6.3f})"
            f"  dz {dz[i]:+.3f}  sd ratio {ratio[i]:.3f}  mcse/sd {mcse[i]:.3f}"
        )
    assert np.all(rhat < 1.01) and np.all(mcse < 0.05), (name, rhat, mcse)
    return np.atleast_1d(dz), np.atleast_1d(ratio)


# ---- eight schools --------------------------------------------------------------------------------


@pytest.mark.slow
def test_eight_schools_full_rank_against_nuts():
    """Non-centred eight schools, full-rank Gaussian on (mu, log tau, theta_tilde) by bbvi (Adam, cosine
    decay from 0.02, 4000 steps, 16 draws) against NUTS (2 chains x 1000 after 500 warmup,
    target_accept 0.9). Bounds: mu, theta_tilde and theta = mu + tau theta_tilde within 0.2 sd of
    NUTS in mean with sd ratios in [0.85, 1.15]; tau, whose log is skewed (a Gaussian in log tau
    cannot hold it), within 0.3 sd, sd ratio in [0.7, 1.1].

    Measured: mu, theta_tilde and theta within 0.08 sd, sd ratios 0.95-1.10 (spread: within 0.13
    sd, 0.90-1.10); tau 0.13 sd low, sd ratio 0.88 (spread: 0.12-0.21 sd low, 0.78-0.87): the
    Gaussian's known shortfall on the scale (as for bbvi's eight-schools experiment against a
    long NUTS run). NUTS: no divergent transition, MCSE 0.020-0.024 sd."""
    target = vijax.from_numpyro(eight_schools, SIGMA, Y)
    schedule = optax.cosine_decay_schedule(0.02, 4000, alpha=0.05)
    alg = bbvi(target, family="fullrank", schedule=schedule, num_samples=16)
    _, vi = _fit(alg, 4000, 0)
    nuts, divergences = _nuts(eight_schools, SIGMA, Y, seed=1, target_accept=0.9)
    print("divergences", divergences)
    assert divergences <= 5, divergences  # the non-centred form: few or none
    vi["theta"] = vi["mu"][:, None] + vi["tau"][:, None] * vi["theta_tilde"]
    nuts["theta"] = nuts["mu"][..., None] + nuts["tau"][..., None] * nuts["theta_tilde"]
    for site in ("mu", "tau", "theta_tilde", "theta"):
        dz, ratio = _compare(site, vi[site], nuts[site])
        mean_tol, band = (0.3, (0.7, 1.1)) if site == "tau" else (0.2, (0.85, 1.15))
        assert np.all(np.abs(dz) < mean_tol), (site, dz)
        assert np.all((band[0] < ratio) & (ratio < band[1])), (site, ratio)


# ---- hierarchical Poisson: the Gamma sites in closed form -----------------------------------------

A, A0, B0 = 2.0, 3.0, 1.5
G = 5
_rng = np.random.default_rng(20)
GROUP = jnp.asarray(np.repeat(np.arange(G), 8))
XP = jnp.asarray(_rng.normal(size=GROUP.shape[0]))
COUNTS = jnp.asarray(_rng.poisson(_rng.gamma(A, 1.0, size=G)[GROUP] * np.exp(0.4 * XP)), jnp.float64)


def poisson_rates(x, group, y):
    """Per-group Gamma(A, b) rates, b ~ Gamma(A0, B0), and a covariate's effect w through exp(w x):
    b and the rates are conditionally conjugate, w is not."""
    b = numpyro.sample("b", dist.Gamma(A0, B0))
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("groups", G):
        rates = numpyro.sample("rates", dist.Gamma(A, b))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Poisson(rates[group] * jnp.exp(w * x)), obs=y)


def _mean_field_optimum(x, group, y):
    """The exact mean-field optimum of poisson_rates over q(b) q(rates) q(w), q(w) Gaussian: the
    closed-form Gamma updates of b and the rates (E_q[exp(w x)] = exp(m x + s^2 x^2 / 2) for
    q(w) = N(m, s^2)) alternated with q(w)'s Gaussian maximising the ELBO (scipy), to the fixed
    point. Returns {site: (mean, sd)}."""
    from scipy.optimize import minimize

    x, group, y = (np.asarray(v, np.float64) for v in (x, group, y))
    group = group.astype(int)
    sums = np.bincount(group, weights=y, minlength=G)
    mean_b, m, s = A0 / B0, 0.0, 0.1
    for _ in range(200):
        rate = mean_b + np.bincount(group, weights=np.exp(m * x + s * s * x * x / 2), minlength=G)
        mean_rates = (A + sums) / rate
        b_rate = B0 + mean_rates.sum()
        mean_b = (A0 + G * A) / b_rate

        def neg_elbo(p, r=mean_rates[group]):  # -(E_q[log p(y, w | rates)] + H[q(w)]), up to constants
            m, log_s = p
            v = np.exp(2 * log_s)
            return -np.sum(y * m * x) + np.sum(r * np.exp(m * x + v * x * x / 2)) + (m * m + v) / 2 - log_s

        m, log_s = minimize(neg_elbo, [m, np.log(s)], method="BFGS", options={"gtol": 1e-10}).x
        s = float(np.exp(log_s))
    return {"b": (mean_b, np.sqrt(A0 + G * A) / b_rate), "w": (m, s), "rates": (mean_rates, np.sqrt(A + sums) / rate)}


@pytest.mark.slow
def test_hierarchical_poisson_conjugate_split_against_nuts():
    """conjugate_sites finds b and the rates conjugate and w not; conjugate_split fits b and the
    rates in closed form (64 draws of the others per update, rho_t Robbins-Monro: the update's
    E_q[exp(w x)] is a Monte Carlo average, and rho_t averages its noise out) and w by bbvi (Adam,
    cosine decay from 0.05, 2000 steps, 8 draws). NUTS: 2 chains x 1000 after 500 warmup.

    Against the exact mean-field optimum (_mean_field_optimum): q's means and sds within 0.05 of its
    sds; the rates' q in the complete conditional's form, Gamma(A + sum_g y, E_q[b] + sum_g
    E_q[exp(w x)]), b's Gamma(A0 + G A, B0 + sum E_q[rates]): the concentrations exact, the rates
    within 1% of the optimum's.
    Against NUTS: means within 0.15 sd, sd ratios in [0.85, 1.1]. The mean-field optimum itself is
    narrower than the posterior where the posterior correlates the factors (b with the rates);
    NUTS' rates' means agree with their Rao-Blackwellised estimate E[(A + sum_g y) / (b + sum_g
    exp(w x))] over NUTS' draws of b and w within 4 MCSE (a check of the reference).

    Measured: against the mean-field optimum within 0.011 sd, sds within 1.2% (spread: 0.020 sd,
    1.3%), the conjugate sites' rates within 0.07% of the optimum's; against NUTS within 0.05 sd,
    sd ratios b 0.90, w 0.95, rates 0.93-0.99 (spread: within 0.066 sd, 0.91-1.02): the mean-field
    shortfall, the optimum's own. NUTS' plain rates' means
    within 2.1 MCSE of the Rao-Blackwellised ones. With rho_t = 1 (the default, for exact
    conditionals) and a constant Adam rate of 0.02, w's q ended 0.3 sd from the optimum: the
    64-draw update and Adam's steps jitter around it, which the decreasing steps remove."""
    target = vijax.from_numpyro(poisson_rates, XP, GROUP, COUNTS)
    report = vijax.conjugate_sites(target, jax.random.PRNGKey(0))
    assert {n: s.conjugate for n, s in report.items()} == {"b": True, "w": False, "rates": True}
    alg = conjugate_split(
        target,
        report,
        schedule=schedules.robbins_monro(1.0, tau=1.0, kappa=0.7),
        num_draws=64,
        learning_rate=optax.cosine_decay_schedule(0.05, 2000, alpha=0.01),
        num_samples=8,
    )
    state, vi = _fit(alg, 2000, 0)
    # against the exact mean-field optimum
    optimum = _mean_field_optimum(XP, GROUP, COUNTS)
    sums = np.bincount(np.asarray(GROUP), weights=np.asarray(COUNTS), minlength=G)
    q_rates, q_b = state.q_global["rates"], state.q_global["b"]
    np.testing.assert_allclose(q_rates.concentration, A + sums, rtol=1e-9)
    np.testing.assert_allclose(q_b.concentration, A0 + G * A, rtol=1e-9)
    rate = (A + sums) / optimum["rates"][0]  # the optimum's E_q[b] + sum_g E_q[exp(w x)]
    print("rates' q rate", np.asarray(q_rates.rate), "at the optimum", rate)
    np.testing.assert_allclose(q_rates.rate, rate, rtol=0.01)
    np.testing.assert_allclose(q_b.rate, (A0 + G * A) / optimum["b"][0], rtol=0.01)
    for site, (m, s) in optimum.items():
        dz, ratio = (vi[site].mean(0) - m) / s, vi[site].std(0) / s
        print(f"{site:6s} mean-field optimum {np.round(m, 3)} ({np.round(s, 3)})", f"dz {dz} sd ratio {ratio}")
        assert np.all(np.abs(dz) < 0.05) and np.all(np.abs(ratio - 1.0) < 0.05), (site, dz, ratio)
    # against NUTS
    nuts, divergences = _nuts(poisson_rates, XP, GROUP, COUNTS, seed=1)
    assert divergences == 0, divergences
    for site in ("b", "w", "rates"):
        dz, ratio = _compare(site, vi[site], nuts[site])
        assert np.all(np.abs(dz) < 0.15), (site, dz)
        assert np.all((0.85 < ratio) & (ratio < 1.1)), (site, ratio)
    flat = {n: v.reshape((-1,) + v.shape[2:]) for n, v in nuts.items()}
    onehot = np.asarray(GROUP)[:, None] == np.arange(G)
    c = flat["b"][:, None] + np.exp(flat["w"][:, None] * np.asarray(XP)) @ onehot  # the conditional's rate
    rao_blackwell = ((A + sums) / c).mean(0)
    mcse = flat["rates"].std(0) / np.sqrt(effective_sample_size(nuts["rates"]))
    print("rates: NUTS", flat["rates"].mean(0), "Rao-Blackwellised", rao_blackwell, "MCSE", mcse)
    assert np.all(np.abs(flat["rates"].mean(0) - rao_blackwell) < 4 * mcse)


# ---- logistic regression ---------------------------------------------------------------------------

_rng = np.random.default_rng(21)
_Z = _rng.normal(size=(100, 2))
XL = jnp.asarray(np.column_stack([np.ones(100), _Z[:, 0], 0.8 * _Z[:, 0] + 0.6 * _Z[:, 1]]))  # correlated covariates
LABELS = jnp.asarray(_rng.random(100) < 1 / (1 + np.exp(-(XL @ np.array([-0.5, 1.0, 0.5])))), jnp.float64)


def logistic(x, y):
    w = numpyro.sample("w", dist.Normal(jnp.zeros(x.shape[1]), 2.0).to_event(1))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=x @ w), obs=y)


def _quadrature_moments(x, y, centre, cov, num=61, half_width=8.0):
    """The posterior's mean and sd of w by the trapezoidal rule on a num^3 grid in whitened
    coordinates (centre + L u, L L^T = cov, u in [-half_width, half_width]^3): the integrand decays
    like a Gaussian, so the rule's error is far below the Monte Carlo errors compared."""
    x, y = np.asarray(x), np.asarray(y)
    u = np.linspace(-half_width, half_width, num)
    grid = np.stack(np.meshgrid(u, u, u, indexing="ij"), -1).reshape(-1, 3)
    w = centre + grid @ np.linalg.cholesky(cov).T
    logits = w @ x.T
    log_p = np.sum(y * logits - np.logaddexp(0.0, logits), axis=1) - np.sum(w * w, axis=1) / (2 * 2.0**2)
    p = np.exp(log_p - log_p.max())
    p /= p.sum()
    mean = p @ w
    return mean, np.sqrt(p @ (w - mean) ** 2)


@pytest.mark.slow
def test_logistic_regression_full_rank_against_nuts_and_quadrature():
    """Logistic regression, 100 points, an intercept and two covariates correlated at 0.8: full-rank
    Gaussian by bbvi (Adam, cosine decay from 0.02, 3000 steps, 16 draws) against NUTS (2 chains x
    1000 after 500 warmup) and against the exact posterior moments by quadrature. A posterior this
    close to Gaussian is one a full-rank q holds: means within 0.1 sd, sd ratios in [0.9, 1.1], of
    both. NUTS itself agrees with the quadrature within 4 MCSE in mean, 10% in sd.

    Measured: against NUTS within 0.013 sd, sd ratios 0.97-1.00 (spread: within 0.051 sd,
    0.97-1.06); against the quadrature within 0.037 sd, sd ratios 0.98-1.00; NUTS against the
    quadrature within 0.75 MCSE in mean and 3.2% in sd."""
    target = vijax.from_numpyro(logistic, XL, LABELS)
    schedule = optax.cosine_decay_schedule(0.02, 3000, alpha=0.05)
    alg = bbvi(target, family="fullrank", schedule=schedule, num_samples=16)
    _, vi = _fit(alg, 3000, 0)
    nuts, divergences = _nuts(logistic, XL, LABELS, seed=1)
    assert divergences == 0, divergences
    dz, ratio = _compare("w", vi["w"], nuts["w"])
    assert np.all(np.abs(dz) < 0.1) and np.all((0.9 < ratio) & (ratio < 1.1)), (dz, ratio)
    flat = nuts["w"].reshape(-1, 3)
    mean, sd = _quadrature_moments(XL, LABELS, flat.mean(0), np.cov(flat.T))
    print("quadrature", mean, sd)
    mcse = flat.std(0) / np.sqrt(effective_sample_size(nuts["w"]))
    print("NUTS against quadrature: (mean - exact) / MCSE", (flat.mean(0) - mean) / mcse, "sd ratio", flat.std(0) / sd)
    assert np.all(np.abs(flat.mean(0) - mean) < 4 * mcse) and np.all(np.abs(flat.std(0) / sd - 1) < 0.1)
    dz, ratio = (vi["w"].mean(0) - mean) / sd, vi["w"].std(0) / sd
    print("vijax against quadrature: dz", dz, "sd ratio", ratio)
    assert np.all(np.abs(dz) < 0.1) and np.all((0.9 < ratio) & (ratio < 1.1)), (dz, ratio)
