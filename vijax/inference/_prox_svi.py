"""Proximal-gradient stochastic variational inference, PG-SVI (seed 001, iteration (9); Khan et al. 2016).

The negative ELBO is split as -L = f + h (§3.1): h is convex and kept exact (here the KL from q to
the conjugate prior, KL(q || p)); f holds the "hard" terms (the non-conjugate expected
log-likelihood) and is linearised at the current q with a stochastic gradient from a minibatch of
M of the N data points and S Monte Carlo samples. Iteration (9):

    lambda_{k+1} = argmin_lambda  <lambda, grad_hat f(lambda_k)> + h(lambda) + (1/beta_k) D(lambda || lambda_k).

Protocol decided by 'prox-core' (shared with the GP-classification helper; see docs/prox_svi.md):

* The model offers ``init_variational(key, batch=None)``, ``prior()``, ``loglik_grad(q, batch,
  key, num_samples)`` (the minibatch SUM of grad_mu E_q[log p(y_n | .)], the gradient with respect
  to q's MEAN parameters mu, structured like q's natural parameters) and ``elbo(q, batch, key,
  num_samples, num_data)`` (full-data estimate), optionally ``prox_step(q, batch, key, beta,
  num_samples, num_data)`` (a model's own closed form, e.g. a structured representation that never
  stores an N x N covariance; called instead of the generic step when present and
  ``divergence="kl"``) and ``check_data(batch)``. See ``vijax.models._nonconjugate.ProxModel``.
  A model whose ``prox_step`` already computes the ELBO estimate (the CTM fits the minibatch's
  local q's in it) sets the class attribute ``prox_step_returns_elbo = True`` and returns
  ``(q_new, elbo)``; ``elbo`` is then not called.
  NOTE: ``elbo`` takes ``num_data`` as a fifth argument (the protocol draft had four): the model
  cannot know N otherwise.
* ``divergence="kl"``: D = KL(q_lambda || q_k) and f linearised in the mean parameters. The
  argmin is in closed form (the conjugate-computation form)::

      lambda_{k+1} = r_k lambda_k + (1 - r_k) (eta + (N/M) g_hat),      r_k = 1 / (1 + beta_k),

  which for a Gaussian q is exactly the precision update of appendix D/E and the mean update
  ("approximate update", eq. (76)) the paper uses. The step goes through the shared domain-guarded
  interpolation (``_natgrad.interpolate`` with rho = 1 - r_k); elements that would leave the
  domain are damped and counted in ``info.num_damped``.
* ``divergence="euclidean"``: D = ||lambda - lambda_k||^2 / 2 in the natural parameters with the
  split h = 0 (the paper allows it, §3.1), i.e. the plain (stochastic) gradient step
  lambda_{k+1} = lambda_k + beta_k grad_lambda L_hat, grad_lambda L = F(lambda)(eta + (N/M) g_hat - lambda)
  (the "GD"/"SGD" baselines of §6.1, in the natural parameters), domain-guarded the same way.
* The step size beta_k is a float > 0 or a schedule ``count -> beta_k`` (read from the state, so
  the step compiles once). M is the leading dimension of the batch.
"""
from __future__ import annotations

import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vijax.inference import _natgrad
from vijax.inference.base import VIAlgorithm, safe_increment
from vijax.models._nonconjugate import euclidean_natural_grad_step, kl_prox_target
from vijax.types import Array, PRNGKey, PyTree

DIVERGENCES = ("kl", "euclidean")


class ProxSVIState(NamedTuple):
    q: PyTree  # the variational parameters (a pytree of families, or a model's structured form)
    count: Array  # int32 scalar; drives beta_k


class ProxSVIInfo(NamedTuple):
    elbo: Array  # minibatch estimate of the full-data ELBO at the pre-update q
    step_size: Array  # beta_k
    num_damped: Array  # family batch elements pulled back into the natural-parameter domain


def batch_size(batch: PyTree) -> int:
    """M: the leading dimension of the batch's first leaf (static under jit)."""
    leaves = jax.tree_util.tree_leaves(batch)
    if not leaves or jnp.ndim(leaves[0]) == 0:
        raise ValueError("batch must hold arrays with a leading minibatch dimension")
    return leaves[0].shape[0]


def _as_schedule(step_size):
    """A float beta > 0 becomes a constant schedule; a callable is checked at count 0 when it can be."""
    if callable(step_size):
        try:
            b0 = np.asarray(step_size(jnp.zeros((), jnp.int32)), dtype=float)
        except jax.errors.ConcretizationTypeError:  # pragma: no cover - a schedule that only traces
            return step_size
        if b0.ndim != 0 or not np.isfinite(b0) or b0 <= 0:
            raise ValueError(f"step_size schedule must give beta_k > 0, got {b0!r} at count 0")
        return step_size
    if isinstance(step_size, bool) or not isinstance(step_size, numbers.Real) \
            or not np.isfinite(step_size) or step_size <= 0:
        raise ValueError(f"step_size must be a finite number > 0 or a schedule, got {step_size!r}")
    beta = float(step_size)
    return lambda count: jnp.asarray(beta)


def init(key: PRNGKey, batch: PyTree = None, *, model) -> ProxSVIState:
    """q_0 from ``model.init_variational`` (after ``model.check_data(batch)`` when both exist)."""
    if batch is not None and callable(getattr(model, "check_data", None)):
        model.check_data(batch)
    return ProxSVIState(model.init_variational(key, batch), jnp.zeros((), jnp.int32))


