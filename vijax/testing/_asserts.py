"""Tree assertions and Monte Carlo helpers with explicit tolerances."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def assert_trees_close(a, b, rtol: float = 1e-6, atol: float = 0.0, err_msg: str = "") -> None:
    """Asserts two pytrees have the same structure and allclose leaves."""
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb, f"tree structures differ: {ta} vs {tb}. {err_msg}"
    for i, (x, y) in enumerate(zip(la, lb)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol, err_msg=f"leaf {i}. {err_msg}")


def mc_mean_and_stderr(samples, axis: int = 0):
    """Monte Carlo mean and its standard error along ``axis``."""
    samples = jnp.asarray(samples)
    n = samples.shape[axis]
    return jnp.mean(samples, axis), jnp.std(samples, axis) / jnp.sqrt(n)
