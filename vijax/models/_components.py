r"""Conjugate components: a likelihood p(x | theta) and its conjugate prior p(theta), the building block of
:class:`~vijax.models.Mixture` and of the HMMs' emissions.

A component is log p(x | theta) = <s(x), t(theta)> + log h(x), t the statistics of its prior's family (Blei et
al. 2017, §4.2; Bishop 2006, §10.2). A new one subclasses :class:`Component` and defines ``prior(num)``,
``suff_stats(x)`` and, where h is not 1, ``log_base_measure(x)``; EM's point estimates: :class:`PointEstimateComponent`.
"""

from __future__ import annotations

import abc
import dataclasses
import types
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from vijax import expfam
from vijax._validate import ArgumentError, check_data_array, check_float_dtype, check_int
from vijax._validate import check_positive, check_positive_fields, check_scalar, finite_nonnegative, finite_values
from vijax._validate import float_dtype, ids_in_range, is_tracer, real_array, values_in_interval, values_in_set
from vijax._validate import values_match
from vijax.models._base import check_index_array, conjugate_posterior
from vijax.models._pytree import PytreeModel, array_or_float, optional_float
from vijax.types import Array, PRNGKey

LOG_2PI = float(np.log(2.0 * np.pi))


def floor_log(v: Array) -> Array:
    """-inf -> a finite floor a few of which still sum finitely, so that 0 * floor = 0 in products, not NaN."""
    return jnp.maximum(v, jnp.finfo(v.dtype).min / (4.0 * (v.shape[-1] + 1)))


class Component(PytreeModel):
    """The interface of a conjugate component (see the module docstring).

    Attributes: ``dtype`` (None: JAX's default float), ``data_name`` (what errors call the data), ``event_ndim``
    (1 for vectors, 0 for symbols), ``distinct_seeds`` (``initial_q`` seeds copies at distinct data: N >= K).
    """

    data_name = "x"
    event_ndim = 1
    dtype: Any = None
    distinct_seeds = False

    @abc.abstractmethod
    def prior(self, num: int):
        """The prior of ``num`` independent copies: an ``expfam`` family of batch shape (num, ...)."""

    @abc.abstractmethod
    def suff_stats(self, x: Array) -> tuple:
        """s(x_n) per datum: a tuple like the prior's natural parameters, each (N, *one copy's shape)."""

    def log_base_measure(self, x: Array) -> Array:
        """log h(x_n), shape (N,) (default 0)."""
        return jnp.zeros(x.shape[:1], float_dtype(self.dtype))

    def prepare(self, x: Array, dtype) -> Array:
        """The data as the local step reads them (cast to the globals' float ``dtype``)."""
        return jnp.asarray(x).astype(dtype)

    def stats(self, x: Array, weights: Array) -> tuple:
        """sum_n w_nk s(x_n) for weights (N, K): a tuple like the prior's natural parameters."""
        return tuple(jnp.tensordot(weights.T, s.astype(weights.dtype), axes=1) for s in self.suff_stats(x))

    def expected_log_lik(self, view, x: Array) -> Array:
        """E[log p(x_n | theta_k)] = <s(x_n), view_k> + log h(x_n), (N, K), at a view (E_q[t(theta)] or a draw's)."""
        s = self.suff_stats(x)
        total = sum(
            jnp.tensordot(si, vi, axes=(tuple(range(1, si.ndim)), tuple(range(1, vi.ndim)))) for si, vi in zip(s, view)
        )
        return total + self.log_base_measure(x).astype(total.dtype)[:, None]

    def log_predictive(self, q, x: Array) -> Array:
        """log p(x_n | q_k) = log h(x_n) + A(eta_k + s(x_n)) - A(eta_k), (N, K): the predictive density."""
        eta = q.natural_params
        s = self.suff_stats(x)
        joined = tuple(e[None] + si.astype(e.dtype)[:, None] for e, si in zip(eta, s))
        a_post = type(q).from_natural(joined).log_normalizer()
        a_post = jnp.sum(a_post.reshape(a_post.shape[:2] + (-1,)), -1)
        a0 = q.log_normalizer()
        a0 = jnp.sum(a0.reshape(a0.shape[:1] + (-1,)), -1)
        return a_post - a0[None] + self.log_base_measure(x).astype(a_post.dtype)[:, None]

    def point_estimate(self, q):
        """A point estimate of each copy's parameters: the posterior mean ``q.to_tfp().mean()`` by default."""
        return q.to_tfp().mean()

    def check_data(self, x, name: str | None = None) -> None:
        """Raises ValueError naming the data (``name``, default ``data_name``) for what the component cannot take."""
        check_data_array(name or self.data_name, x, ndim=1 + self.event_ndim)

    def _datum_shape(self) -> tuple:
        dim = getattr(self, "dim", None)
        return (None,) * self.event_ndim if dim is None or self.event_ndim != 1 else (dim,)

    @property
    def data_shape(self) -> str:
        """The shape of the data, as errors write it: ``(N,)``, ``(N, dim)``, ``(N, ...)``."""
        dims = ["N"] + ["..." if w is None else str(w) for w in self._datum_shape()]
        return "(N,)" if len(dims) == 1 else "(" + ", ".join(dims) + ")"

    def check_shape(self, x: Array) -> None:
        """Raises ValueError naming the data when a (possibly traced) batch lacks a datum's dimensions."""
        want = self._datum_shape()
        ok = x.ndim == 1 + self.event_ndim and all(w is None or w == s for w, s in zip(want, x.shape[1:]))
        if not ok:
            raise ArgumentError(self.data_name, f"{self.data_name} must have shape {self.data_shape}, got {x.shape}")

    def batch_checks(self, x, name: str | None = None) -> list:
        """The value checks of a step's batch (default: finite values), for any leading axes."""
        return [finite_values(f"batch {name or self.data_name}", x)]

    def initial_q(self, key: PRNGKey, num: int, x: Array | None = None):
        """``(q of num copies, counts (num,))``: by default the prior updated by one random datum, N / num data each."""
        if x is None:
            raise ValueError(f"{type(self).__name__} starts from data: pass the data to init_globals(key, x)")
        dt = float_dtype(self.dtype)
        x = self.prepare(x, dt) if self.event_ndim else jnp.asarray(x)
        n = x.shape[0]
        seeds = x[jax.random.choice(key, n, (num,), replace=n < num)]
        q = conjugate_posterior(self.prior(num), self.stats(seeds, jnp.eye(num, dtype=dt)))
        return q, jnp.full((num,), n / num, dt)


