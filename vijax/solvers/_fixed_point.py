"""Fixed-point iterations on many small problems at once, one per row, each row frozen at its own
convergence (so its result does not depend on the other rows) and the loop ending when all are.

References:
  Varadhan and Roland (2008). Simple and globally convergent methods for accelerating the
  convergence of any EM algorithm. Scandinavian Journal of Statistics 35(2), §2-3 (SQUAREM).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from vijax.types import Array

_SQUAREM_MAX_STEP = 32.0  # bound on |s|, the extrapolation step of squarem_per_row
_SQUAREM_STEP_GROWTH = 4.0  # factor on a row's bound on |s| after an accepted step that reached it


def squarem_per_row(
    update: Callable[[Array], tuple[Array, Array]], x0: Array, tol: float, max_iters: int, floor: Array
) -> Array:
    """The fixed point of ``update`` for each row of ``x0`` (B, K) by safeguarded SQUAREM cycles (Varadhan
    and Roland 2008, §3).

    Each cycle from x: f1 = F(x), f2 = F(f1), r = f1 - x, v = f2 - 2 f1 + x, s = -||r|| / ||v|| clipped
    to [-s_max, -1], x' = max(x - 2 s r + s^2 v, ``floor``), f3 = F(x'). s_max starts at 1 and grows by
    ``_SQUAREM_STEP_GROWTH`` after each accepted cycle that reached it, up to ``_SQUAREM_MAX_STEP``. x'
    is kept only if finite and f(x') >= f(f1), else the cycle ends at f2, so f never decreases. A row
    is frozen once f1 (or f2) or f3 changes it by a mean absolute amount below ``tol``.

    Args:
      update: x (B, K) -> (F(x) (B, K), f(x) (B,)), F never lowering f.
      x0: the start, (B, K).
      tol: threshold on the mean absolute change of a row.
      max_iters: cap on the evaluations of ``update`` (>= 3 for one cycle).
      floor: lower bound of every fixed point (broadcastable to x), onto which x' is projected.
    """
    norm = lambda a: jnp.sqrt(jnp.sum(a * a, axis=-1))
    change = lambda a, b: jnp.mean(jnp.abs(a - b), axis=-1)

    def cond(carry):
        i, _, _, active = carry
        return (i + 3 <= max_iters) & jnp.any(active)

    def body(carry):
        i, x, s_max, active = carry
        f1, _ = update(x)
        done1 = change(f1, x) < tol
        f2, obj1 = update(f1)
        r, v = f1 - x, f2 - 2.0 * f1 + x
        nv = norm(v)
        step = jnp.clip(jnp.where(nv > 0, -norm(r) / jnp.where(nv > 0, nv, 1.0), -1.0), -s_max, -1.0)
        xp = jnp.maximum(x + (-2.0 * step)[:, None] * r + (step * step)[:, None] * v, floor)
        inside = jnp.all(jnp.isfinite(xp), axis=-1)
        p = jnp.where(inside[:, None], xp, f2)
        f3, obj_p = update(p)
        ok = ~inside | (obj_p >= obj1)  # at p = f2, f(f2) >= f(f1) already (F never decreases f)
        done = jnp.where(ok, change(f3, p), change(f2, f1)) < tol
        new = jnp.where(done1[:, None], f1, jnp.where(ok[:, None], f3, f2))
        grow = ok & inside & (step <= -s_max)
        s_max = jnp.where(grow, jnp.minimum(s_max * _SQUAREM_STEP_GROWTH, _SQUAREM_MAX_STEP), s_max)
        return i + 3, jnp.where(active[:, None], new, x), s_max, active & ~done1 & ~done

    b = x0.shape[0]
    init = (jnp.zeros((), jnp.int32), x0, jnp.ones((b,), x0.dtype), jnp.ones((b,), bool))
    return jax.lax.while_loop(cond, body, init)[1]


def iterate_per_row(
    update: Callable[[Array], Array],
    summary: Callable[[Array], Array],
    x0: Array,
    tol: float,
    max_iters: int,
    groups: Array | None = None,
) -> Array:
    """x <- update(x) for a block of rows, each row frozen after the first update that changes its
    ``summary`` (B, K) by a mean absolute amount below ``tol`` (or after ``max_iters`` updates).

    Args:
      update: x -> the next x, the same shape; rows must not interact.
      summary: x -> (B, K), what the stopping rule compares (x itself or a smaller statistic of it).
      x0: the start, leading axis B.
      tol: threshold on the mean absolute change of a row's summary.
      max_iters: cap on the updates.
      groups: (N,) int, entry i of x in row ``groups[i]`` of the summary (None: x's leading axis is the rows').
    """

    def cond(carry):
        i, _, active = carry
        return (i < max_iters) & jnp.any(active)

    def body(carry):
        i, x, active = carry
        new = update(x)
        change = jnp.mean(jnp.abs(summary(new) - summary(x)), axis=-1)
        per_entry = active if groups is None else jnp.take(active, groups, mode="clip")
        keep = per_entry.reshape(per_entry.shape + (1,) * (x.ndim - 1))
        return i + 1, jnp.where(keep, new, x), active & (change >= tol)

    rows = x0.shape[0] if groups is None else jax.eval_shape(summary, x0).shape[0]
    return jax.lax.while_loop(cond, body, (jnp.zeros((), jnp.int32), x0, jnp.ones((rows,), bool)))[1]
