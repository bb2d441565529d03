"""Fixed-point iterations run on many small problems at once, one per row of a block.

Local steps of latent-variable models (LDA's q(theta_d), CTM's q(z_d), an HMM's per-sequence
messages) solve one small fixed-point problem per datum. Run in a batch, the rows converge after
very different numbers of updates; both iterations here freeze each row at its own convergence,
so that a row's result does not depend on the rows it is computed with, and stop when every row
is frozen.

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
    """The fixed point of ``update`` for each row of ``x0`` (B, K), by safeguarded SQUAREM cycles
    (the squared extrapolation of Varadhan and Roland 2008, §3), each row on its own.

    ``update(x)`` returns (F(x), f(x)): the fixed-point map and an objective it never decreases,
    per row (B,) (an EM or coordinate-ascent map and its lower bound). Each cycle from x computes
    f1 = F(x), f2 = F(f1), r = f1 - x, v = f2 - 2 f1 + x, the step s = -||r|| / ||v||, the
    extrapolation x' = max(x - 2 s r + s^2 v, ``floor``) and f3 = F(x').

    The step s is clipped to [-s_max, -1], s_max per row starting at 1 (the first cycle's
    extrapolation is f2 itself) and multiplied by ``_SQUAREM_STEP_GROWTH`` after each accepted
    cycle whose step reached it, up to ``_SQUAREM_MAX_STEP`` (the step-length control of Varadhan
    and Roland's SQUAREM: long jumps only once the iteration has shown a steady direction). The
    extrapolated point x' is used only if it is finite with no entry below ``floor`` (else
    f3 = F(f2), three plain updates), and kept only if f(x') >= f(f1); a cycle whose x' lowers f
    ends at f2 (its f3 is discarded), so f never decreases from one cycle to the next.

    Each row is frozen when its plain update f1 (or, after a rejected extrapolation, f2) or its
    post-extrapolation update f3 changes x by a mean absolute amount below ``tol``; so, as with
    :func:`iterate_per_row`, the result is one update away from a point it changes by less than
    ``tol``. At most ``max_iters`` evaluations of ``update`` (``max_iters // 3`` cycles).

    Args:
      update: x (B, K) -> (F(x) (B, K), f(x) (B,)), F never lowering f.
      x0: the start, (B, K).
      tol: threshold on the mean absolute change of a row.
      max_iters: cap on the evaluations of ``update`` (>= 3 for one cycle).
      floor: lower bound of every fixed point (scalar or broadcastable to x), onto which the
        extrapolation is projected: one that overshoots the coordinates a row is leaving keeps
        its gain on the others.

    Returns:
      x (B, K) at the end of the iteration.
    """

    def norm(a):
        return jnp.sqrt(jnp.sum(a * a, axis=-1))

    def change(a, b):
        return jnp.mean(jnp.abs(a - b), axis=-1)

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
        # projected onto x >= floor (where every fixed point lies): an extrapolation that
        # overshoots the coordinates a row is leaving keeps its gain on the others
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
    """x <- update(x) for a block of rows (x's leading axis), each row frozen after the first
    update that changes its ``summary`` (B, K) by a mean absolute amount below ``tol`` (or after
    ``max_iters`` updates), so that a row's result does not depend on the rows it is computed
    with; the loop ends when every row is frozen.

    Args:
      update: x -> the next x, the same shape; rows must not interact.
      summary: x -> (B, K), what the stopping rule compares (x itself, or a smaller statistic of
        a larger per-row state, e.g. topic counts of per-token responsibilities).
      x0: the start, leading axis B.
      tol: threshold on the mean absolute change of a row's summary.
      max_iters: cap on the updates.
      groups: optional (N,) int, for an x whose leading axis N is not the rows': entry i of x
        belongs to row ``groups[i]`` of the summary (B, K) and is frozen with it (indices past
        the last row are clipped to it). None: x's leading axis is the rows'.

    Returns:
      x at the end of the iteration, like ``x0``.
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


__all__ = ["iterate_per_row", "squarem_per_row"]