class CategoricalEmissions(NamedTuple):
    probs: Array  # (K, V), rows sum to 1


class GaussianEmissions(NamedTuple):
    means: Array  # (K, D)
    variances: Array  # (K, D), > 0


@runtime_checkable
class PointEstimateComponent(Protocol):
    """A component with point estimates of theta, for ML or MAP EM (Baum–Welch; Rabiner 1989, eq. 40a-c, 53-54)."""

    point_type: type  # the parameters' NamedTuple (CategoricalEmissions, GaussianEmissions, ...)
    point_width: int  # the width of one copy's parameters (V symbols, D dimensions)

    def point_checks(self, params, num: int) -> list:
        """The value checks (``ValueCheck``s) of ``num`` copies' point parameters."""

    def point_view(self, params) -> tuple:
        """t(theta) at a point, in the layout of the prior's mean parameters."""

    def point_m_step(self, stats):
        """The point parameters maximizing the expected complete-data log-likelihood (or posterior)."""

    def point_log_prior(self, params) -> Array:
        """log p(theta) up to a constant (0 for maximum likelihood)."""

    def init_point(self, key: PRNGKey, num: int, prepared=None):
        """Starting parameters of ``num`` copies; ``prepared``: (observations (M, ...), mask (M,)) or None."""

    def pseudo_stats(self, params) -> tuple:
        """The expected statistics of one pseudo-observation per copy at ``params``."""

    def expected_point(self, q):
        """The posterior means of the parameters under q(theta), as ``point_type``."""


def _describe(value: Any) -> str:
    """What was given, for an error: a type, with its shape where it has one."""
    shape = getattr(value, "shape", None)
    kind = "one array" if isinstance(value, (jax.ShapeDtypeStruct, jax.Array, np.ndarray)) else type(value).__name__
    return kind + ("" if shape is None else f" of shape {tuple(shape)}")


@jax.jit
def _prior_values(component: Component):
    prior = component.prior(1)
    return prior.natural_params, prior.is_valid()


def _domain_problem(component: Component, family) -> str | None:
    """What is wrong with a concrete prior's natural parameters (not finite, outside the domain); None if nothing."""
    if any(is_tracer(leaf) for leaf in jax.tree_util.tree_leaves(component)):
        return None
    eta, valid = jax.device_get(_prior_values(component))
    batch = tuple(family.batch_shape)
    for e in eta:
        bad = ~np.isfinite(np.asarray(e))
        if bad.any():
            at = np.unravel_index(int(np.argmax(bad)), bad.shape)
            return f"with a NaN or infinite natural parameter at {list(map(int, at))}"
    valid = np.broadcast_to(np.asarray(valid), batch)
    if valid.all():
        return None
    at = np.unravel_index(int(np.argmin(valid)), batch)
    values = ", ".join(f"{float(np.asarray(e)[at].ravel()[0]):.4g}" for e in eta)
    return f"with natural parameters outside its domain at {list(map(int, at))} (there {values}; {type(family).__name__}.is_valid)"


