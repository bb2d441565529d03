"""Tree assertions, Monte Carlo helpers with explicit tolerances, and primitive counts of a program."""

from __future__ import annotations

import jax
import jax.extend.core
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
    return jnp.mean(samples, axis), jnp.std(samples, axis) / jnp.sqrt(samples.shape[axis])


def primitive_counts(fn, *args) -> dict:
    """How often each primitive occurs in ``jax.make_jaxpr(fn)(*args)``, nested jaxprs included: a regression
    guard on a program's structure that does not depend on its text.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> primitive_counts(lambda x: jax.lax.fori_loop(0, jnp.int32(x.size), lambda i, y: y * 2, x), jnp.ones(3))["while"]
        1
    """
    counts: dict = {}

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
            for sub in jax.extend.core.jaxprs_in_params(eqn.params):
                walk(sub)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return counts
