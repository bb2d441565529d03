"""PG-SVI beyond Gaussians: non-conjugate likelihoods under a conjugate exponential-family prior.

With q and its prior p in one ``vijax.expfam`` family (h = KL(q || p) exact and convex; Khan et al.
2016, §3.1), the KL-proximal step of iteration (9) with f linearised in the mean parameters is
lambda_{k+1} = r lambda_k + (1 - r)(eta + (N/M) g_hat), r = 1/(1 + beta_k), g_hat a reparameterised
Monte Carlo gradient mapped by ``mean_param_grad`` (grad_mu = F^-1 grad_lambda); see Khan et al., §7.

* ``PoissonGammaSoftplus``: theta_d ~ Gamma(a0, b0), y_n ~ Poisson(softplus(x_n^T theta)).
* ``NoisyDirichletMultinomial``: theta ~ Dirichlet(alpha0), c_n ~ Multinomial(sum_k c_nk,
  (1 - eps) theta + eps / K), conjugate only at eps = 0.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from vijax import expfam
from vijax._validate import ArgumentError, check_allocation, check_data_dtype, check_int, check_positive_scalar
from vijax._validate import check_scalar, finite_nonnegative, finite_values
from vijax.expfam import mean_param_grad
from vijax.types import Array, PRNGKey
from vijax.models._base import check_features
from vijax.models._pytree import PytreeModel


@dataclasses.dataclass(frozen=True, eq=False)
class PoissonGammaSoftplus(PytreeModel):
    """theta_d ~ Gamma(prior_shape, prior_rate), y_n ~ Poisson(softplus(x_n^T theta)); batch (x, y).

    Examples:
        >>> model = PoissonGammaSoftplus(2)
        >>> model.prior().batch_shape
        (2,)
    """

    dim: int
    prior_shape: float = 2.0
    prior_rate: float = 2.0

    def __post_init__(self):
        check_int("dim", self.dim)
        check_positive_scalar("prior_shape", self.prior_shape)
        check_positive_scalar("prior_rate", self.prior_rate)
        check_allocation("dim", self.dim, jnp.result_type(float).itemsize)

    def batch_checks(self, batch) -> list:
        """The value checks of a step's batch: finite features, counts finite and >= 0."""
        return [finite_values("batch x", batch[0]), finite_nonnegative("batch count y", batch[1])]

    def check_data(self, batch) -> None:
        """Raises ValueError naming ``x`` or ``y`` unless x is finite (M, dim) and y M counts."""
        xy = check_features(*batch, self.dim)
        if xy is not None and not np.all(np.isfinite(xy[1]) & (xy[1] >= 0) & (xy[1] == np.round(xy[1]))):
            raise ArgumentError("y", "y (counts) must be non-negative integers")

    def prior(self, dtype=None) -> expfam.Gamma:
        """p(theta_d) = Gamma(``prior_shape``, ``prior_rate``) for d = 1..D: a ``Gamma`` of batch shape (D,)."""
        dt = dtype or jnp.result_type(float)
        return expfam.Gamma(
            jnp.full((self.dim,), self.prior_shape - 1.0, dt), jnp.full((self.dim,), -self.prior_rate, dt)
        )

    def init_variational(self, key: PRNGKey, batch=None) -> expfam.Gamma:
        """The prior with its shapes jittered by up to 10 %."""
        if batch is not None:
            self.check_data(batch)
        p = self.prior()
        u = jax.random.uniform(key, (self.dim,), p.dtype, 0.9, 1.1)
        return expfam.Gamma(self.prior_shape * u - 1.0, p.eta2)

    def expected_loglik(self, q: expfam.Gamma, batch, key: PRNGKey, num_samples: int) -> Array:
        """Sum over the batch of the Monte Carlo E_q[log p(y_n | theta)] (reparameterised draws)."""
        x, y = batch
        theta = q.sample(key, (num_samples,))  # (S, D)
        rate = jax.nn.softplus(theta @ x.T)  # (S, M)
        ll = y[None, :] * jnp.log(rate) - rate - gammaln(y + 1.0)[None, :]
        return jnp.sum(jnp.mean(ll, 0))

    def loglik_grad(self, q: expfam.Gamma, batch, key: PRNGKey, num_samples: int):
        """g_hat: the gradient of ``expected_loglik`` in q's mean parameters (E[log theta], E[theta])."""
        return mean_param_grad(lambda qq: self.expected_loglik(qq, batch, key, num_samples), q)

    def elbo(self, q, batch, key, num_samples, num_data):
        """The minibatch ELBO estimate (N/M) sum_n E_q[log p(y_n | theta)] - KL(q || p)."""
        scale = num_data / batch[0].shape[0]
        return scale * self.expected_loglik(q, batch, key, num_samples) - jnp.sum(q.kl(self.prior(q.dtype)))

    def sample_data(self, key: PRNGKey, num_data: int, theta=None):
        """Synthetic (x, y, theta): x ~ |N(0, 1)|, theta from the prior unless given."""
        k1, k2, k3 = jax.random.split(key, 3)
        if theta is None:
            theta = self.prior().sample(k1)
        x = jnp.abs(jax.random.normal(k2, (num_data, self.dim)))
        y = jax.random.poisson(k3, jax.nn.softplus(x @ theta)).astype(x.dtype)
        return x, y, theta