def check_component(component: Component, name: str) -> None:
    """Raises ValueError naming ``name`` unless ``prior(1)`` is a proper ``expfam`` family of batch shape (1, ...)."""
    cls = type(component).__name__
    try:  # abstract values: the family and its shapes, nothing computed
        prior = jax.eval_shape(lambda c: c.prior(1), component)
    except ValueError as e:  # a family's own check of its parameters (a Gamma of shape -1)
        raise ArgumentError(name, f"{cls}.prior(1) fails: {e}") from e
    if not expfam.is_family(prior):
        raise ArgumentError(
            name,
            f"{cls}.prior(num) must return an expfam family of batch shape (num, ...) (e.g. "
            f"expfam.Gamma.from_shape_rate(...)), got {_describe(prior)}",
        )
    if tuple(prior.batch_shape[:1]) != (1,):
        raise ArgumentError(
            name, f"{cls}.prior(num) must have batch shape (num, ...); prior(1) has batch shape {prior.batch_shape}"
        )
    problem = _domain_problem(component, prior)
    if problem is not None:
        raise ArgumentError(
            name,
            f"{cls}.prior(1) is a {type(prior).__name__} {problem}: give the prior parameters its family "
            "allows (e.g. a Gamma's shape and rate > 0)",
        )


@jax.jit
def _statistics_rows(component: Component, x: Array):
    """Per datum sum s(x_n) and invalid entries of prior + s(x_n); whether prior + all s(x_n) is finite, valid."""
    prior = component.prior(1)
    eta = prior.natural_params
    s = component.suff_stats(component.prepare(x, prior.dtype))
    n = jnp.shape(x)[0]
    row_sums = sum(jnp.sum(jnp.reshape(si.astype(e.dtype), (n, -1)), 1) for e, si in zip(eta, s))
    each = type(prior).from_natural(tuple(e + si.astype(e.dtype) for e, si in zip(eta, s)))
    invalid = jnp.sum(jnp.reshape(jnp.where(each.is_valid(), 0.0, 1.0), (n, -1)), 1)
    summed = tuple(e + jnp.sum(si.astype(e.dtype), 0, keepdims=True) for e, si in zip(eta, s))
    finite = sum(jnp.all(jnp.isfinite(t)).astype(jnp.int32) for t in summed) == len(summed)
    return row_sums, invalid, finite, jnp.all(type(prior).from_natural(summed).is_valid())


def check_statistics(component: Component, x, data_name: str, name: str) -> None:
    """Checks the statistics s(x) of data that passed ``check_data``: structure (also traced); concrete: finite, proper.

    Raises:
      ValueError: naming ``name`` (wrong structure, NaN for finite data) or ``data_name`` (overflow, not proper).
    """
    cls = type(component).__name__
    prior = jax.eval_shape(lambda c: c.prior(1), component)  # the family and its shapes, nothing computed
    eta = prior.natural_params
    spec = x if is_tracer(x) else np.asarray(x)
    n = np.shape(spec)[0]
    spec = jax.ShapeDtypeStruct(np.shape(spec), spec.dtype)
    got = jax.eval_shape(lambda c, v: c.suff_stats(c.prepare(v, prior.dtype)), component, spec)
    want = [(n,) + tuple(np.shape(e)[1:]) for e in eta]
    leaves = got if isinstance(got, (tuple, list)) else None
    if leaves is None or len(leaves) != len(eta) or any(tuple(np.shape(g)) != w for g, w in zip(leaves, want)):
        shown = _describe(got) if leaves is None else "(" + ", ".join(str(tuple(np.shape(g))) for g in leaves) + ")"
        raise ArgumentError(
            name,
            f"{cls}.suff_stats({data_name}) must return a tuple like the natural parameters of its prior "
            f"(a {type(prior).__name__}): {len(eta)} arrays of shapes {tuple(want)} for {n} data, got {shown}",
        )
    if is_tracer(x):
        return
    with jax.ensure_compile_time_eval():  # concrete data met inside a trace (a closed-over constant)
        rows = _statistics_rows(component, x)
    if any(is_tracer(r) for r in rows):  # a component of traced parameters (a grid's point)
        return
    row_sums, invalid, total_finite, total_ok = jax.device_get(rows)
    bad = ~np.isfinite(row_sums)
    row = int(np.argmax(bad))
    row_stats = component.suff_stats(component.prepare(x[row : row + 1], prior.dtype)) if bad.any() else ()
    if any(np.isnan(np.asarray(si)).any() for si in row_stats):
        raise ArgumentError(
            name,
            f"{cls}.suff_stats({data_name}) is NaN at row {row} of finite {data_name}: a component's "
            "statistics of finite data must be finite",
        )
    dtype = jnp.dtype(prior.dtype).name
    if bad.any() or not total_finite:
        a = np.abs(np.asarray(x, np.float64))
        where = f"{data_name} row {row}" if bad.any() else f"{data_name} (summed)"
        raise ArgumentError(
            data_name,
            f"{where} overflows {dtype} in {cls}'s sufficient statistics (infinite; {data_name} of magnitude "
            f"up to {float(a.max()):.3g}): rescale {data_name} (or compute in float64)",
        )
    each_ok = invalid == 0
    if not each_ok.all() or not total_ok:
        where = f"{data_name} row {int(np.argmin(each_ok))}" if not each_ok.all() else f"{data_name} as a whole"
        raise ArgumentError(
            data_name,
            f"the statistics of {where} make {cls}'s posterior improper (its {type(prior).__name__} prior "
            f"updated by them is outside the family's domain): {data_name} outside the likelihood's support, "
            f"or {cls}.suff_stats of the wrong sign",
        )


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
    """log p(y_n | phi_k) = sum_d y log phi + (1 - y) log(1 - phi), (N, K); exact at phi = 0 or 1."""
    y = y.astype(probs.dtype)
    return y @ floor_log(jnp.log(probs)).T + (1.0 - y) @ floor_log(jnp.log1p(-probs)).T


