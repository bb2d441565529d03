"""The background-thread prefetch of host batches: same items in the same order, exceptions reach
the consumer, the thread stops, and a prefetched run is bit-identical to one without."""

import threading
import time

import numpy as np
import pytest

from vijax.data import Minibatcher, PrefetchHostBatches, prefetch, sample_lda_corpus


def _threads():
    return sum(t.name == "vijax-prefetch" for t in threading.enumerate())


def test_prefetch_iterator_order_error_and_shutdown():
    assert list(prefetch(iter(range(50)), depth=3)) == list(range(50))

    def failing():
        yield 1
        yield 2
        raise KeyError("boom at 3")

    it = prefetch(failing(), depth=1)
    assert next(it) == 1 and next(it) == 2
    with pytest.raises(KeyError, match="boom at 3"):
        next(it)
    # an abandoned endless iterator: close stops the thread although its queue is full
    before = _threads()
    with prefetch(iter(int, 1), depth=2) as it:
        next(it)
        time.sleep(0.05)
    assert _threads() == before
    with pytest.raises(ValueError, match="depth"):
        prefetch(range(3), depth=0)


def test_prefetch_host_batches_matches_minibatcher_in_any_call_order():
    corpus = sample_lda_corpus(0, num_docs=30, num_topics=2, vocab_size=20, doc_length_mean=6).corpus
    mb = Minibatcher(corpus, 4, seed=3)
    calls = [(0, 3), (3, 3), (6, 3), (2, 3), (5, 2), (7, 2), (7, 2), (40, 5)]  # in order, a jump back, a new n
    with PrefetchHostBatches(mb.host_batches, depth=2) as f:
        for t0, n in calls:
            got, want = f(t0, n), mb.host_batches(t0, n)
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a, b)
    assert _threads() == 0

    def bad(t0, n):
        if t0 >= 4:
            raise OSError(f"cannot read chunk {t0}")
        return t0

    g = PrefetchHostBatches(bad, depth=2)
    assert g(0, 2) == 0 and g(2, 2) == 2
    with pytest.raises(OSError, match="chunk 4"):
        g(4, 2)
    g.close()


def test_runner_with_and_without_prefetch_bit_identical():
    import chex
    import jax

    from vijax.inference import svi
    from vijax.models import LDA
    from vijax.run import run

    corpus = sample_lda_corpus(0, num_docs=24, num_topics=2, vocab_size=15, doc_length_mean=5).corpus
    mb = Minibatcher(corpus, 4, seed=1)
    alg = svi(LDA(2, 15), num_data=corpus.num_docs)
    out = [
        run(
            alg,
            jax.random.PRNGKey(0),
            host_batches=mb.host_batches,
            num_steps=6,
            chunk_size=2,
            progress=False,
            prefetch=p,
        )
        for p in (0, 2)
    ]
    np.testing.assert_array_equal(out[0].trace["elbo"], out[1].trace["elbo"])
    chex.assert_trees_all_equal(out[0].state, out[1].state)
    assert _threads() == 0


def test_unclosed_prefetcher_is_collected_and_its_thread_stops():
    import gc

    f = PrefetchHostBatches(lambda t0, n: t0, depth=1)
    f(0, 1)
    assert _threads() == 1
    del f
    gc.collect()
    assert _threads() == 0
