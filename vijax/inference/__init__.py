"""Inference algorithms as (init, step) pairs of pure functions."""
from vijax.inference._cavi import CAVIInfo, CAVIState
from vijax.inference._cavi import as_top_level_api as cavi
from vijax.inference.base import VIAlgorithm

__all__ = ["CAVIInfo", "CAVIState", "VIAlgorithm", "cavi"]
