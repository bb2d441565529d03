"""``Minibatcher(packed=True)``: host chunks stored by the documents' entries (``PackedBowBatch``), padded on the
device a step at a time, give the runner the very batches of padded chunks, in memory that follows the entries
rather than S x L slots."""

import jax
import numpy as np
import pytest

from vijax.data import Corpus, Minibatcher, PackedBowBatch, device_batch
from vijax.inference import svi
from vijax.models import LDA
from vijax.run import run


def _long_tailed(num_docs=60, vocab=300, seed=0):
    """Documents of 3-12 distinct words, and one of 250: the padded length follows the long one."""
    r = np.random.default_rng(seed)
    sizes = r.integers(3, 13, num_docs)
    sizes[17] = 250
    ids = np.concatenate([r.choice(vocab, n, replace=False) for n in sizes])
    return Corpus(np.concatenate([[0], np.cumsum(sizes)]), ids, r.integers(1, 5, ids.size).astype(np.float32))


def test_packed_chunks_pad_on_the_device_to_the_stacked_chunks_in_less_host_memory():
    """Every chunk of two epochs (the last batch of each partial), padded by ``padded()`` under ``jit`` and
    ``vmap``, equals ``host_batches``' stacked (T, S, L) chunk; the packed chunk holds under a third of its bytes
    (a chunk's entries per step follow its fullest step)."""
    corpus = _long_tailed()
    padded, packed = Minibatcher(corpus, 8, seed=3, length="corpus"), Minibatcher(corpus, 8, seed=3, packed=True)
    unpack = jax.jit(jax.vmap(device_batch))
    for t0 in range(0, 2 * packed.steps_per_epoch, 5):
        want, got = padded.host_batches(t0, 5), packed.host_batches(t0, 5)
        assert isinstance(got, PackedBowBatch) and got.length == want.word_ids.shape[2] == 256
        np.testing.assert_array_equal(unpack(got).word_ids, want.word_ids)
        np.testing.assert_array_equal(unpack(got).counts, want.counts)
        host_bytes = sum(x.nbytes for x in (got.word_ids, got.counts, got.lengths))
        assert host_bytes < (want.word_ids.nbytes + want.counts.nbytes) / 3, host_bytes


@pytest.mark.slow  # two compilations of LDA's chunk: over CI's per-test budget (the streaming test runs packed)
def test_a_run_on_packed_chunks_equals_one_on_padded_chunks():
    """SVI on LDA through ``run``: the same state and ELBO trace, bit for bit."""
    corpus = _long_tailed()
    alg = svi(LDA(3, corpus.vocab_size), num_data=corpus.num_docs, schedule=0.7)
    res = [
        run(alg, jax.random.PRNGKey(0), host_batches=mb.host_batches, num_steps=10, chunk_size=5, progress=False)
        for mb in (Minibatcher(corpus, 8, seed=1, length="corpus"), Minibatcher(corpus, 8, seed=1, packed=True))
    ]
    np.testing.assert_array_equal(res[0].trace["elbo"], res[1].trace["elbo"])
    jax.tree.map(np.testing.assert_array_equal, res[0].state, res[1].state)


def test_packed_chunks_refuse_a_short_length_and_padded_wants_one_step():
    mb = Minibatcher(_long_tailed(), 8, seed=1, packed=True)
    with pytest.raises(ValueError, match=r"^length = 64 is shorter than the minibatcher's \(256\)"):
        mb.host_batches(0, 2, 64)
    with pytest.raises(ValueError, match=r"padded\(\): one step's"):
        mb.host_batches(0, 2).padded()
    with pytest.raises(ValueError, match="packed"):
        Minibatcher(_long_tailed(), 8, seed=1, packed=1)
