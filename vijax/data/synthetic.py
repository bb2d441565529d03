"""Synthetic data sets with known ground truth."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from vijax._compile import EVALUATION_CPU_OPTIONS, as_one_program
from vijax._validate import ArgumentError, check_int, check_key
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
    check_key("key", key)
    check_int("num_points", num_points, 1)
    check_int("num_components", num_components, 1)
    check_int("dim", dim, 1)
    if not (spread > 0 and 0 < scale_range[0] <= scale_range[1] and weight_concentration > 0):
        raise ArgumentError(
            "spread", "spread, scale_range and weight_concentration must be positive (scale_range increasing)"
        )
    dt = dtype or jnp.result_type(float)
    return _one_program(
        lambda: _gmm(key, num_points, num_components, dim, spread, scale_range, weight_concentration, dt)
    )


def _one_program(draw):
    """``draw()`` as one compiled program on concrete values (op by op, each operation would be a
    compilation of its own), inlined under a caller's trace."""
    return as_one_program(draw, "synthetic_data", options=EVALUATION_CPU_OPTIONS)


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

    Each of ``num_components`` image types has one prototype histogram per channel, drawn from
    Dirichlet(concentration); an image of type k has, per channel, the normalized counts of
    ``pixels`` draws from its prototype. A point is the concatenation of the channel histograms
    (``channels * bins`` = 576 dimensions by default). ``means`` holds the prototypes and
    ``scales`` the multinomial standard deviations.
    """
    check_key("key", key)
    check_int("num_points", num_points, 1)
    check_int("num_components", num_components, 1)
    dt = dtype or jnp.result_type(float)
    return _one_program(lambda: _histograms(key, num_points, num_components, channels, bins, pixels, concentration, dt))


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

    x_n ~ N(0, S) with S_ij = correlation^|i - j| (an AR(1) design; 0 gives independent inputs);
    the first ``num_relevant`` coefficients are drawn as +-(1 + |N(0, 1)|) (so no relevant one is
    near zero), the rest are 0; y_n = w^T x_n + noise * eps_n.

    Raises:
      ValueError: naming ``num_points``, ``dim``, ``num_relevant`` (0 <= num_relevant <= dim),
        ``noise`` (> 0) or ``correlation`` (in [0, 1)).
    """
    check_key("key", key)
    check_int("num_points", num_points)
    check_int("dim", dim)
    check_int("num_relevant", num_relevant, minimum=0, maximum=dim)
    if not noise > 0:
        raise ArgumentError("noise", f"noise must be > 0, got {noise!r}", value=noise)
    if not 0.0 <= correlation < 1.0:
        raise ArgumentError("correlation", f"correlation must be in [0, 1), got {correlation!r}", value=correlation)
    x, y, w = _one_program(lambda: _regression(key, num_points, dim, num_relevant, noise, correlation, dtype))
    return RegressionData(x, y, w, float(noise))


def _regression(key, num_points, dim, num_relevant, noise, correlation, dtype) -> tuple:
    k_x, k_sign, k_mag, k_eps = jax.random.split(key, 4)
    idx = jnp.arange(dim)
    cov = jnp.asarray(correlation, dtype) ** jnp.abs(idx[:, None] - idx[None, :]).astype(dtype)
    x = jax.random.normal(k_x, (num_points, dim), dtype) @ jnp.linalg.cholesky(cov).T
    signs = jnp.where(jax.random.bernoulli(k_sign, 0.5, (dim,)), 1.0, -1.0).astype(dtype)
    w = jnp.where(idx < num_relevant, signs * (1.0 + jnp.abs(jax.random.normal(k_mag, (dim,), dtype))), 0.0)
    y = x @ w + noise * jax.random.normal(k_eps, (num_points,), dtype)
    return x, y, w
