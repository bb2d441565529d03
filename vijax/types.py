"""Type aliases shared across vijax."""

from typing import Any, Callable

import jax

Array = jax.Array
PRNGKey = jax.Array
PyTree = Any
Scalar = Any  # a Python number or a 0-d array
Schedule = Callable[[Array], Array]  # step count (int32 scalar) -> step size

__all__ = ["Array", "PRNGKey", "PyTree", "Scalar", "Schedule"]
