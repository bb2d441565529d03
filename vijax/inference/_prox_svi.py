"""Proximal-gradient stochastic variational inference, PG-SVI (Khan, Babanezhad, Lin, Schmidt and
Sugiyama 2016, Faster stochastic variational inference using proximal-gradient methods with
general divergence functions, iteration (9)).

The negative ELBO is split as -L = f + h (§3.1): h is convex and kept exact (here the KL from q to
the conjugate prior, KL(q || p)); f holds the "hard" terms (the non-conjugate expected
log-likelihood) and is linearised at the current q with a stochastic gradient from a minibatch of
M of the N data points and S Monte Carlo samples. Iteration (9):

    lambda_{k+1} = argmin_lambda  <lambda, grad_hat f(lambda_k)> + h(lambda) + (1/beta_k) D(lambda || lambda_k).

The model is a ``vijax.models.ProxModel`` (``init_variational``, ``elbo``, ``check_data``) and
either a ``GradientProxModel`` (``prior``, ``loglik_grad``) or a ``StructuredProxModel``
(``prox_update``); see ``vijax/models/_nonconjugate.py`` and docs/prox_svi.md.

* ``divergence="kl"``: D = KL(q_lambda || q_k) and f linearised in the mean parameters. The
  argmin is in closed form (the conjugate-computation form)::

      lambda_{k+1} = r_k lambda_k + (1 - r_k) (eta + (N/M) g_hat),      r_k = 1 / (1 + beta_k),

  which for a Gaussian q is exactly the precision update of appendix D/E and the mean update
  ("approximate update", eq. (76)) the paper uses: ``vijax.models.kl_prox_update``, through the
  shared domain-guarded update (``vijax.expfam.conjugate_update`` with rho = 1 - r_k; elements
  that would leave the domain are damped and counted in ``info.num_damped``). A model with a
  closed form of its own (a ``vijax.models.StructuredProxModel``: GP classification's structured
  (m, gamma) form that never stores an N x N covariance, the CTM's local fits, the GLM's
  linearisations) supplies ``prox_update`` instead.
* ``divergence="euclidean"``: D = ||lambda - lambda_k||^2 / 2 in the natural parameters with the
  split h = 0 (the paper allows it, §3.1), i.e. the plain (stochastic) gradient step
  lambda_{k+1} = lambda_k + beta_k grad_lambda L_hat, grad_lambda L = F(lambda)(eta + (N/M) g_hat - lambda)
  (the "GD"/"SGD" baselines of §6.1, in the natural parameters), domain-guarded the same way.
* The step size beta_k is the ``schedule``: a float > 0 or a callable ``count -> beta_k`` (read
  from the state, so the step compiles once). M is the leading dimension of the batch.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from vijax import expfam
from vijax._validate import ArgumentError, check_choice, check_int, check_key, implements
from vijax.inference._conjugate import check_q_global, float_leaf_dtype
from vijax.inference._scale import check_num_data, data_scale, num_present
from vijax.inference.base import (
    VIAlgorithm,
    bind_settings,
    check_protocol,
    reject_non_finite,
    safe_increment,
    validated_step,
)
from vijax.inference.schedules import as_schedule
from vijax.expfam import euclidean_natural_grad_step
from vijax.models import GradientProxModel, ProxModel, StructuredProxModel, kl_prox_update
from vijax.types import Array, PRNGKey, PyTree, Schedule

DIVERGENCES = ("kl", "euclidean")


class ProxSVIState(NamedTuple):
    q_global: PyTree  # the variational parameters (a pytree of families, or a model's structured form)
    count: Array  # int32 scalar; drives beta_k


class ProxSVIInfo(NamedTuple):
    elbo: Array  # minibatch estimate of the full-data ELBO at the pre-update q
    step_size: Array  # beta_k
    num_damped: Array  # family batch elements pulled back into the natural-parameter domain


def init(key: PRNGKey, batch: PyTree = None, *, model: ProxModel) -> ProxSVIState:
    """q_0 from ``model.init_variational`` (after ``model.check_data(batch)`` when given)."""
    check_key("key", key)
    if batch is not None:
        model.check_data(batch)
    return ProxSVIState(model.init_variational(key, batch), jnp.zeros((), jnp.int32))


@validated_step
def step(
    key: PRNGKey,
    state: ProxSVIState,
    batch: PyTree,
    *,
    model: ProxModel,
    num_data: int,
    schedule: Schedule,
    divergence: str = "kl",
    num_samples: int = 1,
) -> tuple[ProxSVIState, ProxSVIInfo]:
    """One PG-SVI iteration (9) on a minibatch.

    The ELBO reported in ``info`` is the model's estimate at the pre-update q (as SVI reports).
    """
    check_num_data(num_data, model, batch, state.count)
    q = state.q_global
    if implements(model, GradientProxModel):  # q in its prior's families (a CTM's globals are its own)
        check_q_global(q, model.prior())
    beta = jnp.asarray(schedule(state.count))
    if divergence == "kl":
        prox = (
            model.prox_update
            if implements(model, StructuredProxModel)
            else (lambda *args: kl_prox_update(model, *args))
        )
        upd = prox(q, batch, key, beta, num_samples, num_data)
        return ProxSVIState(upd.q, safe_increment(state.count)), ProxSVIInfo(upd.elbo, beta, upd.num_damped)
    key_grad, key_elbo = jax.random.split(key)
    elbo = model.elbo(q, batch, key_elbo, num_samples, num_data)
    scale, _ = data_scale(state.count, num_present(model, batch), num_data, False, float_leaf_dtype(q))
    g_scaled = jax.tree_util.tree_map(lambda g: scale * g, model.loglik_grad(q, batch, key_grad, num_samples))
    target = euclidean_natural_grad_step(q, model.prior(), g_scaled, beta)
    q_new, num_damped = expfam.tree_interpolate(q, target, 1.0)
    return ProxSVIState(q_new, safe_increment(state.count)), ProxSVIInfo(elbo, beta, num_damped)


def as_top_level_api(
    model: ProxModel, *, num_data: int, schedule, divergence: str = "kl", num_samples: int = 1
) -> VIAlgorithm:
    """Proximal-gradient SVI (Khan et al. 2016, iteration (9)) as a ``VIAlgorithm(init, step)``.

    Args:
      model: a ``vijax.models.ProxModel`` (GLM, Poisson-Gamma softplus, noisy
        Dirichlet-multinomial, CTM, GP classification).
      num_data: N, the number of data points minibatches are drawn from (minibatch terms are
        scaled by N/M).
      schedule: beta_k (required): a finite float > 0, or a callable ``count -> beta_k``. For the
        KL divergence r_k = 1/(1 + beta_k); beta -> inf is the full (coordinate) step
        eta + (N/M) g.
      divergence: ``"kl"`` (closed-form KL-proximal step) or ``"euclidean"`` (plain gradient step
        in the natural parameters, the split h = 0).
      num_samples: Monte Carlo samples per stochastic gradient (and ELBO estimate).

    Returns:
      ``VIAlgorithm`` whose ``init(key, batch=None)`` gives ``ProxSVIState`` and whose
      ``step(key, state, batch)`` gives ``(ProxSVIState, ProxSVIInfo)``; both jit and vmap.

    Raises:
      ValueError: for a missing ``schedule``, beta <= 0 (or a schedule giving beta_0 <= 0), an
        unknown ``divergence``, ``num_data`` or ``num_samples`` < 1, or a model that is not a
        ``ProxModel`` with a step for ``divergence``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.models import GLM
        >>> x = jax.random.normal(jax.random.PRNGKey(0), (50, 3)); y = (x[:, 0] > 0).astype(float)
        >>> alg = prox_svi(GLM(3, "logistic"), num_data=50, schedule=1.0, num_samples=10)
        >>> state = alg.init(jax.random.PRNGKey(1))
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(2), state, (x[:10], y[:10]))
        >>> bool(jnp.isfinite(info.elbo))
        True

    References:
      Khan, Babanezhad, Lin, Schmidt, Sugiyama (2016), "Faster stochastic variational inference
      using proximal-gradient methods with general divergence functions", UAI.
    """
    num_data = check_int("num_data", num_data)
    num_samples = check_int("num_samples", num_samples)
    check_choice("divergence", divergence, DIVERGENCES)
    schedule = as_schedule(schedule, upper=None)
    check_protocol(model, ProxModel, "prox_svi")
    if not implements(model, GradientProxModel) and (
        divergence == "euclidean" or not implements(model, StructuredProxModel)
    ):
        raise ArgumentError(
            "divergence",
            f"divergence={divergence!r} needs model.prior and model.loglik_grad (a GradientProxModel)"
            f"{'' if divergence == 'euclidean' else ' or model.prox_update (a StructuredProxModel)'}; "
            f"{type(model).__name__} has none",
        )
    return reject_non_finite(
        VIAlgorithm(
            init=bind_settings(init, model=model),
            step=bind_settings(
                step, model=model, num_data=num_data, schedule=schedule, divergence=divergence, num_samples=num_samples
            ),
        )
    )


prox_svi = as_top_level_api

__all__ = ["DIVERGENCES", "ProxSVIInfo", "ProxSVIState", "as_top_level_api", "init", "prox_svi", "step"]
