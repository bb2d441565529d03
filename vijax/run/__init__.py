"""The one host loop (``run``: jitted ``lax.scan`` chunks, evaluation, a stopping rule, bit-identical
checkpoint/resume), run configs (``load_config`` against a registered ``ExperimentSpec``) and the
``vijax`` command (``main``); the built-in experiments register when ``vijax.run.experiments`` is
imported.
"""

from vijax._lazy import attach_stub

# the names of __init__.pyi, each loaded from its module at its first use (vijax._lazy)
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
