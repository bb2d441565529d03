"""The VAE model: its densities against TFP, the analytic KL against TFP's, and its checks of the
networks and the data (each error names the argument)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow_probability.substrates.jax as tfp

from vijax.models import AEVBModel, VAE, Network

tfd = tfp.distributions
K1, K2 = jax.random.split(jax.random.PRNGKey(0))


def np_mlp(seed, sizes):
    """A tanh MLP like ``vijax.models.mlp`` with weights drawn by NumPy: eager JAX draws compile one
    program per shape (seconds on a loaded two-core machine), NumPy's cost nothing."""
    rng = np.random.default_rng(seed)
    params = [
        {"w": jnp.asarray(rng.standard_normal((a, b)) / np.sqrt(a)), "b": jnp.asarray(0.1 * rng.standard_normal(b))}
        for a, b in zip(sizes[:-1], sizes[1:])
    ]

    def apply(params, x):
        for i, layer in enumerate(params):
            x = x @ layer["w"] + layer["b"]
            x = jnp.tanh(x) if i < len(params) - 1 else x
        return x

    return Network(apply, params)


def _vae(likelihood="bernoulli", d=2, D=5, **kw):
    return VAE(np_mlp(1, (D, 7, 2 * d)), np_mlp(2, (d, 7, D)), latent_dim=d, data_dim=D, likelihood=likelihood, **kw)


def test_analytic_kl_matches_tfp():
    vae = _vae(d=3)
    mean, log_scale = jnp.array([0.3, -1.2, 2.0]), jnp.array([-0.5, 0.4, -2.0])
    z = jnp.array([0.1, 0.2, -0.3])

    @jax.jit  # one program: eager TFP and JAX ops would each compile their own
    def both(mean, log_scale, z):
        q = tfd.MultivariateNormalDiag(mean, jnp.exp(log_scale))
        p = tfd.MultivariateNormalDiag(jnp.zeros(3), jnp.ones(3))
        draws = vae.sample_latent(mean, log_scale, jax.random.PRNGKey(1), 20000)
        return (
            (vae.kl_to_prior(mean, log_scale), tfd.kl_divergence(q, p)),
            (vae.log_q(mean, log_scale, z), q.log_prob(z)),
            (vae.log_prior(z), p.log_prob(z)),
            vae.kl_to_prior(jnp.zeros(3), jnp.zeros(3)),
            draws,
        )

    *pairs, zero, draws = both(mean, log_scale, z)
    for ours, theirs in pairs:  # the KL, q's density and the prior's
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    assert float(zero) == 0.0
    # the reparameterized draws have q's moments
    se = jnp.exp(log_scale) / np.sqrt(20000)
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * se)
    np.testing.assert_allclose(draws.std(0), jnp.exp(log_scale), rtol=0.03)


@pytest.mark.parametrize("likelihood", ["bernoulli", "gaussian"])
def test_log_likelihood_matches_tfp(likelihood):
    vae = _vae(likelihood, obs_scale=0.3)
    theta, z = vae.decoder.params, jnp.array([0.5, -1.0])
    x = jnp.array([1.0, 0.0, 0.0, 1.0, 1.0])

    @jax.jit
    def both(theta, z, x):
        out = vae.decoder.apply(theta, z)
        dist = tfd.Bernoulli(logits=out) if likelihood == "bernoulli" else tfd.Normal(out, 0.3)
        return (
            (vae.log_likelihood(theta, z, x), dist.log_prob(x).sum()),
            (vae.mean(theta, z), dist.mean()),
            vae.sample_data(theta, z, jax.random.PRNGKey(2)),
            vae.encode(vae.encoder.params, x),
        )

    *pairs, draw, (mu, log_sigma) = both(theta, z, x)
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    assert draw.shape == (5,) and mu.shape == log_sigma.shape == (2,)
    assert isinstance(vae, AEVBModel)


def test_networks_and_data_are_checked_by_name():
    enc, dec = np_mlp(1, (5, 4)), np_mlp(2, (2, 5))
    with pytest.raises(ValueError, match="^encoder must map one datum of shape \\(5,\\) to shape \\(4,\\)"):
        VAE(np_mlp(1, (5, 3)), dec, latent_dim=2, data_dim=5)
    with pytest.raises(ValueError, match="^encoder: applying it"):  # the encoder takes another width
        VAE(np_mlp(1, (6, 4)), dec, latent_dim=2, data_dim=5)
    with pytest.raises(ValueError, match="^decoder must map one datum of shape \\(2,\\) to shape \\(5,\\)"):
        VAE(enc, np_mlp(2, (2, 4)), latent_dim=2, data_dim=5)
    with pytest.raises(ValueError, match="^encoder must be a vijax.models.Network"):
        VAE(lambda p, x: x, dec, latent_dim=2, data_dim=5)
    with pytest.raises(ValueError, match="^likelihood"):
        _vae("poisson")
    with pytest.raises(ValueError, match="^obs_scale"):
        _vae("gaussian", obs_scale=0.0)
    with pytest.raises(ValueError, match="^latent_dim"):
        VAE(enc, dec, latent_dim=0, data_dim=5)
    vae = _vae()
    with pytest.raises(ValueError, match="^x must have 5 columns"):
        vae.check_data(jnp.zeros((3, 4)))
    with pytest.raises(ValueError, match="^batch must be numeric and finite"):
        vae.check_data(jnp.full((3, 5), jnp.nan), "batch")
    with pytest.raises(ValueError, match="^x must lie in \\[0, 1\\]"):
        vae.check_data(jnp.full((3, 5), 2.0))
    with pytest.raises(ValueError, match="^x must have 2 dimension"):
        vae.check_data(jnp.zeros(5))
    _vae("gaussian").check_data(jnp.full((3, 5), 2.0))  # any finite value for a Gaussian


@pytest.mark.parametrize("which, value", [("encoder", np.nan), ("decoder", np.inf)])
def test_a_network_parameter_that_is_not_finite_is_refused_naming_it(which, value):
    """A NaN in the encoder's weights was accepted: the objective was NaN and every step rejected."""
    nets = {"encoder": np_mlp(1, (5, 7, 4)), "decoder": np_mlp(2, (2, 7, 5))}
    nets[which].params[1]["b"] = nets[which].params[1]["b"].at[0].set(value)
    with pytest.raises(ValueError, match=rf"^{which}\.params\[1\]\['b'\] must be finite, got 1 NaN or infinite"):
        VAE(nets["encoder"], nets["decoder"], latent_dim=2, data_dim=5)
