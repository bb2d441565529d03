"""Helpers for testing vijax and code built on it."""

from vijax.testing._asserts import assert_trees_close, mc_mean_and_stderr, primitive_counts
from vijax.testing._argmin import fd_hessian, newton_argmin
from vijax.testing._sklearn_gmm import matched_sklearn_bgmm, sklearn_to_q

__all__ = [
    "assert_trees_close",
    "fd_hessian",
    "newton_argmin",
    "matched_sklearn_bgmm",
    "mc_mean_and_stderr",
    "primitive_counts",
    "sklearn_to_q",
]
