"""Collapsed Gibbs sampling of token allocations with the per-row proportions integrated out: LDA's
E-step with the topics fixed (Mimno, Hoffman and Blei 2012; Hoffman and Blei 2015, §4.1), and that of
any admixture with theta_d ~ Dirichlet(alpha 1_K) and fixed weights b_k (Griffiths and Steyvers 2004)::

    p(z_dn = k | z_d^{-n}, w, b) ∝ (alpha + N_dk^{-n}) b_{k w_dn}.

References:
  Griffiths and Steyvers (2004). Finding scientific topics. PNAS 101(suppl. 1).
  Mimno, Hoffman and Blei (2012). Sparse stochastic inference for latent Dirichlet allocation. ICML.
  Hoffman and Blei (2015). Structured stochastic variational inference. AISTATS, §4.1.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from vijax.types import Array, PRNGKey

GIBBS_CHUNK = 32  # tokens per chunk: the uniforms of a chunk are drawn in one call, outside its token loop


def collapsed_gibbs_allocations(
    logb: Array, n: Array, key: PRNGKey, alpha: Array, sweeps: int, burn_in: int, chunk: int = GIBBS_CHUNK
) -> Array:
    """Average per-slot component counts (S, L, K) over the kept sweeps of collapsed Gibbs sampling.

    Tokens of one slot are exchangeable, so row d's state is the allocation A_d (L, K), A_dlk the
    number of slot l's n_dl tokens in component k, N_dk = sum_l A_dlk. A sweep visits the tokens in
    order; token t of slot l removes one not-yet-visited token of its slot, of component j with
    probability rem_dj / sum_j rem_dj (rem_d: the slot's tokens of the previous sweep not yet
    visited; nothing in the initialization pass), then draws its component ∝ (alpha + N_dk^{-t})
    b_{k w_t} by inverse CDF: the systematic-scan single-site sampler, each token once per sweep in a
    uniformly random order within its slot. The token loop runs over all rows at once in chunks of
    ``chunk`` tokens whose uniforms are drawn together; row d's draws depend only on
    ``fold_in(key, d)``, its counts and b.

    Args:
      logb: (S, L, K) log b_{k, w_dl}, slot l's log-weight under each component (any per-slot shift).
      n: (S, L) integer-valued token counts n_dl (0 for padding slots).
      key: PRNG key; row d uses ``fold_in(key, d)``.
      alpha: scalar Dirichlet concentration (> 0), possibly traced.
      sweeps: sweeps after the initialization pass (>= 1); burn_in (< sweeps) of them discarded.
      chunk: static number of token steps whose random numbers are drawn together.

    Returns:
      (S, L, K) float of logb's dtype: sum over kept sweeps of A_dlk, divided by their number.
    """
    s, num_slots, k = logb.shape
    dt = logb.dtype
    if num_slots == 0:
        return jnp.zeros(logb.shape, dt)
    n_int = jnp.round(n).astype(jnp.int32)
    cum = jnp.cumsum(n_int, axis=1)  # (S, L): tokens of slots 0..l
    start = cum - n_int  # index of the first token of each slot
    total = cum[:, -1]  # N_d
    num_chunks = (jnp.max(total) + chunk - 1) // chunk  # depends on the batch only
    # b_dlk = exp(logb_dlk - max_j logb_dlj): the per-slot shift cancels in the conditional, and
    # max_k b_dlk = 1 with alpha > 0 keeps every normaliser positive.
    b = jnp.exp(logb - jnp.max(logb, axis=-1, keepdims=True))
    rows = jnp.arange(s)
    doc_keys = jax.vmap(lambda d: jax.random.fold_in(key, d))(jnp.arange(s))
    offsets = jnp.arange(chunk, dtype=jnp.int32)
    topics_k = jnp.arange(k, dtype=jnp.int32)

    def token_step(carry, x):
        nk, rem = carry  # (S, K) int: N_dk; old tokens of the current slot not yet visited
        old_row, b_row, active, first, u = x  # (S, K), (S, K), (S,), (S,), (S, 2)
        rem = jnp.where(first[:, None], old_row, rem)
        cr = jnp.cumsum(rem, axis=-1)
        tot = cr[:, -1]
        r = jnp.minimum(jnp.floor(u[:, 0] * tot.astype(dt)).astype(jnp.int32), tot - 1)  # in [0, tot)
        j = jnp.sum((cr <= r[:, None]).astype(jnp.int32), axis=-1)  # first j with cr_j > r
        removed = ((topics_k[None, :] == j[:, None]) & (active & (tot > 0))[:, None]).astype(jnp.int32)
        rem, nk = rem - removed, nk - removed
        p = (alpha + nk.astype(dt)) * b_row
        cp = jnp.cumsum(p, axis=-1)
        topic = jnp.sum((cp <= u[:, 1:] * cp[:, -1:]).astype(jnp.int32), axis=-1)
        # rounding may put u * total at total: fall back to the last topic of positive weight
        last = k - 1 - jnp.argmax(jnp.flip(p > 0, axis=-1), axis=-1).astype(jnp.int32)
        topic = jnp.minimum(topic, last)
        nk = nk + ((topics_k[None, :] == topic[:, None]) & active[:, None]).astype(jnp.int32)
        return (nk, rem), topic

    def sweep(old, nk, sweep_keys):
        def chunk_body(c, carry):
            new, nk, rem = carry
            t = c * chunk + offsets  # (C,)
            slot = jax.vmap(lambda cd: jnp.searchsorted(cd, t, side="right"))(cum).astype(jnp.int32)  # (S, C)
            slot = jnp.minimum(slot, num_slots - 1)
            active = t[None, :] < total[:, None]
            first = active & (t[None, :] == jnp.take_along_axis(start, slot, axis=1))
            u = jax.vmap(lambda kd: jax.random.uniform(jax.random.fold_in(kd, c), (chunk, 2), dt))(sweep_keys)
            xs = (
                jnp.swapaxes(old[rows[:, None], slot], 0, 1),
                jnp.swapaxes(b[rows[:, None], slot], 0, 1),
                active.T,
                first.T,
                jnp.swapaxes(u, 0, 1),
            )
            (nk, rem), topic = jax.lax.scan(token_step, (nk, rem), xs)
            new = new.at[rows[:, None], slot, topic.T].add(active.astype(jnp.int32))  # one scatter per chunk
            return new, nk, rem

        new, nk, _ = jax.lax.fori_loop(
            0, num_chunks, chunk_body, (jnp.zeros_like(old), nk, jnp.zeros((s, k), jnp.int32))
        )
        return new, nk

    def body(i, carry):
        # i = 0: the initialization pass (nothing to remove); the sweeps after burn_in are kept
        alloc, nk, acc = carry
        alloc, nk = sweep(alloc, nk, jax.vmap(lambda kd: jax.random.fold_in(kd, i))(doc_keys))
        return alloc, nk, acc + (i > burn_in).astype(dt) * alloc.astype(dt)

    init = (jnp.zeros((s, num_slots, k), jnp.int32), jnp.zeros((s, k), jnp.int32), jnp.zeros((s, num_slots, k), dt))
    acc = jax.lax.fori_loop(0, sweeps + 1, body, init)[2]
    return acc / (sweeps - burn_in)
