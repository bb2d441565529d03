"""vijax: variational inference in JAX.

Layers, bottom to top: ``expfam`` (exponential families as pytrees), ``solvers`` (numerical
algorithms that models share), ``models``, ``inference`` (algorithms as ``init``/``step`` pairs),
``data`` and ``metrics``, ``run`` (the host loop, configs and the ``vijax`` command). NumPyro and
TFP models come in as targets through ``interop`` (``from_numpyro``, ``from_tfp``).

``import vijax`` loads none of them (nor JAX): each layer, and the names re-exported here (``cavi``,
``from_numpyro``, ``from_tfp``, ``predictive``, ``to_arviz``), is imported at its first use (PEP 562), so a
program pays only for the layers it touches.
"""

from vijax._lazy import attach_stub

__version__ = "0.2.0"

# the names of __init__.pyi, each loaded from its module at its first use (vijax._lazy)
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
