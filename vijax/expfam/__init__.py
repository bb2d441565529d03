"""Exponential families as registered pytrees of natural parameters.

Every family offers the same pure methods (``log_normalizer``, ``mean_params``, ``fisher_vp``, ``inv_fisher_vp``,
``log_prob``, ``entropy``, ``kl``, ``sample``, ...) and optional capabilities (``implements(family, name)``);
``tree_*`` functions map over pytrees of families.
"""

from vijax._lazy import attach_stub

# the names of __init__.pyi, each loaded from its module at its first use (vijax._lazy)
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