def map_rows(counts: Array, concentration: float) -> Array:
    """argmax of Dirichlet(c) x Multinomial(counts) per row: (counts + c - 1)_+ normalized (all-zero: uniform)."""
    c = jnp.maximum(counts + (concentration - 1.0), 0.0)
    tot = jnp.sum(c, -1, keepdims=True)
    return jnp.where(tot > 0, c / jnp.where(tot > 0, tot, 1.0), 1.0 / c.shape[-1])


@dataclasses.dataclass(frozen=True, eq=False)
class BetaBernoulli(Component):
    """D Bernoullis y_d ~ Bernoulli(phi_d), phi_d ~ Beta(a, b) (Hoffman & Blei 2015, §4.2): s(y) = (y, 1 - y) for
    (log phi, log(1 - phi)); ``init_pseudo_count`` is the weight of a seed datum in the initial q."""

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
        full = lambda v: jnp.full((num, self.dim), v, float_dtype(self.dtype))
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
        """Bernoulli products at E[phi] (exact for a factorized q), (N, K)."""
        return bernoulli_log_lik(self.point_estimate(q), y)

    def point_estimate(self, q: expfam.Beta) -> Array:
        """E[phi] (K, D)."""
        return q.concentration1 / (q.concentration1 + q.concentration0)

    def check_data(self, y, name: str | None = None) -> None:
        if not is_tracer(y) and np.asarray(y).dtype == bool:
            y = np.asarray(y, float)
        check_data_array(name or self.data_name, y, ndim=2, last_dim=self.dim)
        check_binary(name or self.data_name, y)

    def batch_checks(self, y, name: str | None = None) -> list:
        return [values_in_set(f"batch {name or self.data_name}", y, (0, 1))]

    def initial_q(self, key: PRNGKey, num: int, y: Array | None = None):
        """q(phi_kd) = Beta(a + c y_(k)d, b + c (1 - y_(k)d)), y_(k) a random datum (or uniform), c the pseudo-count."""
        dt = float_dtype(self.dtype)
        if y is None:
            seeds, n = jax.random.bernoulli(key, 0.5, (num, self.dim)).astype(dt), float(num)
        else:
            y = jnp.asarray(y, dt)
            n = y.shape[0]
            seeds = y[jax.random.choice(key, n, (num,), replace=n < num)]
        c = self.init_pseudo_count
        q = expfam.Beta.from_natural((self.a - 1.0 + c * seeds, self.b - 1.0 + c * (1.0 - seeds)))
        return q, jnp.full((num,), n / num, dt)


@dataclasses.dataclass(frozen=True, eq=False)
class DirichletCategorical(Component):
    """A symbol x in {0, ..., V - 1} ~ Categorical(p), p ~ Dirichlet(c 1_V): s(x) = onehot(x) for log p; data (N,) ints."""

    num_symbols: int
    concentration: float = 1.0
    dtype: Any = None
    static_floats = ("concentration",)
    event_ndim = 0
    point_type = CategoricalEmissions

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
        """log E[p_x] = log(alpha_kx / sum_v alpha_kv), (N, K)."""
        return jnp.log(jnp.take(self.point_estimate(q).T, x, axis=0, mode="clip"))

    def point_estimate(self, q: expfam.Dirichlet) -> Array:
        """E[p] (K, V)."""
        return q.concentration / jnp.sum(q.concentration, -1, keepdims=True)

    def check_data(self, x, name: str | None = None) -> None:
        k = self.num_symbols
        check_index_array(name or self.data_name, x, k, "symbols", f"num_symbols={k}")

    def batch_checks(self, x, name: str | None = None) -> list:
        return [ids_in_range(f"batch {name or self.data_name} symbol", x, self.num_symbols)]

    # -- PointEstimateComponent: CategoricalEmissions(probs)
    point_width = property(lambda self: self.num_symbols, doc="V: the width of ``CategoricalEmissions.probs``.")

    def point_checks(self, params: CategoricalEmissions, num: int) -> list:
        """None of its own: the HMM's probability checks cover ``CategoricalEmissions``."""
        return []

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
        """The expected statistics of one pseudo-observation per row: (probs,)."""
        return (params.probs,)

    def expected_point(self, q: expfam.Dirichlet) -> CategoricalEmissions:
        """E_q[p] as ``CategoricalEmissions``."""
        return CategoricalEmissions(self.point_estimate(q))

    def initial_q(self, key: PRNGKey, num: int, x: Array | None = None):
        """Each copy's probabilities drawn from Dirichlet(1), as one pseudo-observation."""
        probs = self.init_point(key, num).probs
        n = float(num) if x is None else np.shape(x)[0]
        return conjugate_posterior(self.prior(num), (probs,)), jnp.full((num,), n / num, probs.dtype)