@dataclasses.dataclass(frozen=True, eq=False)
class NoisyDirichletMultinomial(PytreeModel):
    """theta ~ Dirichlet(alpha0 1_K), c_n ~ Multinomial(sum c_n, (1 - noise) theta + noise / K); batch: counts (M, K).

    Examples:
        >>> model = NoisyDirichletMultinomial(3, noise=0.1)
        >>> model.prior().concentration.shape
        (3,)
    """

    num_categories: int
    noise: float = 0.1
    prior_concentration: float = 1.0

    def __post_init__(self):
        check_int("num_categories", self.num_categories, minimum=2)
        check_scalar("noise", self.noise, low=0.0, high=1.0, include_low=True, include_high=False)
        check_positive_scalar("prior_concentration", self.prior_concentration)
        check_allocation("num_categories", self.num_categories, jnp.result_type(float).itemsize)

    def batch_checks(self, batch) -> list:
        """The value check of a step's batch: counts finite and >= 0."""
        return [finite_nonnegative("batch count", batch)]

    def check_data(self, batch) -> None:
        """Raises ValueError naming ``counts`` unless the batch is (M, K) non-negative integer counts."""
        check_data_dtype("counts", batch)
        if np.ndim(batch) != 2 or np.shape(batch)[1] != self.num_categories:
            raise ValueError(f"counts must have shape (M, {self.num_categories}), got {np.shape(batch)}")
        if isinstance(batch, jax.core.Tracer):
            return
        c = np.asarray(batch)
        if not np.all(np.isfinite(c)) or not np.all((c >= 0) & (c == np.round(c))):
            raise ValueError("counts must be non-negative integers")

    def prior(self, dtype=None) -> expfam.Dirichlet:
        """p(theta) = Dirichlet(alpha0 1_K), alpha0 = ``prior_concentration``: a ``Dirichlet`` with event shape (K,)."""
        dt = dtype or jnp.result_type(float)
        return expfam.Dirichlet(jnp.full((self.num_categories,), self.prior_concentration - 1.0, dt))

    def init_variational(self, key: PRNGKey, batch=None) -> expfam.Dirichlet:
        """The prior with its concentrations jittered by up to 10 %."""
        if batch is not None:
            self.check_data(batch)
        u = jax.random.uniform(key, (self.num_categories,), jnp.result_type(float), 0.9, 1.1)
        return expfam.Dirichlet(self.prior_concentration * u - 1.0)

    def expected_loglik(self, q: expfam.Dirichlet, counts, key: PRNGKey, num_samples: int) -> Array:
        """Sum over the batch of the Monte Carlo E_q[log p(c_n | theta)], multinomial coefficients included."""
        theta = q.sample(key, (num_samples,))  # (S, K)
        probs = (1.0 - self.noise) * theta + self.noise / self.num_categories
        log_coef = gammaln(jnp.sum(counts, -1) + 1.0) - jnp.sum(gammaln(counts + 1.0), -1)
        return jnp.sum(log_coef) + jnp.mean(jnp.log(probs) @ jnp.sum(counts, 0))

    def loglik_grad(self, q: expfam.Dirichlet, counts, key: PRNGKey, num_samples: int):
        """g_hat: the gradient of ``expected_loglik`` in q's mean parameters E[log theta] (sum_n c_n at noise 0)."""
        return mean_param_grad(lambda qq: self.expected_loglik(qq, counts, key, num_samples), q)

    def elbo(self, q, counts, key, num_samples, num_data):
        """The minibatch ELBO estimate (N/M) sum_n E_q[log p(c_n | theta)] - KL(q || p)."""
        scale = num_data / counts.shape[0]
        return scale * self.expected_loglik(q, counts, key, num_samples) - jnp.sum(q.kl(self.prior(q.dtype)))

    def sample_data(self, key: PRNGKey, num_data: int, draws: int = 20, theta=None):
        """Synthetic (counts, theta): num_data rows of ``draws`` noisy multinomial draws."""
        k1, k2 = jax.random.split(key)
        if theta is None:
            theta = self.prior().sample(k1)
        probs = (1.0 - self.noise) * theta + self.noise / self.num_categories
        z = jax.random.categorical(k2, jnp.log(probs), shape=(num_data, draws))
        return jax.nn.one_hot(z, self.num_categories).sum(1), theta


__all__ = ["NoisyDirichletMultinomial", "PoissonGammaSoftplus"]
