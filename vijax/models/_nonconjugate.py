"""What proximal-gradient SVI (Khan et al. 2016) needs from a non-conjugate model, and shared helpers.

The negative ELBO splits into f + h (§3.1): h = KL(q || conjugate prior) is kept exact, f is
linearised at the current q with a minibatch, Monte Carlo gradient. With q an exponential family
(natural parameters lambda, mean parameters mu, prior eta) and f linearised in mu, iteration (9)
with the KL divergence reads

    lambda_{k+1} = argmin_lambda  -<g, mu(lambda)> + KL(q_lambda || p) + (1/beta_k) KL(q_lambda || q_k)
                 = r_k lambda_k + (1 - r_k) (eta + g),          r_k = 1 / (1 + beta_k),

g = (N/M) sum_{n in minibatch} grad_mu E_q[log p(y_n | .)]. ``prox_svi`` needs a :class:`ProxModel`
that is a :class:`GradientProxModel` or a :class:`StructuredProxModel`; ``optax_vi`` a
:class:`ParamsModel`; ``aevb`` an :class:`AEVBModel`.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Protocol, runtime_checkable

import jax
import jax.numpy as jnp

from vijax import expfam
from vijax._validate import batch_size
from vijax.models._base import BatchChecked
from vijax.types import Array, PRNGKey, PyTree


@runtime_checkable
class ProxModel(BatchChecked, Protocol):
    """What ``prox_svi`` needs from every non-conjugate model (Khan et al. 2016, §3)."""

    def init_variational(self, key: PRNGKey, batch: PyTree = None) -> PyTree:
        """A starting q."""

    def elbo(self, q: PyTree, batch: PyTree, key: PRNGKey, num_samples: int, num_data: int) -> Array:
        """A Monte Carlo estimate of the full-data ELBO (minibatch terms scaled by N/M)."""


@runtime_checkable
class GradientProxModel(ProxModel, Protocol):
    """A ``ProxModel`` whose q is a pytree of families, for the generic KL-proximal step (:func:`kl_prox_update`)."""

    def prior(self) -> PyTree:
        """The prior (or its conjugate part) as a pytree of families structured like q."""

    def loglik_grad(self, q: PyTree, batch: PyTree, key: PRNGKey, num_samples: int) -> PyTree:
        """Sum over the minibatch of grad_mu E_q[log p(y_n | .)], structured like q's natural params."""


class ProxUpdate(NamedTuple):
    """One KL-proximal step: the new q, the ELBO estimate at the pre-update q and the number of batch
    elements pulled back into the natural-parameter domain."""

    q: PyTree
    elbo: Array
    num_damped: Array


@runtime_checkable
class StructuredProxModel(ProxModel, Protocol):
    """A ``ProxModel`` with its own closed-form KL-proximal step ``prox_update``."""

    def prox_update(
        self, q: PyTree, batch: PyTree, key: PRNGKey, beta, num_samples: Optional[int], num_data: int
    ) -> ProxUpdate:
        """The step with step size ``beta`` on ``batch`` (terms scaled by N/M)."""


@runtime_checkable
class ParamsModel(BatchChecked, Protocol):
    """Variational parameters as a pytree and a stochastic ELBO differentiable in them."""

    def init_params(self, key: PRNGKey, batch: PyTree = None) -> PyTree:
        """The starting variational parameters."""

    def elbo_params(
        self, params: PyTree, batch: PyTree, key: PRNGKey, num_samples: Optional[int], num_data: Optional[int]
    ) -> Array:
        """The ELBO estimate at ``params`` (minibatch terms scaled by N/M)."""


@runtime_checkable
class AEVBModel(BatchChecked, Protocol):
    """An amortized diagonal-Gaussian q(z | x), a decoder and a standard-normal prior, for ONE datum."""

    latent_dim: int
    data_dim: int

    def network_params(self) -> PyTree:
        """{"encoder": phi, "decoder": theta}, the starting parameters."""

    def encode(self, enc_params: PyTree, x: Array) -> tuple:
        """(mu, log sigma) of q(z | x), each (d,)."""

    def sample_latent(self, mean: Array, log_scale: Array, key: PRNGKey, num_samples: int) -> Array:
        """(S, d) reparameterized draws of q(z | x)."""

    def log_q(self, mean: Array, log_scale: Array, z: Array) -> Array:
        """log q(z | x) for one z."""

    def kl_to_prior(self, mean: Array, log_scale: Array) -> Array:
        """KL(q(z | x) || p(z)) in closed form."""

    def log_prior(self, z: Array) -> Array:
        """log p(z) for one z."""

    def log_likelihood(self, dec_params: PyTree, z: Array, x: Array) -> Array:
        """log p(x | z; theta), a scalar."""

    def mean(self, dec_params: PyTree, z: Array) -> Array:
        """E[x | z; theta]."""

    def check_data(self, x: Array, name: str = "x") -> None:
        """Raises ValueError naming ``name`` for data the model cannot take."""


def kl_prox_update(
    model: GradientProxModel, q: PyTree, batch: PyTree, key: PRNGKey, beta, num_samples: int, num_data: int
) -> ProxUpdate:
    """The generic KL-proximal step of iteration (9), lambda <- r lambda + (1 - r)(eta + (N/M) g_hat), with
    the domain guard of ``vijax.expfam.conjugate_update``; the ELBO at the pre-update q."""
    m = batch_size(batch)
    key_grad, key_elbo = jax.random.split(key)
    elbo = model.elbo(q, batch, key_elbo, num_samples, num_data)
    g_hat = model.loglik_grad(q, batch, key_grad, num_samples)
    dtype = jax.tree_util.tree_leaves(q)[0].dtype
    rho = (beta / (1.0 + beta)).astype(dtype)  # 1 - r_k
    q_new, num_damped = expfam.conjugate_update(q, model.prior(), g_hat, rho, scale=num_data / m)
    return ProxUpdate(q_new, elbo, num_damped)


def structured_prox_update(
    model: ProxModel, prox_step: Callable, q: PyTree, batch: PyTree, key: PRNGKey, beta, num_samples, num_data: int
) -> ProxUpdate:
    """A ``ProxUpdate`` from a model's own ``prox_step(q, batch, key, beta, num_samples, num_data) -> q_new``."""
    key_grad, key_elbo = jax.random.split(key)
    elbo = model.elbo(q, batch, key_elbo, num_samples, num_data)
    q_new = prox_step(q, batch, key_grad, beta, num_samples, num_data)
    return ProxUpdate(q_new, elbo, jnp.zeros((), jnp.int32))