@dataclasses.dataclass(frozen=True, eq=False)
class GammaPoisson(Component):
    """Counts x_d ~ Poisson(lambda_d), lambda_d ~ Gamma(a0, b0): s(x) = (x, -1) for (log lambda, lambda), h = 1/x!"""

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
        full = lambda v: jnp.full((num, self.dim), v, float_dtype(self.dtype))
        return expfam.Gamma.from_shape_rate(full(self.a0), full(self.b0))

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
        check_data_array(name or self.data_name, x, ndim=2, last_dim=self.dim)
        if not is_tracer(x):
            a = np.asarray(x)
            if np.any(a < 0) or np.any(a != np.round(a)):
                raise ArgumentError(
                    name or self.data_name, f"{name or self.data_name} must hold counts (integers >= 0)"
                )

    def batch_checks(self, x, name: str | None = None) -> list:
        name = f"batch {name or self.data_name}"
        x = jnp.asarray(x)
        return [finite_nonnegative(name, x), values_match(name, x, jnp.round(x), "an integer count")]


def kmeanspp_centers(key: PRNGKey, x: Array, k: int) -> Array:
    """Greedy k-means++ seeding (Arthur and Vassilvitskii 2007, as scikit-learn seeds): the first center a uniform
    draw of the points; each next one, of 2 + floor(ln k) points drawn ∝ their squared distance to the nearest center
    so far, the one that leaves the smallest sum of those distances. One candidate (plain k-means++) more often puts
    two seeds in one cluster and none in another."""
    trials = 2 + int(np.log(k))
    keys = jax.random.split(key, k)
    first = x[jax.random.randint(keys[0], (), 0, x.shape[0])]
    centers = jnp.zeros((k, x.shape[1]), x.dtype).at[0].set(first)
    d2 = jnp.sum((x - first[None, :]) ** 2, axis=1)

    def body(i, carry):
        centers, d2 = carry
        picks = x[jax.random.categorical(keys[i], jnp.log(d2 + jnp.finfo(x.dtype).tiny), shape=(trials,))]
        left = jax.vmap(lambda c: jnp.minimum(d2, jnp.sum((x - c[None, :]) ** 2, axis=1)))(picks)  # (trials, N)
        best = jnp.argmin(jnp.sum(left, axis=1))
        return centers.at[i].set(picks[best]), left[best]

    return jax.lax.fori_loop(1, k, body, (centers, d2))[0]


def nearest_center_resp(key: PRNGKey, x: Array, k: int) -> Array:
    """One-hot responsibilities (N, k): each point assigned to the nearest of k k-means++ seeds."""
    centers = kmeanspp_centers(key, x, k)
    d2 = jnp.sum(x**2, 1)[:, None] - 2.0 * x @ centers.T + jnp.sum(centers**2, 1)[None, :]
    return jax.nn.one_hot(jnp.argmin(d2, 1), k, dtype=x.dtype)


def normal_gamma_log_predictive(ng: expfam.NormalGamma, x: Array) -> Array:
    """log predictive of x (N, D) under each Normal-Gamma component, (N, K): prod_d t(2a, m, b (kappa + 1) / (a kappa))."""
    a, b, m, kappa = ng.concentration, ng.rate, ng.loc, ng.kappa  # (K, D)
    nu = 2.0 * a
    scale2 = b * (kappa + 1.0) / (a * kappa)
    z2 = (x[:, None, :] - m[None]) ** 2 / scale2[None]
    log_norm = gammaln((nu + 1) / 2) - gammaln(nu / 2) - 0.5 * jnp.log(nu * jnp.pi * scale2)
    return jnp.sum(log_norm[None] - (nu[None] + 1) / 2 * jnp.log1p(z2 / nu[None]), -1)


def gaussian_point_checks(means: Array, variances: Array) -> list:
    """The value checks of ``GaussianEmissions``: finite means, variances finite and normal numbers."""
    tiny = float(jnp.finfo(variances.dtype).tiny)
    return [
        finite_values("params.emissions.means", means),
        finite_values("params.emissions.variances", variances),
        values_in_interval("params.emissions.variances", variances, tiny, float("inf")),
    ]


def student_t_log_density(x: Array, loc: Array, scale: Array, dof: Array) -> tuple[Array, Array]:
    """log t_nu(x_n; mu_k, Sigma_k) (Bishop 2006, eq. 2.162) and the squared Mahalanobis distances, both (N, K)."""
    d = x.shape[-1]
    chol = jnp.linalg.cholesky(scale)
    diff = x[:, None, :] - loc[None]  # (N, K, D)
    z = jax.scipy.linalg.solve_triangular(chol[None], diff[..., None], lower=True)[..., 0]
    delta = jnp.sum(z**2, -1)
    log_det = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), -1)
    const = gammaln(0.5 * (dof + d)) - gammaln(0.5 * dof) - 0.5 * d * jnp.log(dof * jnp.pi) - 0.5 * log_det
    return const[None] - 0.5 * (dof + d)[None] * jnp.log1p(delta / dof[None]), delta


