"""vijax: variational inference in JAX.

Layers, bottom to top: ``expfam`` (exponential families as pytrees), ``solvers`` (numerical
algorithms that models share), ``models``, ``inference`` (algorithms as ``init``/``step`` pairs),
``data`` and ``metrics``, ``run`` (the host loop, configs and the ``vijax`` command). NumPyro and
TFP models come in as targets through ``interop`` (``from_numpyro``, ``from_tfp``).

``import vijax`` loads none of them (nor JAX): each layer, and the names re-exported here (``cavi``,
``from_numpyro``, ``from_tfp``, ``predictive``, ``to_arviz``), is imported at its first use (PEP 562), so a
program pays only for the layers it touches.
"""

import importlib

__version__ = "0.1.0"

_LAYERS = ("data", "expfam", "inference", "interop", "metrics", "models", "run", "solvers")
_NAMES = {
    "cavi": "inference",
    "conjugate_sites": "interop",
    "from_numpyro": "interop",
    "from_tfp": "interop",
    "predictive": "interop",
    "to_arviz": "metrics",
}

__all__ = ["__version__", "cavi", "conjugate_sites", "from_numpyro", "from_tfp", "predictive", "to_arviz", *_LAYERS]


def __getattr__(name: str):
    if name in _LAYERS:
        return importlib.import_module(f"vijax.{name}")
    if name in _NAMES:
        value = getattr(importlib.import_module(f"vijax.{_NAMES[name]}"), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'vijax' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
