"""Inference algorithms as ``VIAlgorithm(init, step)`` pairs of pure functions.

Auto-encoding variational Bayes (``aevb``: a VAE with a point or a Bayesian decoder).
Black-box VI on any log-density: ``bbvi`` (an optax optimizer on a Monte Carlo ELBO) and ``ngvi``
(natural-gradient VI for exponential-family q). Factories take the model (or log-density) first and keyword-only ``num_data`` and ``schedule``; every state holds
``q_global`` and ``count``. Every factory returns ``VIAlgorithm(init, step)``; what an algorithm
offers beyond them (``bbvi``'s ``guide``, draws, PSIS log-weights, a differentiable ``elbo``;
``aevb``'s evaluations) are module functions over the algorithm and its state: ``guide``,
``sample``, ``log_weights``, ``elbo``, ``iwae_log_likelihood``, ``reconstruct``, ``decoder_kl``.
``bbvi`` and ``ngvi`` also take a NumPyro or TFP model as a ``vijax.interop.Target``
(``vijax.from_numpyro``, ``vijax.from_tfp``); ``auto_family(target)`` matches an exponential family
to each site's support; ``conjugate_split`` updates a NumPyro model's conditionally conjugate
sites (``vijax.conjugate_sites``) in closed form and the rest by ``bbvi``, in one step. Maximum-likelihood / MAP ``em`` for any model with an E-step and an M-step. Algorithms by name: ``ALGORITHMS`` / ``make_algorithm``.
A Bayesian last layer on a network, trained end to end by the user's own loop:
``bayesian_last_layer`` (docs/composition.md). Combinators: ``restarts``, ``lock_step``, ``replace_elbo``, ``data_parallel``
(across processes: ``initialize_processes``, ``process_shard``, ``global_batch``, ``global_host_batches``).
"""

from vijax.inference import schedules
from vijax.inference._aevb import THETA_DRAWS, AEVBInfo, AEVBState, aevb, gaussian_kl
from vijax.inference._bbvi import ESTIMATORS, BBVIInfo, BBVIState, bbvi, log_joint
from vijax.inference._cavi import CAVIInfo, CAVIState, cavi
from vijax.inference._em import EMInfo, EMState, em
from vijax.inference._extras import decoder_kl, elbo, guide, iwae_log_likelihood, log_weights, reconstruct, sample
from vijax.inference._combinators import (
    GridState,
    factory_grid,
    hyperparameter_grid,
    lock_step,
    replace_elbo,
    restarts,
    select_restart,
)
from vijax.inference._guides import KINDS, ExpFamilyGuide, GaussianGuide, auto_family
from vijax.inference._last_layer import LIKELIHOODS, LastLayer, bayesian_last_layer, head_log_likelihood
from vijax.inference._map import MAPInfo, MAPState, map_em
from vijax.inference._ngvi import GRADIENTS, NGVIInfo, NGVIState, ngvi
from vijax.inference._optax_vi import (
    DEFAULT_LEARNING_RATES,
    OPTIMIZERS,
    OptaxVIInfo,
    OptaxVIState,
    make_optimizer,
    optax_vi,
    resolve_optimizer,
)
from vijax.inference._parallel import DataParallel, data_parallel
from vijax.inference._distributed import global_batch, global_host_batches, initialize_processes, process_shard
from vijax.inference._prox_svi import DIVERGENCES, ProxSVIInfo, ProxSVIState, prox_svi
from vijax.inference._registry import ALGORITHMS, M_STEPS, AlgorithmSpec, make_algorithm, register_algorithm
from vijax.inference._split import SplitInfo, SplitState, conjugate_split
from vijax.inference._ssvi import MODES, SSVIInfo, SSVIState, ssvi, ssvi_a
from vijax.inference._conjugate import inject_hyperparameters
from vijax.inference._svi import SVIInfo, SVIState, svi
from vijax.inference.sgrld import SGRLDInfo, SGRLDState, sgrld_lda, sgrld_schedule, sgrld_topics, topics_dirichlet
from vijax.inference.base import (
    BoundFunction,
    InitFn,
    StepFn,
    VIAlgorithm,
    bind_settings,
    check_step_batch,
    init_from,
    jit_step,
    safe_increment,
    with_value_checks,
)

__all__ = [
    "SplitInfo",
    "SplitState",
    "conjugate_split",
    "auto_family",
    "decoder_kl",
    "elbo",
    "guide",
    "iwae_log_likelihood",
    "log_weights",
    "reconstruct",
    "sample",
    "check_step_batch",
    "jit_step",
    "BoundFunction",
    "bind_settings",
    "with_value_checks",
    "AEVBInfo",
    "AEVBState",
    "ALGORITHMS",
    "THETA_DRAWS",
    "aevb",
    "gaussian_kl",
    "BBVIInfo",
    "BBVIState",
    "ESTIMATORS",
    "ExpFamilyGuide",
    "GRADIENTS",
    "GaussianGuide",
    "KINDS",
    "LIKELIHOODS",
    "LastLayer",
    "bayesian_last_layer",
    "head_log_likelihood",
    "NGVIInfo",
    "NGVIState",
    "bbvi",
    "log_joint",
    "ngvi",
    "AlgorithmSpec",
    "CAVIInfo",
    "CAVIState",
    "DIVERGENCES",
    "DataParallel",
    "EMInfo",
    "EMState",
    "InitFn",
    "M_STEPS",
    "MAPInfo",
    "MAPState",
    "MODES",
    "OPTIMIZERS",
    "DEFAULT_LEARNING_RATES",
    "resolve_optimizer",
    "OptaxVIInfo",
    "OptaxVIState",
    "ProxSVIInfo",
    "ProxSVIState",
    "SSVIInfo",
    "SSVIState",
    "SVIInfo",
    "SVIState",
    "StepFn",
    "VIAlgorithm",
    "cavi",
    "data_parallel",
    "em",
    "global_batch",
    "global_host_batches",
    "initialize_processes",
    "process_shard",
    "lock_step",
    "make_algorithm",
    "make_optimizer",
    "map_em",
    "optax_vi",
    "prox_svi",
    "register_algorithm",
    "replace_elbo",
    "restarts",
    "GridState",
    "factory_grid",
    "hyperparameter_grid",
    "safe_increment",
    "schedules",
    "select_restart",
    "ssvi",
    "ssvi_a",
    "svi",
    "inject_hyperparameters",
    "init_from",
    *("SGRLDInfo", "SGRLDState", "sgrld_lda", "sgrld_schedule", "sgrld_topics", "topics_dirichlet"),
]
