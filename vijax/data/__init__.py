"""Data: synthetic generators (and, in later modules, corpus readers and minibatching)."""
from vijax.data._bow import BowBatch
from vijax.data.synthetic import GMMData, sample_gmm, sample_histogram_mixture

__all__ = ["BowBatch", "GMMData", "sample_gmm", "sample_histogram_mixture"]
