"""How models meet algorithms: Protocols and the shared conjugate ELBO.

A conditionally conjugate model (seed 002 §4.2; seed 000 §2.1) has globals beta with prior in an
exponential family with sufficient statistics t(beta) and natural parameters eta, and per-datum
locals z_n whose complete-data likelihood is linear in t(beta)::

    log p(x_n, z_n | beta) = <s(x_n, z_n), t(beta)> + log h(x_n, z_n).

Given q(z), the expected log joint is <sum_n E_q[s_n], E_q[t(beta)]> + sum_n E_q[log h_n], so the
optimal q(beta) has natural parameters eta + sum_n E_q[s_n] (seed 002 eq. 36, 41) and the ELBO is

    L = <sbar, E_q[t(beta)]> + sum_n (E_q[log h_n] + H[q(z_n)]) - KL(q(beta) || p(beta)).

``local_step`` returns ``sbar`` (``suff_stats``) and the second sum (``local_terms``).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax.types import Array, PRNGKey, PyTree


class LocalResult(NamedTuple):
    """What a local step returns for a batch.

    Attributes:
      suff_stats: sum over the batch of E_q[s(x_n, z_n)], structured like the natural parameters
        of the prior's pytree of families.
      local_terms: scalar, sum over the batch of E_q[log h(x_n, z_n)] + H[q(z_n)].
      local_params: the local variational parameters (e.g. responsibilities), for diagnostics.
    """

    suff_stats: PyTree
    local_terms: Array
    local_params: PyTree


@runtime_checkable
class ConditionallyConjugateModel(Protocol):
    """What CAVI, SVI and SSVI need from a model.

    Optional, for hyperparameter updates (``svi(..., hyper_step=...)``; seed 000 §2.6): a model
    with positive scalar hyperparameters h (LDA's alpha and eta) may also offer

    - ``hyperparameters() -> dict[str, float]``: their fixed values, the start of the updates;
    - a keyword ``hyper`` (a dict of scalar arrays, possibly traced; None = the fixed values) to
      ``prior(hyper=None)`` and ``local_step(globals_view, batch, key, method, hyper=None)``;
    - ``hyper_objective(hyper, q_global, local, scale) -> scalar``: the terms of the ELBO that
      depend on h, with q(beta) and the locals of ``local`` held fixed, the batch's terms
      multiplied by ``scale`` (N / S), differentiable in ``hyper`` by ``jax.grad``. SVI takes
      damped Newton steps on it and needs it concave in each h (true of any h that is a natural
      parameter of the prior, whose second derivative is minus the prior's Fisher information).

    Models without hyperparameters (the GMMs) offer none of these and are called without ``hyper``.
    """

    local_methods: tuple[str, ...]

    def prior(self) -> PyTree:
        """The prior p(beta) as a pytree of ``AbstractExpFamily``."""

    def init_globals(self, key: PRNGKey, batch: PyTree = None) -> PyTree:
        """A starting q(beta) (same structure as ``prior()``)."""

    def local_step(self, globals_view: PyTree, batch: PyTree, key: PRNGKey, method: str = "meanfield") -> LocalResult:
        """Local variational update given E_q[t(beta)] (or a sample's t(beta))."""

    def check_data(self, batch: PyTree) -> None:
        """Raises ValueError naming the problem for data the model cannot take."""


@runtime_checkable
class HyperparameterModel(ConditionallyConjugateModel, Protocol):
    """A conditionally conjugate model whose positive scalar hyperparameters h SVI can learn
    (``svi(..., hyper_step=...)``; Hoffman and Blei 2015, §2.6): see the notes of
    :class:`ConditionallyConjugateModel`. ``prior`` and ``local_step`` also take ``hyper=``."""

    def hyperparameters(self) -> dict:
        """The fixed values of h, the start of the updates."""

    def hyper_objective(self, hyper: dict, q_global: PyTree, local: LocalResult, scale=1.0) -> Array:
        """The ELBO's h-dependent terms, concave in each h, differentiable by ``jax.grad``."""


def conjugate_elbo(prior: PyTree, q_global: PyTree, local: LocalResult, scale=1.0) -> Array:
    """L = scale * (<sbar, E_q[t(beta)]> + local_terms) - KL(q(beta) || p(beta)).

    ``scale`` = N / S turns a minibatch's local result into an unbiased full-data estimate.
    """
    expected_t = expfam.tree_mean_params(q_global)
    data_term = expfam.tree_inner(local.suff_stats, expected_t) + local.local_terms
    return scale * data_term - expfam.tree_kl(q_global, prior)


def conjugate_posterior(prior: PyTree, suff_stats: PyTree, scale=1.0) -> PyTree:
    """The coordinate-optimal q(beta): natural parameters eta + scale * sbar."""
    nat = jax.tree_util.tree_map(lambda e, s: e + scale * s, expfam.tree_natural_params(prior), suff_stats)
    return expfam.tree_from_natural(prior, nat)


def check_int(name: str, value: Any, minimum: int = 1) -> None:
    """Raises ValueError naming ``name`` unless ``value`` is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def set_static_floats(obj: Any, names: tuple[str, ...]) -> None:
    """Replaces the fields ``names`` of a frozen dataclass by plain Python floats (hashable, so the
    model can be a static argument under ``jit``); raises ValueError naming a field that is not a
    real scalar."""
    for name in names:
        value = getattr(obj, name)
        try:
            if isinstance(value, (bool, str)) or np.ndim(value) != 0:
                raise TypeError
            value = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a real scalar, got {value!r}") from None
        object.__setattr__(obj, name, value)


def check_positive_hyper(name: str, value: Any) -> None:
    """Raises ValueError naming ``name`` unless every entry of ``value`` is finite and > 0."""
    a = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(a)) or not np.all(a > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")


def check_data_array(name: str, x: Any, ndim: int, last_dim: int | None = None) -> None:
    """Shape and finiteness checks of concrete data (tracers pass: checks run before compilation)."""
    if isinstance(x, jax.core.Tracer):
        return
    a = np.asarray(x)
    if a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {a.shape}")
    if last_dim is not None and a.shape[-1] != last_dim:
        raise ValueError(f"{name} must have {last_dim} columns (the model's dim), got shape {a.shape}")
    if a.shape[0] < 1:
        raise ValueError(f"{name} is empty")
    if not np.issubdtype(a.dtype, np.number) or not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be numeric and finite (no NaN or inf)")


def float_dtype(dtype):
    """``dtype``, or JAX's default float dtype when None."""
    return jnp.dtype(dtype) if dtype is not None else jnp.result_type(float)


def check_float_dtype(dtype) -> None:
    """Raises ValueError naming ``dtype`` unless it is None or a floating dtype."""
    if dtype is None:
        return
    try:
        ok = jnp.issubdtype(jnp.dtype(dtype), jnp.floating)
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"dtype must be a float dtype, got {dtype!r}")


def check_method(method: str, allowed: tuple[str, ...], model_name: str) -> None:
    if method not in allowed:
        raise ValueError(f"local step method {method!r} is not offered by {model_name}; choose one of {allowed}")


def entropy_of_probs(probs: Array, axis: int = -1) -> Array:
    """H of categorical rows, 0 log 0 = 0."""
    return -jnp.sum(jnp.where(probs > 0, probs * jnp.log(jnp.where(probs > 0, probs, 1.0)), 0.0), axis)
