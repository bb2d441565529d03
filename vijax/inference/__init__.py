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

from vijax._lazy import attach_stub

# the names of __init__.pyi, each loaded from its module at its first use (vijax._lazy)
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
