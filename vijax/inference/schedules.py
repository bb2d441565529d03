"""Step-size schedules, optax-compatible: ``count (int32 scalar) -> step size``; :func:`as_schedule`
coerces every factory's ``schedule`` (None, a number, or a callable)."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from vijax import _validate
from vijax._validate import check_scalar, is_tracer

if TYPE_CHECKING:
    import optax


def robbins_monro(scale: float = 1.0, tau: float = 1.0, kappa: float = 0.7) -> optax.Schedule:
    """rho_t = scale * (t + tau)^(-kappa), t = 0, 1, ... (Blei, Kucukelbir and McAuliffe 2017,
    §4.3; Hoffman et al. 2013).

    kappa in (0.5, 1] (the Robbins-Monro conditions) and ``rho_0 = scale * tau^(-kappa)`` in (0, 1]
    are checked where the constants are concrete.

    Examples:
        >>> float(robbins_monro(1.0, tau=1.0, kappa=1.0)(3))
        0.25
    """

    def schedule(count):
        return scale * (jnp.asarray(count, jnp.float32) + tau) ** (-kappa)

    if any(is_tracer(v) for v in (scale, tau, kappa)):
        return schedule
    if not 0.5 < kappa <= 1.0:
        raise _validate.ArgumentError("kappa", f"kappa must lie in (0.5, 1], got {kappa!r}", value=kappa)
    if not tau > 0:
        raise _validate.ArgumentError("tau", f"tau must be > 0, got {tau!r}", value=tau)
    if not 0 < scale * tau ** (-kappa) <= 1.0:
        raise _validate.ArgumentError(
            "scale", f"scale * tau^-kappa (the first step size) must lie in (0, 1], got {scale * tau ** (-kappa)!r}"
        )
    schedule.first_step = scale * tau ** (-kappa)  # read by as_schedule
    return schedule


def constant(rho: float) -> optax.Schedule:
    """rho_t = rho for every t (rho in (0, 1]); what ``as_schedule`` makes of a number."""
    return as_schedule(rho, "rho")


def default_schedule() -> optax.Schedule:
    """The default step sizes of SVI, SSVI and MAP-EM: ``robbins_monro(1.0, tau=1.0, kappa=0.7)``."""
    return robbins_monro(1.0, tau=1.0, kappa=0.7)


def as_schedule(schedule, name: str = "schedule", *, default=None, upper: float | None = 1.0):
    """The schedule an algorithm runs with, from what its caller passed.

    Args:
      schedule: None (``default``), a finite number in (0, ``upper``], or ``count -> step size`` (checked at
        count 0 where it can be); a traced value is taken unchecked (a ``vmap``ped grid of step sizes).
      name: the argument's name in error messages.
      default: the schedule used for None; None makes ``schedule`` required.
      upper: the largest allowed step size (None: unbounded).

    Raises:
      ValueError: naming ``name`` for a missing, non-finite, non-positive or too large step size.

    Examples:
        >>> float(as_schedule(0.5)(7))
        0.5
        >>> as_schedule(2.0)
        Traceback (most recent call last):
        ...
        vijax._validate.ArgumentError: schedule must be a finite number in (0, 1], got 2.0
    """
    if schedule is None:
        if default is None:
            raise _validate.ArgumentError(name, f"{name} is required: a number > 0 or a callable count -> step size")
        return default
    if is_tracer(schedule):
        return lambda count: schedule
    if callable(schedule):
        first = getattr(schedule, "first_step", None)
        try:
            first = np.asarray(jax.jit(schedule)(np.int32(0)) if first is None else first, dtype=float)
        except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
            return schedule
        if first.ndim != 0 or not np.isfinite(first) or first <= 0 or (upper is not None and first > upper):
            bound = "> 0" if upper is None else f"in (0, {upper:g}]"
            raise _validate.ArgumentError(
                name, f"{name} must give a finite step size {bound}, got {first!r} at count 0"
            )
        return schedule
    if isinstance(schedule, bool) or not isinstance(schedule, numbers.Real):
        raise _validate.ArgumentError(
            name, f"{name} must be a number or a callable count -> step size (or None), got {schedule!r}"
        )
    value = check_scalar(name, schedule, low=0.0, high=upper)
    return lambda count: value  # optax.constant_schedule's


__all__ = ["as_schedule", "constant", "default_schedule", "robbins_monro"]
