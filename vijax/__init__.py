"""vijax: variational inference in JAX.

Layers, bottom to top: ``expfam`` (exponential families as pytrees), ``solvers`` (numerical
algorithms that models share), ``models``, ``inference`` (algorithms as ``init``/``step`` pairs),
``data`` and ``metrics``, ``run`` (the host loop, configs and the ``vijax`` command). NumPyro and
TFP models come in as targets through ``interop`` (``from_numpyro``, ``from_tfp``).
"""

from vijax import data, expfam, inference, interop, metrics, models, run, solvers
from vijax.inference import cavi
from vijax.interop import from_numpyro, from_tfp
from vijax.metrics import to_arviz

__version__ = "0.1.0"
__all__ = [
    "__version__",
    "cavi",
    "from_numpyro",
    "from_tfp",
    "to_arviz",
    "data",
    "expfam",
    "inference",
    "interop",
    "metrics",
    "models",
    "run",
    "solvers",
]
