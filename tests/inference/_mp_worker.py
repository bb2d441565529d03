"""One process of the multi-process data-parallel test (tests/inference/test_distributed.py):
``python _mp_worker.py PORT NUM_PROCESSES PROCESS_ID OUT.npz [bad]`` (NUM_PROCESSES 1: the
one-process reference, reading both halves). Each process reads only its own
block of the corpus, runs SVI on LDA through ``vijax.run.run`` with ``global_host_batches`` and
writes the final topics and the ELBO trace. With ``bad``, process 1 reads a negative count in
its first row of step BAD_STEP (0-based): the run must stop there with an error on every process
and write nothing."""

import sys

import numpy as np

D, K, V, S, STEPS, CHUNK = 48, 3, 25, 8, 6, 3
BAD_STEP = 4  # in the second chunk


def fit(shards, num_shards, bad=False):
    import jax

    from vijax.data import Minibatcher, bucket_length, sample_lda_corpus
    from vijax.inference import data_parallel, global_host_batches, process_shard, svi
    from vijax.models import LDA
    from vijax.run import run

    corpus = sample_lda_corpus(0, num_docs=D, num_topics=K, vocab_size=V, doc_length_mean=8).corpus
    length = bucket_length(int(corpus.doc_unique_words.max()))
    local = [Minibatcher(corpus.subset(process_shard(D, p, num_shards)), S // num_shards, seed=1) for p in shards]

    def local_host_batches(t0, n):  # this process's rows of steps t0 .. t0 + n - 1
        parts = [mb.host_batches(t0, n, length) for mb in local]
        batches = jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *parts)
        if bad and t0 <= BAD_STEP < t0 + n:
            counts = np.array(batches.counts)
            counts[BAD_STEP - t0, 0, 0] = -1.0
            batches = batches._replace(counts=counts)
        return batches

    model = data_parallel(LDA(K, V))
    alg = svi(model, num_data=D)
    result = run(
        alg,
        jax.random.PRNGKey(0),
        host_batches=global_host_batches(model, local_host_batches),
        num_steps=STEPS,
        chunk_size=CHUNK,
        progress=False,
        compile_cache=False,
    )
    leaves = [np.asarray(x.addressable_data(0)) for x in jax.tree.leaves(result.state.q_global)]
    return np.asarray(result.trace["elbo"]), leaves


if __name__ == "__main__":
    port, nproc, pid, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    bad = sys.argv[5:] == ["bad"]
    from vijax.inference import initialize_processes

    if nproc > 1:
        initialize_processes(f"localhost:{port}", nproc, pid)  # first thing, before any JAX computation
    import jax

    # one process alone reads every shard (the reference); else each its own
    if nproc > 1:
        elbo, leaves = fit([jax.process_index()], nproc, bad=bad and jax.process_index() == 1)
    else:
        elbo, leaves = fit([0, 1], 2)
    np.savez(out, elbo, *leaves)
    print("process", jax.process_index(), "of", jax.process_count(), "devices", jax.devices(), flush=True)
