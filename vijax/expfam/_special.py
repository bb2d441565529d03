"""Special functions the families and models evaluate in their inner loops: digamma, log Gamma
and trigamma for x > 0 by a shift to x + 10 and the asymptotic series (Abramowitz and Stegun,
Handbook of Mathematical Functions, 1964, 6.3.18, 6.1.41 and 6.4.12)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from vijax.types import Array


@jax.jit
def digamma(x: Array) -> Array:
    """psi(x) for x > 0 in a few elementwise operations.

    For x < 10 the recurrence psi(x) = psi(x + 10) - sum_{i=0}^{9} 1 / (x + i); then the asymptotic
    series (Abramowitz and Stegun 6.3.18) psi(y) = log y - 1/(2y) - sum_j B_2j / (2j y^2j) to y^-12.

    Examples:
        >>> round(float(digamma(1.0)), 4)  # minus Euler's constant
        -0.5772
    """
    small, num, den, y, log_y, _, r2 = _shifted(x)
    return _psi(small, num, den, y, log_y, r2)


@jax.jit
def digamma_and_gammaln(x: Array) -> tuple[Array, Array]:
    """(psi(x), log Gamma(x)) for x > 0, sharing the recurrence and log of :func:`digamma`.

    log Gamma(x) = log Gamma(x + 10) - log prod_{i=0}^{9} (x + i) for x < 10, then Stirling's series
    (Abramowitz and Stegun 6.1.41) log Gamma(y) = (y - 1/2) log y - y + log(2 pi) / 2
    + sum_j B_2j / (2j (2j - 1) y^(2j-1)) to y^-9.
    """
    small, num, den, y, log_y, r, r2 = _shifted(x)
    psi = _psi(small, num, den, y, log_y, r2)
    series = r * (1 / 12 - r2 * (1 / 360 - r2 * (1 / 1260 - r2 * (1 / 1680 - r2 * (1 / 1188)))))
    lgam = (y - 0.5) * log_y - y + 0.91893853320467274178 + series
    return psi, lgam - jnp.where(small, jnp.log(den), 0.0)


def digamma_and_gammaln_with_total(a: Array) -> tuple[Array, Array]:
    """:func:`digamma_and_gammaln` of [a, sum_k a_k] (the last axis with its sum appended): psi
    and log Gamma of a Dirichlet's concentrations and of their total, each (..., K + 1)."""
    return digamma_and_gammaln(jnp.concatenate([a, jnp.sum(a, axis=-1, keepdims=True)], -1))


@jax.jit
def trigamma(x: Array) -> Array:
    """psi'(x), the derivative of digamma, for x > 0: for x < 10 the recurrence psi'(x) = psi'(x + 10) +
    sum_{i=0}^{9} 1 / (x + i)^2, then the asymptotic series (Abramowitz and Stegun 6.4.12)
    psi'(y) = 1/y + 1/(2y^2) + sum_k B_2k / y^(2k+1) to y^-13.
    """
    x = _float(x)
    small = x < 10.0
    xc = jnp.where(small, x, 1.0)
    num, den = jnp.zeros_like(x), jnp.ones_like(x)
    for i in range(10):  # num / den = sum_{i < 10} 1 / (xc + i)^2, one fraction without divisions
        t2 = (xc + i) * (xc + i)
        num, den = num * t2 + den, den * t2
    y = jnp.where(small, x + 10.0, x)
    r = 1.0 / y
    r2 = r * r
    series = r2 * (-1 / 30 + r2 * (1 / 42 + r2 * (-1 / 30 + r2 * (5 / 66 - r2 * (691 / 2730)))))
    tail = r + 0.5 * r2 + r * r2 * (1 / 6 + series)
    return tail + jnp.where(small, num / den, 0.0)


def _float(x: Array) -> Array:
    """``x`` as a float array: an integer one times 1.0 (weakly typed where ``x`` is)."""
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x * 1.0


def _shifted(x: Array):
    """The recurrence shared by psi and log Gamma: x < 10 is shifted to y = x + 10, with
    num / den = sum_{i < 10} 1 / (x + i) and den = prod_{i < 10} (x + i)."""
    x = _float(x)
    small = x < 10.0
    xc = jnp.where(small, x, 1.0)
    num, den = jnp.zeros_like(x), jnp.ones_like(x)
    for i in range(10):
        t = xc + i
        num, den = num * t + den, den * t
    y = jnp.where(small, x + 10.0, x)
    return small, num, den, y, jnp.log(y), 1.0 / y, 1.0 / (y * y)


def _psi(small, num, den, y, log_y, r2):
    series = r2 * (1 / 12 - r2 * (1 / 120 - r2 * (1 / 252 - r2 * (1 / 240 - r2 * (1 / 132)))))
    return log_y - 0.5 / y - series - jnp.where(small, num / den, 0.0)
