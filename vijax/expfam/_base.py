"""The exponential-family interface and the helpers every family shares.

A family is an immutable dataclass registered as a pytree whose fields are its natural parameters ``eta`` (with
leading batch dimensions: a ``K x V`` array of Dirichlet parameters is ``K`` Dirichlets)::

    log p(x | eta) = <eta, t(x)> - A(eta) + log h(x)
    mean_params()  = grad A(eta) = E[t(x)]
    fisher_vp(v)   = hess A(eta) . v = Cov[t(x)] . v

Inner products sum over each natural parameter's event dimensions (``_event_ndims``), so every scalar
quantity (``log_normalizer``, ``entropy``, ``kl``) has the family's batch shape.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any, ClassVar, Protocol, Sequence, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import ArgumentError, is_tracer, protocol_members
from vijax.types import Array, PRNGKey, PyTree

Params = tuple  # natural or mean parameters: one array per natural-parameter field


class AbstractExpFamily(abc.ABC):
    """Abstract base of every exponential family: final subclasses are decorated with
    :func:`register_family`, their fields the natural parameters."""

    _event_ndims: ClassVar[tuple[int, ...]]  # trailing event dimensions of each field, e.g. (1,) for Dirichlet
    _sample_ndims: ClassVar[int]  # trailing dimensions of one draw x (0 for scalar families)

    @property
    def natural_params(self) -> Params:
        """The natural parameters ``eta`` as a tuple of arrays (one per field)."""
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self))

    @classmethod
    def from_natural(cls, natural_params: Sequence[Array]):
        """Builds the family from natural parameters (no validation: usable under ``jit``)."""
        return cls(*natural_params)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """The batch shape: the leading axes of the first natural parameter, before its event axes."""
        leaf, nd = self.natural_params[0], self._event_ndims[0]
        return tuple(leaf.shape[: leaf.ndim - nd])

    @property
    def dtype(self):
        """The floating dtype of the natural parameters (that of the first field)."""
        return self.natural_params[0].dtype

    @abc.abstractmethod
    def log_normalizer(self) -> Array:
        """A(eta), with the batch shape."""

    @abc.abstractmethod
    def mean_params(self) -> Params:
        """E[t(x)] = grad A(eta), in closed form; same structure as ``natural_params``."""

    @abc.abstractmethod
    def sufficient_stats(self, x: Array) -> Params:
        """t(x); ``x`` has shape ``sample_shape + batch_shape + event_shape``."""

    def log_base_measure(self, x: Array) -> Array:
        """log h(x). Default: h = 1 (families with another base measure override this)."""
        return jnp.zeros(jnp.shape(x)[: jnp.ndim(x) - self._sample_ndims], self.dtype)

    def expected_log_base_measure(self) -> Array:
        """E_q[log h(x)], with the batch shape (used by the generic entropy). Default: h = 1."""
        return jnp.zeros(self.batch_shape, self.dtype)

    @abc.abstractmethod
    def sample(self, key: PRNGKey, shape: Sequence[int] = ()) -> Array:
        """Draws ``shape + batch_shape + event_shape`` samples, reparameterized where possible."""

    @abc.abstractmethod
    def is_valid(self) -> Array:
        """Boolean array with the batch shape: are the natural parameters inside the domain?"""

    @abc.abstractmethod
    def to_tfp(self):
        """The matching ``tfp.substrates.jax`` distribution."""

    def fisher_vp(self, v: Params) -> Params:
        """hess A(eta) . v. Default: forward-mode derivative of ``mean_params`` (exact)."""
        return autodiff_fisher_vp(self, v)

    def inv_fisher_vp(self, v: Params) -> Params:
        """(hess A(eta))^-1 . v. Default: dense solve of the per-element Fisher matrix."""
        return dense_inv_fisher_vp(self, v)

    def outside_support(self, x: Array) -> Array:
        """Boolean array of shape ``sample_shape + batch_shape``: is x outside the family's support? NaN
        entries are not (they stay NaN in ``log_prob``). Default: nothing is."""
        x = jnp.asarray(x)
        return jnp.zeros(x.shape[: x.ndim - self._sample_ndims], bool)

    def _support_point(self, x: Array) -> Array:
        """A point of the support shaped like ``x``, which ``log_prob`` evaluates in place of an x outside
        it (so that no derivative meets a log of a negative). Default: ones."""
        return jnp.ones_like(x)

    def log_prob(self, x: Array) -> Array:
        """log p(x) = <eta, t(x)> - A(eta) + log h(x); -inf outside the support (as scipy.stats gives).
        ``x`` has shape ``sample_shape + batch_shape + event_shape`` (ValueError naming ``x`` otherwise)."""
        x = jnp.asarray(x)
        lead, batch = x.shape[: x.ndim - self._sample_ndims], self.batch_shape
        if len(lead) < len(batch) or any(b not in (1, n) for b, n in zip(batch, lead[len(lead) - len(batch) :])):
            raise ArgumentError(
                "x",
                f"x must have shape sample_shape + {batch} (the family's batch shape) + its event shape, got {x.shape}",
            )
        out = self.outside_support(x)
        wide = jnp.broadcast_to(out.reshape(out.shape + (1,) * self._sample_ndims), x.shape)
        x = jnp.where(wide, self._support_point(x), x)
        t = self.sufficient_stats(x)
        nat = tuple(jnp.broadcast_to(p, ti.shape) for p, ti in zip(self.natural_params, t))
        log_h = self.log_base_measure(x)
        lp = inner(self, nat, t) - jnp.broadcast_to(self.log_normalizer(), log_h.shape) + log_h
        return jnp.where(jnp.broadcast_to(out, lp.shape), jnp.asarray(-jnp.inf, lp.dtype), lp)

    def entropy(self) -> Array:
        """H = A(eta) - <eta, mu> - E[log h(x)]."""
        mu = self.mean_params()
        return self.log_normalizer() - inner(self, self.natural_params, mu) - self.expected_log_base_measure()

    def kl(self, other: "AbstractExpFamily") -> Array:
        """KL(self || other) within the family: the Bregman divergence of A,
        A(eta_other) - A(eta_self) - <eta_other - eta_self, mu_self>."""
        if type(other) is not type(self):
            raise TypeError(f"kl: other must be a {type(self).__name__}, got {type(other).__name__}")
        for mine, theirs in zip(self.natural_params, other.natural_params):
            try:
                np.broadcast_shapes(jnp.shape(mine), jnp.shape(theirs))
            except ValueError:  # named here, not by the subtraction's broadcasting error
                raise ArgumentError(
                    "other",
                    f"other: kl's other family has natural parameters of shape {jnp.shape(theirs)}, which do "
                    f"not broadcast with this {type(self).__name__}'s {jnp.shape(mine)}",
                ) from None
        diff = tuple(o - s for o, s in zip(other.natural_params, self.natural_params))
        return other.log_normalizer() - self.log_normalizer() - inner(self, diff, self.mean_params())

    def replace_natural(self, natural_params: Sequence[Array]):
        """A family of the same type with the given natural parameters (``from_natural``; no validation)."""
        return type(self).from_natural(tuple(natural_params))


def as_float(x: Any) -> Array:
    """``jnp.asarray`` that turns integer/bool input into the default float dtype."""
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.result_type(float))


# optional capabilities: Protocols a family class satisfies by defining their methods (``implements``)
@runtime_checkable
class HasMode(Protocol):
    """A family with a mode: MAP-EM (``vijax.inference.map_em``) runs its local step there."""

    def mode(self) -> Array:
        """The mode of the density, shaped like a draw (the boundary point where there is no interior mode)."""

    def mode_stats(self) -> Params:
        """t(x) at x = ``mode()``, structured like ``mean_params()``, finite at a boundary mode (``floored_log``)."""


@runtime_checkable
class Reparameterizable(Protocol):
    """A family sampled by inversion: SSVI and SSVI-A (``vijax.inference.ssvi``) draw from it."""

    def reparam_sample_and_stats(self, key: PRNGKey) -> tuple[Array, Params]:
        """One draw x = R(u; eta) and its statistics t(x) (structured like ``mean_params()``), both
        differentiable in eta at fixed u (Hoffman and Blei 2015, appendix B)."""


@runtime_checkable
class GammaBased(Protocol):
    """A family whose draw by inversion is a function of independent Gamma(a, 1) variables (Gamma, Beta,
    Dirichlet), drawn for a whole pytree by one ``standard_log_gamma`` call."""

    def log_gamma_shapes(self) -> Array:
        """The shapes a of the Gamma(a, 1) variables of one draw (any array shape)."""

    def from_log_gammas(self, log_g: Array) -> tuple[Array, Params]:
        """(x, t(x)) from log g, g ~ Gamma(``log_gamma_shapes()``, 1) (same shape)."""


@runtime_checkable
class NormalBased(Protocol):
    """A family whose draw is an affine map of independent standard normals (Normal, MultivariateNormal),
    drawn for a whole pytree by one ``standard_normal`` call."""

    def normal_shape(self) -> tuple[int, ...]:
        """The shape of the standard normals of one draw."""

    def from_normals(self, eps: Array) -> tuple[Array, Params]:
        """(x, t(x)) from standard normals ``eps`` of shape ``sample_shape + normal_shape()``."""


CAPABILITIES = {m: p for p in (HasMode, Reparameterizable, GammaBased, NormalBased) for m in protocol_members(p)}


def standard_normal(key: PRNGKey, shape: Sequence[int], dtype=None) -> Array:
    """``jax.random.normal(key, shape, dtype)``, drawn as a flat vector and reshaped (the same values)."""
    shape = tuple(shape)
    return jax.random.normal(key, (math.prod(shape),), dtype).reshape(shape)


def implements(family: Any, capability: str) -> bool:
    """Whether ``family`` (an instance or class) has the optional capability (a method of ``CAPABILITIES``).

    Examples:
        >>> from vijax.expfam import Categorical, Gamma
        >>> implements(Gamma, "reparam_sample_and_stats"), implements(Categorical, "mode")
        (True, False)
    """
    cls = family if isinstance(family, type) else type(family)
    return issubclass(cls, AbstractExpFamily) and issubclass(cls, CAPABILITIES[capability])


def broadcast_draw(fam: AbstractExpFamily, draw, key: PRNGKey, shape: Sequence[int], param: Array) -> Array:
    """``draw(key, param, shape)`` in the family's dtype, ``param`` broadcast to ``shape + batch_shape``."""
    shape = tuple(shape) + fam.batch_shape
    return draw(key, jnp.broadcast_to(param, shape), shape).astype(fam.dtype)


