"""Heavy-tailed synthetic data: a mixture of multivariate Student-t distributions."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from vijax._validate import check_int, check_scalar
from vijax.data._csr import as_rng


class StudentTMixtureData(NamedTuple):
    x: np.ndarray  # (N, D)
    z: np.ndarray  # (N,) component of each point
    weights: np.ndarray  # (K,)
    means: np.ndarray  # (K, D)
    scales: np.ndarray  # (K, D, D) scale matrices Sigma_k
    dof: float


def sample_student_t_mixture(
    seed,
    num_points: int,
    num_components: int,
    dim: int,
    *,
    dof: float = 2.0,
    spread: float = 6.0,
    weight_concentration: float = 5.0,
) -> StudentTMixtureData:
    """x_n = mu_z + L_z eps / sqrt(u_n), eps ~ N(0, I), u_n ~ Gamma(dof / 2, rate dof / 2): a mixture of
    multivariate t's with ``dof`` degrees of freedom (heavy tails for small ``dof``; Peel and McLachlan
    2000). Means ~ N(0, spread^2 I), Sigma_k = A A^T / D + I / 2 with A standard normal, weights ~
    Dirichlet(weight_concentration). Drawn in NumPy from an int seed or a JAX key."""
    check_int("num_points", num_points)
    check_int("num_components", num_components)
    check_int("dim", dim)
    check_scalar("dof", dof, low=0.0)
    check_scalar("spread", spread, low=0.0)
    check_scalar("weight_concentration", weight_concentration, low=0.0)
    r = as_rng(seed)
    k, d = num_components, dim
    weights = r.dirichlet(np.full(k, weight_concentration))
    means = spread * r.normal(size=(k, d))
    a = r.normal(size=(k, d, d))
    scales = a @ np.swapaxes(a, 1, 2) / d + 0.5 * np.eye(d)
    z = r.choice(k, num_points, p=weights)
    u = r.gamma(0.5 * dof, 2.0 / dof, num_points)
    eps = np.einsum("nij,nj->ni", np.linalg.cholesky(scales)[z], r.normal(size=(num_points, d)))
    return StudentTMixtureData(means[z] + eps / np.sqrt(u)[:, None], z, weights, means, scales, float(dof))


__all__ = ["StudentTMixtureData", "sample_student_t_mixture"]
