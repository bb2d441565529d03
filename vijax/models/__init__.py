"""Models: priors, local steps, expected sufficient statistics, ELBOs and predictives."""
from vijax.models._base import (
    ConditionallyConjugateModel,
    LocalResult,
    conjugate_elbo,
    conjugate_posterior,
)
from vijax.models.gmm import DiagonalGMM, UnivariateGMM

__all__ = [
    "ConditionallyConjugateModel",
    "DiagonalGMM",
    "LocalResult",
    "UnivariateGMM",
    "conjugate_elbo",
    "conjugate_posterior",
]