def not_integer(x: Array) -> Array:
    """Finite entries of ``x`` that are not whole numbers (outside the support of count families)."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return jnp.zeros(x.shape, bool)
    return jnp.isfinite(x) & (x != jnp.round(x))


def floored_log(x: Array) -> Array:
    """log(max(x, 0)) floored at the log of the dtype's smallest normal number (finite at x = 0)."""
    floor = jnp.log(jnp.finfo(x.dtype).tiny)
    return jnp.maximum(jnp.log(jnp.maximum(x, 0.0)), floor)


def register_family(cls):
    """Class decorator: a frozen dataclass registered as a pytree of its natural-parameter fields."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    if len(names) != len(cls._event_ndims):
        raise TypeError(f"{cls.__name__}: {len(names)} fields but _event_ndims has {len(cls._event_ndims)}")
    return jax.tree_util.register_dataclass(cls, data_fields=names, meta_fields=[])


def inner(fam: AbstractExpFamily, a: Params, b: Params) -> Array:
    """<a, b> summed over event dimensions of each natural-parameter field."""
    return sum(jnp.sum(x * y, axis=tuple(range(-nd, 0))) for x, y, nd in zip(a, b, fam._event_ndims))


def autodiff_fisher_vp(fam: AbstractExpFamily, v: Params) -> Params:
    """hess A . v by ``jax.jvp`` of ``mean_params``: the oracle for closed-form products."""
    cls = type(fam)
    return jax.jvp(lambda nat: cls.from_natural(nat).mean_params(), (fam.natural_params,), (tuple(v),))[1]


def dense_fisher(fam: AbstractExpFamily) -> Array:
    """The Fisher matrix hess A of every batch element, ``batch_shape + (d, d)``, from ``d`` Fisher-vector
    products (for small ``d``, the total natural dimension)."""
    batch, shapes, sizes = param_layout(fam)
    d = sum(sizes)
    cols = []
    for j in range(d):
        e = jnp.zeros(batch + (d,), fam.dtype).at[..., j].set(1.0)
        cols.append(flatten_params(fam.fisher_vp(unflatten_params(e, batch, shapes, sizes)), batch))
    return jnp.stack(cols, axis=-1)


def param_layout(fam: AbstractExpFamily):
    """(batch shape, per-field event shapes, per-field event sizes) of a family's parameters."""
    batch = fam.batch_shape
    shapes = [p.shape[len(batch) :] for p in fam.natural_params]
    return batch, shapes, [math.prod(s) for s in shapes]


