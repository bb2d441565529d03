"""Models: priors, local steps, expected sufficient statistics, ELBOs and predictives."""

from vijax._lazy import attach_stub

# the names of __init__.pyi, each loaded from its module at its first use (vijax._lazy)
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
