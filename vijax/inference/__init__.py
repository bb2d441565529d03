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

from vijax._lazy import exported, lazy_names

# name -> the module it is read from at its first use (vijax._lazy): a program loads only what it uses
_MODULES = {
    "vijax.inference.schedules": (),
    "vijax.inference._aevb": ("THETA_DRAWS", "AEVBInfo", "AEVBState", "aevb", "gaussian_kl"),
    "vijax.inference._bbvi": ("ESTIMATORS", "BBVIInfo", "BBVIState", "bbvi", "log_joint"),
    "vijax.inference._cavi": ("CAVIInfo", "CAVIState", "cavi"),
    "vijax.inference._em": ("EMInfo", "EMState", "em"),
    "vijax.inference._extras": (
        "decoder_kl",
        "elbo",
        "guide",
        "iwae_log_likelihood",
        "log_weights",
        "reconstruct",
        "sample",
    ),
    "vijax.inference._combinators": (
        "GridState",
        "check_algorithm",
        "factory_grid",
        "hyperparameter_grid",
        "lock_step",
        "replace_elbo",
        "restarts",
        "select_restart",
    ),
    "vijax.inference._guides": ("KINDS", "ExpFamilyGuide", "GaussianGuide", "auto_family"),
    "vijax.inference._last_layer": ("LIKELIHOODS", "LastLayer", "bayesian_last_layer", "head_log_likelihood"),
    "vijax.inference._map": ("MAPInfo", "MAPState", "map_em"),
    "vijax.inference._ngvi": ("GRADIENTS", "NGVIInfo", "NGVIState", "ngvi"),
    "vijax.inference._optax_vi": (
        "DEFAULT_LEARNING_RATES",
        "OPTIMIZERS",
        "OptaxVIInfo",
        "OptaxVIState",
        "make_optimizer",
        "optax_vi",
        "resolve_optimizer",
    ),
    "vijax.inference._parallel": ("DataParallel", "data_parallel"),
    "vijax.inference._distributed": ("global_batch", "global_host_batches", "initialize_processes", "process_shard"),
    "vijax.inference._prox_svi": ("DIVERGENCES", "ProxSVIInfo", "ProxSVIState", "prox_svi"),
    "vijax.inference._registry": ("ALGORITHMS", "M_STEPS", "AlgorithmSpec", "make_algorithm", "register_algorithm"),
    "vijax.inference._split": ("SplitInfo", "SplitState", "conjugate_split"),
    "vijax.inference._ssvi": ("MODES", "SSVIInfo", "SSVIState", "ssvi", "ssvi_a"),
    "vijax.inference._conjugate": ("inject_hyperparameters",),
    "vijax.inference._svi": ("SVIInfo", "SVIState", "svi"),
    "vijax.inference.sgrld": (
        "GibbsTopicModel",
        "SGRLDInfo",
        "SGRLDState",
        "sgrld_lda",
        "sgrld_schedule",
        "sgrld_topics",
        "topics_dirichlet",
    ),
    "vijax.inference.base": (
        "BoundFunction",
        "GuardedInfo",
        "GuardedState",
        "InitFn",
        "StepFn",
        "VIAlgorithm",
        "bind_settings",
        "check_step_batch",
        "init_from",
        "jit_step",
        "reject_non_finite",
        "safe_increment",
        "with_value_checks",
    ),
}

__all__ = exported(_MODULES)

__getattr__, __dir__ = lazy_names(__name__, _MODULES, __all__)