def flatten_params(params: Params, batch) -> Array:
    return jnp.concatenate([jnp.reshape(p, batch + (-1,)) for p in params], axis=-1)


def unflatten_params(flat: Array, batch, shapes, sizes) -> Params:
    parts = jnp.split(flat, np.cumsum(sizes)[:-1], axis=-1)
    return tuple(jnp.reshape(p, batch + tuple(s)) for p, s in zip(parts, shapes))


def dense_inv_fisher_vp(fam: AbstractExpFamily, v: Params, extra: Any = 0.0) -> Params:
    """(hess A + ``extra``)^-1 v by a dense solve per batch element. O(d^3); for families of small d."""
    batch, shapes, sizes = param_layout(fam)
    fisher = dense_fisher(fam)
    x = jnp.linalg.solve(fisher + jnp.broadcast_to(extra, fisher.shape), flatten_params(v, batch)[..., None])[..., 0]
    return unflatten_params(x, batch, shapes, sizes)


def is_family(x: Any) -> bool:
    """Whether ``x`` is a family instance (an ``AbstractExpFamily``): the ``is_leaf`` of the ``tree_*`` maps."""
    return isinstance(x, AbstractExpFamily)


def check_in_domain(name: str, q: PyTree) -> None:
    """Raises a ValueError naming ``name`` and the entry's path where a family of the pytree ``q`` has
    non-finite or out-of-domain natural parameters, or another float leaf is not finite (traced: skipped)."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(q, is_leaf=is_family)[0]:
        where = f"{name}{jax.tree_util.keystr(path)}"
        arrays = leaf.natural_params if is_family(leaf) else (leaf,)
        if any(is_tracer(a) for a in arrays) or not all(
            jnp.issubdtype(jnp.result_type(a), jnp.inexact) for a in arrays
        ):
            continue  # traced, or not float values (a count, a typed PRNG key): nothing to check
        if not all(np.all(np.isfinite(np.asarray(a))) for a in arrays):
            raise ArgumentError(name, f"{where} has NaN or infinite entries")
        if is_family(leaf) and not bool(np.all(np.asarray(jax.tree_util.tree_map(np.asarray, leaf).is_valid()))):
            raise ArgumentError(name, f"{where}: a {type(leaf).__name__} with natural parameters outside its domain")


def tree_natural_params(q: PyTree) -> PyTree:
    """Natural parameters of every family in a pytree of families (same tree structure)."""
    return jax.tree_util.tree_map(lambda f: f.natural_params, q, is_leaf=is_family)


def tree_mean_params(q: PyTree) -> PyTree:
    """Mean parameters E[t] of every family in a pytree of families."""
    return jax.tree_util.tree_map(lambda f: f.mean_params(), q, is_leaf=is_family)


def tree_from_natural(like: PyTree, natural: PyTree) -> PyTree:
    """Rebuilds a pytree of families shaped like ``like`` from natural parameters."""
    return jax.tree_util.tree_map(lambda f, n: f.replace_natural(n), like, natural, is_leaf=is_family)


def tree_kl(q: PyTree, p: PyTree) -> Array:
    """Sum over families and batch elements of KL(q || p)."""
    kls = jax.tree_util.tree_map(lambda a, b: jnp.sum(a.kl(b)), q, p, is_leaf=is_family)
    return sum(jax.tree_util.tree_leaves(kls))


def tree_inner(a: PyTree, b: PyTree) -> Array:
    """Total inner product of two pytrees of arrays (everything summed)."""
    return sum(jnp.sum(x * y) for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


def tree_is_valid(q: PyTree) -> PyTree:
    """Per-family batch masks of domain validity."""
    return jax.tree_util.tree_map(lambda f: f.is_valid(), q, is_leaf=is_family)
