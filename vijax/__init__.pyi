"""Names of the package for type checkers and the lazy loader (vijax._lazy.attach_stub)."""

__version__: str

from vijax import data as data
from vijax import expfam as expfam
from vijax import inference as inference
from vijax.inference import cavi as cavi
from vijax import interop as interop
from vijax.interop import (
    conjugate_sites as conjugate_sites,
    from_numpyro as from_numpyro,
    from_tfp as from_tfp,
    predictive as predictive,
)
from vijax import metrics as metrics
from vijax.metrics import to_arviz as to_arviz
from vijax import models as models
from vijax import run as run
from vijax.run import fit as fit
from vijax import solvers as solvers
from vijax._validate import ArgumentError as ArgumentError

__all__ = [
    "__version__",
    "ArgumentError",
    "cavi",
    "conjugate_sites",
    "fit",
    "from_numpyro",
    "from_tfp",
    "predictive",
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
