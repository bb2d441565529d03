"""LDA's two layouts of the mean-field E-step (``LDA(estep=...)``): the dense one (the minibatch's documents
at once, two matrix products per iteration) reaches the tiles' fixed point, and ``estep=None`` chooses by
platform when the step is traced."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.data import BowBatch
from vijax.models import LDA
from vijax.models import lda as lda_module
from vijax.testing import assert_trees_close


def _batch(seed, s, l, v):
    """Random documents of S rows and L slots: repeated words within a document, padding slots (count 0,
    any id) among the words, one-word documents and an empty one."""
    r = np.random.default_rng(seed)
    ids = r.integers(0, v, (s, l)).astype(np.int32)
    ids[:, 1] = ids[:, 0]  # a word in two slots of its document
    counts = r.integers(1, 5, (s, l)).astype(np.float64)
    counts[r.random((s, l)) < 0.3] = 0.0  # padding, also between words
    counts[0, 1:] = 0.0  # a one-word document
    counts[1, :] = 0.0  # an empty one
    counts[2, 2:] = 0.0
    counts[2, 1] = 3.0  # one word in two slots only
    return BowBatch(jnp.asarray(ids), jnp.asarray(counts))


def _log_beta(seed, k, v):
    lam = np.random.default_rng(seed).uniform(0.2, 3.0, (k, v))
    return jnp.asarray(np.log(lam / lam.sum(1, keepdims=True)))


def _pair(k, v, **kw):
    return (LDA(k, v, alpha=0.3, tol=1e-11, max_iters=2000, estep=e, **kw) for e in ("tiles", "dense"))


def _close(a, b):
    np.testing.assert_allclose(a.local_params, b.local_params, rtol=1e-6)
    assert_trees_close(a.suff_stats, b.suff_stats, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(a.local_terms, b.local_terms, rtol=1e-6)


K, V, S, L = 4, 300, 9, 6  # S L < V: the batch's distinct words (V = 7 below: all words)


@pytest.mark.parametrize("v, accelerate", [(7, False), (V, True)])
def test_dense_reaches_the_tiles_fixed_point(v, accelerate):
    batch, log_beta = _batch(0, S, L, v), _log_beta(1, K, v)
    a, b = (m.local_step((log_beta,), batch) for m in _pair(K, v, accelerate=accelerate))
    _close(a, b)
    np.testing.assert_allclose(np.sum(b.suff_stats[0]), np.sum(batch.counts), rtol=1e-12)  # every token once
    np.testing.assert_allclose(b.local_params[1], 0.3)  # the empty document: gamma = alpha


def test_dense_matches_tiles_under_jit_and_vmap_over_batches_and_topics():
    batches = [_batch(seed, S, L, V) for seed in (2, 3)]
    stacked = BowBatch(*(jnp.stack(x) for x in zip(*batches)))
    log_betas = jnp.stack([_log_beta(4, K, V), _log_beta(5, K, V)])
    tiles, dense = _pair(K, V)
    step = jax.jit(jax.vmap(lambda lb, bt, a: dense.local_step((lb,), bt, hyper={"alpha": a})))
    got = step(log_betas, stacked, jnp.asarray([0.3, 0.3]))
    for i in range(2):  # each slice as its own call of either layout (the programs of the test above)
        for model in (tiles, dense):
            _close(jax.tree_util.tree_map(lambda x: x[i], got), model.local_step((log_betas[i],), batches[i]))


def test_estep_none_is_tiles_on_a_cpu_and_dense_on_an_accelerator_chosen_at_trace_time(monkeypatch):
    k, v = 3, 10
    batch, log_beta = _batch(6, 4, 3, v), _log_beta(7, k, v)
    calls = []
    for name in ("_meanfield_tiles", "_meanfield_dense"):
        original = getattr(LDA, name)
        monkeypatch.setattr(LDA, name, lambda self, *a, _f=original, _n=name: calls.append(_n) or _f(self, *a))
    args = (log_beta, batch.word_ids, batch.counts, jnp.asarray(0.3))
    trace = lambda model: jax.make_jaxpr(model._meanfield)(*args)  # local_step's own jit would reuse its trace
    assert jax.default_backend() == "cpu"
    trace(LDA(k, v))
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    trace(LDA(k, v))
    trace(LDA(k, v, estep="tiles"))  # an explicit value wins on any platform
    assert calls == ["_meanfield_tiles", "_meanfield_dense", "_meanfield_tiles"]
    assert lda_module.estep_layout("tiles") == "tiles" and lda_module.estep_layout(None) == "dense"
    with pytest.raises(ValueError, match="estep"):
        LDA(k, v, estep="sparse")
