r"""Conjugate components: a likelihood p(x | theta) and its conjugate prior p(theta), the building
block of :class:`~vijax.models.Mixture` (finite or Dirichlet-process) and of the HMMs' emissions.

A component is an exponential-family likelihood written in the statistics of its prior's family::

    log p(x | theta) = <s(x), t(theta)> + log h(x),

where t(theta) are the sufficient statistics of the prior p(theta) (an ``expfam`` family) and s(x)
is the datum's contribution to them. Everything a mixture or an HMM needs follows from s and h
(Blei et al. 2017, §4.2; Bishop 2006, §10.2; the dynamax split of models into components):

- the statistics of weighted data, sum_n w_nk s(x_n) (K copies, shaped like the prior's
  natural parameters): the M-step / global update eta + sum_n w_nk s(x_n);
- the expected log-likelihood E_q[log p(x_n | theta_k)] = <s(x_n), E_q[t(theta_k)]> + log h(x_n),
  an (N, K) array: the E-step's logits, at the mean parameters of q (CAVI, SVI) or at t(theta) of a
  draw (SSVI);
- the posterior predictive of one datum, p(x | q_k) = h(x) exp(A(eta_k + s(x)) - A(eta_k)) with A the
  family's log-normalizer (exact for any conjugate pair: integrate theta out of the datum's
  likelihood times q_k).

**EM (a capability, optional).** Point estimates of theta for maximum-likelihood or MAP EM (the HMMs'
Baum–Welch): ``point_type`` (the parameters' NamedTuple), ``point_width``, ``point_view(params)``
(t(theta) at a point), ``point_m_step(stats)``, ``point_log_prior(params)``, ``init_point(key, num,
prepared)``, ``pseudo_stats(params)`` and ``expected_point(q)``; ``DirichletCategorical`` and
``NormalGammaDiagonal`` have them. A component without them still serves every Bayesian fit.

A new component is a subclass of :class:`Component` that defines ``prior(num)`` (the prior of
``num`` copies, batch shape (num, ...)), ``suff_stats(x)`` (s(x_n) per datum, one (N, ...) array per
natural parameter of the prior) and, where h(x) is not 1, ``log_base_measure(x)``. Everything else
has a generic default that the built-in components replace with faster or closed forms:
:class:`NormalGammaDiagonal` (diagonal Gaussian), :class:`NormalWishartFull` (full-covariance
Gaussian), :class:`BetaBernoulli` (products of Bernoullis), :class:`DirichletCategorical`
(categorical symbols) and :class:`GammaPoisson` (Poisson counts).
"""

from __future__ import annotations

import abc
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax._compile import setup_jit
from vijax._validate import ArgumentError, check_data_array, finite_values, float_dtype, is_tracer
from vijax.models._base import conjugate_posterior
from vijax.types import Array, PRNGKey
from vijax.models._pytree import PytreeModel

LOG_2PI = float(np.log(2.0 * np.pi))


def floor_log(v: Array) -> Array:
    """-inf -> a large finite negative number (log 0 from a sampled probability that underflowed),
    small enough that a few of them still sum to a finite number, so that 0 * floor = 0 in an
    E-step's matrix products instead of 0 * (-inf) = NaN."""
    return jnp.maximum(v, jnp.finfo(v.dtype).min / (4.0 * (v.shape[-1] + 1)))


def _flat_event(x: Array, event_ndim: int) -> Array:
    """``x`` with its leading (batch) axes flattened into one."""
    return jnp.reshape(x, (-1,) + tuple(x.shape[x.ndim - event_ndim :]))


