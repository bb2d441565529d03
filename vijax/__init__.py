"""vijax: variational inference in JAX."""
from vijax import expfam

__version__ = "0.1.0"
__all__ = ["expfam", "__version__"]
