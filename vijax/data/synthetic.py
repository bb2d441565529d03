"""Synthetic data sets with known ground truth: mixtures (Gaussian, colour histograms, Bernoulli,
categorical, Student-t) and sparse linear regression."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import ArgumentError, check_draw_args, check_scalar
from vijax.data._csr import as_rng
from vijax.types import Array, PRNGKey


class GMMData(NamedTuple):
    """Points with their true assignments and the mixture that generated them."""

    x: Array  # (N, D)
    z: Array  # (N,) int32 component of each point
    weights: Array  # (K,)
    means: Array  # (K, D)
    scales: Array  # (K, D) per-dimension standard deviations


def sample_gmm(
    key: PRNGKey,
    num_points: int,
    num_components: int,
    dim: int,
    *,
    spread: float = 5.0,
    scale_range: tuple[float, float] = (0.5, 1.5),
    weight_concentration: float = 5.0,
    dtype=None,
) -> GMMData:
    """Random axis-aligned Gaussian mixture data (the simulation of Blei et al. 2017, §3.4).

    Means ~ N(0, spread^2 I); per-dimension scales ~ Uniform(scale_range); weights ~
    Dirichlet(weight_concentration); z_n ~ Categorical(weights); x_n ~ N(means[z_n], diag(scales[z_n]^2)).
    """
    dt = check_draw_args(dict(num_points=num_points, num_components=num_components, dim=dim), dtype=dtype, key=key)
    if not (spread > 0 and 0 < scale_range[0] <= scale_range[1] and weight_concentration > 0):
        raise ArgumentError(
            "spread", "spread, scale_range and weight_concentration must be positive (scale_range increasing)"
        )
    return _gmm(
        key, num_points, num_components, dim, float(spread), tuple(scale_range), float(weight_concentration), dt
    )


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6, 7))
def _gmm(key, num_points, num_components, dim, spread, scale_range, weight_concentration, dt) -> GMMData:
    k_m, k_s, k_w, k_z, k_x = jax.random.split(key, 5)
    means = spread * jax.random.normal(k_m, (num_components, dim), dt)
    scales = jax.random.uniform(k_s, (num_components, dim), dt, *scale_range)
    weights = jax.random.dirichlet(k_w, jnp.full((num_components,), weight_concentration, dt))
    z = jax.random.categorical(k_z, jnp.log(weights), shape=(num_points,)).astype(jnp.int32)
    x = means[z] + scales[z] * jax.random.normal(k_x, (num_points, dim), dt)
    return GMMData(x, z, weights, means, scales)


def sample_histogram_mixture(
    key: PRNGKey,
    num_points: int,
    num_components: int = 30,
    *,
    channels: int = 3,
    bins: int = 192,
    pixels: int = 1024,
    concentration: float = 0.1,
    dtype=None,
) -> GMMData:
    """Synthetic colour histograms in the manner of Blei et al.'s (2017) image study (appendix B).

    Each image type has one prototype histogram per channel ~ Dirichlet(concentration); an image holds, per
    channel, the normalized counts of ``pixels`` draws from its type's prototype (``means``), concatenated.
    """
    dt = check_draw_args(dict(num_points=num_points, num_components=num_components), dtype=dtype, key=key)
    return _histograms(key, num_points, num_components, channels, bins, pixels, float(concentration), dt)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6, 7))
def _histograms(key, num_points, num_components, channels, bins, pixels, concentration, dt) -> GMMData:
    k_p, k_w, k_z, k_x = jax.random.split(key, 4)
    protos = jax.random.dirichlet(k_p, jnp.full((bins,), concentration, dt), (num_components, channels))
    weights = jax.random.dirichlet(k_w, jnp.full((num_components,), 5.0, dt))
    z = jax.random.categorical(k_z, jnp.log(weights), shape=(num_points,)).astype(jnp.int32)
    counts = jax.random.multinomial(k_x, float(pixels), protos[z], dtype=dt)  # (N, C, bins)
    x = (counts / pixels).reshape(num_points, channels * bins)
    means = protos.reshape(num_components, channels * bins)
    return GMMData(x, z, weights, means, jnp.sqrt(means * (1 - means) / pixels))


class RegressionData(NamedTuple):
    x: Array  # (N, D) inputs
    y: Array  # (N,) outputs
    w: Array  # (D,) the true coefficients (zero for the irrelevant inputs)
    noise: float  # the noise sd


def sample_sparse_regression(
    key: PRNGKey,
    num_points: int,
    dim: int,
    num_relevant: int,
    *,
    noise: float = 0.5,
    correlation: float = 0.0,
    dtype=jnp.float32,
) -> RegressionData:
    """Linear-regression data where only ``num_relevant`` of ``dim`` inputs matter (the setting of
    automatic relevance determination, Blei et al. 2017, appendix A).

    x_n ~ N(0, S) with S_ij = correlation^|i - j| (an AR(1) design); the first ``num_relevant``
    coefficients are +-(1 + |N(0, 1)|), the rest 0; y_n = w^T x_n + noise * eps_n.

    Raises:
      ValueError: naming the argument: ``num_relevant`` not in [0, dim], ``noise`` <= 0, ``correlation`` not in [0, 1).
    """
    check_draw_args(dict(num_points=num_points, dim=dim, num_relevant=(num_relevant, 0, dim)), key=key)
    if not noise > 0:
        raise ArgumentError("noise", f"noise must be > 0, got {noise!r}", value=noise)
    if not 0.0 <= correlation < 1.0:
        raise ArgumentError("correlation", f"correlation must be in [0, 1), got {correlation!r}", value=correlation)
    x, y, w = _regression(key, num_points, dim, num_relevant, float(noise), float(correlation), dtype)
    return RegressionData(x, y, w, float(noise))


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6))
def _regression(key, num_points, dim, num_relevant, noise, correlation, dtype) -> tuple:
    k_x, k_sign, k_mag, k_eps = jax.random.split(key, 4)
    idx = jnp.arange(dim)
    cov = jnp.asarray(correlation, dtype) ** jnp.abs(idx[:, None] - idx[None, :]).astype(dtype)
    x = jax.random.normal(k_x, (num_points, dim), dtype) @ jnp.linalg.cholesky(cov).T
    signs = jnp.where(jax.random.bernoulli(k_sign, 0.5, (dim,)), 1.0, -1.0).astype(dtype)
    w = jnp.where(idx < num_relevant, signs * (1.0 + jnp.abs(jax.random.normal(k_mag, (dim,), dtype))), 0.0)
    y = x @ w + noise * jax.random.normal(k_eps, (num_points,), dtype)
    return x, y, w


class BernoulliMixtureData(NamedTuple):
    """Binary vectors with their true assignments and the mixture that generated them."""

    y: Array  # (N, D) float, entries 0 or 1
    z: Array  # (N,) int32 component of each datum
    weights: Array  # (K,) pi
    probs: Array  # (K, D) phi

    @property
    def components_used(self) -> int:
        """The number of distinct components among the true z (56 in the paper's draw)."""
        return int(np.unique(np.asarray(self.z)).size)


def sample_bernoulli_mixture(
    key: PRNGKey,
    num_points: int = 1000,
    num_components: int = 100,
    dim: int = 100,
    *,
    alpha: float = 20.0,
    a: float = 1.0,
    b: float = 1.0,
    dtype=None,
) -> BernoulliMixtureData:
    """Draws pi, phi from the prior and N data from the mixture (Hoffman & Blei 2015, §4.2)::

        pi ~ Dirichlet(alpha / K 1_K),  phi_kd ~ Beta(a, b),  z_n ~ Categorical(pi),  y_nd ~ Bernoulli(phi_{z_n d}).

    The defaults are the paper's: N = 1000, K = 100, D = 100, alpha = 20, Beta(1, 1).

    Examples:
        >>> data = sample_bernoulli_mixture(jax.random.PRNGKey(0), 50, 10, 8, alpha=2.0)
        >>> data.y.shape, data.probs.shape
        ((50, 8), (10, 8))
    """
    sizes = dict(num_points=num_points, num_components=num_components, dim=dim)
    dt = check_draw_args(sizes, dict(alpha=alpha, a=a, b=b), dtype, key=key)
    return _sample(key, num_points, num_components, dim, float(alpha), float(a), float(b), dt)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6, 7))
