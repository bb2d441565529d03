"""Inference algorithms as (init, step) pairs of pure functions."""
from vijax.inference import schedules
from vijax.inference._cavi import CAVIInfo, CAVIState
from vijax.inference._cavi import as_top_level_api as cavi
from vijax.inference._svi import SVIInfo, SVIState
from vijax.inference._svi import as_top_level_api as svi
from vijax.inference.base import VIAlgorithm, restarts, select_restart

__all__ = ["CAVIInfo", "CAVIState", "SVIInfo", "SVIState", "VIAlgorithm", "cavi", "restarts", "schedules", "select_restart", "svi"]
