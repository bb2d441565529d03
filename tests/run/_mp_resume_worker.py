"""One process of a two-process run (tests/run/test_multiprocess_resume.py):
``python _mp_resume_worker.py PORT PROCESS_ID CHECKPOINT_DIR OUT.npz NUM_STEPS RESUME KILL_AT CACHE [CORPUS]``.

SVI on a mixture of unit-variance Gaussians (``UnivariateGMM``, cheap to compile), data-parallel
over the two processes (each reads its own half of 32 points, 2 of them a step), or, given the path of
a corpus file ``CORPUS``, SVI on LDA streaming it: each process memory-maps the file and reads its own
``process_shard`` of the documents (2 of them a step, ``Minibatcher``), through
``vijax.run.run`` with checkpoints every 2 steps; ``CHECKPOINT_DIR`` ``-`` gives this process none
(the other processes of a run need none). With ``KILL_AT`` >= 0 the process kills itself
(``SIGKILL``) when it is asked for the batches of update ``KILL_AT`` or later. It prints the first
update of each chunk of batches it is asked for, and writes the final state's leaves and the
trace to ``OUT.npz``."""

import os
import signal
import sys

import numpy as np

N, K, CHUNK, EVERY = 32, 2, 2, 2


def _mapped(a) -> bool:
    while a is not None and not isinstance(a, np.memmap):
        a = getattr(a, "base", None)
    return a is not None


def main(port, process_id, checkpoint_dir, out, num_steps, resume, kill_at, cache, corpus_path=None):
    from vijax.inference import initialize_processes

    initialize_processes(f"localhost:{port}", 2, process_id)  # first thing, before any JAX computation
    from vijax.run import RunConfig, run

    RunConfig(fast_cpu_compile=True, compile_cache=cache).apply_process_settings()  # before JAX starts
    import jax

    from vijax.data import Corpus, Minibatcher, bucket_length
    from vijax.inference import data_parallel, global_host_batches, process_shard, svi
    from vijax.models import LDA, UnivariateGMM

    if corpus_path is None:
        data = np.random.default_rng(0).normal(size=N).astype(np.float32) + np.repeat([-2.0, 2.0], N // 2)
        mine = data[np.asarray(process_shard(N))]
        rows = lambda t: np.random.default_rng(t).choice(mine, 2, replace=False)  # noqa: E731
        model, num_data = data_parallel(UnivariateGMM(K)), N
    else:
        corpus = Corpus.load_npz(corpus_path, mmap=True)
        shard = corpus.subset(process_shard(corpus.num_docs))  # this process's block, still mapped
        assert np.shares_memory(shard.word_ids, corpus.word_ids) and _mapped(corpus.word_ids)
        length = bucket_length(int(corpus.doc_unique_words.max()))  # the same in every process
        minibatcher = Minibatcher(shard, 2, seed=1)
        model, num_data = data_parallel(LDA(K, corpus.vocab_size)), corpus.num_docs

    def local_batches(t0, n):  # this process's rows of updates t0 .. t0 + n - 1: a function of t alone
        print(f"batches asked from update {t0}", flush=True)
        if 0 <= kill_at <= t0:
            os.kill(os.getpid(), signal.SIGKILL)
        if corpus_path is None:
            return np.stack([rows(t) for t in range(t0, t0 + n)])
        return minibatcher.host_batches(t0, n, length)

    result = run(
        svi(model, num_data=num_data),
        jax.random.PRNGKey(0),
        host_batches=global_host_batches(model, local_batches),
        num_steps=num_steps,
        chunk_size=CHUNK,
        checkpoint_every=EVERY,
        checkpoint_dir=None if checkpoint_dir == "-" else checkpoint_dir,
        resume=resume,
        prefetch=0,  # the batches of update t are asked for when update t - CHUNK runs: KILL_AT is exact
        progress=False,
        compile_cache=cache,
    )
    arrays = {f"state/{i}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(result.state))}
    arrays.update({f"trace/{k}": v for k, v in result.trace.items()})
    np.savez(out, **arrays)


if __name__ == "__main__":
    port, pid, ckpt, out, steps, resume, kill_at, cache = sys.argv[1:9]
    main(int(port), int(pid), ckpt, out, int(steps), resume == "1", int(kill_at), cache, *sys.argv[9:10])
