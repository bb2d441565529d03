"""Synthetic data of the simple mixture model (*Raise your ELBO*, §SMM): symbols of a finite alphabet
drawn from a mixture of categorical distributions."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from vijax._validate import check_int, check_scalar
from vijax.data._csr import as_rng


class CategoricalMixtureData(NamedTuple):
    x: np.ndarray  # (N,) symbols in [0, V)
    z: np.ndarray  # (N,) component of each symbol
    weights: np.ndarray  # (K,) pi
    probs: np.ndarray  # (K, V) eta, each row a distribution over the V symbols


def sample_categorical_mixture(
    seed,
    num_points: int,
    num_components: int,
    num_symbols: int,
    *,
    concentration: float = 0.3,
    weight_concentration: float = 5.0,
) -> CategoricalMixtureData:
    """z_i ~ Categorical(pi), x_i ~ Categorical(eta_{z_i}) with pi ~ Dirichlet(``weight_concentration``)
    and each row eta_k ~ Dirichlet(``concentration``) over the ``num_symbols`` symbols (small
    concentrations: peaked, well separated components). Drawn in NumPy from an int seed or a JAX key.

    Raises:
      ValueError: naming the argument: a size that is not a positive integer, a concentration <= 0.
    """
    check_int("num_points", num_points)
    check_int("num_components", num_components)
    check_int("num_symbols", num_symbols)
    check_scalar("concentration", concentration, low=0.0)
    check_scalar("weight_concentration", weight_concentration, low=0.0)
    r = as_rng(seed)
    weights = r.dirichlet(np.full(num_components, weight_concentration))
    probs = r.dirichlet(np.full(num_symbols, concentration), size=num_components)
    z = r.choice(num_components, num_points, p=weights)
    u = r.random(num_points)[:, None]  # x_i by inversion of its component's CDF
    x = np.minimum((u > np.cumsum(probs[z], axis=1)).sum(1), num_symbols - 1)
    return CategoricalMixtureData(x.astype(np.int32), z, weights, probs)


__all__ = ["CategoricalMixtureData", "sample_categorical_mixture"]
