"""Type aliases shared across vijax."""

from typing import Any, Callable

import jax

Array = jax.Array
PRNGKey = jax.Array
PyTree = Any
Scalar = Any  # a Python number or a 0-d array
Schedule = Callable[[Array], Array]  # step count (int32 scalar) -> step size


def tfp_jax():
    """TensorFlow Probability's JAX substrate, imported at its first use (``to_tfp``, bijectors,
    TFP distributions), so that ``import vijax`` does not import TFP."""
    import tensorflow_probability.substrates.jax as tfp

    return tfp


__all__ = ["Array", "PRNGKey", "PyTree", "Scalar", "Schedule", "tfp_jax"]
