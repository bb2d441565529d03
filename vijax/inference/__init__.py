"""Inference algorithms as ``VIAlgorithm(init, step)`` pairs of pure functions.

Factories take the model (or log-density, or a ``vijax.interop.Target``) first and keyword-only
``num_data`` and ``schedule``; every state holds ``q_global`` and ``count``. Conjugate models:
``cavi``, ``svi``, ``ssvi``, ``ssvi_a``, ``map_em``; any log-density: ``bbvi``, ``ngvi``; also
``aevb``, ``amortized`` (a target's local sites by an encoder), ``discrete_bbvi`` (its discrete sites by
score-function gradients), ``prox_svi``, ``optax_vi``, ``em``, ``conjugate_split``, ``bayesian_last_layer`` and, by
name, ``make_algorithm``. What an algorithm offers beyond ``init`` and ``step`` are module functions
over it (``guide``, ``sample``, ``log_weights``, ``elbo``, ...); combinators: ``restarts``,
``lock_step``, ``replace_elbo``, ``averaged``, ``data_parallel``.
"""

from vijax._lazy import attach_stub

# the names of __init__.pyi, each loaded from its module at its first use (vijax._lazy)
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