class Component(PytreeModel):
    """The interface of a conjugate component (see the module docstring).

    Required: ``prior(num)``, ``suff_stats(x)``. Attributes: ``dtype`` (the float dtype of the prior;
    None: JAX's default), ``data_name`` (the name errors give the data, ``"x"``), ``event_ndim``
    (the dimensions of one datum: 1 for vectors, 0 for symbols).
    """

    data_name = "x"
    event_ndim = 1
    dtype: Any = None
    distinct_seeds = False  # whether initial_q seeds each copy at a distinct datum (a finite mixture needs N >= K)

    # -- required ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def prior(self, num: int):
        """The prior of ``num`` independent copies: an ``expfam`` family of batch shape (num, ...)."""

    @abc.abstractmethod
    def suff_stats(self, x: Array) -> tuple:
        """s(x_n) per datum: a tuple like the prior's natural parameters, each (N, ...) with the shape
        of one copy's parameter after the leading N."""

    # -- generic, replaceable ---------------------------------------------------------------------
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
        """E[log p(x_n | theta_k)] = <s(x_n), view_k> + log h(x_n), shape (N, K), at a view (E_q[t(theta)]
        of K copies, or t(theta) of a draw)."""
        s = self.suff_stats(x)
        total = sum(
            jnp.tensordot(si, vi, axes=(tuple(range(1, si.ndim)), tuple(range(1, vi.ndim)))) for si, vi in zip(s, view)
        )
        return total + self.log_base_measure(x).astype(total.dtype)[:, None]

    def log_predictive(self, q, x: Array) -> Array:
        """log p(x_n | q_k) = log h(x_n) + A(eta_k + s(x_n)) - A(eta_k), shape (N, K): each component's
        posterior (or prior) predictive density, theta integrated out."""
        eta = q.natural_params
        s = self.suff_stats(x)
        joined = tuple(e[None] + si.astype(e.dtype)[:, None] for e, si in zip(eta, s))
        a_post = type(q).from_natural(joined).log_normalizer()
        a_post = jnp.sum(a_post.reshape(a_post.shape[:2] + (-1,)), -1)
        a0 = q.log_normalizer()
        a0 = jnp.sum(a0.reshape(a0.shape[:1] + (-1,)), -1)
        return a_post - a0[None] + self.log_base_measure(x).astype(a_post.dtype)[:, None]

    def point_estimate(self, q):
        """A point estimate of each copy's parameters from q: the posterior mean of theta, read from
        the family's TFP distribution (``q.to_tfp().mean()``; a component replaces it where theta has
        several parts, as the Gaussians' (means, variances))."""
        return q.to_tfp().mean()

    def check_data(self, x, name: str | None = None) -> None:
        """Raises ValueError naming the data (``name``, default ``data_name``) for what the component
        cannot take (default: a finite numeric array with one axis more than a datum)."""
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
        """Raises ValueError naming the data when a local step's batch (possibly traced) does not have
        a datum's dimensions after its leading axis (default: ``event_ndim`` of them, the last one
        ``dim`` where the component has one)."""
        want = self._datum_shape()
        ok = x.ndim == 1 + self.event_ndim and all(w is None or w == s for w, s in zip(want, x.shape[1:]))
        if not ok:
            raise ValueError(f"{self.data_name} must have shape {self.data_shape}, got {x.shape}")

    def batch_checks(self, x, name: str | None = None) -> list:
        """The value checks of a step's batch, ``ValueCheck``s named ``batch <name>`` (default: finite
        values). They hold for any leading axes (an HMM's (B, T, ...) observations)."""
        return [finite_values(f"batch {name or self.data_name}", x)]

    def initial_q(self, key: PRNGKey, num: int, x: Array | None = None):
        """A starting q of ``num`` copies and the data count each starts with, ``(q, counts (num,))``.

        Default: each copy is the prior updated by one datum drawn at random (with replacement when
        there are fewer data than copies), each counting N / num data. Without data a component
        that cannot draw its own seeds raises ValueError: pass data to ``init_globals``."""
        if x is None:
            raise ValueError(f"{type(self).__name__} starts from data: pass the data to init_globals(key, x)")
        dt = float_dtype(self.dtype)
        x = self.prepare(x, dt) if self.event_ndim else jnp.asarray(x)
        n = x.shape[0]
        seeds = x[jax.random.choice(key, n, (num,), replace=n < num)]
        q = conjugate_posterior(self.prior(num), self.stats(seeds, jnp.eye(num, dtype=dt)))
        return q, jnp.full((num,), n / num, dt)


def _describe(value: Any) -> str:
    """What was given, for an error: a type, with its shape where it has one."""
    shape = getattr(value, "shape", None)
    kind = "one array" if isinstance(value, (jax.ShapeDtypeStruct, jax.Array, np.ndarray)) else type(value).__name__
    return kind + ("" if shape is None else f" of shape {tuple(shape)}")


@setup_jit
def _prior_values(component: Component):
    """The natural parameters of ``prior(1)`` and its ``is_valid``, one compiled program."""
    prior = component.prior(1)
    return prior.natural_params, prior.is_valid()


def _domain_problem(component: Component, family) -> str | None:
    """What is wrong with the natural parameters of a component's concrete prior ``family`` (NaN or
    infinite entries, or outside the family's domain, ``is_valid``), with the first such index;
    None if nothing (or traced)."""
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
    """The checks of a component a mixture or an HMM is built over: ``prior(1)`` an ``expfam``
    family of batch shape (1, ...) with finite natural parameters inside its domain.

    Raises:
      ValueError: naming ``name`` (``component``, ``emissions``) and the component's class.
    """
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


@setup_jit
def _statistics_rows(component: Component, x: Array):
    """Per datum (N,): the sum of s(x_n)'s entries (NaN or infinite where an entry is) and the
    number of entries outside the family's domain of the prior updated by s(x_n); whether the
    prior updated by every datum's statistics is finite, and in its domain. Float sums, not
    boolean reductions over rows, which XLA's CPU compiler takes about ten times longer to build."""
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


def _row_statistics(component: Component, x: Array):
    """s(x) of a few rows ``x``, in the prior's dtype (the statistics of a row found not finite)."""
    dtype = jax.eval_shape(lambda c: c.prior(1), component).dtype
    return jax.device_get(component.suff_stats(component.prepare(x, dtype)))


def check_statistics(component: Component, x, data_name: str, name: str) -> None:
    """The checks of the statistics s(x) of data ``x`` that passed the component's ``check_data``:
    a tuple like the prior's natural parameters, each (N, ...) with one copy's parameter shape
    after N (also of traced data, at trace time); and, for concrete data, finite in the prior's
    dtype, and the prior updated by any one datum's statistics, or by all of them, a proper
    distribution (inside its family's domain).

    Raises:
      ValueError: naming ``name`` (the component) for statistics of the wrong structure or NaN
        statistics of finite data; naming ``data_name`` for statistics that overflow the dtype
        (data of magnitude 1e20, whose squares are infinite in float32) or that leave the domain
        (data outside the likelihood's support).
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
    if bad.any() and any(np.isnan(np.asarray(si)).any() for si in _row_statistics(component, x[row : row + 1])):
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


__all__ = ["Component", "LOG_2PI", "check_component", "check_statistics", "floor_log"]
