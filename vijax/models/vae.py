"""The variational autoencoder of Kingma and Welling (2014), as *Raise your ELBO* (2019, §VAE) writes it::

    z_n ~ N(0, I_d),    x_n | z_n ~ p(x_n; f_theta(z_n)),    q_phi(z_n | x_n) = N(mu_phi(x_n), diag(sigma_phi(x_n)^2)),

the encoder (x (D,) -> [mu, log sigma] (2d,)) and decoder (z (d,) -> (D,)) ``vijax.models.Network``s.
The decoder gives the logits of a Bernoulli (data in [0, 1]) or the mean of N(m, obs_scale^2 I) with
a fixed scale. -KL(q(z | x) || p(z)) = d/2 + sum_j log sigma_j - (1/2) sum_j (mu_j^2 + sigma_j^2).
Everything here is for ONE datum; ``vijax.inference.aevb`` vmaps it.
"""

from __future__ import annotations

import types
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import ArgumentError, INT32_MAX, check_choice, check_data_array, check_float_dtype, check_int
from vijax._validate import check_scalar, finite_values, is_tracer, values_in_interval
from vijax.models._network import Network, check_network
from vijax.types import Array, PRNGKey, PyTree
from vijax.models._pytree import PytreeModel

LIKELIHOODS = ("bernoulli", "gaussian")
_LOG_2PI = math.log(2.0 * math.pi)


def _float_dtype(tree) -> jnp.dtype:
    for leaf in jax.tree_util.tree_leaves(tree):
        if hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.floating):
            return leaf.dtype
    return jnp.result_type(float)


