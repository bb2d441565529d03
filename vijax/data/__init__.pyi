"""Names of the package for type checkers and the lazy loader (vijax._lazy.attach_stub)."""

from vijax.data._bow import (
    BowBatch as BowBatch,
    CorpusBatch as CorpusBatch,
    PackedBowBatch as PackedBowBatch,
    device_batch as device_batch,
)
from vijax.data._csr import (
    MIN_BUCKET as MIN_BUCKET,
    Corpus as Corpus,
    CorpusWriter as CorpusWriter,
    as_rng as as_rng,
    bucket_length as bucket_length,
)
from vijax.data._synthetic_corpus import (
    LDA_BLOCK_DOCS as LDA_BLOCK_DOCS,
    LDASample as LDASample,
    sample_ctm_corpus as sample_ctm_corpus,
    sample_lda_corpus as sample_lda_corpus,
    write_lda_corpus_npz as write_lda_corpus_npz,
)
from vijax.data._prepare import prepare_corpus as prepare_corpus
from vijax.data._prefetch import PrefetchHostBatches as PrefetchHostBatches, prefetch as prefetch
from vijax.data._readers import read_ldac as read_ldac, read_uci_bow as read_uci_bow, read_word_list as read_word_list
from vijax.data._text import (
    STOP_WORDS_EN as STOP_WORDS_EN,
    Vocabulary as Vocabulary,
    build_vocabulary as build_vocabulary,
    corpus_from_texts as corpus_from_texts,
    load_vocabulary as load_vocabulary,
    tokenize as tokenize,
)
from vijax.data._hmm import HMMSample as HMMSample, sample_hmm as sample_hmm
from vijax.data._images import (
    ImageData as ImageData,
    LatentBernoulliData as LatentBernoulliData,
    latent_bernoulli_log_prob as latent_bernoulli_log_prob,
    load_digits_images as load_digits_images,
    sample_latent_bernoulli as sample_latent_bernoulli,
)
from vijax.data._minibatch import (
    Minibatcher as Minibatcher,
    epoch_batches as epoch_batches,
    minibatches as minibatches,
    stack_batches as stack_batches,
    subsample as subsample,
)
from vijax.data._paths import resolve_data_path as resolve_data_path, shared_data_path as shared_data_path
from vijax.data._spectra import (
    SpectrogramData as SpectrogramData,
    sample_speech_spectrogram as sample_speech_spectrogram,
    speech_like_dictionary as speech_like_dictionary,
)
from vijax.data._uci import (
    DATASETS as DATASETS,
    BinaryData as BinaryData,
    dataset_available as dataset_available,
    load_binary_dataset as load_binary_dataset,
    load_breast_cancer as load_breast_cancer,
    load_digits_3v5 as load_digits_3v5,
    load_ionosphere as load_ionosphere,
    load_sonar as load_sonar,
    load_usps_3v5 as load_usps_3v5,
)
from vijax.data.synthetic import (
    BernoulliMixtureData as BernoulliMixtureData,
    CategoricalMixtureData as CategoricalMixtureData,
    GMMData as GMMData,
    RegressionData as RegressionData,
    StudentTMixtureData as StudentTMixtureData,
    sample_bernoulli_mixture as sample_bernoulli_mixture,
    sample_categorical_mixture as sample_categorical_mixture,
    sample_gmm as sample_gmm,
    sample_histogram_mixture as sample_histogram_mixture,
    sample_sparse_regression as sample_sparse_regression,
    sample_student_t_mixture as sample_student_t_mixture,
)

__all__ = [
    "BernoulliMixtureData",
    "BinaryData",
    "BowBatch",
    "CategoricalMixtureData",
    "Corpus",
    "CorpusBatch",
    "CorpusWriter",
    "DATASETS",
    "GMMData",
    "HMMSample",
    "ImageData",
    "LDASample",
    "LDA_BLOCK_DOCS",
    "LatentBernoulliData",
    "MIN_BUCKET",
    "Minibatcher",
    "PackedBowBatch",
    "PrefetchHostBatches",
    "RegressionData",
    "STOP_WORDS_EN",
    "SpectrogramData",
    "StudentTMixtureData",
    "Vocabulary",
    "as_rng",
    "bucket_length",
    "build_vocabulary",
    "corpus_from_texts",
    "dataset_available",
    "device_batch",
    "epoch_batches",
    "latent_bernoulli_log_prob",
    "load_binary_dataset",
    "load_breast_cancer",
    "load_digits_3v5",
    "load_digits_images",
    "load_ionosphere",
    "load_sonar",
    "load_usps_3v5",
    "load_vocabulary",
    "minibatches",
    "prefetch",
    "prepare_corpus",
    "read_ldac",
    "read_uci_bow",
    "read_word_list",
    "resolve_data_path",
    "sample_bernoulli_mixture",
    "sample_categorical_mixture",
    "sample_ctm_corpus",
    "sample_gmm",
    "sample_histogram_mixture",
    "sample_hmm",
    "sample_latent_bernoulli",
    "sample_lda_corpus",
    "sample_sparse_regression",
    "sample_speech_spectrogram",
    "sample_student_t_mixture",
    "shared_data_path",
    "speech_like_dictionary",
    "stack_batches",
    "subsample",
    "tokenize",
    "write_lda_corpus_npz",
]
