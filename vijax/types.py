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
    TFP distributions), so that ``import vijax`` does not import TFP; a broken TFP install (tfp-nightly
    beside tensorflow-probability) raises an ImportError naming the command that mends it."""
    from vijax._validate import tfp_substrate

    return tfp_substrate()


__all__ = ["Array", "PRNGKey", "PyTree", "Scalar", "Schedule", "tfp_jax"]
