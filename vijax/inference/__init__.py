"""Inference algorithms as (init, step) pairs of pure functions."""
from vijax.inference import schedules
from vijax.inference._cavi import CAVIInfo, CAVIState
from vijax.inference._cavi import as_top_level_api as cavi
from vijax.inference._svi import SVIInfo, SVIState
from vijax.inference._svi import as_top_level_api as svi
from vijax.inference._optax_vi import OPTIMIZERS, OptaxVIInfo, OptaxVIState, make_optimizer, optax_vi
from vijax.inference._prox_svi import ProxSVIInfo, ProxSVIState
from vijax.inference._prox_svi import as_top_level_api as prox_svi
from vijax.inference._matrix import GLOBAL_UPDATES, build_algorithm, map_em
from vijax.inference._parallel import DataParallel, data_parallel
from vijax.inference._ssvi import SSVIInfo, SSVIState
from vijax.inference._ssvi import as_top_level_api as ssvi
from vijax.inference.base import VIAlgorithm, lock_step, restarts, select_restart

__all__ = ["CAVIInfo", "CAVIState", "DataParallel", "data_parallel", "GLOBAL_UPDATES", "OPTIMIZERS", "OptaxVIInfo", "OptaxVIState", "ProxSVIInfo", "ProxSVIState", "make_optimizer", "optax_vi", "prox_svi", "SSVIInfo", "SSVIState", "build_algorithm", "map_em", "ssvi", "SVIInfo", "SVIState", "VIAlgorithm", "cavi", "lock_step", "restarts", "schedules", "select_restart", "svi"]
