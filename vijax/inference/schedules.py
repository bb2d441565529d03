"""Step-size schedules, optax-compatible: ``count (int32 scalar) -> rho``."""
from __future__ import annotations

import jax.numpy as jnp
import optax


def robbins_monro(scale: float = 1.0, tau: float = 1.0, kappa: float = 0.7) -> optax.Schedule:
    """rho_t = scale * (t + tau)^(-kappa), t = 0, 1, ... (seed 002 §4.3; Hoffman et al. 2013).

    With kappa in (0.5, 1] the sum of rho_t diverges and the sum of rho_t^2 converges (the
    Robbins-Monro conditions). ``rho_0 = scale * tau^(-kappa)`` must lie in (0, 1].

    Examples:
        >>> float(robbins_monro(1.0, tau=1.0, kappa=0.5)(3))
        0.5
    """
    if not 0.5 < kappa <= 1.0:
        raise ValueError(f"kappa must lie in (0.5, 1], got {kappa!r}")
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau!r}")
    if not 0 < scale * tau ** (-kappa) <= 1.0:
        raise ValueError(f"scale * tau^-kappa (the first step size) must lie in (0, 1], got {scale * tau ** (-kappa)!r}")

    def schedule(count):
        return scale * (jnp.asarray(count, jnp.float32) + tau) ** (-kappa)

    return schedule


def constant(rho: float) -> optax.Schedule:
    """rho_t = rho for every t (rho in (0, 1])."""
    if not 0 < rho <= 1:
        raise ValueError(f"rho must lie in (0, 1], got {rho!r}")
    return optax.constant_schedule(rho)


__all__ = ["constant", "robbins_monro"]
