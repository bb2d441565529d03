"""Proximal steps on pytrees of exponential families (Khan et al. 2016, iteration (9) and §3.1),
beside ``conjugate_update``: the KL-proximal target and its closed form, the proximal objective the
tests minimise as an oracle, the Euclidean natural-gradient step, and the chain rule from natural to
mean parameters. They need only the families; the steps that call a model (``kl_prox_update``,
``structured_prox_update``) are in ``vijax.models``."""

from __future__ import annotations

from typing import Callable

import jax

from vijax.expfam._base import is_family, tree_from_natural, tree_inner, tree_kl, tree_mean_params, tree_natural_params
from vijax.types import Array, PyTree


def mean_param_grad(fn: Callable[[PyTree], Array], q: PyTree) -> PyTree:
    """grad_mu fn for a function of a pytree of families, by the chain rule through lambda.

    Since grad_lambda fn = F(lambda) grad_mu fn (F = hess A, the Fisher matrix),
    grad_mu fn = F^-1 grad_lambda fn, computed per family with ``inv_fisher_vp`` (closed form for
    every vijax family; for MultivariateNormal the pseudo-inverse, exact on the symmetric
    directions where such gradients live). ``fn`` may be a Monte Carlo estimate with fixed noise
    drawn inside (reparameterised samples): the result is then the exact mean-parameter gradient of
    that estimate.

    Args:
      fn: q -> scalar, differentiable in the natural parameters (fields) of q's families.
      q: pytree of ``AbstractExpFamily``.

    Returns:
      A pytree like ``tree_natural_params(q)``.
    """
    grad_nat = jax.grad(fn)(q)  # a pytree of families whose fields are d fn / d lambda
    return jax.tree_util.tree_map(lambda f, g: tuple(f.inv_fisher_vp(g.natural_params)), q, grad_nat, is_leaf=is_family)


def kl_prox_target(prior: PyTree, g_hat: PyTree, scale=1.0) -> PyTree:
    """eta + scale * g_hat, the point the KL-proximal step interpolates towards."""
    return jax.tree_util.tree_map(lambda e, g: e + scale * g, tree_natural_params(prior), g_hat)


def kl_prox_closed_form(q: PyTree, prior: PyTree, g: PyTree, beta) -> PyTree:
    """The undamped closed-form KL-proximal step r lambda_k + (1 - r)(eta + g), r = 1/(1 + beta)."""
    r = 1.0 / (1.0 + beta)
    new = jax.tree_util.tree_map(
        lambda lam, t: r * lam + (1.0 - r) * t, tree_natural_params(q), kl_prox_target(prior, g)
    )
    return tree_from_natural(q, new)


def prox_objective(q_new: PyTree, q_k: PyTree, prior: PyTree, g: PyTree, beta) -> Array:
    """The KL-proximal objective of iteration (9) with f linearised in the mean parameters:

        -<g, mu(q_new)> + KL(q_new || p) + (1/beta) KL(q_new || q_k).

    (The constant f(q_k) - <g, mu(q_k)> is dropped.) Its minimiser is ``kl_prox_closed_form``;
    tests minimise it numerically as the oracle.
    """
    lin = tree_inner(g, tree_mean_params(q_new))
    return -lin + tree_kl(q_new, prior) + tree_kl(q_new, q_k) / beta


def euclidean_natural_grad_step(q: PyTree, prior: PyTree, g: PyTree, beta) -> PyTree:
    """lambda + beta * grad_lambda L, with grad_lambda L = F(lambda) (eta + g - lambda).

    The ELBO's Euclidean gradient in the natural parameters (the split h = 0 of Khan et al. 2016, §3.1:
    the whole negative ELBO is linearised; ``fisher_vp`` maps the mean-parameter gradient g and
    the prior's natural-parameter gap to lambda-space).
    """

    def fam_step(f, e, gg):
        direction = tuple(ei + gi - li for ei, gi, li in zip(e, gg, f.natural_params))
        grad = f.fisher_vp(direction)
        return tuple(li + beta * di for li, di in zip(f.natural_params, grad))

    new = jax.tree_util.tree_map(fam_step, q, tree_natural_params(prior), g, is_leaf=is_family)
    return new


__all__ = ["euclidean_natural_grad_step", "kl_prox_closed_form", "kl_prox_target", "mean_param_grad", "prox_objective"]
