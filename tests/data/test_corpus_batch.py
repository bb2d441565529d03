"""CorpusBatch: a Corpus's minibatches are vouched for by the corpus, so a step compiles no check of
their values (no host callback under a plain jax.jit), and anything made from them is checked."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.data import BowBatch, Corpus, CorpusBatch, Minibatcher, sample_lda_corpus
from vijax.inference import jit_step, svi
from vijax.models import CTM, LDA, PLSA

V = 30


@pytest.fixture(scope="module")
def setup():
    corpus = sample_lda_corpus(0, 40, 3, V, doc_length_mean=10).corpus
    batch = next(iter(Minibatcher(corpus, 8, seed=0, num_epochs=1)))
    alg = svi(LDA(3, V), num_data=40)
    return corpus, batch, alg, alg.init(jax.random.PRNGKey(0), batch)


def _has_callback(step, state, batch) -> bool:
    return "callback" in jax.jit(step).lower(jax.random.PRNGKey(1), state, batch).as_text()


def test_a_corpus_batch_is_read_only_and_vouched_for(setup):
    corpus, batch, _, _ = setup
    assert type(batch) is CorpusBatch and isinstance(batch, BowBatch)
    assert batch.checked_vocab_size() == corpus.vocab_size == V
    assert not batch.word_ids.flags.writeable and not batch.counts.flags.writeable
    with pytest.raises(ValueError):
        batch.counts[0, 0] = -1.0
    # a narrower count type may round or overflow a count: a plain, checked BowBatch
    assert type(corpus.batch([0, 1], dtype=np.float16)) is BowBatch


def test_plain_jit_of_a_step_on_corpus_batches_has_no_host_callback(setup):
    _, batch, alg, state = setup
    assert not _has_callback(alg.step, state, batch)
    assert _has_callback(alg.step, state, BowBatch(np.array(batch.word_ids), np.array(batch.counts)))
    for model in (CTM(3, V), PLSA(3, V)):  # the other bag-of-words models share the rule
        assert model.batch_checks(batch) == []
        assert len(model.batch_checks(BowBatch(*map(np.array, batch)))) == 2


def test_anything_made_from_a_corpus_batch_is_checked(setup):
    _, batch, alg, state = setup
    key = jax.random.PRNGKey(1)
    # the same arrays stay vouched for; new arrays do not, whatever their type
    assert jax.tree.map(lambda x: x, batch).checked_vocab_size() == V
    assert batch._replace(counts=batch.counts * 2).checked_vocab_size() is None
    assert jax.device_put(batch).checked_vocab_size() is None
    ids = np.array(batch.word_ids)
    ids[0, 0] = V + 5
    forged = CorpusBatch(ids, np.array(batch.counts))
    assert forged.checked_vocab_size() is None
    with pytest.raises(Exception, match=r"batch word id 35 at \[0, 0\] is out of range \[0, 30\)"):
        jax.block_until_ready(jax.jit(alg.step)(key, state, forged))

    def mapped_inside(k, s, b):  # a map inside the user's own jit makes a batch of new tracers
        return alg.step(k, s, jax.tree.map(lambda x: jnp.where(x == x, V + 1, x) if x.dtype == jnp.int32 else x, b))

    with pytest.raises(Exception, match=r"batch word id 31 at \[0, 0\] is out of range"):
        jax.block_until_ready(jax.jit(mapped_inside)(key, state, batch))


def test_ahead_of_time_compiled_step_takes_the_batch_it_was_lowered_for(setup):
    """``jax.jit(step).lower(...).compile()``: JAX rebuilds the arguments' tree from stand-ins of
    the arrays (ArgInfo), which keep the batch's metadata, so the compiled step takes the corpus
    batch (it raised a pytree mismatch) and refuses a batch the corpus does not vouch for."""
    _, batch, alg, state = setup
    key = jax.random.PRNGKey(1)
    compiled = jax.jit(alg.step).lower(key, state, batch).compile()
    new, _ = compiled(key, state, batch)
    want, _ = jax.jit(alg.step)(key, state, batch)
    np.testing.assert_allclose(np.asarray(new.q_global.concentration), np.asarray(want.q_global.concentration))
    with pytest.raises(TypeError):  # an unmarked batch never runs in the program without checks
        compiled(key, state, batch._replace(counts=np.array(batch.counts)))
    # stand-ins made by the user keep the metadata too
    specs = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), batch)
    assert jax.tree_util.tree_structure(specs) == jax.tree_util.tree_structure(batch)
    assert "callback" not in jax.jit(alg.step).lower(key, state, specs).as_text()


def test_a_model_with_fewer_words_than_the_corpus_checks_the_batch(setup):
    _, batch, _, _ = setup
    small = svi(LDA(3, 20), num_data=40)
    state = small.init(jax.random.PRNGKey(0), None)
    assert _has_callback(small.step, state, batch)
    bad = np.argwhere(np.asarray(batch.word_ids) >= 20)[0]
    with pytest.raises(Exception, match=rf"batch word id \d+ at \[{bad[0]}, {bad[1]}\] is out of range \[0, 20\)"):
        jax.block_until_ready(jax.jit(small.step)(jax.random.PRNGKey(1), state, batch))


def test_an_unchecked_corpus_cuts_plain_batches_that_the_step_checks(setup):
    """Corpus(validate=False) vouches for nothing: its batches are plain BowBatches, and a word id
    out of the model's range raises at the step; a subset keeps its corpus's standing."""
    corpus, _, alg, state = setup
    assert type(corpus.subset([0, 1]).batch([0])) is CorpusBatch
    bad = Corpus(np.array([0, 2]), np.array([3, V + 2]), np.array([1.0, 2.0]), V + 5, validate=False)
    assert type(bad.batch([0])) is BowBatch and type(bad.subset([0]).batch([0])) is BowBatch
    batch = bad.batch([0] * 8, length=8)
    with pytest.raises(Exception, match=r"batch word id 32 at \[0, 1\] is out of range \[0, 30\)"):
        jax.block_until_ready(jax.jit(alg.step)(jax.random.PRNGKey(1), state, batch))


def test_steps_on_corpus_batches_match_steps_on_checked_copies(setup):
    """Skipping the checks changes nothing else: the same state as the checked step, bit for bit,
    by jit_step (no check to collect) and by a plain jax.jit."""
    _, batch, alg, state = setup
    copy = BowBatch(np.array(batch.word_ids), np.array(batch.counts))
    key = jax.random.PRNGKey(3)
    a, _ = jit_step(alg.step)(key, state, batch)
    b, _ = jax.jit(alg.step)(key, state, copy)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_the_doc_example_corpus():
    c = Corpus(np.array([0, 2, 3]), np.array([0, 3, 1]), np.array([2.0, 1.0, 4.0]))
    assert c.batch([0, 1]).checked_vocab_size() == 4


_SCRIPT = """
import sys, jax, numpy as np
import vijax.run
vijax.run.enable_compile_cache(sys.argv[1])
from vijax.data import BowBatch, Minibatcher, sample_lda_corpus
from vijax.inference import svi
from vijax.models import LDA
corpus = sample_lda_corpus(0, 40, 3, 30, doc_length_mean=10).corpus
batch = next(iter(Minibatcher(corpus, 8, seed=0, num_epochs=1)))
if sys.argv[2] == "copy":
    batch = BowBatch(np.array(batch.word_ids), np.array(batch.counts))
