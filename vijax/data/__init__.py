"""Data: synthetic generators (binary data from a random decoder for VAEs among them), images (the
8 x 8 digits), bag-of-words corpora (readers, tokenizer, synthetic LDA and CTM corpora,
memory-mapped storage), the minibatchers (host-side ``Minibatcher`` of corpora,
device-side ``epoch_batches`` of indices), and the location of optional reference data."""

from vijax._lazy import exported, lazy_names
from vijax.data import corpus as _corpus
from vijax.data.corpus import *  # noqa: F401,F403  (the corpus layer's public names, see its __all__)

# name -> the module it is read from at its first use (vijax._lazy): the generators and loaders, some
# of which build models, load only when used
_MODULES = {
    "vijax.data._bernoulli": ("BernoulliMixtureData", "sample_bernoulli_mixture"),
    "vijax.data._categorical_mixture": ("CategoricalMixtureData", "sample_categorical_mixture"),
    "vijax.data._hmm": ("HMMSample", "sample_hmm"),
    "vijax.data._images": (
        "ImageData",
        "LatentBernoulliData",
        "latent_bernoulli_log_prob",
        "load_digits_images",
        "sample_latent_bernoulli",
    ),
    "vijax.data._minibatch": ("epoch_batches",),
    "vijax.data._paths": ("resolve_data_path", "shared_data_path"),
    "vijax.data._spectra": ("SpectrogramData", "sample_speech_spectrogram", "speech_like_dictionary"),
    "vijax.data._student_t": ("StudentTMixtureData", "sample_student_t_mixture"),
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
        "GMMData",
        "RegressionData",
        "sample_gmm",
        "sample_histogram_mixture",
        "sample_sparse_regression",
    ),
}

__all__ = sorted(_corpus.__all__ + exported(_MODULES))

__getattr__, __dir__ = lazy_names(__name__, _MODULES, __all__)
