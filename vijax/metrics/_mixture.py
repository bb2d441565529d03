"""Metrics of mixture fits: the KL between two mixtures of Bernoulli vectors, the number of components a fit uses
(Hoffman and Blei 2015, "Structured stochastic variational inference", §4.2), and the purity of a clustering."""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import ArgumentError, check_data_array, check_int, is_tracer
from vijax.models.bernoulli_mixture import map_assignments, mixture_log_prob
from vijax.types import Array, PRNGKey


WEIGHTS_SUM_TOL = 1e-3  # |sum(weights) - 1| allowed: float32 rounding and a truncated stick's remainder


def _check_mixture(weights_name: str, weights, probs_name: str, probs, dim: int | None = None) -> None:
    """Raises ArgumentError unless weights (K,) are on the simplex and probs (K, D = ``dim``) in [0, 1]."""
    w_shape, p_shape = np.shape(weights), np.shape(probs)
    if len(w_shape) != 1 or w_shape[0] < 1:
        raise ArgumentError(weights_name, f"{weights_name} must be (K,) with K >= 1 components, got shape {w_shape}")
    if len(p_shape) != 2 or p_shape[0] != w_shape[0] or p_shape[1] < 1:
        raise ArgumentError(
            probs_name, f"{probs_name} must be (K, D) with the K = {w_shape[0]} of {weights_name}, got shape {p_shape}"
        )
    if dim is not None and p_shape[1] != dim:
        raise ArgumentError(probs_name, f"{probs_name} must have D = {dim} columns, got shape {p_shape}")
    if not is_tracer(weights):
        w = np.asarray(weights, np.float64)
        if not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
            raise ArgumentError(weights_name, f"{weights_name} must be finite, >= 0 and not all 0, got {w}")
        if abs(np.sum(w) - 1.0) > WEIGHTS_SUM_TOL:
            raise ArgumentError(
                weights_name,
                f"{weights_name} must sum to 1 (mixture weights, a point of the simplex), got sum {np.sum(w):.6g}",
            )
    if not is_tracer(probs):
        p = np.asarray(probs, np.float64)
        if not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
            raise ArgumentError(
                probs_name, f"{probs_name} must be finite probabilities in [0, 1], got NaN, infinite or outside entries"
            )


def components_used(weights: Array, probs: Array, y: Array) -> int:
    """The number of distinct z_hat_n = argmax_k pi_hat_k p(y_n | phi_hat_k) (Hoffman and Blei 2015, §4.2).

    Raises:
      ValueError: naming ``weights``, ``probs`` (see ``bernoulli_mixture_kl``) or ``y`` (empty, not (N, D), not finite).
    """
    _check_mixture("weights", weights, "probs", probs)
    check_data_array("y", y, 2, np.shape(probs)[1])
    return count_distinct(map_assignments(weights, probs, y))


def count_distinct(z) -> int:
    """The number of distinct labels in ``z``; ValueError naming ``z`` when it is empty or holds NaN."""
    a = np.asarray(z)
    if a.size == 0:
        raise ArgumentError("z", f"z is empty (shape {a.shape}): there are no labels to count")
    if np.issubdtype(a.dtype, np.floating) and np.isnan(a).any():
        raise ArgumentError("z", "z holds NaN labels")
    return int(np.unique(a).size)


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
    """KL(p(y | pi, phi) || p(y | pi_hat, phi_hat)) between two finite mixtures of Bernoulli vectors, by Monte Carlo
    with y drawn from the truth (Hoffman and Blei 2015, §4.2), and its standard error std / sqrt(M).

    Args:
      key: PRNG key for the M draws.
      true_weights: the data-generating pi (K,).
      true_probs: the data-generating phi (K, D).
      fit_weights: the fitted pi_hat (K',).
      fit_probs: the fitted phi_hat (K', D).
      num_samples: M >= 2.

    Raises:
      ValueError: naming the argument: weights not on the simplex, probs not (K, D) in [0, 1], ``num_samples``.
    """
    check_int("num_samples", num_samples, 2)
    _check_mixture("true_weights", true_weights, "true_probs", true_probs)
    _check_mixture("fit_weights", fit_weights, "fit_probs", fit_probs, np.shape(true_probs)[1])
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
    """The KL of :func:`bernoulli_mixture_kl` by enumerating all 2^D binary vectors (D <= 16). Raises ValueError
    naming an invalid argument, as ``bernoulli_mixture_kl``."""
    _check_mixture("true_weights", true_weights, "true_probs", true_probs)
    _check_mixture("fit_weights", fit_weights, "fit_probs", fit_probs, np.shape(true_probs)[1])
    d = true_probs.shape[-1]
    if d > 16:
        raise ValueError(f"bernoulli_mixture_kl_exact enumerates 2^D vectors; D = {d} is too large (at most 16)")
    y = jnp.asarray(np.array(list(itertools.product([0.0, 1.0], repeat=d))), true_probs.dtype)
    log_p = mixture_log_prob(true_weights, true_probs, y)
    log_q = mixture_log_prob(fit_weights, fit_probs, y)
    p = jnp.exp(log_p)
    return jnp.sum(jnp.where(p > 0, p * (log_p - log_q), 0.0))


def cluster_purity(z_true: np.ndarray, z_hat: np.ndarray) -> float:
    """Fraction of points whose fitted cluster's (``z_hat``, (N,) ints) majority true type (``z_true``) is theirs.

    Raises:
      ValueError: naming ``z_true`` or ``z_hat``: not non-empty 1-D integer arrays of one length, negative labels.

    Examples:
        >>> cluster_purity(np.array([0, 0, 1, 1]), np.array([5, 5, 5, 7]))
        0.75
    """
    z_true, z_hat = np.asarray(z_true), np.asarray(z_hat)
    for name, z in (("z_true", z_true), ("z_hat", z_hat)):
        if z.ndim != 1 or z.size == 0 or not np.issubdtype(z.dtype, np.integer):
            raise ValueError(f"{name} must be a non-empty 1-D array of integer labels, got {z.dtype} {z.shape}")
    if z_hat.shape != z_true.shape:
        raise ArgumentError("z_hat", f"z_hat must have the shape of z_true {z_true.shape}, got {z_hat.shape}")
    if z_true.min() < 0:
        raise ArgumentError("z_true", f"z_true must hold non-negative labels, got {z_true.min()}")
    return float(sum(np.bincount(z_true[z_hat == c]).max() for c in np.unique(z_hat)) / len(z_true))
