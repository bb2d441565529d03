"""Online LDA end to end: the configs' experiments at a small size, and SVI streaming minibatches
of a memory-mapped on-disk corpus through the runner."""

import jax
import numpy as np
import pytest

from vijax.data import Corpus, Minibatcher, shared_data_path, write_lda_corpus_npz
from vijax.inference import schedules, svi
from vijax.models import LDA
from vijax.run import load_config, run, run_experiment


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_lda_synthetic_small_learns(tmp_path):
    cfg = load_config(
        {
            "experiment": "lda_synthetic",
            "model": {"num_topics": 8, "alpha": 0.1},
            "data": {"num_docs": 2000, "vocab_size": 300, "true_topics": 8, "max_test_docs": 200, "test_fraction": 0.1},
            "algorithm": {"batch_size": 64, "tau": 16.0},
            "run": {"num_steps": 200, "chunk_size": 5, "eval_every": 5, "progress": False},
            "output": {"dir": str(tmp_path)},
        }
    )
    _, metrics = run_experiment(cfg)
    evals = metrics["evals"]
    scores = [e["heldout_per_word"] for e in evals]
    assert scores[-1] > scores[0] + 0.05  # the held-out score climbs (from step 5 to step 200; 0.07 with seed 0)
    assert scores[-1] > -3.3  # -log(300) = -5.7 for uniform topics
    assert metrics["summary"]["topic_recovery_mean_cosine"] > 0.8
    assert (tmp_path / "heldout.png").stat().st_size > 0


@pytest.mark.slow  # CI time budget: run by `make test-slow`
@pytest.mark.skipif(shared_data_path("wiki_bnpy", "train.ldac.gz") is None, reason="reference data absent")
def test_lda_wiki_config_runs_briefly(tmp_path):
    cfg = load_config(
        "configs/lda_wiki.yaml",
        overrides=[
            f"output.dir={tmp_path}",
            "run.num_steps=20",
            "run.chunk_size=10",
            "run.eval_every=10",
            "run.progress=false",
            "model.num_topics=10",
            "data.max_test_docs=50",
        ],
    )
    _, metrics = run_experiment(cfg)
    assert np.isfinite(metrics["summary"]["heldout_per_word"])
    assert len(metrics["summary"]["top_words"]) == 10
    assert (tmp_path / "topics.txt").exists()


def test_svi_streams_a_memory_mapped_corpus(tmp_path):
    path = str(tmp_path / "corpus.npz")
    write_lda_corpus_npz(path, 0, 3000, 5, 200, alpha=0.1, eta=0.05, doc_length_mean=40)
    mm = Corpus.load_npz(path, mmap=True)
    assert isinstance(mm.word_ids, np.memmap) or isinstance(getattr(mm.word_ids, "base", None), np.memmap)
    model = LDA(5, 200, alpha=0.1, eta=0.05)
    alg = svi(model, num_data=mm.num_docs, schedule=schedules.robbins_monro(1.0, tau=8.0, kappa=0.7))
    mb = Minibatcher(mm, 50, seed=0)
    res = run(alg, jax.random.PRNGKey(0), host_batches=mb.host_batches, num_steps=60, chunk_size=20, progress=False)
    elbo = res.trace["elbo"]
    assert np.all(np.isfinite(elbo)) and elbo[-20:].mean() > elbo[:20].mean()
    assert int(res.state.count) == 60


def _tiny_lda(tmp_path, **algorithm):
    return load_config(
        {
            "experiment": "lda_synthetic",
            "model": {"num_topics": 4, "alpha": 0.1},
            "data": {"num_docs": 400, "vocab_size": 60, "true_topics": 4, "max_test_docs": 40, "test_fraction": 0.1},
            "algorithm": dict({"batch_size": 32, "tau": 16.0}, **algorithm),
            "run": {"num_steps": 20, "chunk_size": 10, "eval_every": 10, "progress": False, "cpu_devices": 2},
            "output": {"dir": str(tmp_path)},
        }
    )


@pytest.mark.slow  # CI time budget: run by `make test-slow`
def test_lda_data_parallel_follows_the_single_device_run(tmp_path):
    """algorithm.data_parallel splits each minibatch over the (two simulated) devices: the same
    trajectory as one device, up to float32 rounding of the summed statistics."""
    _, one = run_experiment(_tiny_lda(tmp_path / "one"))
    _, two = run_experiment(_tiny_lda(tmp_path / "two", data_parallel=True))
    a = [e["heldout_per_word"] for e in one["evals"]]
    b = [e["heldout_per_word"] for e in two["evals"]]
    np.testing.assert_allclose(b, a, atol=1e-4)


def test_lda_data_parallel_bad_batch_size_and_cpu_devices_are_named(tmp_path):
    from vijax.run import ConfigError, RunConfig

    with pytest.raises(ValueError, match="algorithm.batch_size: 33 must be a multiple of the 2 devices"):
        run_experiment(_tiny_lda(tmp_path, data_parallel=True, batch_size=33))
    RunConfig(cpu_devices=2).apply_process_settings()  # what JAX already has here: accepted
    with pytest.raises(ValueError, match="run.cpu_devices: cannot set 3 CPU devices"):
        RunConfig(cpu_devices=3).apply_process_settings()
    cfg = _tiny_lda(tmp_path)
    cfg["run"]["cpu_devices"] = 3
    with pytest.raises(ConfigError, match="run.cpu_devices: cannot set 3 CPU devices"):
        run_experiment(cfg)
