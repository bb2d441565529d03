"""Collapsed Gibbs sampling of token allocations with the per-row proportions integrated out.

The E-step of LDA with the topics fixed (Mimno, Hoffman and Blei 2012; Hoffman and Blei 2015,
§4.1), and of any admixture whose rows (documents, sequences) draw each token's component k from
proportions theta_d ~ Dirichlet(alpha 1_K) and its value from fixed per-component weights b_k.
With theta_d integrated out (Griffiths and Steyvers 2004)::

    p(z_dn = k | z_d^{-n}, w, b) ∝ (alpha + N_dk^{-n}) b_{k w_dn}.

:func:`collapsed_gibbs_allocations` is a pure function of fixed-shape arrays (it jits and vmaps;
the number of token steps is read from the counts, so a ``vmap`` over keys or over restarts sharing
one batch keeps a single, unbatched loop bound). One token step costs O(S K), whatever the rows'
lengths L.

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
    """Average per-slot component counts (S, L, K) of the kept sweeps of collapsed Gibbs sampling
    of every token's component, with each row's proportions integrated out and the weights fixed.

    **State.** Tokens of one slot (one word in one document) are exchangeable, so the state of
    row d is the allocation A_d (L, K), A_dlk = number of the n_dl tokens of slot l currently in
    component k, with N_dk = sum_l A_dlk. A sweep visits the row's N_d tokens in order
    t = 0..N_d-1, token t belonging to slot l_t = #{l: cumsum(n_d)_l <= t} (zero-count slots own
    no token); the tokens of slot l are visited consecutively, and while they are, the sampler
    carries only rem_d (K,), the slot's tokens not yet visited this sweep (A_dl of the previous
    sweep, less those visited). Token t:

    1. picks one not-yet-visited token of its slot uniformly, i.e. its component j with
       probability rem_dj / sum_j rem_dj, and removes it: rem_dj -= 1, N_dj -= 1 (skipped in the
       initialization pass, where nothing is placed yet);
    2. draws its new component k with probability ∝ (alpha + N_dk^{-t}) b_{k w_t}, by inverse CDF:
       k = #{k': C_k' <= u C_K}, C_k = sum_{j<=k} (alpha + N_dj) b_{j w_t}, u ~ U[0, 1);
       N_dk += 1.

    Since token labels within a slot do not matter, this is exactly the systematic-scan
    single-site collapsed Gibbs sampler over tokens (each token updated once per sweep, in a
    uniformly random order within its slot), so its stationary distribution is
    p(z_d | w_d, b, alpha) with theta_d integrated out. The initialization pass places the tokens
    one by one, each drawn given those already placed (as in Griffiths and Steyvers'
    initialization). The allocation A_d after each of the ``sweeps - burn_in`` kept sweeps is
    built by one scatter of the sweep's drawn components to their slots (per chunk of tokens,
    below) and averaged.

    **Cost.** The token loop runs over all S rows at once, t = 0..max_d N_d - 1 (tokens t >= N_d
    are inactive and change nothing), in chunks of ``chunk`` (32) tokens: per chunk, the tokens'
    slots (a binary search of cumsum(n_d)), their rows of b and of the previous allocation, and two
    uniforms per token (key ``fold_in(fold_in(fold_in(key, d), sweep), chunk)``, no random call
    inside the token loop) are gathered at once; then each token step is O(S K) work on (S, K)
    arrays, and the chunk's components are scattered into the new allocation. A batch costs
    (1 + sweeps) * ceil(max_d N_d / 32) * 32 token steps of O(S K), plus O(S L K) per sweep. Row
    d's draws depend only on its key ``fold_in(key, d)``, its counts and b: not on the other rows
    of the batch.

    Args:
      logb: (S, L, K) log b_{k, w_dl}, the log-weight of slot l's value under each component (any
        per-slot shift).
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
        """One token t of every document: remove a not-yet-visited token of its slot (topic drawn
        ∝ rem), then draw its new topic ∝ (alpha + N_dk^{-t}) b_{k w_t} by inverse CDF."""
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
        """Every token of every document once, in order t = 0..N_d-1, from the allocation ``old``
        (S, L, K); returns the new allocation and N (S, K)."""

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

    def sweep_keys(i):
        return jax.vmap(lambda kd: jax.random.fold_in(kd, i))(doc_keys)

    def body(i, carry):
        # i = 0 is the initialization pass (from the empty allocation, nothing to remove), then
        # the sweeps 1..sweeps, of which those after burn_in are kept: one copy of the sweep in
        # the program
        alloc, nk, acc = carry
        alloc, nk = sweep(alloc, nk, sweep_keys(i))
        return alloc, nk, acc + (i > burn_in).astype(dt) * alloc.astype(dt)

    init = (jnp.zeros((s, num_slots, k), jnp.int32), jnp.zeros((s, k), jnp.int32), jnp.zeros((s, num_slots, k), dt))
    acc = jax.lax.fori_loop(0, sweeps + 1, body, init)[2]
    return acc / (sweeps - burn_in)


__all__ = ["GIBBS_CHUNK", "collapsed_gibbs_allocations"]
