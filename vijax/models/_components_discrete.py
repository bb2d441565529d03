"""The discrete conjugate components: :class:`BetaBernoulli` (products of Bernoullis),
:class:`DirichletCategorical` (symbols) and :class:`GammaPoisson` (counts); see
``vijax.models._components`` for the interface."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from vijax import expfam
from vijax._validate import (
    ArgumentError,
    check_data_array,
    check_data_dtype,
    check_float_dtype,
    check_int,
    check_positive_fields,
    finite_nonnegative,
    float_dtype,
    ids_in_range,
    is_tracer,
    values_in_set,
    values_match,
)
from vijax.models._base import conjugate_posterior
from vijax.models._components import Component, floor_log
from vijax.models._hmm_params import CategoricalEmissions
from vijax.types import Array, PRNGKey


def check_binary(name: str, y: Any) -> None:
    """Raises ValueError naming ``name`` unless every entry of concrete ``y`` is 0 or 1 (tracers pass)."""
    if is_tracer(y):
        return
    a = np.asarray(y)
    if a.dtype == bool:
        return
    if not np.issubdtype(a.dtype, np.number):
        raise ArgumentError(name, f"{name} must be numeric binary data (0/1), got dtype {a.dtype}")
    bad = ~((a == 0) | (a == 1))
    if np.any(bad):
        raise ArgumentError(name, f"{name} must hold only 0 and 1 (binary data), got {a[bad].ravel()[0]!r}")


def bernoulli_log_lik(probs: Array, y: Array) -> Array:
    """log p(y_n | phi_k) = sum_d y log phi + (1 - y) log(1 - phi), shape (N, K); exact at phi = 0
    or 1 (0 log 0 = 0)."""
    y = y.astype(probs.dtype)
    return y @ floor_log(jnp.log(probs)).T + (1.0 - y) @ floor_log(jnp.log1p(-probs)).T


def map_rows(counts: Array, concentration: float) -> Array:
    """argmax of Dirichlet(c) x Multinomial(counts) per row: (counts + c - 1)_+ normalized (uniform
    for an all-zero row)."""
    c = jnp.maximum(counts + (concentration - 1.0), 0.0)
    tot = jnp.sum(c, -1, keepdims=True)
    return jnp.where(tot > 0, c / jnp.where(tot > 0, tot, 1.0), 1.0 / c.shape[-1])


@dataclasses.dataclass(frozen=True, eq=False)
class BetaBernoulli(Component):
    """Products of D Bernoullis y_d ~ Bernoulli(phi_d) with phi_d ~ Beta(a, b) (Hoffman & Blei 2015,
    §4.2). A datum contributes s = (y, 1 - y) to (log phi, log(1 - phi)); log h = 0.

    ``init_pseudo_count`` is the weight of a seed datum in the initial q (:meth:`initial_q`).
    """

    dim: int
    a: float = 1.0
    b: float = 1.0
    init_pseudo_count: float = 1.0
    dtype: Any = None
    static_floats = ("a", "b", "init_pseudo_count")
    data_name = "y"

    def __post_init__(self):
        check_int("dim", self.dim)
        check_positive_fields(self, ("a", "b", "init_pseudo_count"), scalar=True)
        check_float_dtype(self.dtype)

    def prior(self, num: int) -> expfam.Beta:
        dt = float_dtype(self.dtype)
        full = lambda v: jnp.full((num, self.dim), v, dt)
        return expfam.Beta.from_concentrations(full(self.a), full(self.b))

    def suff_stats(self, y: Array) -> tuple:
        return y, 1.0 - y

    def stats(self, y: Array, weights: Array) -> tuple:
        ones = weights.T @ y
        return ones, jnp.sum(weights, 0)[:, None] - ones

    def expected_log_lik(self, view, y: Array) -> Array:
        e_log_phi, e_log_1m = view
        return y @ floor_log(e_log_phi).T + (1.0 - y) @ floor_log(e_log_1m).T

    def log_predictive(self, q: expfam.Beta, y: Array) -> Array:
        """Bernoulli products at E[phi] (exact for a factorized q), shape (N, K)."""
        return bernoulli_log_lik(self.point_estimate(q), y)

    def point_estimate(self, q: expfam.Beta) -> Array:
        """E[phi] (K, D)."""
        a, b = q.concentration1, q.concentration0
        return a / (a + b)

    def check_data(self, y, name: str | None = None) -> None:
        name = name or self.data_name
        if not is_tracer(y) and np.asarray(y).dtype == bool:
            y = np.asarray(y, float)
        check_data_array(name, y, ndim=2, last_dim=self.dim)
        check_binary(name, y)

    def batch_checks(self, y, name: str | None = None) -> list:
        return [values_in_set(f"batch {name or self.data_name}", y, (0, 1))]

    def check_shape(self, y: Array) -> None:
        if y.ndim != 2 or y.shape[1] != self.dim:
            raise ArgumentError("y", f"y must have shape (N, {self.dim}), got {y.shape}")

    def initial_q(self, key: PRNGKey, num: int, y: Array | None = None):
        """Each copy k seeded by one datum y_(k) chosen at random (with replacement when N < num):
        q(phi_kd) = Beta(a + c y_(k)d, b + c (1 - y_(k)d)), c = ``init_pseudo_count``, counting N / num
        data each. Without data: y_(k) uniform on {0, 1}^D, one datum each."""
        dt = float_dtype(self.dtype)
        if y is None:
            seeds = jax.random.bernoulli(key, 0.5, (num, self.dim)).astype(dt)
            n = float(num)
        else:
            y = jnp.asarray(y, dt)
            n = y.shape[0]
            seeds = y[jax.random.choice(key, n, (num,), replace=n < num)]
        c = self.init_pseudo_count
        q = expfam.Beta.from_natural((self.a - 1.0 + c * seeds, self.b - 1.0 + c * (1.0 - seeds)))
        return q, jnp.full((num,), n / num, dt)


@dataclasses.dataclass(frozen=True, eq=False)
class DirichletCategorical(Component):
    """A symbol x in {0, ..., V - 1} ~ Categorical(p) with p ~ Dirichlet(c 1_V). A datum contributes
    s = onehot(x) to log p; log h = 0. Data are integer arrays of shape (N,)."""

    num_symbols: int
    concentration: float = 1.0
    dtype: Any = None
    static_floats = ("concentration",)
    event_ndim = 0

    def __post_init__(self):
        check_int("num_symbols", self.num_symbols)
        check_positive_fields(self, ("concentration",), scalar=True)
        check_float_dtype(self.dtype)

    def prior(self, num: int) -> expfam.Dirichlet:
        conc = jnp.full((num, self.num_symbols), self.concentration, float_dtype(self.dtype))
        return expfam.Dirichlet.from_concentration(conc)

    def prepare(self, x: Array, dtype) -> Array:
        return jnp.asarray(x)

    def suff_stats(self, x: Array) -> tuple:
        return (jax.nn.one_hot(x, self.num_symbols, dtype=float_dtype(self.dtype)),)

    def stats(self, x: Array, weights: Array) -> tuple:
        return (jax.ops.segment_sum(weights, x, num_segments=self.num_symbols).T,)

    def expected_log_lik(self, view, x: Array) -> Array:
        (log_p,) = view  # (K, V)
        return jnp.take(log_p.T, x, axis=0, mode="clip")

    def log_predictive(self, q: expfam.Dirichlet, x: Array) -> Array:
        """log E[p_x] = log(alpha_kx / sum_v alpha_kv), shape (N, K)."""
        return jnp.log(jnp.take(self.point_estimate(q).T, x, axis=0, mode="clip"))

    def point_estimate(self, q: expfam.Dirichlet) -> Array:
        """E[p] (K, V)."""
        return q.concentration / jnp.sum(q.concentration, -1, keepdims=True)

    def check_data(self, x, name: str | None = None) -> None:
        name = name or self.data_name
        shape = np.shape(x)
        if len(shape) != 1 or shape[0] < 1:
            raise ArgumentError(name, f"{name} must be a non-empty array of symbols of shape (N,), got shape {shape}")
        check_data_dtype(name, x)
        dtype = x.dtype if is_tracer(x) else np.asarray(x).dtype
        if not jnp.issubdtype(dtype, jnp.integer):
            raise ArgumentError(name, f"{name} must hold integer symbols, got dtype {dtype}")
        if not is_tracer(x):
            a = np.asarray(x)
            if np.any(a < 0) or np.any(a >= self.num_symbols):
                raise ArgumentError(
                    name,
                    f"{name} must hold symbols in [0, num_symbols={self.num_symbols}), got values in [{a.min()}, {a.max()}]",
                )

    def batch_checks(self, x, name: str | None = None) -> list:
        return [ids_in_range(f"batch {name or self.data_name} symbol", x, self.num_symbols)]

    # -- EM: point estimates (CategoricalEmissions(probs)) ---------------------------------------------
    point_type = CategoricalEmissions

    @property
    def point_width(self) -> int:
        """V: the number of symbols (the width of each row of ``CategoricalEmissions.probs``)."""
        return self.num_symbols

    def point_checks(self, params: CategoricalEmissions, num: int) -> list:
        """No checks of its own: the probability checks of the HMM's parameters cover
        ``CategoricalEmissions``."""
        return []  # the probability checks of HMM parameters cover CategoricalEmissions

    def point_view(self, params: CategoricalEmissions) -> tuple:
        """t(theta) at a point: (log probs,), (K, V)."""
        return (jnp.log(params.probs),)

    def point_m_step(self, stats) -> CategoricalEmissions:
        """MAP rows (counts + c - 1)_+ normalized under the Dirichlet(c) prior (c = 1: maximum likelihood)."""
        return CategoricalEmissions(map_rows(stats[0], self.concentration))

    def point_log_prior(self, params: CategoricalEmissions) -> Array:
        """(c - 1) sum log p (0 for c = 1)."""
        zero = jnp.zeros((), float_dtype(self.dtype))
        return zero if self.concentration == 1.0 else zero + (self.concentration - 1.0) * jnp.sum(jnp.log(params.probs))

    def init_point(self, key: PRNGKey, num: int, prepared=None) -> CategoricalEmissions:
        """Rows drawn from Dirichlet(1) (the data are not used)."""
        dt = float_dtype(self.dtype)
        return CategoricalEmissions(jax.random.dirichlet(key, jnp.ones(self.num_symbols, dt), (num,), dtype=dt))

    def pseudo_stats(self, params: CategoricalEmissions) -> tuple:
        """The expected statistics of one pseudo-observation per row: (probs,), (K, V)."""
        return (params.probs,)

    def expected_point(self, q: expfam.Dirichlet) -> CategoricalEmissions:
        """E_q[p]: the rows' posterior means as ``CategoricalEmissions`` (K, V)."""
        return CategoricalEmissions(self.point_estimate(q))

    def initial_q(self, key: PRNGKey, num: int, x: Array | None = None):
        """Each copy's probabilities drawn from Dirichlet(1), as one pseudo-observation of each
        symbol's probability (with or without data)."""
        dt = float_dtype(self.dtype)
        probs = jax.random.dirichlet(key, jnp.ones(self.num_symbols, dt), (num,), dtype=dt)
        n = float(num) if x is None else np.shape(x)[0]
        return conjugate_posterior(self.prior(num), (probs,)), jnp.full((num,), n / num, dt)


