"""A streamed corpus costs memory that does not grow with its size: SVI on LDA through ``vijax.run.run``
over a memory-mapped corpus, in a fresh process per size, holds the same anonymous memory for a file
20 times larger (``benchmarks/lda_scale.py`` measures it at 10^5 to 3.8 * 10^6 documents)."""

import json
import os
import subprocess
import sys

import numpy as np

from vijax.data import CorpusWriter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CHILD = r"""
import json, sys
import numpy as np
from vijax.run import RunConfig, run
RunConfig(fast_cpu_compile=True, compile_cache=sys.argv[2]).apply_process_settings()
import jax
from vijax.data import Corpus, Minibatcher, bucket_length
from vijax.inference import svi
from vijax.models import LDA

def anon_mib():
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("RssAnon:")) / 1024

corpus = Corpus.load_npz(sys.argv[1], mmap=True)  # checked in blocks, then mapped
mb = Minibatcher(corpus, 32, seed=1, packed=True)  # host chunks of the entries alone, padded on the device
length = bucket_length(int(corpus.doc_unique_words.max()))
r = run(svi(LDA(3, corpus.vocab_size), num_data=corpus.num_docs), jax.random.PRNGKey(0),
        host_batches=mb.host_batches, num_steps=8, chunk_size=4, progress=False,
        compile_cache=sys.argv[2])
jax.block_until_ready(r.state)
for start in range(0, corpus.num_docs, 8192):  # every document read once, as a pass does
    corpus.batch(range(start, min(start + 8192, corpus.num_docs)), length=length)
print("RESULT " + json.dumps({"anon_mib": anon_mib(), "mapped": isinstance(corpus.word_ids.base, np.memmap)}))
"""


def _write(path, num_docs, vocab=5000, words=50, block=50_000):
    """``num_docs`` documents of ``words`` distinct words each (0.4 KiB of entries a document), in blocks."""
    with CorpusWriter(path, vocab) as w:
        for start in range(0, num_docs, block):
            d = np.arange(start, min(start + block, num_docs))
            ids = (7 * d[:, None] + 97 * np.arange(words)) % vocab  # distinct: 97 is prime to 5000
            w.append_arrays(np.full(d.size, words), ids.ravel().astype(np.int32), np.ones(ids.size, np.float32))


def _anon_after_streaming(path, cache) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]), JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), cache], capture_output=True, text=True, env=env)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert out.returncode == 0 and line, out.stdout + out.stderr
    return json.loads(line[-1][7:])


def test_memory_of_a_streamed_run_does_not_grow_with_the_corpus(tmp_path):
    """10^4 and 2 * 10^5 documents (4 and 76 MiB of entries): after 8 SVI steps and a read of
    every document, the larger run's anonymous RSS exceeds the smaller's by less than a third of the
    files' difference (what holding the entries would add: 8 bytes each), where only a few arrays of
    8 bytes a document (the epoch's order, the document sizes) may grow."""
    sizes, res = (10_000, 200_000), []
    cache = str(tmp_path / "cache")  # the second process loads the first one's programs
    for d in sizes:
        path = tmp_path / f"c{d}.npz"
        _write(path, d)
        res.append({**_anon_after_streaming(path, cache), "file_mib": os.path.getsize(path) / 2**20})
    assert all(r["mapped"] for r in res), res
    grew, file_grew = res[1]["anon_mib"] - res[0]["anon_mib"], res[1]["file_mib"] - res[0]["file_mib"]
    assert file_grew > 50, res
    assert grew < file_grew / 3, res
