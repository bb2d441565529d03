"""The corpus layer of bag-of-words models (LDA and its relatives).

- ``Corpus``: an immutable sparse corpus in CSR form on the host, padded into ``BowBatch``es per
  minibatch, split by documents or by tokens (document completion), saved to and memory-mapped
  from ``.npz`` files; ``CorpusWriter`` writes one chunk at a time.
- Readers of the UCI bag-of-words and lda-c formats (``read_uci_bow``, ``read_ldac``), streaming;
  ``prepare_corpus`` converts UCI, lda-c or text to the memory-mapped ``.npz`` (``vijax prepare``).
- Raw text: ``tokenize``, ``Vocabulary``, ``build_vocabulary``, ``load_vocabulary``,
  ``corpus_from_texts``, ``STOP_WORDS_EN``.
- Synthetic corpora from LDA's generative process: ``sample_lda_corpus`` in memory,
  ``write_lda_corpus_npz`` streamed to disk; from the correlated topic model:
  ``sample_ctm_corpus``.
- The one minibatcher, ``Minibatcher`` / ``minibatches``, and ``stack_batches`` for ``lax.scan``;
  ``prefetch`` / ``PrefetchHostBatches`` build batches ahead in a background thread.

Everything here runs in NumPy on the host; a ``BowBatch`` goes to the accelerator when a jitted
step receives it. Random functions take an int seed or a JAX PRNG key, never a default.
"""

from vijax.data._bow import BowBatch, CorpusBatch
from vijax.data._csr import MIN_BUCKET, Corpus, CorpusWriter, as_rng, bucket_length
from vijax.data._ctm_synthetic import sample_ctm_corpus
from vijax.data._lda_synthetic import LDA_BLOCK_DOCS, LDASample, sample_lda_corpus, write_lda_corpus_npz
from vijax.data._prepare import prepare_corpus
from vijax.data._prefetch import PrefetchHostBatches, prefetch
from vijax.data._minibatch import Minibatcher, minibatches, stack_batches
from vijax.data._readers import read_ldac, read_uci_bow, read_word_list
from vijax.data._text import STOP_WORDS_EN, Vocabulary, build_vocabulary, corpus_from_texts, load_vocabulary, tokenize

__all__ = [
    "BowBatch",
    "Corpus",
    "CorpusBatch",
    "CorpusWriter",
    "LDASample",
    "LDA_BLOCK_DOCS",
    "MIN_BUCKET",
    "Minibatcher",
    "PrefetchHostBatches",
    "STOP_WORDS_EN",
    "Vocabulary",
    "as_rng",
    "bucket_length",
    "build_vocabulary",
    "corpus_from_texts",
    "load_vocabulary",
    "minibatches",
    "prefetch",
    "prepare_corpus",
    "read_ldac",
    "read_uci_bow",
    "read_word_list",
    "sample_ctm_corpus",
    "sample_lda_corpus",
    "stack_batches",
    "tokenize",
    "write_lda_corpus_npz",
]
