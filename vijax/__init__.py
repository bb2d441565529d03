"""vijax: variational inference in JAX.

Layers, bottom to top: ``expfam`` (exponential families as pytrees), ``solvers`` (numerical
algorithms that models share), ``models``, ``inference`` (algorithms as ``init``/``step`` pairs),
``data`` and ``metrics``, ``run`` (the host loop, configs and the ``vijax`` command). NumPyro and
TFP models come in as targets through ``interop`` (``from_numpyro``, ``from_tfp``).

``import vijax`` loads none of them (nor JAX): each layer, and the names re-exported here (``cavi``,
``from_numpyro``, ``from_tfp``, ``predictive``, ``to_arviz``), is imported at its first use (PEP 562), so a
program pays only for the layers it touches.
"""

from vijax._lazy import lazy_names

__version__ = "0.1.0"

# the layers, and the names re-exported here, each loaded at its first use (vijax._lazy)
_MODULES = {
    "vijax.data": (),
    "vijax.expfam": (),
    "vijax.inference": ("cavi",),
    "vijax.interop": ("conjugate_sites", "from_numpyro", "from_tfp", "predictive"),
    "vijax.metrics": ("to_arviz",),
    "vijax.models": (),
    "vijax.run": (),
    "vijax.solvers": (),
}

__all__ = [
    "__version__",
    *("cavi", "conjugate_sites", "from_numpyro", "from_tfp", "predictive", "to_arviz"),
    *("data", "expfam", "inference", "interop", "metrics", "models", "run", "solvers"),
]

__getattr__, __dir__ = lazy_names(__name__, _MODULES, __all__)
