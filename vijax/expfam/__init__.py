"""Exponential families as registered pytrees of natural parameters."""
from vijax.expfam._base import (
    AbstractExpFamily,
    autodiff_fisher_vp,
    dense_fisher,
    inner,
    is_family,
    register_family,
    tree_from_natural,
    tree_inner,
    tree_is_valid,
    tree_kl,
    tree_mean_params,
    tree_natural_params,
)
from vijax.expfam._dirichlet import Dirichlet
from vijax.expfam._gamma import Gamma
from vijax.expfam._normal import Normal
from vijax.expfam._normal_gamma import NormalGamma

__all__ = [
    "AbstractExpFamily",
    "Dirichlet",
    "Gamma",
    "Normal",
    "NormalGamma",
    "autodiff_fisher_vp",
    "dense_fisher",
    "inner",
    "is_family",
    "register_family",
    "tree_from_natural",
    "tree_inner",
    "tree_is_valid",
    "tree_kl",
    "tree_mean_params",
    "tree_natural_params",
]
