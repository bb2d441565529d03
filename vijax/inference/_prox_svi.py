"""Proximal-gradient stochastic variational inference, PG-SVI (Khan, Babanezhad, Lin, Schmidt and Sugiyama
2016, Faster stochastic variational inference using proximal-gradient methods with general divergence
functions, iteration (9)). -L = f + h (§3.1): h = KL(q || p) kept exact; f, the non-conjugate expected
log-likelihood, is linearised at q with a stochastic gradient from M of N data points and S samples:

    lambda_{k+1} = argmin_lambda  <lambda, grad_hat f(lambda_k)> + h(lambda) + (1/beta_k) D(lambda || lambda_k).

The model is a ``ProxModel`` and either a ``GradientProxModel`` (``prior``, ``loglik_grad``) or a
``StructuredProxModel`` (``prox_update``).

* ``divergence="kl"``: D = KL(q_lambda || q_k), f linearised in the mean parameters; in closed form
  lambda_{k+1} = r_k lambda_k + (1 - r_k) (eta + (N/M) g_hat), r_k = 1 / (1 + beta_k) (for a
  Gaussian q, appendix D/E and eq. (76)): ``vijax.models.kl_prox_update`` through the domain-guarded
  ``vijax.expfam.conjugate_update``; a ``StructuredProxModel`` supplies its own ``prox_update``.
* ``divergence="euclidean"``: D = ||lambda - lambda_k||^2 / 2 with h = 0: the natural-parameter
  gradient step lambda_{k+1} = lambda_k + beta_k F(lambda)(eta + (N/M) g_hat - lambda) (§6.1's SGD).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from vijax import expfam
from vijax._validate import ArgumentError, check_choice, check_int, implements
from vijax.inference._conjugate import check_q_global, float_leaf_dtype
from vijax.inference._scale import check_num_data, data_scale, num_present
from vijax.inference.base import VIAlgorithm, check_protocol, guarded_algorithm, safe_increment, validated_step
from vijax.inference.base import checked_start
from vijax.inference.schedules import as_schedule
from vijax.expfam import euclidean_natural_grad_step
from vijax.models import GradientProxModel, ProxModel, StructuredProxModel, kl_prox_update
from vijax.types import Array, PRNGKey, PyTree

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
    checked_start(key, batch, model)
    return ProxSVIState(model.init_variational(key, batch), jnp.zeros((), jnp.int32))


@validated_step
def step(
    key: PRNGKey, state: ProxSVIState, batch: PyTree, *, model, num_data: int, schedule, divergence="kl", num_samples=1
) -> tuple[ProxSVIState, ProxSVIInfo]:
    """One PG-SVI iteration (9) on a minibatch; ``info.elbo`` is at the pre-update q."""
    check_num_data(num_data, model, batch, state.count)
    q = state.q_global
    if implements(model, GradientProxModel):
        check_q_global(q, model.prior())
    beta = jnp.asarray(schedule(state.count))
    if divergence == "kl":
        if implements(model, StructuredProxModel):
            upd = model.prox_update(q, batch, key, beta, num_samples, num_data)
        else:
            upd = kl_prox_update(model, q, batch, key, beta, num_samples, num_data)
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
      model: a ``vijax.models.ProxModel`` (GLM, Poisson-Gamma, Dirichlet-multinomial, CTM, GP classification).
      num_data: N, the number of data points minibatches are drawn from.
      schedule: beta_k (required): a float > 0 or a callable ``count -> beta_k``.
      divergence: ``"kl"`` or ``"euclidean"`` (module docstring).
      num_samples: Monte Carlo samples per stochastic gradient (and ELBO estimate).

    Raises:
      ValueError: for a missing or bad setting, or a model that is not a ``ProxModel`` with a step for ``divergence``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.models import GLM
        >>> x = jax.random.normal(jax.random.PRNGKey(0), (50, 3)); y = (x[:, 0] > 0).astype(float)
        >>> alg = prox_svi(GLM(3, "logistic"), num_data=50, schedule=1.0, num_samples=10)
        >>> state = alg.init(jax.random.PRNGKey(1))
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(2), state, (x[:10], y[:10]))
        >>> bool(jnp.isfinite(info.elbo))
        True
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
    settings = dict(num_data=num_data, schedule=schedule, divergence=divergence, num_samples=num_samples)
    return guarded_algorithm(init, step, model=model, **settings)


prox_svi = as_top_level_api
