"""Models: priors, local steps, expected sufficient statistics, ELBOs and predictives."""
from vijax.models._base import (
    ConditionallyConjugateModel,
    LocalResult,
    conjugate_elbo,
    conjugate_posterior,
)
from vijax.models.gmm import DiagonalGMM, UnivariateGMM
from vijax.models.lda import LDA

__all__ = [
    "ConditionallyConjugateModel",
    "DiagonalGMM",
    "LDA",
    "LocalResult",
    "UnivariateGMM",
    "conjugate_elbo",
    "conjugate_posterior",
]
