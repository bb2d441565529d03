"""Metrics of mixture fits: the KL between two finite mixtures of Bernoulli vectors, the number
of components a Bernoulli-mixture fit uses (Hoffman and Blei 2015, "Structured stochastic
variational inference", AISTATS, §4.2), and the purity of a clustering."""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import check_int
from vijax.models.bernoulli_mixture import map_assignments, mixture_log_prob
from vijax.types import Array, PRNGKey


def components_used(weights: Array, probs: Array, y: Array) -> int:
    """The number of components that are the most probable component of at least one datum.

    With point estimates (pi_hat, phi_hat) of a fit, z_hat_n = argmax_k pi_hat_k p(y_n | phi_hat_k)
    (``vijax.models.bernoulli_mixture.map_assignments``) and the count is the number of distinct
    z_hat_n. For the truth the
    paper's count (56; Hoffman and Blei 2015, §4.2) is the number of distinct true z_n, which is
    what :func:`count_distinct` of the generator's z gives. Hard assignments make the count
    insensitive to the tiny weight a fit leaves on an unused component (mean-field's superfluous
    components keep E[pi_k] ≈ (alpha / K) / (N + alpha) > 0), which is how the paper's "not
    significantly associated with data" reads.
    """
    return count_distinct(map_assignments(weights, probs, y))


def count_distinct(z) -> int:
    """The number of distinct labels in ``z``."""
    return int(np.unique(np.asarray(z)).size)


class KLEstimate(NamedTuple):
    """A Monte Carlo estimate with its standard error."""

    value: Array
    stderr: Array


def bernoulli_mixture_kl(
    key: PRNGKey,
    true_weights: Array,
    true_probs: Array,
    fit_weights: Array,
    fit_probs: Array,
    num_samples: int = 10_000,
) -> KLEstimate:
    """KL(p(y | pi, phi) || p(y | pi_hat, phi_hat)) = E_{y ~ p(y | pi, phi)}[log p(y | pi, phi) - log p(y | pi_hat, phi_hat)]
    between two finite mixtures of Bernoulli vectors, by simple Monte Carlo with y drawn from the
    truth (Hoffman and Blei 2015, §4.2), and its standard error std / sqrt(M).

    Args:
      key: PRNG key for the M draws.
      true_weights: the data-generating pi (K,).
      true_probs: the data-generating phi (K, D).
      fit_weights: the fitted pi_hat (K',).
      fit_probs: the fitted phi_hat (K', D).
      num_samples: M >= 2.
    """
    check_int("num_samples", num_samples, 2)
    return _kl_monte_carlo(key, true_weights, true_probs, fit_weights, fit_probs, num_samples)


@functools.partial(jax.jit, static_argnums=5)
def _kl_monte_carlo(key, true_weights, true_probs, fit_weights, fit_probs, num_samples):
    k_z, k_y = jax.random.split(key)
    log_w = jnp.where(true_weights > 0, jnp.log(jnp.where(true_weights > 0, true_weights, 1.0)), -jnp.inf)
    z = jax.random.categorical(k_z, log_w, shape=(num_samples,))
    y = jax.random.bernoulli(k_y, true_probs[z]).astype(true_probs.dtype)
    diff = mixture_log_prob(true_weights, true_probs, y) - mixture_log_prob(fit_weights, fit_probs, y)
    return KLEstimate(jnp.mean(diff), jnp.std(diff, ddof=1) / jnp.sqrt(num_samples))


def bernoulli_mixture_kl_exact(true_weights: Array, true_probs: Array, fit_weights: Array, fit_probs: Array) -> Array:
    """The KL of :func:`bernoulli_mixture_kl` by enumerating all 2^D binary vectors (for tests;
    D <= 16)."""
    d = true_probs.shape[-1]
    if d > 16:
        raise ValueError(f"bernoulli_mixture_kl_exact enumerates 2^D vectors; D = {d} is too large (at most 16)")
    y = jnp.asarray(np.array(list(itertools.product([0.0, 1.0], repeat=d))), true_probs.dtype)
    log_p = mixture_log_prob(true_weights, true_probs, y)
    log_q = mixture_log_prob(fit_weights, fit_probs, y)
    p = jnp.exp(log_p)
    return jnp.sum(jnp.where(p > 0, p * (log_p - log_q), 0.0))


def cluster_purity(z_true: np.ndarray, z_hat: np.ndarray) -> float:
    """Fraction of points whose fitted cluster's majority true type is their own type.

    Args:
      z_true: (N,) non-negative int true labels.
      z_hat: (N,) fitted cluster labels.

    Examples:
        >>> cluster_purity(np.array([0, 0, 1, 1]), np.array([5, 5, 5, 7]))
        0.75

    Raises:
      ValueError: naming ``z_true`` or ``z_hat`` for labels that are not non-empty 1-D integer
        arrays of one length, or negative true labels.
    """
    z_true, z_hat = np.asarray(z_true), np.asarray(z_hat)
    for name, z in (("z_true", z_true), ("z_hat", z_hat)):
        if z.ndim != 1 or z.size == 0 or not np.issubdtype(z.dtype, np.integer):
            raise ValueError(f"{name} must be a non-empty 1-D array of integer labels, got {z.dtype} {z.shape}")
    if z_hat.shape != z_true.shape:
        raise ValueError(f"z_hat must have the shape of z_true {z_true.shape}, got {z_hat.shape}")
    if z_true.min() < 0:
        raise ValueError(f"z_true must hold non-negative labels, got {z_true.min()}")
    total = 0
    for c in np.unique(z_hat):
        total += np.bincount(z_true[z_hat == c]).max()
    return float(total / len(z_true))


__all__ = [
    "KLEstimate",
    "bernoulli_mixture_kl",
    "bernoulli_mixture_kl_exact",
    "cluster_purity",
    "components_used",
    "count_distinct",
]