@dataclasses.dataclass(frozen=True, eq=False)
class VAE(PytreeModel):
    """A VAE with a diagonal-Gaussian encoder and a standard-normal prior.

    Args:
      encoder: a ``Network`` mapping one datum (data_dim,) to (2 * latent_dim,): [mu, log sigma].
      decoder: a ``Network`` mapping one latent (latent_dim,) to (data_dim,): logits or the Gaussian mean.
      latent_dim: d >= 1.
      data_dim: D >= 1, the width of a datum.
      likelihood: ``"bernoulli"`` or ``"gaussian"``.
      obs_scale: the fixed observation standard deviation of the Gaussian likelihood (> 0).

    Raises:
      ValueError: naming ``encoder`` / ``decoder`` (a network of the wrong shape) or the bad setting.

    Examples:
        >>> from vijax.models import mlp
        >>> k1, k2 = jax.random.split(jax.random.PRNGKey(0))
        >>> vae = VAE(mlp(k1, (4, 8, 2 * 2)), mlp(k2, (2, 8, 4)), latent_dim=2, data_dim=4)
        >>> mu, log_sigma = vae.encode(vae.encoder.params, jnp.ones(4))
        >>> mu.shape, float(vae.kl_to_prior(jnp.zeros(2), jnp.zeros(2)))
        ((2,), 0.0)
    """

    encoder: Network
    decoder: Network
    latent_dim: int
    data_dim: int
    likelihood: str = "bernoulli"
    obs_scale: float = 1.0
    converters = types.MappingProxyType({"obs_scale": lambda name, value: check_scalar(name, value, low=0.0)})

    def __post_init__(self):
        check_int("latent_dim", self.latent_dim, maximum=INT32_MAX)
        check_int("data_dim", self.data_dim, maximum=INT32_MAX)
        check_choice("likelihood", self.likelihood, LIKELIHOODS)
        for name in ("encoder", "decoder"):  # half-precision weights: refused as any model's half dtype
            net = getattr(self, name)
            check_float_dtype(_float_dtype(net.params if isinstance(net, Network) else None), f"{name}.params")
        dt = _float_dtype(self.encoder.params if isinstance(self.encoder, Network) else None)
        check_network(self.encoder, jnp.zeros((self.data_dim,), dt), (2 * self.latent_dim,), "encoder")
        check_network(self.decoder, jnp.zeros((self.latent_dim,), dt), (self.data_dim,), "decoder")

    def network_params(self) -> dict:
        """{"encoder": phi, "decoder": theta}: the networks' own starting parameters."""
        return {"encoder": self.encoder.params, "decoder": self.decoder.params}

    def encode(self, enc_params: PyTree, x: Array) -> tuple[Array, Array]:
        """(mu (d,), log sigma (d,)) of q(z | x) for one datum x (D,)."""
        out = self.encoder.apply(enc_params, x)
        return out[: self.latent_dim], out[self.latent_dim :]

    @staticmethod
    def sample_latent(mean: Array, log_scale: Array, key: PRNGKey, num_samples: int) -> Array:
        """(S, d) reparameterized draws z = mu + sigma * eps, eps ~ N(0, I) (Kingma and Welling 2014, §2.4)."""
        eps = jax.random.normal(key, (num_samples,) + mean.shape, mean.dtype)
        return mean[None] + jnp.exp(log_scale)[None] * eps

    @staticmethod
    def log_q(mean: Array, log_scale: Array, z: Array) -> Array:
        """log N(z; mu, diag(sigma^2)) for one z (d,)."""
        r = (z - mean) * jnp.exp(-log_scale)
        return -0.5 * jnp.sum(r * r) - jnp.sum(log_scale) - 0.5 * z.shape[-1] * _LOG_2PI

    @staticmethod
    def kl_to_prior(mean: Array, log_scale: Array) -> Array:
        """KL(N(mu, diag(sigma^2)) || N(0, I)) = (1/2) sum_j (mu_j^2 + sigma_j^2 - 1 - 2 log sigma_j)."""
        return 0.5 * jnp.sum(mean * mean + jnp.exp(2.0 * log_scale) - 1.0 - 2.0 * log_scale)

    @staticmethod
    def log_prior(z: Array) -> Array:
        """log N(z; 0, I) for one z (d,)."""
        return -0.5 * jnp.sum(z * z) - 0.5 * z.shape[-1] * _LOG_2PI

    def log_likelihood(self, dec_params: PyTree, z: Array, x: Array) -> Array:
        """log p(x | z; theta) for one datum x (D,) and one latent z (d,) (a scalar)."""
        out = self.decoder.apply(dec_params, z)
        if self.likelihood == "bernoulli":
            return jnp.sum(x * jax.nn.log_sigmoid(out) + (1.0 - x) * jax.nn.log_sigmoid(-out))
        r = (x - out) / self.obs_scale
        return -0.5 * jnp.sum(r * r) - x.shape[-1] * (math.log(self.obs_scale) + 0.5 * _LOG_2PI)

    def mean(self, dec_params: PyTree, z: Array) -> Array:
        """E[x | z; theta] (D,): the pixel probabilities (Bernoulli) or the decoder's mean (Gaussian)."""
        out = self.decoder.apply(dec_params, z)
        return jax.nn.sigmoid(out) if self.likelihood == "bernoulli" else out

    def sample_data(self, dec_params: PyTree, z: Array, key: PRNGKey) -> Array:
        """One draw x ~ p(x | z; theta) (D,)."""
        m = self.mean(dec_params, z)
        if self.likelihood == "bernoulli":
            return jax.random.bernoulli(key, m).astype(m.dtype)
        return m + self.obs_scale * jax.random.normal(key, m.shape, m.dtype)

    def batch_checks(self, x) -> list:
        """The value checks of a step's batch: finite, and in [0, 1] for the Bernoulli likelihood."""
        if self.likelihood == "bernoulli":
            return [values_in_interval("batch x", x, 0.0, 1.0)]
        return [finite_values("batch x", x)]

    def check_data(self, x: Array, name: str = "x") -> None:
        """Raises ValueError naming ``name`` unless ``x`` is (N, data_dim), finite and, for the Bernoulli
        likelihood, in [0, 1]."""
        check_data_array(name, x, 2, self.data_dim)
        if self.likelihood == "bernoulli" and not is_tracer(x):
            a = np.asarray(x)
            if a.min() < 0.0 or a.max() > 1.0:
                raise ArgumentError(
                    name,
                    f"{name} must lie in [0, 1] for the Bernoulli likelihood, got values in "
                    f"[{float(a.min()):g}, {float(a.max()):g}]",
                )


__all__ = ["LIKELIHOODS", "VAE"]
