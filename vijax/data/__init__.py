"""Data: synthetic generators with known ground truth, images (the 8 x 8 digits), the UCI binary
classification sets, and the corpus layer of bag-of-words models: ``Corpus`` (an immutable CSR
corpus on the host, memory-mapped from ``.npz``), readers of the UCI and lda-c formats, a text
tokenizer and vocabulary, synthetic LDA and CTM corpora, the one minibatcher (``Minibatcher``,
``epoch_batches``) and background prefetching. Random functions take an int seed or a JAX PRNG
key, never a default.
"""

from vijax._lazy import exported, lazy_names

# name -> its module, loaded at the name's first use (vijax._lazy)
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