def step(state: ProxSVIState, batch: PyTree, key: PRNGKey, *, model, num_data: int, schedule,
         divergence: str = "kl", num_samples: int = 1) -> tuple[ProxSVIState, ProxSVIInfo]:
    """One PG-SVI iteration (9) on a minibatch.

    The ELBO reported in ``info`` is the model's estimate at the pre-update q (as SVI reports).
    """
    m = batch_size(batch)
    key_grad, key_elbo = jax.random.split(key)
    q = state.q
    beta = jnp.asarray(schedule(state.count))
    own_step = divergence == "kl" and callable(getattr(model, "prox_step", None))
    if own_step and getattr(model, "prox_step_returns_elbo", False):
        # the model's step already fits what the ELBO needs (CTM: the minibatch's local q's)
        q_new, elbo = model.prox_step(q, batch, key_grad, beta, num_samples, num_data)
        return ProxSVIState(q_new, safe_increment(state.count)), ProxSVIInfo(elbo, beta, jnp.zeros((), jnp.int32))
    elbo = model.elbo(q, batch, key_elbo, num_samples, num_data)
    if own_step:
        q_new = model.prox_step(q, batch, key_grad, beta, num_samples, num_data)
        num_damped = jnp.zeros((), jnp.int32)
    else:
        g_hat = model.loglik_grad(q, batch, key_grad, num_samples)
        scale = num_data / m
        if divergence == "kl":
            dtype = jax.tree_util.tree_leaves(q)[0].dtype
            rho = (beta / (1.0 + beta)).astype(dtype)  # 1 - r_k
            q_new, num_damped = _natgrad.interpolate(q, kl_prox_target(model.prior(), g_hat, scale), rho)
        else:
            g_scaled = jax.tree_util.tree_map(lambda g: scale * g, g_hat)
            target = euclidean_natural_grad_step(q, model.prior(), g_scaled, beta)
            q_new, num_damped = _natgrad.interpolate(q, target, 1.0)
    return ProxSVIState(q_new, safe_increment(state.count)), ProxSVIInfo(elbo, beta, num_damped)


def as_top_level_api(model, num_data: int, step_size, divergence: str = "kl", num_samples: int = 1) -> VIAlgorithm:
    """Proximal-gradient SVI (seed 001, iteration (9)) as a ``VIAlgorithm(init, step)``.

    Args:
      model: a ``vijax.models._nonconjugate.ProxModel`` (GLM, Poisson–Gamma softplus,
        noisy Dirichlet–multinomial, CTM, GP classification).
      num_data: N, the number of data points minibatches are drawn from (minibatch terms are
        scaled by N/M).
      step_size: beta_k: a finite float > 0, or a schedule ``count -> beta_k``. For the KL
        divergence r_k = 1/(1 + beta_k); beta -> inf is the full (coordinate) step eta + (N/M) g.
      divergence: ``"kl"`` (closed-form KL-proximal step) or ``"euclidean"`` (plain gradient step
        in the natural parameters, the split h = 0).
      num_samples: Monte Carlo samples per stochastic gradient (and ELBO estimate).

    Returns:
      ``VIAlgorithm`` whose ``init(key, batch=None)`` gives ``ProxSVIState`` and whose
      ``step(state, batch, key)`` gives ``(ProxSVIState, ProxSVIInfo)``; both jit and vmap.

    Raises:
      ValueError: for ``step_size`` <= 0 (or a schedule giving beta_0 <= 0), an unknown
        ``divergence``, ``num_data`` or ``num_samples`` < 1, or ``divergence="euclidean"`` with a
        model that offers no ``loglik_grad``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.models.glm import GLM
        >>> x = jax.random.normal(jax.random.PRNGKey(0), (50, 3)); y = (x[:, 0] > 0).astype(float)
        >>> alg = prox_svi(GLM(3, "logistic"), num_data=50, step_size=1.0, num_samples=10)
        >>> state = alg.init(jax.random.PRNGKey(1))
        >>> state, info = jax.jit(alg.step)(state, (x[:10], y[:10]), jax.random.PRNGKey(2))
        >>> bool(jnp.isfinite(info.elbo))
        True

    References:
      Khan, Babanezhad, Lin, Schmidt, Sugiyama (2016), "Faster stochastic variational inference
      using proximal-gradient methods with general divergence functions", UAI.
    """
    if isinstance(num_data, bool) or not isinstance(num_data, (int, np.integer)) or num_data < 1:
        raise ValueError(f"num_data must be an integer >= 1, got {num_data!r}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) or num_samples < 1:
        raise ValueError(f"num_samples must be an integer >= 1, got {num_samples!r}")
    if divergence not in DIVERGENCES:
        raise ValueError(f"divergence must be one of {DIVERGENCES}, got {divergence!r}")
    if divergence == "euclidean" and not callable(getattr(model, "loglik_grad", None)):
        raise ValueError(f"divergence='euclidean' needs model.loglik_grad; {type(model).__name__} has none")
    schedule = _as_schedule(step_size)
    num_data, num_samples = int(num_data), int(num_samples)
    return VIAlgorithm(
        init=lambda key, batch=None: init(key, batch, model=model),
        step=lambda state, batch, key: step(state, batch, key, model=model, num_data=num_data, schedule=schedule,
                                            divergence=divergence, num_samples=num_samples))


prox_svi = as_top_level_api

__all__ = ["DIVERGENCES", "ProxSVIInfo", "ProxSVIState", "as_top_level_api", "batch_size", "prox_svi"]
