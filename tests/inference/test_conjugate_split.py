"""``conjugate_split``: a NumPyro model's conjugate sites in closed form, the rest by ``bbvi``.

Checked against exact answers: a model whose conjugate part does not touch the rest (the rate's
q is its exact posterior after one step; the rest's q reaches its exact posterior mean by 1-D
quadrature), and a model where they interact (at the end the rate's q is the complete conditional
at the rest's q: Gamma(a + sum y, b + n E_q[sigmoid(w)]), within the Monte Carlo error of the
draws)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

numpyro = pytest.importorskip("numpyro")
dist = numpyro.distributions

import vijax  # noqa: E402
from vijax._validate import ArgumentError  # noqa: E402
from vijax.inference import conjugate_split, schedules  # noqa: E402

Y = jnp.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
X = jnp.array([-1.5, -0.5, 0.3, 1.2, 2.0, -2.2, 0.8, 1.7])
T = jnp.array([0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0])


def separate(y, x, t):
    rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
    w = numpyro.sample("w", dist.Normal(0.0, 2.0))
    with numpyro.plate("counts", y.shape[0]):
        numpyro.sample("y", dist.Poisson(rate), obs=y)
    with numpyro.plate("labels", x.shape[0]):
        numpyro.sample("t", dist.Bernoulli(logits=w * x), obs=t)


def interacting(y):
    rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("counts", y.shape[0]):
        numpyro.sample("y", dist.Poisson(rate * jax.nn.sigmoid(w)), obs=y)


def _fit(alg, steps, key):
    """``steps`` steps in one ``lax.scan``; the final state and the last step's info."""
    state = alg.init(jax.random.PRNGKey(0))
    body = lambda s, k: alg.step(k, s, None)
    state, infos = jax.jit(lambda s, ks: jax.lax.scan(body, s, ks))(state, jax.random.split(key, steps))
    return state, jax.tree_util.tree_map(lambda a: a[-1], infos)


def test_separate_parts_reach_the_exact_posteriors():
    target = vijax.from_numpyro(separate, Y, X, T)
    report = vijax.conjugate_sites(target, jax.random.PRNGKey(1))
    assert report["rate"].conjugate and not report["w"].conjugate
    alg = conjugate_split(target, report, family="meanfield", learning_rate=0.01, num_samples=4)
    state, info = _fit(alg, 4000, jax.random.PRNGKey(2))
    q = state.q_global["rate"]
    # the rate's complete conditional does not involve w: its exact posterior, Gamma(2 + sum y, 1 + n)
    np.testing.assert_allclose([q.concentration, q.rate], [2.0 + float(jnp.sum(Y)), 1.0 + Y.shape[0]], rtol=1e-5)
    # w's best Gaussian: the ELBO of N(m, s^2) by 80-point Gauss-Hermite quadrature, maximised by scipy
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    x, t = np.asarray(X), np.asarray(T)

    def negative_elbo(v):
        m, log_s = v
        w = m + np.exp(log_s) * nodes
        logits = w[:, None] * x[None]
        logp = -0.5 * (w / 2.0) ** 2 + np.sum(t * logits - np.logaddexp(0.0, logits), axis=1)
        return -(np.sum(weights * logp) / np.sqrt(2 * np.pi) + log_s)

    m_ref, log_s_ref = scipy.optimize.minimize(
        negative_elbo, [0.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10}
    ).x
    draws = vijax.inference.sample(alg, jax.random.PRNGKey(3), state, 20000)["w"]
    # within 0.1 of the optimum's sd: the final iterate's optimizer noise and the draws' error
    s_ref = float(np.exp(log_s_ref))
    assert abs(float(jnp.mean(draws)) - m_ref) < 0.1 * s_ref
    assert abs(float(jnp.std(draws)) - s_ref) < 0.1 * s_ref
    assert bool(info.accepted) and np.isfinite(float(info.elbo))
    rate = vijax.inference.sample(alg, jax.random.PRNGKey(4), state, 20000)["rate"]  # every site, constrained
    np.testing.assert_allclose(float(jnp.mean(rate)), float(q.concentration / q.rate), rtol=0.02)


def test_interacting_sites_meet_at_the_coordinate_fixed_point():
    target = vijax.from_numpyro(interacting, Y)
    report = vijax.conjugate_sites(target, jax.random.PRNGKey(1))
    assert report["rate"].conjugate and not report["w"].conjugate
    alg = conjugate_split(
        target, report, schedule=schedules.robbins_monro(1.0, tau=1.0, kappa=0.7), num_draws=32, learning_rate=0.02
    )
    state, _ = _fit(alg, 1500, jax.random.PRNGKey(4))
    q = state.q_global["rate"]
    draws = vijax.inference.sample(alg, jax.random.PRNGKey(5), state, 20000)["w"]
    e_sig = float(jnp.mean(jax.nn.sigmoid(draws)))
    assert float(q.concentration) == pytest.approx(2.0 + float(jnp.sum(Y)), rel=1e-5)
    # the rate parameter is 1 + n E_q[sigmoid(w)], up to the averaging of the last steps' draws (2%)
    assert float(q.rate) == pytest.approx(1.0 + Y.shape[0] * e_sig, rel=0.02)


def test_bad_arguments_are_named():
    target = vijax.from_numpyro(interacting, Y)
    report = vijax.conjugate_sites(target, jax.random.PRNGKey(1))
    with pytest.raises(ArgumentError, match="conjugate"):
        conjugate_split(target, ["rate"])
    with pytest.raises(ArgumentError, match="conjugate"):
        conjugate_split(target, {n: s._replace(conjugate=False) for n, s in report.items()})
    with pytest.raises(ArgumentError, match="num_draws"):
        conjugate_split(target, report, num_draws=0)
    with pytest.raises(ArgumentError, match="schedule"):
        conjugate_split(target, report, schedule=2.0)
    with pytest.raises(ArgumentError, match="target"):
        conjugate_split(lambda p, b: 0.0, report)
