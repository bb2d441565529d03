"""The mean-field local step of a mixture taken a chunk of rows at a time on a CPU
(``Mixture._local_step_in_chunks``): the same statistics, local terms and responsibilities as
one pass, up to the order of the sums, for every kind of mixture and a batch whose rows are not a
multiple of the chunk's (the last chunk shifted back); under ``jit`` and ``vmap``; one pass where
the batch holds few chunks. The speed is ``benchmarks/gmm_cavi.py``'s."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.models import BernoulliMixture, DiagonalGMM, DPMixture, FullGMM
from vijax.models import mixture as mixture_module

RNG = np.random.default_rng(0)


def _models():
    x = RNG.normal(size=(603, 3))
    bits = (RNG.random((603, 4)) < 0.3).astype(np.float64)
    gmm = DiagonalGMM(3, 3, dtype=jnp.float64)
    return [
        ("diagonal GMM", gmm, gmm.features(jnp.asarray(x))),
        ("full GMM", FullGMM(3, 3, dtype=jnp.float64), jnp.asarray(x)),
        ("Bernoulli mixture", BernoulliMixture(3, 4, dtype=jnp.float64), jnp.asarray(bits)),
        ("DP mixture", DPMixture(gmm.component, truncation_level=4), gmm.features(jnp.asarray(x))),
    ]


def _view(model, x):
    q = model.init_globals(jax.random.PRNGKey(0), x)
    return expfam.tree_mean_params(q)


@pytest.mark.parametrize("name, model, x", _models(), ids=[m[0] for m in _models()])
def test_chunked_local_step_equals_one_pass(monkeypatch, name, model, x):
    """603 rows in chunks of 64 rows (10 chunks, the last shifted back over 40 rows counted
    before): statistics, local terms and responsibilities equal one pass's to 1e-12."""
    view = _view(model, x)
    one = model.local_step(view, x)
    row_bytes = int(np.prod(x.shape[1:])) * x.dtype.itemsize
    monkeypatch.setattr(mixture_module, "_CHUNK_BYTES", 64 * row_bytes)
    assert mixture_module._rows_per_chunk(x) == 64
    assert " scan[" in str(jax.make_jaxpr(lambda v, b: model.local_step(v, b))(view, x))  # the chunks' loop
    chunked = jax.jit(lambda v, b: model.local_step(v, b))(view, x)
    for a, b in zip(jax.tree_util.tree_leaves(chunked), jax.tree_util.tree_leaves(one)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12)


def test_chunked_local_step_under_vmap_and_one_pass_for_few_chunks(monkeypatch):
    """Vmapped over two views (restarts in lock step), each member's chunked step equals its one
    pass; a batch of fewer than ``_MIN_CHUNKS`` chunks takes one pass (no loop)."""
    _, model, x = _models()[0]
    views = jax.vmap(lambda k: expfam.tree_mean_params(model.init_globals(k, x)))(
        jax.random.split(jax.random.PRNGKey(1), 2)
    )
    one = jax.vmap(lambda v: model.local_step(v, x).suff_stats)(views)
    monkeypatch.setattr(mixture_module, "_CHUNK_BYTES", 64 * x.shape[1] * x.dtype.itemsize)
    chunked = jax.jit(jax.vmap(lambda v: model.local_step(v, x).suff_stats))(views)
    for a, b in zip(jax.tree_util.tree_leaves(chunked), jax.tree_util.tree_leaves(one)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12)
    monkeypatch.setattr(mixture_module, "_CHUNK_BYTES", 200 * x.shape[1] * x.dtype.itemsize)  # 3 chunks
    assert mixture_module._rows_per_chunk(x) is None
    assert " scan[" not in str(
        jax.make_jaxpr(lambda v: model.local_step(v, x))(jax.tree_util.tree_map(lambda a: a[0], views))
    )
