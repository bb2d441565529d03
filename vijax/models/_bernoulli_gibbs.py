"""Collapsed Gibbs sampling for the finite DP mixture of Bernoullis (Neal 2000, algorithm 3 for the
finite Dirichlet prior), the reference of Hoffman & Blei 2015, §4.2.

With pi and phi integrated out the state is the assignments z, summarized by n_k = #{n : z_n = k}
and c_kd = sum_{n : z_n = k} y_nd::

    log p(y, z) = lgamma(alpha) - lgamma(N + alpha) + sum_k [lgamma(n_k + alpha/K) - lgamma(alpha/K)]
                  + sum_kd [log B(a + c_kd, b + n_k - c_kd) - log B(a, b)],
    p(z_n = k | z^-n, y) ∝ (n_k^-n + alpha/K) prod_d (c_kd^-n + a)^y_nd (n_k^-n - c_kd^-n + b)^(1 - y_nd)
                           / (n_k^-n + a + b)^D.

A sweep visits the data in a random order, after a sequential first pass. Point estimates are the
Rao-Blackwellized means E[pi_k | z] = (n_k + alpha/K) / (N + alpha), E[phi_kd | z] = (c_kd + a) /
(n_k + a + b), averaged over the sweeps after burn-in.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from vijax._validate import check_int
from vijax.models._base import check_step_batch
from vijax.types import Array, PRNGKey


class GibbsSampler(NamedTuple):
    """``init(key, y) -> state`` and ``step(key, state, y) -> (state, info)``, shaped as a ``VIAlgorithm``."""

    init: Callable
    step: Callable


class GibbsState(NamedTuple):
    z: Array  # (N,) int32 assignments (-1: not yet placed, before the first pass)
    counts: Array  # (K,) n_k
    ones: Array  # (K, D) c_kd
    log_one: Array  # (K, D) log(c_kd + a)
    log_zero: Array  # (K, D) log(n_k - c_kd + b)
    sum_weights: Array  # (K,) sum over kept sweeps of E[pi | z]
    sum_probs: Array  # (K, D) sum over kept sweeps of E[phi | z]
    num_kept: Array  # int32 scalar
    count: Array  # int32 scalar: sweeps done (the sequential first pass counts as one)


class GibbsInfo(NamedTuple):
    elbo: Array  # the collapsed log joint log p(y, z) after the sweep
    num_occupied: Array  # components holding at least one datum


def collapsed_log_joint(model, counts: Array, ones: Array) -> Array:
    """log p(y, z) with pi and phi integrated out, from the counts (see the module docstring)."""
    k = model.num_components
    ak = model.alpha / k
    n = jnp.sum(counts)
    log_pz = gammaln(model.alpha) - gammaln(n + model.alpha) + jnp.sum(gammaln(counts + ak) - gammaln(ak))
    # log B(x, y) as lgamma differences: jax.scipy.special.betaln is off by up to ~5e-7 in float64.
    ab = model.a + model.b
    log_py = jnp.sum(
        gammaln(model.a + ones)
        + gammaln(model.b + counts[:, None] - ones)
        - gammaln(ab + counts[:, None])
        - (gammaln(model.a) + gammaln(model.b) - gammaln(ab))
    )
    return log_pz + log_py


def conditional_logits(model, counts: Array, log_one: Array, log_zero: Array, y_n: Array) -> Array:
    """Unnormalized log p(z_n = k | z^-n, y), shape (K,), from the counts *without* datum n."""
    log_n = jnp.log(counts + model.alpha / model.num_components)
    return log_n + log_one @ y_n + log_zero @ (1.0 - y_n) - model.dim * jnp.log(counts + model.a + model.b)


def init(key: PRNGKey, y: Array, *, model) -> GibbsState:
    """The sequential first pass (in a random order) from empty counts."""
    model.check_data(y)
    y = jnp.asarray(y, jnp.result_type(float))
    k, d = model.num_components, model.dim
    counts, ones, zero = jnp.zeros((k,), y.dtype), jnp.zeros((k, d), y.dtype), jnp.zeros((), jnp.int32)
    tables = (jnp.full((k, d), jnp.log(model.a), y.dtype), jnp.full((k, d), jnp.log(model.b), y.dtype))
    empty = GibbsState(jnp.full((y.shape[0],), -1, jnp.int32), counts, ones, *tables, counts, ones, zero, zero)
    return _sweep(empty, y, key, model)


def _sweep(state: GibbsState, y: Array, key: PRNGKey, model) -> GibbsState:
    n_data = y.shape[0]
    k_perm, k_g = jax.random.split(key)
    order = jax.random.permutation(k_perm, n_data)
    gumbel = jax.random.gumbel(k_g, (n_data, model.num_components), y.dtype)
    a, b = model.a, model.b

    def set_row(carry, k, sign, y_n):
        z, counts, ones, log_one, log_zero = carry
        counts = counts.at[k].add(sign)
        row = ones[k] + sign * y_n
        ones = ones.at[k].set(row)
        log_one = log_one.at[k].set(jnp.log(row + a))
        log_zero = log_zero.at[k].set(jnp.log(counts[k] - row + b))
        return z, counts, ones, log_one, log_zero

    def body(i, carry):
        n = order[i]
        y_n = y[n]
        old = carry[0][n]
        placed = (old >= 0).astype(y.dtype)
        carry = set_row(carry, jnp.maximum(old, 0), -placed, y_n)  # remove datum n (nothing on the first pass)
        z, counts, ones, log_one, log_zero = carry
        logits = conditional_logits(model, counts, log_one, log_zero, y_n)
        new = jnp.argmax(logits + gumbel[i]).astype(jnp.int32)  # Gumbel-max: a draw from the conditional
        carry = set_row((z.at[n].set(new), counts, ones, log_one, log_zero), new, jnp.ones((), y.dtype), y_n)
        return carry

    z, counts, ones, log_one, log_zero = jax.lax.fori_loop(
        0, n_data, body, (state.z, state.counts, state.ones, state.log_one, state.log_zero)
    )
    return state._replace(z=z, counts=counts, ones=ones, log_one=log_one, log_zero=log_zero, count=state.count + 1)


def posterior_means(model, counts: Array, ones: Array) -> tuple[Array, Array]:
    """(E[pi | z, y], E[phi | z, y]) given the counts."""
    n = jnp.sum(counts)
    return (
        (counts + model.alpha / model.num_components) / (n + model.alpha),
        (ones + model.a) / (counts[:, None] + model.a + model.b),
    )


def step(key: PRNGKey, state: GibbsState, y: Array, *, model, burn_in: int = 0) -> tuple[GibbsState, GibbsInfo]:
    """One sweep; its Rao-Blackwellized means are accumulated once ``burn_in`` sweeps (with the first pass) are done."""
    check_step_batch(model, y, state.count)
    y = jnp.asarray(y).astype(state.ones.dtype)
    state = _sweep(state, y, key, model)
    keep = state.count > burn_in
    w, p = posterior_means(model, state.counts, state.ones)
    state = state._replace(
        sum_weights=state.sum_weights + jnp.where(keep, w, 0.0),
        sum_probs=state.sum_probs + jnp.where(keep, p, 0.0),
        num_kept=state.num_kept + keep.astype(jnp.int32),
    )
    info = GibbsInfo(collapsed_log_joint(model, state.counts, state.ones), jnp.sum(state.counts > 0).astype(jnp.int32))
    return state, info


def point_estimates(model, state: GibbsState) -> tuple[Array, Array]:
    """The posterior means of pi (K,) and phi (K, D) averaged over the kept sweeps (or the current sweep's)."""
    w, p = posterior_means(model, state.counts, state.ones)
    kept = state.num_kept > 0
    denom = jnp.maximum(state.num_kept, 1).astype(w.dtype)
    return jnp.where(kept, state.sum_weights / denom, w), jnp.where(kept, state.sum_probs / denom, p)


def collapsed_gibbs(model, *, burn_in: int = 0) -> GibbsSampler:
    """Collapsed Gibbs sampling for a ``BernoulliMixture``: ``init(key, y)`` runs the sequential first pass,
    ``step(key, state, y)`` one sweep.

    Args:
      model: a :class:`~vijax.models.bernoulli_mixture.BernoulliMixture`.
      burn_in: sweeps (counting the first pass) whose estimates are not averaged (>= 0).

    Examples:
        >>> from vijax.models.bernoulli_mixture import BernoulliMixture
        >>> model = BernoulliMixture(num_components=5, dim=3)
        >>> y = jnp.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
        >>> alg = collapsed_gibbs(model)
        >>> state, info = alg.step(jax.random.PRNGKey(1), alg.init(jax.random.PRNGKey(0), y), y)
        >>> int(jnp.sum(state.counts))
        3
    """
    check_int("burn_in", burn_in, 0)

    def init_fn(key, y=None):
        if y is None:
            raise ValueError("collapsed Gibbs needs the data y to initialize")
        return init(key, y, model=model)

    return GibbsSampler(init=init_fn, step=lambda key, state, y: step(key, state, y, model=model, burn_in=burn_in))
