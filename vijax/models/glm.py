"""Generalised linear models with a Gaussian prior, for proximal-gradient SVI (Khan et al. 2016, §3.1, app. A.2, E).

    z ~ N(m0, s0^2 I_D),      y_n | z ~ p(y_n | a_n = x_n^T z),
    logistic:  log p(y | a) = y a - softplus(a),          y in {0, 1};
    poisson:   log p(y | a) = y a - exp(a) - log y!,      y in {0, 1, 2, ...}.

q(z) = N(m, V) is a ``vijax.expfam.MultivariateNormal``; f = -sum_n E_q[log p(y_n | x_n^T z)] is
linearised, h = KL(q || p) kept exact (app. A.2). Each expectation depends on the 1-d marginal
a_n ~ N(x_n^T m, x_n^T V x_n) (Monte Carlo for the logistic, exact for the Poisson likelihood), with
Bonnet's and Price's gradients dE[l]/dm_a = E[l'(a)], dE[l]/dv_a = E[l''(a)] / 2. With Phi(m, V) the
minibatch sum, the gradient in the mean parameters (m, V + m m^T) is g1 = dPhi/dm - 2 (dPhi/dV) m,
g2 = dPhi/dV, and the KL-proximal step (r = 1/(1 + beta), s = N/M) is ``kl_prox_update``::

    P_{k+1} = r P_k + (1 - r) (P0 - 2 s dPhi/dV),     P_{k+1} m_{k+1} = r P_k m_k + (1 - r) (P0 m0 + s g1).

With ``linearization="moments"`` f is linearised in (m, V) (before the paper's approximation (76)):
the same precision, and [(1 - r) P0 + r P_k] m = (1 - r)(s dPhi/dm + P0 m0) + r P_k m_k.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from vijax import expfam
from vijax._validate import check_allocation, check_choice, check_int, check_positive_scalar
from vijax._validate import check_scalar, finite_nonnegative, finite_values, values_in_set
from vijax.models._base import check_features
from vijax.models._nonconjugate import ProxUpdate, kl_prox_update, structured_prox_update
from vijax.types import Array, PRNGKey
from vijax.models._pytree import PytreeModel

LIKELIHOODS = ("logistic", "poisson")
LINEARIZATIONS = ("mean", "moments")


def _sym(a):
    return 0.5 * (a + a.T)


@dataclasses.dataclass(frozen=True, eq=False)
class GLM(PytreeModel):
    """Bayesian GLM z ~ N(prior_mean 1, prior_var I), y_n ~ p(y | x_n^T z), for ``prox_svi``.

    Args:
      dim: D, the number of features (weights).
      likelihood: ``"logistic"`` (labels in {0, 1}) or ``"poisson"`` (counts, log link).
      prior_mean: m0, a float.
      prior_var: s0^2 > 0, a float.
      linearization: ``"mean"`` (f linearised in the mean parameters) or ``"moments"`` (in (m, V)).

    A batch is a pair ``(x, y)``: x of shape (M, D), y of shape (M,).

    Examples:
        >>> model = GLM(2, "poisson")
        >>> model.prior().mean.shape
        (2,)
    """

    dim: int
    likelihood: str = "logistic"
    prior_mean: float = 0.0
    prior_var: float = 1.0
    linearization: str = "mean"

    def __post_init__(self):
        check_int("dim", self.dim)
        check_choice("likelihood", self.likelihood, LIKELIHOODS)
        check_scalar("prior_mean", self.prior_mean)
        check_positive_scalar("prior_var", self.prior_var)
        check_choice("linearization", self.linearization, LINEARIZATIONS)
        check_allocation("dim**2", self.dim * self.dim, jnp.result_type(float).itemsize)  # q's covariance

    def batch_checks(self, batch) -> list:
        """The value checks of a step's batch: finite features, labels in {0, 1} (logistic), counts
        >= 0 (Poisson), finite responses."""
        x, y = batch
        checks = [finite_values("batch x", x)]
        if self.likelihood == "logistic":
            return checks + [values_in_set("batch label y", y, (0, 1))]
        if self.likelihood == "poisson":
            return checks + [finite_nonnegative("batch count y", y)]
        return checks + [finite_values("batch y", y)]

    def check_data(self, batch) -> None:
        """Raises ValueError naming ``x`` or ``y`` for data the model cannot take."""
        xy = check_features(*batch, self.dim)
        if xy is None:
            return
        x, y = xy
        if not np.issubdtype(y.dtype, np.number) or not np.all(np.isfinite(y)):
            raise ValueError("y must be numeric and finite")
        if self.likelihood == "logistic" and not np.all((y == 0) | (y == 1)):
            hint = " (for labels in {-1, 1} pass (y + 1) / 2)" if np.all((y == -1) | (y == 1)) else ""
            raise ValueError(f"y (labels) must lie in {{0, 1}} for the logistic likelihood{hint}")
        if self.likelihood == "poisson" and not np.all((y >= 0) & (y == np.round(y))):
            raise ValueError("y (counts) must be non-negative integers for the Poisson likelihood")

    def prior(self, dtype=None) -> expfam.MultivariateNormal:
        """p(z) = N(m0 1, s0^2 I_D) (``prior_mean``, ``prior_var``) as a ``MultivariateNormal``."""
        dt = dtype or jnp.result_type(float)
        prec = 1.0 / self.prior_var
        return expfam.MultivariateNormal(
            jnp.full((self.dim,), prec * self.prior_mean, dt), -0.5 * prec * jnp.eye(self.dim, dtype=dt)
        )

    def init_variational(self, key: PRNGKey, batch=None) -> expfam.MultivariateNormal:
        """The prior with its mean jittered by 0.1 s0 (so restarts differ)."""
        if batch is not None:
            self.check_data(batch)
        p = self.prior()
        jitter = 0.1 * np.sqrt(self.prior_var) * jax.random.normal(key, (self.dim,), p.dtype)
        return p.replace_natural((p.eta1 + jitter / self.prior_var, p.eta2))

    def _log_lik(self, a, y):
        if self.likelihood == "logistic":
            return y * a - jax.nn.softplus(a)
        return y * a - jnp.exp(a) - gammaln(y + 1.0)

    def expected_loglik(self, m: Array, v: Array, batch, noise: Array) -> Array:
        """Sum over the batch of E_q[log p(y_n | x_n^T z)] as a function of q's (m, V): Monte Carlo with
        ``noise`` (M, S) standard normal draws, exact for the Poisson likelihood."""
        x, y = batch
        a_mean = x @ m
        a_var = jnp.sum((x @ v) * x, -1)
        if self.likelihood == "poisson":
            return jnp.sum(y * a_mean - jnp.exp(a_mean + 0.5 * a_var) - gammaln(y + 1.0))
        a = a_mean[:, None] + jnp.sqrt(a_var)[:, None] * noise
        return jnp.sum(jnp.mean(self._log_lik(a, y[:, None]), -1))

    def _noise(self, key, batch, num_samples, dtype):
        return jax.random.normal(key, (batch[0].shape[0], num_samples), dtype)

    def marginal_grads(self, q: expfam.MultivariateNormal, batch, key: PRNGKey, num_samples: int):
        """Per example, alpha_n = E_q[l'(a_n)] and gamma_n = -E_q[l''(a_n)] (Bonnet, Price): Monte Carlo for
        the logistic likelihood, exact for the Poisson one."""
        x, y = batch
        a_mean = x @ q.mean
        a_var = jnp.sum((x @ q.covariance) * x, -1)
        if self.likelihood == "poisson":
            rate = jnp.exp(a_mean + 0.5 * a_var)
            return y - rate, rate
        noise = self._noise(key, batch, num_samples, q.dtype)
        sig = jax.nn.sigmoid(a_mean[:, None] + jnp.sqrt(a_var)[:, None] * noise)
        return jnp.mean(y[:, None] - sig, -1), jnp.mean(sig * (1.0 - sig), -1)

    def moment_grads(self, q: expfam.MultivariateNormal, batch, key: PRNGKey, num_samples: int):
        """(dPhi/dm, dPhi/dV) = (X^T alpha, -X^T diag(gamma) X / 2), dPhi/dV negative semi-definite."""
        x = batch[0]
        alpha, gamma = self.marginal_grads(q, batch, key, num_samples)
        return x.T @ alpha, -0.5 * (x.T * gamma[None, :]) @ x

    def loglik_grad(self, q: expfam.MultivariateNormal, batch, key: PRNGKey, num_samples: int):
        """Minibatch sum of grad_mu E_q[log p(y_n | .)] as (g1, g2) (module docstring)."""
        gm, gv = self.moment_grads(q, batch, key, num_samples)
        return gm - 2.0 * gv @ q.mean, gv

    def elbo(self, q: expfam.MultivariateNormal, batch, key: PRNGKey, num_samples: int, num_data: int) -> Array:
        """The minibatch ELBO estimate (N/M) sum_n E_q[log p(y_n | x_n^T z)] - KL(q || p)."""
        noise = self._noise(key, batch, num_samples, q.dtype)
        scale = num_data / batch[0].shape[0]
        return scale * self.expected_loglik(q.mean, q.covariance, batch, noise) - q.kl(self.prior(q.dtype))

    def moments_prox_step(self, q, batch, key, beta, num_samples, num_data):
        """KL-proximal step with f linearised in (m, V) (module docstring), in closed form."""
        gm, gv = self.moment_grads(q, batch, key, num_samples)
        s = num_data / batch[0].shape[0]
        r = 1.0 / (1.0 + beta)
        p = self.prior(q.dtype)
        p0, pk = p.precision, q.precision
        new_prec = _sym(r * pk + (1.0 - r) * (p0 - 2.0 * s * gv))
        lhs = (1.0 - r) * p0 + r * pk
        rhs = (1.0 - r) * (s * gm + p.eta1) + r * q.eta1
        m_new = jnp.linalg.solve(lhs, rhs)
        return q.replace_natural((new_prec @ m_new, -0.5 * new_prec))

    def prox_update(self, q, batch, key: PRNGKey, beta, num_samples: int, num_data: int) -> ProxUpdate:
        """``prox_svi``'s step: ``kl_prox_update`` (``"mean"``) or ``moments_prox_step`` (``"moments"``)."""
        if self.linearization == "mean":
            return kl_prox_update(self, q, batch, key, beta, num_samples, num_data)
        return structured_prox_update(self, self.moments_prox_step, q, batch, key, beta, num_samples, num_data)

    def predictive_mean(self, q: expfam.MultivariateNormal, x: Array, key: PRNGKey, num_samples: int = 1000) -> Array:
        """E[y | x] under q by Monte Carlo (logistic: p(y = 1 | x); Poisson: exact exp(m_a + v_a/2))."""
        a_mean = x @ q.mean
        a_var = jnp.sum((x @ q.covariance) * x, -1)
        if self.likelihood == "poisson":
            return jnp.exp(a_mean + 0.5 * a_var)
        e = jax.random.normal(key, (x.shape[0], num_samples), q.dtype)
        return jnp.mean(jax.nn.sigmoid(a_mean[:, None] + jnp.sqrt(a_var)[:, None] * e), -1)


__all__ = ["GLM", "LIKELIHOODS", "LINEARIZATIONS"]