class _Gaussian(Component):
    """What the two Gaussian components share: log h = -D/2 log 2 pi and a k-means++ start."""

    distinct_seeds = True

    def log_base_measure(self, x: Array) -> Array:
        return jnp.full(x.shape[:1], -0.5 * self.dim * LOG_2PI, x.dtype)

    def initial_q(self, key: PRNGKey, num: int, x: Array | None = None):
        """One M-step from points assigned to the nearest of ``num`` k-means++ seeds (no data: a prior draw's means)."""
        dt = float_dtype(self.dtype)
        prior = self.prior(num)
        if x is None:
            return self._at_prior_draw(prior, key), jnp.zeros((num,), dt)
        x = jnp.asarray(x, dt)[:, : self.dim]  # raw data, or the data part of features(x)
        resp = nearest_center_resp(key, x, num)
        return conjugate_posterior(prior, self.stats(x, resp)), jnp.sum(resp, 0)


@dataclasses.dataclass(frozen=True, eq=False)
class NormalGammaDiagonal(_Gaussian):
    """Diagonal Gaussian x_d ~ N(mu_d, 1 / tau_d), tau_d ~ Gamma(a0, b0_d), mu_d | tau_d ~ N(m0_d, 1 / (kappa0 tau_d))
    (Blei et al. 2017, appendix B): s(x) = (x, -1/2, -x^2/2, 1/2) for (tau mu, tau mu^2, tau, log tau). Every
    method taking data also takes the features [x, x^2] (N, 2D) (:meth:`features`)."""

    dim: int
    loc0: Any = 0.0
    kappa0: float = 1.0
    a0: float = 1.0
    b0: Any = 1.0
    min_variance: float = 1e-6
    dtype: Any = None
    static_floats = ("kappa0", "a0", "min_variance")
    converters = types.MappingProxyType(dict.fromkeys(("loc0", "b0"), array_or_float))
    point_type = GaussianEmissions

    def __post_init__(self):
        check_int("dim", self.dim)
        check_positive_fields(self, ("kappa0", "a0"), scalar=True)
        check_positive("b0", self.b0)
        check_scalar("min_variance", self.min_variance, low=0.0, include_low=True)
        if not np.all(np.isfinite(real_array("loc0", self.loc0, "a finite number or array"))):
            raise ValueError(f"loc0 must be finite, got {self.loc0!r}")
        for name in ("loc0", "b0"):
            shape = np.shape(getattr(self, name))
            if shape not in ((), (self.dim,)):
                raise ValueError(f"{name} must be a scalar or have shape ({self.dim},), got {shape}")
        check_float_dtype(self.dtype)

    def prior(self, num: int) -> expfam.NormalGamma:
        full = lambda v: jnp.broadcast_to(jnp.asarray(v, float_dtype(self.dtype)), (num, self.dim))
        return expfam.NormalGamma.from_params(full(self.loc0), full(self.kappa0), full(self.a0), full(self.b0))

    def _at_prior_draw(self, prior: expfam.NormalGamma, key: PRNGKey) -> expfam.NormalGamma:
        return expfam.NormalGamma.from_params(prior.sample(key)[..., 0], prior.kappa, prior.concentration, prior.rate)

    def features(self, x: Array) -> Array:
        """[x, x^2], shape (N, 2D); features are returned unchanged."""
        return x if x.shape[-1] == 2 * self.dim else jnp.concatenate([x, x**2], axis=-1)

    def suff_stats(self, x: Array) -> tuple:
        f = self.features(x)
        half = jnp.full(f.shape[:1] + (self.dim,), 0.5, f.dtype)
        return f[:, : self.dim], -half, -0.5 * f[:, self.dim :], half

    def stats(self, x: Array, weights: Array) -> tuple:
        sx = weights.T @ self.features(x)
        s1, s2 = sx[:, : self.dim], sx[:, self.dim :]
        half_n = jnp.broadcast_to(0.5 * jnp.sum(weights, 0)[:, None], s1.shape)
        return s1, -half_n, -0.5 * s2, half_n

    def expected_log_lik_without_base(self, view, x: Array) -> Array:
        """<s(x_n), view_k>, (N, K): :meth:`expected_log_lik` without log h = -D/2 log 2 pi."""
        e_tm, e_tm2, e_t, e_logt = view
        w = jnp.concatenate([e_tm, -0.5 * e_t], axis=1)  # (K, 2D)
        const = jnp.sum(0.5 * e_logt - 0.5 * e_tm2, axis=1)
        return self.features(x) @ w.T + const[None, :]

    def expected_log_lik(self, view, x: Array) -> Array:
        return self.expected_log_lik_without_base(view, x) - 0.5 * self.dim * LOG_2PI

    def log_predictive(self, q: expfam.NormalGamma, x: Array) -> Array:
        """Products over d of Student-t(2a, m, b (kappa + 1) / (a kappa)), (N, K)."""
        return normal_gamma_log_predictive(q, x[:, : self.dim])

    def point_estimate(self, q: expfam.NormalGamma):
        """(means E[mu], variances 1 / E[tau])."""
        return q.loc, q.rate / q.concentration

    def _is_features(self, x) -> bool:
        return np.ndim(x) == 2 and np.shape(x)[1] == 2 * self.dim

    def check_data(self, x, name: str | None = None) -> None:
        check_data_array(name or self.data_name, x, ndim=2, last_dim=2 * self.dim if self._is_features(x) else self.dim)

    def batch_checks(self, x, name: str | None = None) -> list:
        """Finite values; for features (N, 2D), also their second half the square of their first."""
        name = name or self.data_name
        finite = finite_values(f"batch {name}", x)
        if not self._is_features(x):
            return [finite]
        d = self.dim
        match = values_match(
            f"batch feature {name}**2",
            x[:, d:],
            x[:, :d] ** 2,
            f"the square of its data column (features must be [x, x**2], (N, {2 * d}); data is (N, {d}))",
        )
        return [finite._replace(covered_by=match.name), match]

    def check_shape(self, x: Array) -> None:
        if x.ndim != 2 or x.shape[1] not in (self.dim, 2 * self.dim):
            raise ArgumentError(
                "x", f"x must have shape (N, {self.dim}) (or features (N, {2 * self.dim})), got {x.shape}"
            )

    # -- PointEstimateComponent: GaussianEmissions(means, variances)
    point_width = property(lambda self: self.dim, doc="D: the width of ``GaussianEmissions.means``.")

    def point_checks(self, params: GaussianEmissions, num: int) -> list:
        """Means and variances finite, variances at least the dtype's smallest normal number."""
        return gaussian_point_checks(params.means, params.variances)

    def point_view(self, params: GaussianEmissions) -> tuple:
        """t(theta) at a point: (tau mu, tau mu^2, tau, log tau) with tau = 1 / variances, each (K, D)."""
        tau = 1.0 / params.variances
        return tau * params.means, tau * params.means**2, tau, jnp.log(tau)

    def point_m_step(self, stats) -> GaussianEmissions:
        """Maximum likelihood (the prior is not used), variances floored at ``min_variance``."""
        s1, neg_half_n, neg_half_s2, _ = stats
        n = -2.0 * neg_half_n
        safe = jnp.where(n > 0, n, 1.0)
        means = jnp.where(n > 0, s1 / safe, 0.0)
        var = jnp.where(n > 0, -2.0 * neg_half_s2 / safe - means**2, 1.0)
        return GaussianEmissions(means, jnp.maximum(var, self.min_variance))

    def point_log_prior(self, params: GaussianEmissions) -> Array:
        """0: EM for these emissions is maximum likelihood."""
        return jnp.zeros((), float_dtype(self.dtype))

    def init_point(self, key: PRNGKey, num: int, prepared=None) -> GaussianEmissions:
        """Means at ``num`` random observed points, the data's variances (no data: N(0, 1) means, unit variances)."""
        dt = float_dtype(self.dtype)
        if prepared is None:
            return GaussianEmissions(jax.random.normal(key, (num, self.dim), dt), jnp.ones((num, self.dim), dt))
        x, mask = prepared
        w = mask.astype(dt)
        n = jnp.sum(w)
        mean = w @ x / n
        var = jnp.maximum(w @ (x - mean[None]) ** 2 / n, max(self.min_variance, 1e-6))
        rows = jax.random.choice(key, x.shape[0], (num,), replace=bool(x.shape[0] < num), p=w / n)
        return GaussianEmissions(x[rows], jnp.broadcast_to(var, (num, self.dim)))

    def pseudo_stats(self, params: GaussianEmissions) -> tuple:
        """E[s(x)] for x ~ N(means, variances): one pseudo-observation per copy."""
        m, v = params.means, params.variances
        half = jnp.full_like(m, 0.5)
        return m, -half, -0.5 * (m**2 + v), half

    def expected_point(self, q: expfam.NormalGamma) -> GaussianEmissions:
        """(E[mu], E[sigma^2] = b / (a - 1))."""
        return GaussianEmissions(q.loc, q.rate / jnp.maximum(q.concentration - 1.0, 1e-12))


