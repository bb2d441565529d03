"""A Normal–Gamma pair found conjugate in a NumPyro model: a Normal mean whose prior precision and
likelihood precision both scale with a Gamma precision (Bishop 2006, *Pattern Recognition and
Machine Learning*, §10.1.3). Each site is conditionally conjugate given the other, so
``vijax.conjugate_sites`` reports both, and CAVI by ``complete_conditional`` reaches the mean-field
fixed point of Bishop's eqs. (10.26)-(10.30), iterated by hand."""

import pytest

numpyro = pytest.importorskip("numpyro")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro.distributions as dist  # noqa: E402

import vijax  # noqa: E402
from vijax import expfam  # noqa: E402
from vijax.interop import complete_conditional  # noqa: E402

MU0, LAMBDA0, A0, B0 = 0.5, 2.0, 3.0, 1.5
X = jnp.array([1.3, -0.4, 2.2, 0.9, 1.7, 0.1, 1.1])


def normal_gamma(x):
    tau = numpyro.sample("tau", dist.Gamma(A0, B0))
    mu = numpyro.sample("mu", dist.Normal(MU0, 1.0 / jnp.sqrt(LAMBDA0 * tau)))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("x", dist.Normal(mu, 1.0 / jnp.sqrt(tau)), obs=x)


def bishop_fixed_point(x, sweeps=500):
    """(mu_N, lambda_N, a_N, b_N) of q(mu) = N(mu_N, 1/lambda_N), q(tau) = Gamma(a_N, b_N)."""
    x = np.asarray(x, np.float64)
    n, xbar = x.size, x.mean()
    mu_n = (LAMBDA0 * MU0 + n * xbar) / (LAMBDA0 + n)  # (10.26), fixed
    a_n = A0 + (n + 1) / 2  # (10.29), fixed
    e_tau = A0 / B0
    for _ in range(sweeps):
        lambda_n = (LAMBDA0 + n) * e_tau  # (10.27)
        e_mu, e_mu2 = mu_n, mu_n**2 + 1 / lambda_n
        # (10.30): E_mu[sum (x - mu)^2 + lambda0 (mu - mu0)^2]
        b_n = B0 + 0.5 * (np.sum(x**2) - 2 * e_mu * x.sum() + n * e_mu2 + LAMBDA0 * (e_mu2 - 2 * e_mu * MU0 + MU0**2))
        e_tau = a_n / b_n
    return mu_n, lambda_n, a_n, b_n


@pytest.mark.slow
def test_both_sites_of_a_normal_gamma_pair_are_found_conjugate():
    report = vijax.conjugate_sites(normal_gamma, jax.random.PRNGKey(0), X)
    assert [(s.name, s.family, s.conjugate) for s in report.values()] == [
        ("tau", "Gamma", True),
        ("mu", "Normal", True),
    ]
    assert all(s.gap <= s.tolerance for s in report.values())


def test_cavi_by_complete_conditionals_reaches_bishops_mean_field_fixed_point():
    """mu's coefficients are linear in tau, so the update at E[tau] is exact; tau's are quadratic in
    mu, so its update averages them over the two points E[mu] +- sd[mu], which is exact for a
    quadratic (its mean is (x - E mu)^2 + var mu)."""
    target = vijax.from_numpyro(normal_gamma, X)

    @jax.jit
    def sweep(q_tau):
        q_mu = complete_conditional(target, "mu", {"tau": q_tau.mean_params()[1][None]})
        mean, sd = q_mu.mean_params()[0], jnp.sqrt(q_mu.variance)
        q_tau = complete_conditional(target, "tau", {"mu": jnp.stack([mean - sd, mean + sd])})
        return q_tau, q_mu

    with jax.enable_x64(True):
        q_tau = expfam.Gamma.from_shape_rate(jnp.float64(A0), jnp.float64(B0))
        for _ in range(100):
            q_tau, q_mu = sweep(q_tau)
        mu_n, lambda_n, a_n, b_n = bishop_fixed_point(X)
        np.testing.assert_allclose([q_mu.mean_params()[0], 1 / q_mu.variance], [mu_n, lambda_n], rtol=1e-9)
        np.testing.assert_allclose([q_tau.concentration, q_tau.rate], [a_n, b_n], rtol=1e-9)
