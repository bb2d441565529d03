"""Registered experiments: importing this package registers every builder with
``vijax.run.register_experiment``."""
from vijax.run.experiments import gmm, lda  # noqa: F401
