"""``complete_conditional`` against the textbook complete conditionals and posteriors, for an
informative and a vague prior of each conjugate pair, in float32 and float64: Gamma–Poisson,
Beta–Bernoulli, Dirichlet–categorical, a Normal mean of Normal data with known scale, and the
Normal–Gamma pair (a Normal mean and a Gamma precision, each given the other; Bishop 2006,
*Pattern Recognition and Machine Learning*, §2.3.6 and §10.1.3). The closed forms are written
out here. Tolerances: rtol 1e-6 in float64 and 1e-5 in float32 (exact identities; the fits run in
float64 either way and the float32 family is their rounding). All five pairs sit in one model,
one program per case (``complete_conditionals``)."""

import pytest

numpyro = pytest.importorskip("numpyro")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro.distributions as dist  # noqa: E402

import vijax  # noqa: E402
from vijax.interop import complete_conditionals  # noqa: E402

# informative and vague priors (in float32 most draws of the vague Gamma(1e-3, 1e-3) underflow to 0:
# the start moves off the support's boundary, and the closed form does not depend on it)
PRIORS = {
    "informative": dict(
        gamma=(2.0, 1.0), beta=(2.0, 3.0), dirichlet=[1.0, 2.0, 0.5], normal=(1.0, 2.0), ng=(3.0, 1.5, 0.5, 2.0)
    ),
    "vague": dict(gamma=None, beta=(0.01, 0.01), dirichlet=[0.01] * 3, normal=(0.0, 1e3), ng=None),
}
SIGMA = 0.7  # the known scale of the Normal mean's data


def model(p, counts, flips, labels, xs, ys):
    a, b = p["gamma"]
    rate = numpyro.sample("rate", dist.Gamma(a, b))
    prob = numpyro.sample("prob", dist.Beta(*p["beta"]))
    probs = numpyro.sample("probs", dist.Dirichlet(jnp.asarray(p["dirichlet"])))
    m = numpyro.sample("m", dist.Normal(*p["normal"]))
    a0, b0, mu0, lambda0 = p["ng"]
    tau = numpyro.sample("tau", dist.Gamma(a0, b0))
    mu = numpyro.sample("mu", dist.Normal(mu0, 1.0 / jnp.sqrt(lambda0 * tau)))
    with numpyro.plate("counts", counts.shape[0]):
        numpyro.sample("k", dist.Poisson(rate), obs=counts)
    with numpyro.plate("flips", flips.shape[0]):
        numpyro.sample("z", dist.Bernoulli(probs=prob), obs=flips)
    with numpyro.plate("labels", labels.shape[0]):
        numpyro.sample("c", dist.Categorical(probs=probs), obs=labels)
    with numpyro.plate("xs", xs.shape[0]):
        numpyro.sample("x", dist.Normal(m, SIGMA), obs=xs)
    with numpyro.plate("ys", ys.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 1.0 / jnp.sqrt(tau)), obs=ys)


@pytest.mark.parametrize("prior", ["informative", "vague"])
@pytest.mark.slow
def test_complete_conditionals_are_the_textbook_closed_forms(prior, dtype):
    a_vague = 1e-3
    p = dict(PRIORS[prior])
    p["gamma"] = p["gamma"] or (a_vague, a_vague)
    p["ng"] = p["ng"] or (a_vague, a_vague, 0.0, 1e-3)
    counts = np.array([3.0, 1.0, 4.0, 2.0, 5.0])
    flips = np.array([1.0, 0.0, 1.0, 1.0])
    labels = np.array([0, 2, 2, 1, 2, 0])
    xs = np.array([0.5, 2.5, 1.0, -0.3])
    ys = np.array([1.3, -0.4, 2.2, 0.9, 1.7])
    draws = {"rate": [1.3], "prob": [0.4], "probs": [[0.2, 0.3, 0.5]], "m": [0.7], "tau": [0.8], "mu": [0.6]}
    draws = {n: np.asarray(v) for n, v in draws.items()}
    requests = {site: {n: v for n, v in draws.items() if n != site} for site in draws}
    with jax.enable_x64(dtype == "float64"):
        target = vijax.from_numpyro(model, p, counts, flips, labels, xs, ys)
        q = complete_conditionals(target, requests)
    rtol = 1e-6 if dtype == "float64" else 1e-5
    for family in q.values():
        assert all(a.dtype == np.dtype(dtype) for a in family.natural_params)

    def close(actual, expected):
        np.testing.assert_allclose(np.asarray(actual, np.float64), expected, rtol=rtol)

    # Gamma-Poisson: Gamma(a + sum k, b + n)
    a, b = p["gamma"]
    close([q["rate"].concentration, q["rate"].rate], [a + counts.sum(), b + counts.size])
    # Beta-Bernoulli: Beta(alpha + ones, beta + zeros)
    alpha, beta = p["beta"]
    close([q["prob"].concentration1, q["prob"].concentration0], [alpha + flips.sum(), beta + (1 - flips).sum()])
    # Dirichlet-categorical: Dirichlet(alpha + counts of each category)
    close(q["probs"].concentration, np.asarray(p["dirichlet"]) + np.bincount(labels, minlength=3))
    # Normal mean, known scale: precision 1/s0^2 + n/sigma^2, mean (mu0/s0^2 + sum x/sigma^2) / precision
    mu0, s0 = p["normal"]
    precision = 1 / s0**2 + xs.size / SIGMA**2
    close([q["m"].mean, 1 / q["m"].variance], [(mu0 / s0**2 + xs.sum() / SIGMA**2) / precision, precision])
    # Normal-Gamma: mu | tau ~ N((lambda0 mu0 + sum y) / (lambda0 + n), 1 / ((lambda0 + n) tau)),
    # tau | mu ~ Gamma(a0 + (n + 1) / 2, b0 + (sum (y - mu)^2 + lambda0 (mu - mu0)^2) / 2)
    a0, b0, mu0, lambda0 = p["ng"]
    n, tau, mu = ys.size, draws["tau"][0], draws["mu"][0]
    close([q["mu"].mean, 1 / q["mu"].variance], [(lambda0 * mu0 + ys.sum()) / (lambda0 + n), (lambda0 + n) * tau])
    close(
        [q["tau"].concentration, q["tau"].rate],
        [a0 + (n + 1) / 2, b0 + (np.sum((ys - mu) ** 2) + lambda0 * (mu - mu0) ** 2) / 2],
    )