@dataclasses.dataclass(frozen=True, eq=False)
class NormalWishartFull(_Gaussian):
    """Gaussian x ~ N(mu, Lambda^-1), Lambda ~ Wishart(W0, nu0), mu | Lambda ~ N(m0, (kappa0 Lambda)^-1) (Bishop
    2006, §10.2): s(x) = (x, -1/2, -x x^T / 2, 1/2) for (Lambda mu, mu^T Lambda mu, Lambda, log|Lambda|); W0^-1 is
    scikit-learn's ``covariance_prior``."""

    dim: int
    loc0: Any = 0.0
    kappa0: float = 1.0
    dof0: float | None = None
    scale_inv0: Any = None
    dtype: Any = None
    static_floats = ("kappa0",)
    converters = types.MappingProxyType({"dof0": optional_float, "loc0": array_or_float, "scale_inv0": array_or_float})

    def __post_init__(self):
        check_int("dim", self.dim)
        check_positive_fields(self, ("kappa0",), scalar=True)
        check_float_dtype(self.dtype)
        d = self.dim
        loc0 = real_array("loc0", self.loc0, f"a finite scalar or an array of shape ({d},)")
        if loc0.shape not in ((), (d,)) or not np.all(np.isfinite(loc0)):
            raise ValueError(f"loc0 must be a finite scalar or have shape ({d},), got {self.loc0!r}")
        check_scalar("dof0", self.degrees_of_freedom, low=d - 1.0)
        s = real_array("scale_inv0", self.scale_inv, f"a symmetric positive-definite ({d}, {d}) matrix")
        if s.shape != (d, d):
            raise ValueError(f"scale_inv0 must have shape ({d}, {d}), got {s.shape}")
        if not np.all(np.isfinite(s)) or not np.allclose(s, s.T) or np.linalg.eigvalsh(s).min() <= 0:
            raise ValueError("scale_inv0 must be a finite, symmetric positive-definite matrix")

    @property
    def degrees_of_freedom(self) -> float:
        """nu0 (``dof0``, default D)."""
        return float(self.dim if self.dof0 is None else check_scalar("dof0", self.dof0))

    scale_inv = property(
        lambda self: np.eye(self.dim) if self.scale_inv0 is None else self.scale_inv0,
        doc="W0^-1 (``scale_inv0``, default the identity).",
    )

    def prior(self, num: int) -> expfam.NormalWishart:
        dt = float_dtype(self.dtype)
        d = self.dim
        scale = jnp.linalg.inv(jnp.asarray(self.scale_inv, dt))
        return expfam.NormalWishart.from_params(
            jnp.broadcast_to(jnp.asarray(self.loc0, dt), (num, d)),
            jnp.full((num,), self.kappa0, dt),
            jnp.broadcast_to(jnp.asarray(0.5 * (scale + scale.T), dt), (num, d, d)),
            jnp.full((num,), self.degrees_of_freedom, dt),
        )

    def _at_prior_draw(self, prior: expfam.NormalWishart, key: PRNGKey) -> expfam.NormalWishart:
        mu = prior.sample(key)[..., -1]  # a draw is [Lambda | mu]
        return expfam.NormalWishart.from_params(mu, prior.kappa, prior.scale, prior.dof)

    def suff_stats(self, x: Array) -> tuple:
        half = jnp.full(x.shape[:1], 0.5, x.dtype)
        return x, -half, -0.5 * x[:, :, None] * x[:, None, :], half

    def stats(self, x: Array, weights: Array) -> tuple:
        n_k = jnp.sum(weights, 0)
        return weights.T @ x, -0.5 * n_k, -0.5 * jnp.einsum("nk,nd,ne->kde", weights, x, x), 0.5 * n_k

    def expected_log_lik(self, view, x: Array) -> Array:
        """Bishop (2006) eq. (10.46)-(10.49) in mean parameters."""
        e_lam_mu, e_mu_lam_mu, e_lam, e_logdet = view
        quad = jnp.einsum("nd,kde,ne->nk", x, e_lam, x)
        const = -0.5 * e_mu_lam_mu + 0.5 * e_logdet - 0.5 * self.dim * LOG_2PI
        return x @ e_lam_mu.T - 0.5 * quad + const[None, :]

    def log_predictive(self, q: expfam.NormalWishart, x: Array) -> Array:
        """Student-t(nu + 1 - D, m, (kappa + 1) / (kappa (nu + 1 - D)) W^-1) per component (Bishop 2006, eq. 10.81)."""
        dof = q.dof + 1.0 - self.dim
        shape = ((q.kappa + 1.0) / (q.kappa * dof))[:, None, None] * q.scale_inv  # (K, D, D)
        return student_t_log_density(x, q.loc, shape, dof)[0]

    def point_estimate(self, q: expfam.NormalWishart):
        """(means E[mu], covariances E[Lambda]^-1)."""
        return q.loc, q.scale_inv / q.dof[:, None, None]

    def check_data(self, x, name: str | None = None) -> None:
        check_data_array(name or self.data_name, x, ndim=2, last_dim=self.dim)


__all__ = [
    "BetaBernoulli",
    "CategoricalEmissions",
    "Component",
    "DirichletCategorical",
    "GammaPoisson",
    "GaussianEmissions",
    "LOG_2PI",
    "NormalGammaDiagonal",
    "NormalWishartFull",
    "PointEstimateComponent",
    "bernoulli_log_lik",
    "check_binary",
    "check_component",
    "check_statistics",
    "floor_log",
    "gaussian_point_checks",
    "kmeanspp_centers",
    "map_rows",
    "nearest_center_resp",
    "normal_gamma_log_predictive",
    "student_t_log_density",
]
