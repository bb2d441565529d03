"""The start checks ``bbvi``'s and ``ngvi``'s ``init`` share: the log-density's values and its
derivative along random directions at a few draws of the initial q, and the errors they raise."""

from __future__ import annotations

import warnings
from typing import Callable, Optional

import jax
import numpy as np

from vijax._validate import ArgumentError

NUM_START_DRAWS = 4  # the draws of the initial q at which init evaluates the log-density


def directional_probe(joint: Callable, log_density: Optional[Callable], batch) -> Callable:
    """``(z, v) -> (joint value, whether d joint / dz . v != 0, whether d log_density / dz . v != 0)``
    at one draw z of q and a direction v (z's structure), by forward mode: a non-zero gradient has a
    non-zero derivative along a random direction with probability one. Without ``log_density`` the
    joint's flag serves both."""

    def probe(z, v):
        value, d_joint = jax.jvp(lambda p: joint(p, batch), (z,), (v,))
        if log_density is None:
            return value, d_joint != 0, d_joint != 0
        d_lik = jax.jvp(lambda p: log_density(p, batch), (z,), (v,))[1]
        return value, d_joint != 0, d_lik != 0

    return probe


def host_rng(key) -> np.random.Generator:
    """NumPy's generator seeded with ``key``'s words (a typed or a raw key), for the start checks'
    host draws."""
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())


def directions(rng: np.random.Generator, z):
    """A standard normal direction from ``rng`` for each draw of ``z`` (arrays or shape structs:
    their shapes and float types)."""
    return jax.tree_util.tree_map(lambda x: rng.standard_normal(x.shape).astype(x.dtype), z)


def check_some_finite(values, where: str) -> None:
    """Raises ValueError when the log-density is not finite at any draw of ``where``: no step from
    such a q is ever accepted (each is a non-finite update, rejected), so the fit would stand still
    without a word; a NaN or an infinity in the data (a covariate, say) is the usual cause."""
    values = np.asarray(values)
    if values.size and not np.any(np.isfinite(values)):
        raise ArgumentError(
            "log_density",
            f"log_density is not finite at any of the {where} ({values}): a NaN or an infinite value in the "
            "data, or a start outside the parameters' support?",
        )


def check_gradient_flows(joint_moves, lik_moves, has_prior: bool, where: str) -> None:
    """Raises ValueError when the log-joint's gradient with respect to the parameters is exactly zero
    at every draw of ``where`` (``joint_moves`` all False): a log-density that is not differentiable
    (``jnp.round``, ``jnp.floor``, ``lax.stop_gradient``, a comparison) or does not depend on the
    parameters leaves q's entropy as the only gradient, so the mean never moves and the scale
    grows without bound. Warns (UserWarning) when only ``log_density``'s gradient is zero while a
    prior's is not: the fit then returns the prior, which is right only for a likelihood that is
    constant in the parameters. Exactly zero at several random draws has probability zero for a
    log-density that depends smoothly on the parameters."""
    if not np.any(np.asarray(joint_moves)):
        raise ValueError(
            f"log_density: its gradient with respect to the parameters is exactly zero at {where}: it is "
            "not differentiable (jnp.round, jnp.floor, lax.stop_gradient, a comparison...) or does not "
            "depend on the parameters, so the ELBO's only gradient would be q's entropy (the mean never "
            "moves, the scale grows without bound)"
        )
    if has_prior and not np.any(np.asarray(lik_moves)):
        warnings.warn(
            f"log_density: its gradient with respect to the parameters is exactly zero at {where}; only "
            "the prior moves q, and the fit will return the prior. A log-density that is not "
            "differentiable (jnp.round, jnp.floor, lax.stop_gradient...) is ignored this way.",
            UserWarning,
            stacklevel=4,
        )


__all__ = [
    "NUM_START_DRAWS",
    "check_gradient_flows",
    "check_some_finite",
    "directional_probe",
    "directions",
    "host_rng",
]
