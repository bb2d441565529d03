"""Data: synthetic generators (binary data from a random decoder for VAEs among them), images (the
8 x 8 digits), bag-of-words corpora (readers, tokenizer, synthetic LDA and CTM corpora,
memory-mapped storage), the minibatchers (host-side ``Minibatcher`` of corpora,
device-side ``epoch_batches`` of indices), and the location of optional reference data."""

from vijax.data import corpus as _corpus
from vijax.data._bernoulli import BernoulliMixtureData, sample_bernoulli_mixture
from vijax.data._hmm import HMMSample, sample_hmm
from vijax.data._images import (
    ImageData,
    LatentBernoulliData,
    latent_bernoulli_log_prob,
    load_digits_images,
    sample_latent_bernoulli,
)
from vijax.data._minibatch import epoch_batches
from vijax.data._paths import resolve_data_path, shared_data_path
from vijax.data._uci import (
    DATASETS,
    BinaryData,
    dataset_available,
    load_binary_dataset,
    load_breast_cancer,
    load_digits_3v5,
    load_ionosphere,
    load_sonar,
    load_usps_3v5,
)
from vijax.data._spectra import SpectrogramData, sample_speech_spectrogram, speech_like_dictionary
from vijax.data.corpus import *  # noqa: F401,F403  (the corpus layer's public names, see its __all__)
from vijax.data.synthetic import GMMData, RegressionData, sample_gmm, sample_histogram_mixture, sample_sparse_regression

__all__ = sorted(
    _corpus.__all__
    + [
        "BinaryData",
        "DATASETS",
        "dataset_available",
        "load_binary_dataset",
        "load_breast_cancer",
        "load_digits_3v5",
        "load_ionosphere",
        "load_sonar",
        "load_usps_3v5",
        "BernoulliMixtureData",
        "HMMSample",
        "sample_hmm",
        "GMMData",
        "SpectrogramData",
        "sample_bernoulli_mixture",
        "sample_speech_spectrogram",
        "speech_like_dictionary",
        "sample_gmm",
        "sample_histogram_mixture",
        "RegressionData",
        "sample_sparse_regression",
        "shared_data_path",
        "epoch_batches",
        "resolve_data_path",
        "ImageData",
        "LatentBernoulliData",
        "latent_bernoulli_log_prob",
        "load_digits_images",
        "sample_latent_bernoulli",
    ]
)

from vijax.data._student_t import StudentTMixtureData, sample_student_t_mixture  # noqa: E402

__all__ += ["StudentTMixtureData", "sample_student_t_mixture"]

from vijax.data._categorical_mixture import CategoricalMixtureData, sample_categorical_mixture  # noqa: E402

__all__ += ["CategoricalMixtureData", "sample_categorical_mixture"]
