"""Host minibatches: ``Minibatcher(packed=True)``'s chunks of the documents' entries (``PackedBowBatch``), padded
on the device a step at a time, give the runner the very batches of padded chunks in memory that follows the
entries rather than S x L slots; a pass releases a mapped corpus's pages; ``subsample`` draws uniform subsets."""

import os

import jax
import numpy as np
import pytest

from vijax.data import Corpus, CorpusWriter, Minibatcher, PackedBowBatch, device_batch, subsample
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


def test_packed_chunks_refuse_a_short_length_bad_lengths_and_padded_wants_one_step():
    mb = Minibatcher(_long_tailed(), 8, seed=1, packed=True)
    with pytest.raises(ValueError, match=r"^length = 64 is shorter than the minibatcher's \(256\)"):
        mb.host_batches(0, 2, 64)
    with pytest.raises(ValueError, match=r"padded\(\): one step's"):
        mb.host_batches(0, 2).padded()
    with pytest.raises(ValueError, match="packed"):
        Minibatcher(_long_tailed(), 8, seed=1, packed=1)
    ids, counts = np.arange(6), np.ones(6, np.float32)
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, length = 2\], got 0..3"):
        PackedBowBatch(ids, counts, np.array([3, 0]), 2)  # a document longer than L: its entries would be dropped
    with pytest.raises(ValueError, match="sum to 7, more than its 6 entries"):
        PackedBowBatch(ids, counts, np.array([4, 3]), 4)
    with pytest.raises(ValueError, match="same leading axes"):
        PackedBowBatch(ids, counts[:5], np.array([2, 2]), 4)
    with pytest.raises(ValueError, match="batch_size"):
        subsample(jax.random.PRNGKey(0), 3, 4)


def _rss_file_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("RssFile:")) / 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads Linux's /proc/self/status")
def test_a_pass_over_a_mapped_corpus_does_not_keep_its_pages_resident(tmp_path):
    """Chunks of a pass over a memory-mapped corpus of 48 MiB of entries: the process's file-backed RSS grows by
    under 12 MiB (the pages of about one chunk), where holding every page read would add the whole file."""
    path = str(tmp_path / "c.npz")
    num_docs, words = 60_000, 100
    with CorpusWriter(path, 5000) as w:
        for start in range(0, num_docs, 10_000):
            d = np.arange(start, start + 10_000)
            ids = (7 * d[:, None] + 97 * np.arange(words)) % 5000
            w.append_arrays(np.full(d.size, words), ids.ravel().astype(np.int32), np.ones(ids.size, np.float32))
    corpus = Corpus.load_npz(path, mmap=True, validate=False)
    mb = Minibatcher(corpus, 500, seed=0, packed=True)
    before = _rss_file_mib()
    for t0 in range(0, mb.steps_per_epoch, 10):
        mb.host_batches(t0, 10)
    assert _rss_file_mib() - before < 12, (before, _rss_file_mib())


@pytest.mark.parametrize("extra", [0, 2])
def test_the_first_distinct_draws_are_a_uniform_subset_in_random_order(extra):
    """subsample's way for M small beside N, forced at N = 6, M = 3 with few spare draws, so that its fallback (the
    largest keys) runs too (with none spare: 44 % of keys): the 20 subsets equally frequent, and the first index
    uniform over the 6 (chi-square tests at the 0.1 % level: below 43.8 with 19 degrees of freedom, 20.5 with 5)."""
    from vijax.data._minibatch import _first_distinct

    keys = jax.random.split(jax.random.PRNGKey(1), 4000)
    draws = np.asarray(jax.jit(jax.vmap(lambda k: _first_distinct(k, 6, 3, extra)))(keys))
    assert all(len(set(row)) == 3 for row in draws.tolist())
    _, counts = np.unique(np.sort(draws, axis=1), axis=0, return_counts=True)
    assert counts.size == 20 and np.sum((counts - 200.0) ** 2 / 200.0) < 43.8, counts
    first = np.bincount(draws[:, 0], minlength=6)
    assert np.sum((first - 4000 / 6) ** 2 / (4000 / 6)) < 20.5, first


def test_subsample_small_beside_the_data_includes_each_index_equally():
    """M = 200 of N = 2,000 (the first-distinct way): distinct indices in range; each index in 50 of 500 draws'
    subsets on average (a chi-square test of the inclusion counts at the 0.1 % level)."""
    keys = jax.random.split(jax.random.PRNGKey(2), 500)
    draws = np.asarray(jax.jit(jax.vmap(lambda k: subsample(k, 2000, 200)))(keys))
    assert draws.min() >= 0 and draws.max() < 2000 and all(len(set(row)) == 200 for row in draws.tolist())
    counts = np.bincount(draws.ravel(), minlength=2000)
    assert np.sum((counts - 50.0) ** 2 / 50.0) < 2200.1, counts  # scipy.stats.chi2.ppf(0.999, 1999)


def test_subsample_draws_each_subset_uniformly():
    """4,000 draws of 3 of 6 indices under vmap: distinct indices; each of the 20 subsets drawn with frequency
    1/20 (a chi-square test at the 0.1% level, 19 degrees of freedom: below 43.8)."""
    draws = np.asarray(jax.vmap(lambda k: subsample(k, 6, 3))(jax.random.split(jax.random.PRNGKey(0), 4000)))
    assert draws.shape == (4000, 3) and all(len(set(row)) == 3 for row in draws.tolist())
    _, counts = np.unique(np.sort(draws, axis=1), axis=0, return_counts=True)
    assert counts.size == 20
    assert np.sum((counts - 200.0) ** 2 / 200.0) < 43.8, counts
