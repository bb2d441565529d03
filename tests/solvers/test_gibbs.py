"""The collapsed Gibbs sampler of token allocations (``vijax.solvers.collapsed_gibbs_allocations``,
LDA's Gibbs E-step): its stationary distribution against exact enumeration of p(z | w, b, alpha)
on a document with repeated words, that every kept sweep is an allocation of the document's
tokens, and the JAX contract (jit, vmap over keys, alpha and batches, one trace). Through LDA
(padding, inactive tokens and other documents change nothing; zero-weight topics are never
drawn): tests/models/test_lda.py."""

import itertools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import gammaln

from vijax.solvers import collapsed_gibbs_allocations as _collapsed_gibbs

collapsed_gibbs = jax.jit(_collapsed_gibbs, static_argnums=(4, 5))


def _exact_slot_counts(b, words, counts, alpha):
    """E[A_lk] = E[#tokens of slot l in topic k] under p(z | w) ∝ prod_n b_{z_n w_n}
    prod_k Gamma(alpha + N_k) / Gamma(alpha), by enumerating all K^N assignments."""
    k = b.shape[0]
    tokens = np.repeat(np.arange(len(words)), counts)  # slot of each token
    exact, total = np.zeros((len(words), k)), 0.0
    for z in itertools.product(range(k), repeat=len(tokens)):
        nk = np.bincount(z, minlength=k)
        wgt = np.prod([b[zz, words[l]] for zz, l in zip(z, tokens)]) * np.exp(
            np.sum(gammaln(alpha + nk) - gammaln(alpha))
        )
        for zz, l in zip(z, tokens):
            exact[l, zz] += wgt
        total += wgt
    return exact / total


def test_stationary_distribution_matches_exact_enumeration():
    """Slots with counts (3, 2, 1) (so removal of a not-yet-visited token of a slot is exercised at
    every size), K = 3, alpha = 0.3: the kept sweeps' average per-slot counts over 3000 independent
    chains, each entry within 5 standard errors of the exact E[A_lk] (243 assignments)."""
    alpha = 0.3
    b = np.random.default_rng(3).uniform(0.2, 3.0, (3, 4))
    words, counts = np.array([1, 3, 0]), np.array([3, 2, 1])
    exact = _exact_slot_counts(b, words, counts, alpha)
    logb = jnp.asarray(np.log(b[:, words].T)[None])  # (1, L, K)
    n = jnp.asarray(counts[None], jnp.float64)
    run = jax.jit(jax.vmap(lambda key: collapsed_gibbs(logb, n, key, jnp.asarray(alpha), 25, 5)[0]))
    est = np.asarray(run(jax.random.split(jax.random.PRNGKey(4), 3000)))
    np.testing.assert_allclose(est.sum(-1), np.broadcast_to(counts, est.shape[:2]), rtol=1e-12)
    mean, se = est.mean(0), est.std(0) / np.sqrt(est.shape[0])
    assert np.all(se > 0)  # the estimates vary: the test has teeth
    assert np.all(np.abs(mean - exact) <= 5 * se), (mean, exact, se)


@pytest.mark.slow
def test_stationary_distribution_at_small_alpha():
    """alpha = 0.01: the chain is sticky (moving one token out of a topic that holds the others has
    weight ~ alpha), so even 200 sweeps are still biased towards the initialization pass (the
    average of 3000 chains was 10 standard errors off on this document); with 3000 sweeps the
    average is within 5 standard errors of the exact E[A_lk]: the kernel is right, only its
    mixing is slow. (300 chains: the standard errors are those of 300.)"""
    alpha = 0.01
    b = np.random.default_rng(3).uniform(0.2, 3.0, (3, 4))
    words, counts = np.array([1, 3, 0]), np.array([3, 2, 1])
    exact = _exact_slot_counts(b, words, counts, alpha)
    logb = jnp.asarray(np.log(b[:, words].T)[None])
    n = jnp.asarray(counts[None], jnp.float64)
    run = jax.jit(jax.vmap(lambda key: collapsed_gibbs(logb, n, key, jnp.asarray(alpha), 3000, 20)[0]))
    est = np.asarray(run(jax.random.split(jax.random.PRNGKey(4), 300)))
    mean, se = est.mean(0), est.std(0) / np.sqrt(est.shape[0])
    assert np.all(se > 0)
    assert np.all(np.abs(mean - exact) <= 5 * se), (mean, exact, se)


def test_every_kept_sweep_is_an_allocation_of_the_tokens():
    """With one kept sweep the result is an integer allocation: A_dl sums to n_dl, padding slots
    and empty documents are all zero, in float32 and float64."""
    r = np.random.default_rng(5)
    n = np.array([[2.0, 0.0, 5.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 40.0, 3.0]])
    for dt in (jnp.float32, jnp.float64):
        logb = jnp.asarray(r.normal(size=(3, 5, 4)), dt)
        out = np.asarray(collapsed_gibbs(logb, jnp.asarray(n, dt), jax.random.PRNGKey(0), jnp.asarray(0.1, dt), 3, 2))
        assert out.dtype == dt
        np.testing.assert_array_equal(out, np.round(out))
        np.testing.assert_array_equal(out.sum(-1), n)
        assert np.all(out >= 0)


def test_jit_vmap_over_keys_alpha_and_batches_with_one_trace():
    """One trace for several keys and alphas; vmap over keys, over alpha (traced) and over
    batches (a batched number of token steps) each equals the unbatched calls."""
    r = np.random.default_rng(9)
    logb = jnp.asarray(r.normal(size=(2, 6, 3)))
    n = jnp.asarray(r.integers(0, 5, (2, 6)).astype(float))
    f = jax.jit(chex.assert_max_traces(lambda lb, nn, kk, a: _collapsed_gibbs(lb, nn, kk, a, 4, 1), n=1))
    keys = jax.random.split(jax.random.PRNGKey(10), 3)
    alphas = jnp.array([0.05, 0.5, 5.0])
    single = [f(logb, n, keys[i], alphas[i]) for i in range(3)]
    assert not np.array_equal(single[0], single[1])  # the key and alpha matter
    np.testing.assert_array_equal(f(logb, n, keys[0], alphas[0]), single[0])  # deterministic
    np.testing.assert_array_equal(jax.vmap(f, in_axes=(None, None, 0, 0))(logb, n, keys, alphas), jnp.stack(single))
    n2 = jnp.stack([n, jnp.asarray(r.integers(0, 30, (2, 6)).astype(float))])  # batched loop bound
    logb2 = jnp.stack([logb, logb + 1.0])
    both = jax.vmap(lambda lb, nn: collapsed_gibbs(lb, nn, keys[0], alphas[0], 4, 1))(logb2, n2)
    for i in range(2):
        np.testing.assert_array_equal(both[i], collapsed_gibbs(logb2[i], n2[i], keys[0], alphas[0], 4, 1))


@pytest.mark.parametrize("shape", [(1, 0, 3), (3, 0, 2)])
def test_no_slots(shape):
    out = collapsed_gibbs(jnp.zeros(shape), jnp.zeros(shape[:2]), jax.random.PRNGKey(0), jnp.asarray(0.1), 2, 0)
    assert out.shape == shape
