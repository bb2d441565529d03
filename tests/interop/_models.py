"""NumPyro models the interop tests share."""

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

J = 8
Y = jnp.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = jnp.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def eight_schools(sigma, y=None):
    """Non-centred eight schools: a real, a positive and a real vector site."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("J", sigma.shape[0]):
        theta_tilde = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0))
        numpyro.sample("obs", dist.Normal(mu + tau * theta_tilde, sigma), obs=y)


def every_support(y):
    """One latent site of each support auto_family matches."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 3.0))
    scale = numpyro.sample("scale", dist.Gamma(2.0 * jnp.ones(2), 1.0).to_event(1))
    p = numpyro.sample("p", dist.Beta(2.0, 3.0))
    w = numpyro.sample("w", dist.Dirichlet(jnp.ones(3)))
    loc = mu + jnp.sum(w * jnp.arange(3.0)) + p
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(loc, scale[0] + scale[1]), obs=y)


N, M = 8, 2
X = jnp.linspace(-1.0, 1.0, N)
T = 0.5 + 2.0 * X + jnp.sin(3.0 * X)


def regression(x, t, subsample_size=None):
    """Normal regression with a positive noise scale; the data plate subsampled by index."""
    w = numpyro.sample("w", dist.Normal(jnp.zeros(2), 2.0).to_event(1))
    noise = numpyro.sample("noise", dist.LogNormal(0.0, 1.0))
    with numpyro.plate("data", x.shape[0], subsample_size=subsample_size) as idx:
        numpyro.sample("t", dist.Normal(w[0] + w[1] * x[idx], noise), obs=t[idx])


def normal_mean(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    with numpyro.plate("data", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


def gamma_poisson(k):
    rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
    with numpyro.plate("data", k.shape[0]):
        numpyro.sample("k", dist.Poisson(rate), obs=k)
