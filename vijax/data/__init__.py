"""Data: synthetic generators (binary data from a random decoder for VAEs among them), images (the
8 x 8 digits), bag-of-words corpora (readers, tokenizer, synthetic LDA and CTM corpora,
memory-mapped storage), the minibatchers (host-side ``Minibatcher`` of corpora,
device-side ``epoch_batches`` of indices), and the location of optional reference data.

The corpus layer of bag-of-words models (LDA and its relatives):

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

Everything there runs in NumPy on the host; a ``BowBatch`` goes to the accelerator when a jitted
step receives it. Random functions take an int seed or a JAX PRNG key, never a default.
"""

from vijax._lazy import exported, lazy_names

# name -> the module it is read from at its first use (vijax._lazy): the generators and loaders, some
# of which build models, load only when used; the corpus layer (its modules listed first) too, so that
# a script reading an lda-c file loads no text tokenizer or synthetic corpus
_MODULES = {
    "vijax.data._bow": ("BowBatch", "CorpusBatch"),
    "vijax.data._csr": ("MIN_BUCKET", "Corpus", "CorpusWriter", "as_rng", "bucket_length"),
    "vijax.data._synthetic_corpus": (
        "LDA_BLOCK_DOCS",
        "LDASample",
        "sample_ctm_corpus",
        "sample_lda_corpus",
        "write_lda_corpus_npz",
    ),
    "vijax.data._prepare": ("prepare_corpus",),
    "vijax.data._prefetch": ("PrefetchHostBatches", "prefetch"),
    "vijax.data._readers": ("read_ldac", "read_uci_bow", "read_word_list"),
    "vijax.data._text": (
        "STOP_WORDS_EN",
        "Vocabulary",
        "build_vocabulary",
        "corpus_from_texts",
        "load_vocabulary",
        "tokenize",
    ),
    "vijax.data._hmm": ("HMMSample", "sample_hmm"),
    "vijax.data._images": (
        "ImageData",
        "LatentBernoulliData",
        "latent_bernoulli_log_prob",
        "load_digits_images",
        "sample_latent_bernoulli",
    ),
    "vijax.data._minibatch": ("Minibatcher", "epoch_batches", "minibatches", "stack_batches"),
    "vijax.data._paths": ("resolve_data_path", "shared_data_path"),
    "vijax.data._spectra": ("SpectrogramData", "sample_speech_spectrogram", "speech_like_dictionary"),
    "vijax.data._uci": (
        "DATASETS",
        "BinaryData",
        "dataset_available",
        "load_binary_dataset",
        "load_breast_cancer",
        "load_digits_3v5",
        "load_ionosphere",
        "load_sonar",
        "load_usps_3v5",
    ),
    "vijax.data.synthetic": (
        "BernoulliMixtureData",
        "CategoricalMixtureData",
        "GMMData",
        "RegressionData",
        "StudentTMixtureData",
        "sample_bernoulli_mixture",
        "sample_categorical_mixture",
        "sample_gmm",
        "sample_histogram_mixture",
        "sample_sparse_regression",
        "sample_student_t_mixture",
    ),
}

__all__ = sorted(exported(_MODULES))

__getattr__, __dir__ = lazy_names(__name__, _MODULES, __all__)