alg = svi(LDA(3, 30), num_data=40)
state = alg.init(jax.random.PRNGKey(0), batch)
jax.block_until_ready(jax.jit(alg.step)(jax.random.PRNGKey(1), state, batch))
"""


@pytest.mark.slow
@pytest.mark.parametrize("batch", ["corpus", "copy"])
def test_a_second_process_loads_the_plain_jit_step_from_the_persistent_cache(tmp_path, batch):
    """End to end: with JAX's persistent cache on, a second run of a script that jits a step on a
    Minibatcher's batch loads the step (a cache hit); on a copied batch, whose
    checks are host callbacks, the step is compiled again in every process."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, JAX_LOG_COMPILES="1", JAX_PLATFORMS="cpu")
    logs = [
        subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(tmp_path / "cache"), batch], capture_output=True, text=True, env=env
        )
        for _ in range(2)
    ]
    assert all(p.returncode == 0 for p in logs), logs[-1].stderr[-2000:]
    import re

    # the step's program, whatever its name (the last one compiled with "step" in it)
    name = re.findall(r"Finished XLA compilation of jit\((\w*step\w*)\)", logs[0].stderr)[-1]
    hit = f"Persistent compilation cache hit for 'jit_{name}'"
    assert hit not in logs[0].stderr
    assert (hit in logs[1].stderr) == (batch == "corpus")
