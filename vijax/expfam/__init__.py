"""Exponential families as registered pytrees of natural parameters.

Every family offers the same pure methods (``log_normalizer``, ``mean_params``, ``fisher_vp``,
``inv_fisher_vp``, ``sufficient_stats``, ``log_prob``, ``entropy``, ``kl``, ``sample``,
``is_valid``, ``to_tfp``) and, where it has them, the optional capabilities that algorithms ask
for by name (``implements(family, name)``), each a Protocol a family satisfies by defining its
methods: ``HasMode`` (``mode``, ``mode_stats``; MAP-EM), ``Reparameterizable``
(``reparam_sample_and_stats``; SSVI) and ``GammaBased`` (``log_gamma_shapes``,
``from_log_gammas``: draws made of Gamma variables, pooled over a pytree). Functions named ``tree_*`` map over pytrees of families.
``digamma``, ``digamma_and_gammaln`` (and ``digamma_and_gammaln_with_total``, of [a, sum a]) and ``trigamma`` are the fast elementwise special functions that
the families' mean parameters and Fisher products and the models' inner loops (LDA, ARD, Student-t
mixtures) evaluate.
"""

from vijax._lazy import attach_stub

# the names of __init__.pyi, each loaded from its module at its first use (vijax._lazy)
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