@dataclasses.dataclass(frozen=True, eq=False)
class GammaPoisson(Component):
    """Counts x_d ~ Poisson(lambda_d) with lambda_d ~ Gamma(a0, b0) (shape, rate). A datum contributes
    s = (x, -1) to (log lambda, lambda); log h = -sum_d log x_d!. The predictive of a datum is a
    product of negative binomials."""

    dim: int
    a0: float = 1.0
    b0: float = 1.0
    dtype: Any = None
    static_floats = ("a0", "b0")

    def __post_init__(self):
        check_int("dim", self.dim)
        check_positive_fields(self, ("a0", "b0"), scalar=True)
        check_float_dtype(self.dtype)

    def prior(self, num: int) -> expfam.Gamma:
        dt = float_dtype(self.dtype)
        return expfam.Gamma.from_shape_rate(
            jnp.full((num, self.dim), self.a0, dt), jnp.full((num, self.dim), self.b0, dt)
        )

    def suff_stats(self, x: Array) -> tuple:
        return x, -jnp.ones_like(x)

    def log_base_measure(self, x: Array) -> Array:
        return -jnp.sum(gammaln(x + 1.0), -1)

    def stats(self, x: Array, weights: Array) -> tuple:
        return weights.T @ x, jnp.broadcast_to(-jnp.sum(weights, 0)[:, None], (weights.shape[1], self.dim))

    def expected_log_lik(self, view, x: Array) -> Array:
        e_log_lam, e_lam = view
        return x @ e_log_lam.T - jnp.sum(e_lam, -1)[None, :] + self.log_base_measure(x)[:, None]

    def point_estimate(self, q: expfam.Gamma) -> Array:
        """E[lambda] = a / b (K, D)."""
        return q.concentration / q.rate

    def check_data(self, x, name: str | None = None) -> None:
        name = name or self.data_name
        check_data_array(name, x, ndim=2, last_dim=self.dim)
        if not is_tracer(x):
            a = np.asarray(x)
            if np.any(a < 0) or np.any(a != np.round(a)):
                raise ArgumentError(name, f"{name} must hold counts (integers >= 0)")

    def batch_checks(self, x, name: str | None = None) -> list:
        name = name or self.data_name
        x = jnp.asarray(x)
        return [
            finite_nonnegative(f"batch {name}", x),
            values_match(f"batch {name}", x, jnp.round(x), "an integer count"),
        ]


__all__ = ["BetaBernoulli", "DirichletCategorical", "GammaPoisson", "bernoulli_log_lik", "check_binary", "map_rows"]