def _sample(key, num_points, num_components, dim, alpha, a, b, dt):
    k_g, k_z, k_y = jax.random.split(key, 3)
    # one log-Gamma draw for all: pi = normalized Gamma(alpha / K) draws, phi = g_a / (g_a + g_b)
    # with g_a ~ Gamma(a), g_b ~ Gamma(b), in log space
    kd = num_components * dim
    conc = jnp.concatenate(
        [jnp.full((num_components,), alpha / num_components, dt), jnp.full((kd,), a, dt), jnp.full((kd,), b, dt)]
    )
    log_g = jax.random.loggamma(k_g, conc, dtype=dt)
    log_w = jax.nn.log_softmax(log_g[:num_components])
    weights = jnp.exp(log_w)
    log_ga = log_g[num_components : num_components + kd].reshape(num_components, dim)
    log_gb = log_g[num_components + kd :].reshape(num_components, dim)
    probs = jax.nn.sigmoid(log_ga - log_gb)
    z = jax.random.categorical(k_z, log_w, shape=(num_points,)).astype(jnp.int32)
    y = jax.random.bernoulli(k_y, probs[z]).astype(dt)
    return BernoulliMixtureData(y, z, weights, probs)


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
    """z_i ~ Categorical(pi), x_i ~ Categorical(eta_{z_i}) with pi ~ Dirichlet(``weight_concentration``) and each
    row eta_k ~ Dirichlet(``concentration``) over the ``num_symbols`` symbols; drawn in NumPy (int seed or key).
    """
    check_draw_args(dict(num_points=num_points, num_components=num_components, num_symbols=num_symbols))
    check_scalar("concentration", concentration, low=0.0)
    check_scalar("weight_concentration", weight_concentration, low=0.0)
    r = as_rng(seed)
    weights = r.dirichlet(np.full(num_components, weight_concentration))
    probs = r.dirichlet(np.full(num_symbols, concentration), size=num_components)
    z = r.choice(num_components, num_points, p=weights)
    u = r.random(num_points)[:, None]  # x_i by inversion of its component's CDF
    x = np.minimum((u > np.cumsum(probs[z], axis=1)).sum(1), num_symbols - 1)
    return CategoricalMixtureData(x.astype(np.int32), z, weights, probs)


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
    check_draw_args(dict(num_points=num_points, num_components=num_components, dim=dim))
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


__all__ = [
    "BernoulliMixtureData",
    "CategoricalMixtureData",
    "GMMData",
    "RegressionData",
    "StudentTMixtureData",
    "sample_bernoulli_mixture",
    "sample_categorical_mixture",
    "sample_gmm",
    "sample_histogram_mixture",
    "sample_sparse_regression",
    "sample_student_t_mixture",
]
