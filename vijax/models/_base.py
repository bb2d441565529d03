"""How models meet algorithms: Protocols and the shared conjugate ELBO.

A conditionally conjugate model (Blei et al. 2017, §4.2; Hoffman & Blei 2015, §2.1) has globals beta with prior in an
exponential family with sufficient statistics t(beta) and natural parameters eta, and per-datum
locals z_n whose complete-data likelihood is linear in t(beta)::

    log p(x_n, z_n | beta) = <s(x_n, z_n), t(beta)> + log h(x_n, z_n).

Given q(z), the expected log joint is <sum_n E_q[s_n], E_q[t(beta)]> + sum_n E_q[log h_n], so the
optimal q(beta) has natural parameters eta + sum_n E_q[s_n] (Blei et al. 2017, eq. 36, 41) and the ELBO is

    L = <sbar, E_q[t(beta)]> + sum_n (E_q[log h_n] + H[q(z_n)]) - KL(q(beta) || p(beta)).

``local_step`` returns ``sbar`` (``suff_stats``) and the second sum (``local_terms``).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax._validate import ArgumentError, check_data_dtype, enforce_value_checks, finite_nonnegative, ids_in_range
from vijax._validate import implements, is_tracer
from vijax.types import Array, PRNGKey, PyTree


class LocalResult(NamedTuple):
    """What a local step returns for a batch.

    Attributes:
      suff_stats: sum over the batch of E_q[s(x_n, z_n)], structured like the prior's natural parameters.
      local_terms: scalar, sum over the batch of E_q[log h(x_n, z_n)] + H[q(z_n)].
      local_params: the local variational parameters (e.g. responsibilities), for diagnostics.
    """

    suff_stats: PyTree
    local_terms: Array
    local_params: PyTree


@runtime_checkable
class BatchChecked(Protocol):
    """How a model declares the checks of a step's batch (run by :func:`check_step_batch`): ``check_data``, of
    shapes and dtypes only (it runs on abstract values), and ``batch_checks``, the ``ValueCheck``s of the values."""

    def check_data(self, batch: PyTree) -> None:
        """Raises an error naming the problem for a batch whose shapes or dtypes the model cannot take."""

    def batch_checks(self, batch: PyTree) -> list:
        """The value checks of a step's batch (``ValueCheck``s; possibly none)."""


_CONCRETE_ONLY = (
    jax.errors.TracerArrayConversionError,
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerBoolConversionError,
    jax.errors.TracerIntegerConversionError,
)


def bow_batch_checks(batch: Any, vocab_size: int) -> list:
    """The value checks of a bag-of-words batch ``(word_ids, counts)`` over V = ``vocab_size`` words: ids in
    [0, V), counts finite and >= 0; none where the corpus vouches for them (``checked_vocab_size() <= V``)."""
    checked = getattr(batch, "checked_vocab_size", None)
    bound = checked() if callable(checked) else None
    if bound is not None and bound <= vocab_size:
        return []
    ids, counts = batch
    return [ids_in_range("batch word id", ids, vocab_size), finite_nonnegative("batch count", counts)]


def check_bow_data(batch: Any, vocab_size: int, integer_counts: bool = False) -> None:
    """Raises ValueError naming the problem unless ``batch`` is a BowBatch of integer ``word_ids`` in
    [0, ``vocab_size``) and finite ``counts`` >= 0 (integer-valued with ``integer_counts``), both (S, L), S >= 1
    (shapes and dtypes also of tracers)."""
    if not (hasattr(batch, "word_ids") and hasattr(batch, "counts")):
        raise ArgumentError("batch", f"batch must be a BowBatch (word_ids, counts), got {type(batch).__name__}")
    ids, counts = batch.word_ids, batch.counts
    check_data_dtype("counts", counts)
    if np.ndim(ids) != 2 or np.ndim(counts) != 2:
        raise ValueError(f"word_ids and counts must be 2-D (S, L), got shapes {np.shape(ids)} and {np.shape(counts)}")
    if np.shape(ids) != np.shape(counts):
        raise ValueError(f"word_ids and counts must have the same shape, got {np.shape(ids)} and {np.shape(counts)}")
    if np.shape(ids)[0] < 1:
        raise ArgumentError("batch", "batch holds no documents (S = 0)")
    if not jnp.issubdtype(jnp.result_type(ids), jnp.integer):
        raise ValueError(f"word_ids must have an integer dtype, got {jnp.result_type(ids)}")
    dtype = jnp.result_type(counts)
    if not jnp.issubdtype(dtype, jnp.number) or jnp.issubdtype(dtype, jnp.complexfloating):
        raise ValueError(f"counts must be real numbers, got {dtype}")
    if isinstance(ids, jax.core.Tracer) or isinstance(counts, jax.core.Tracer):
        return
    a, c = np.asarray(ids), np.asarray(counts, dtype=float)
    if a.size and (a.min() < 0 or a.max() >= vocab_size):
        raise ValueError(f"word_ids must lie in [0, vocab_size={vocab_size}), got range [{a.min()}, {a.max()}]")
    if not np.all(np.isfinite(c)):
        raise ValueError("counts must be finite (no NaN or inf)")
    if np.any(c < 0):
        raise ValueError(f"counts must be >= 0, got min {c.min()!r}")
    if integer_counts and np.any(c != np.round(c)):
        raise ValueError("counts must be integer-valued (fractional counts are not token counts)")


def check_index_array(name: str, x: Any, high: int, what: str, bound: str | None = None) -> None:
    """Raises ValueError naming ``name`` unless ``x`` is a non-empty 1-D integer array of ``what`` whose concrete
    values lie in [0, ``high``) (written ``bound`` in the error); shapes and dtypes only while tracing."""
    check_data_dtype(name, x)
    tracing = is_tracer(x) or isinstance(x, jax.ShapeDtypeStruct)
    a = x if tracing else np.asarray(x)
    if a.ndim != 1 or a.shape[0] < 1 or not np.issubdtype(a.dtype, np.integer):
        raise ArgumentError(
            name, f"{name} must be a 1-D array of integer {what} with at least one, got {a.dtype} {a.shape}"
        )
    if not tracing and (a.min() < 0 or a.max() >= high):
        shown = high if bound is None else bound
        raise ArgumentError(name, f"{name} must hold {what} in [0, {shown}), got values in [{a.min()}, {a.max()}]")


def check_features(x: Any, y: Any, dim: int):
    """Raises ValueError naming ``x`` or ``y`` unless ``x`` is finite numeric (M, ``dim``) and ``y`` (M,); returns
    (x, y) as NumPy arrays (None while tracing)."""
    check_data_dtype("x", x)
    check_data_dtype("y", y)
    if np.ndim(x) != 2 or np.shape(x)[1] != dim:
        raise ArgumentError("x", f"x must have shape (M, {dim}), got {np.shape(x)}")
    if np.shape(y) != np.shape(x)[:1]:
        raise ArgumentError("y", f"y must have shape ({np.shape(x)[0]},) to match x, got {np.shape(y)}")
    if is_tracer(x) or is_tracer(y):
        return None
    x, y = np.asarray(x), np.asarray(y)
    if not np.issubdtype(x.dtype, np.number) or not np.all(np.isfinite(x)):
        raise ArgumentError("x", "x (features) must be numeric and finite (no NaN or inf)")
    return x, y


def describe_batch(batch: Any) -> str:
    """What a batch is, for an error: its container and each array's dtype and shape."""
    leaves = jax.tree_util.tree_leaves(batch)
    show = lambda a: f"{getattr(a, 'dtype', type(a).__name__)} {tuple(np.shape(a))}"  # noqa: E731
    fields = getattr(batch, "_fields", None)
    if fields is not None and len(fields) == len(batch):
        parts = [f"{f} {show(v)}" for f, v in zip(fields, batch)]
    else:
        parts = [show(a) for a in leaves[:4]] + (["..."] if len(leaves) > 4 else [])
    return f"a {type(batch).__name__} of {len(leaves)} array(s) ({', '.join(parts)})"


def check_one_array(model: Any, x: Any, takes: str) -> None:
    """Raises ValueError naming ``batch`` when ``x`` is a container of arrays or None, not the one array
    ``model`` takes (``takes``)."""
    container = (
        x is None
        or isinstance(x, (tuple, dict))
        or (isinstance(x, list) and any(hasattr(a, "shape") for a in jax.tree_util.tree_leaves(x)))
    )
    if container:
        given = "None" if x is None else describe_batch(x)
        raise ArgumentError("batch", f"batch is not what {type(model).__name__} takes ({takes}): got {given}")


def check_step_batch(model: Any, batch: PyTree, count: Any = None) -> None:
    """The checks every public ``step`` runs on its batch: a pytree of numeric arrays; for a :class:`BatchChecked`
    model its ``check_data`` on the abstract values and its ``batch_checks`` (step number ``count + 1``).

    Raises:
      TypeError: naming the model when its ``check_data`` reads values.
    """
    for leaf in jax.tree_util.tree_leaves(batch):  # also for a plain log-density's batch
        kind = getattr(getattr(leaf, "dtype", None), "kind", None)
        if isinstance(leaf, (str, bytes)) or kind in ("U", "S", "O"):  # (ml_dtypes such as bfloat16 are "V")
            what = type(leaf).__name__ if kind is None else f"an array of dtype {leaf.dtype}"
            raise ArgumentError("batch", f"batch must be a pytree of numeric arrays, got {what}")
    if not implements(model, BatchChecked):
        return
    try:
        jax.eval_shape(lambda b: (model.check_data(b), jnp.zeros(()))[1], batch)
    except _CONCRETE_ONLY as e:
        raise TypeError(
            f"{type(model).__name__}.check_data must check shapes and dtypes only: a step runs it on the "
            "batch's abstract values (jax.eval_shape), concrete or traced; put value checks in "
            f"batch_checks ({type(e).__name__})"
        ) from None
    except TypeError as e:
        raise ArgumentError(
            "batch", f"batch must be a pytree of numeric arrays, got {type(batch).__name__} ({e})"
        ) from None
    enforce_value_checks(lambda: model.batch_checks(batch), count)


@runtime_checkable
class ConditionallyConjugateModel(BatchChecked, Protocol):
    """What CAVI, SVI and SSVI need from a model (optionally :class:`HyperparameterModel`, :class:`PaddedBatchModel`)."""

    @property
    def local_methods(self) -> tuple[str, ...]:
        """The names of the local-step methods ``local_step`` takes as ``method``."""

    def prior(self) -> PyTree:
        """The prior p(beta) as a pytree of ``AbstractExpFamily``."""

    def init_globals(self, key: PRNGKey, batch: PyTree = None) -> PyTree:
        """A starting q(beta) (same structure as ``prior()``)."""

    def local_step(self, globals_view: PyTree, batch: PyTree, key: PRNGKey, method: str = "meanfield") -> LocalResult:
        """Local variational update given E_q[t(beta)] (or a sample's t(beta))."""


@runtime_checkable
class HyperparameterModel(ConditionallyConjugateModel, Protocol):
    """A conditionally conjugate model whose positive scalar hyperparameters h (LDA's alpha and eta) SVI can
    learn (``svi(..., hyper_step=...)``; Hoffman and Blei 2015, §2.6). ``prior`` and ``local_step`` also take
    ``hyper=`` (a dict of scalar arrays; None = the fixed values); ``hyper_objective`` is the ELBO's
    h-dependent part, the batch's terms times ``scale``, on which SVI takes damped Newton steps.
    """

    def hyperparameters(self) -> dict:
        """The fixed values of h, the start of the updates."""

    def hyper_objective(self, hyper: dict, q_global: PyTree, local: LocalResult, scale=1.0) -> Array:
        """The ELBO's h-dependent terms, concave in each h, differentiable by ``jax.grad``."""


@runtime_checkable
class PaddedBatchModel(Protocol):
    """A model whose batches may hold padding rows (LDA's empty documents): SVI, SSVI and MAP-EM scale a
    batch by N over ``present_rows(batch).sum()``."""

    def present_rows(self, batch: PyTree) -> Array:
        """(S,) bool: the rows of ``batch`` that hold a data point."""


@runtime_checkable
class BlockedGlobalsModel(Protocol):
    """A model whose globals interact (a product of two globals' statistics in the log-joint, as x ~ N(mu,
    1/tau)): CAVI updates the blocks in turn."""

    def global_blocks(self, batch: PyTree) -> tuple:
        """Blocks of globals that do not interact, each a pytree of bools structured like q(beta)."""


def conjugate_elbo(prior: PyTree, q_global: PyTree, local: LocalResult, scale=1.0) -> Array:
    """L = scale * (<sbar, E_q[t(beta)]> + local_terms) - KL(q(beta) || p(beta)); ``scale`` = N / S
    makes a minibatch's local result an unbiased full-data estimate."""
    data_term, kl = conjugate_elbo_terms(prior, q_global, local, scale)
    return data_term - kl


def conjugate_elbo_terms(prior: PyTree, q_global: PyTree, local: LocalResult, scale=1.0) -> tuple[Array, Array]:
    """The two terms of :func:`conjugate_elbo`, L = data_term - kl."""
    expected_t = expfam.tree_mean_params(q_global)
    data_term = expfam.tree_inner(local.suff_stats, expected_t) + local.local_terms
    return scale * data_term, expfam.tree_kl(q_global, prior)


def conjugate_posterior(prior: PyTree, suff_stats: PyTree, scale=1.0) -> PyTree:
    """The coordinate-optimal q(beta): natural parameters eta + scale * sbar (Blei et al. 2017, eq. 41)."""
    nat = jax.tree_util.tree_map(lambda e, s: e + scale * s, expfam.tree_natural_params(prior), suff_stats)
    return expfam.tree_from_natural(prior, nat)


def program_argument(x) -> Array:
    """``x`` as a JAX array as it is, anything else (a nested list) as a NumPy array."""
    return x if isinstance(x, jax.Array) else np.asarray(x)


def rows_with_data(batch) -> Array:
    """(S,) bool: the rows of a bag-of-words batch that hold a token (LDA's ``present_rows``)."""
    return jnp.any(jnp.asarray(batch.counts) != 0, axis=-1)


def entropy_of_probs(probs: Array, axis: int = -1) -> Array:
    """H of categorical rows, 0 log 0 = 0."""
    return -jnp.sum(jnp.where(probs > 0, probs * jnp.log(jnp.where(probs > 0, probs, 1.0)), 0.0), axis)


@runtime_checkable
class EMModel(BatchChecked, Protocol):
    """What ``vijax.inference.em`` needs: a point estimate theta, an E-step and an M-step (Dempster, Laird
    and Rubin 1977; *Raise your ELBO*, §EM). ``log_prior`` is 0 for maximum likelihood."""

    def init_params(self, key: PRNGKey, batch: PyTree = None) -> PyTree:
        """A starting theta."""

    def e_step(self, params: PyTree, batch: PyTree) -> tuple[PyTree, Array]:
        """(expected sufficient statistics, log p(batch | params))."""

    def m_step(self, stats: PyTree) -> PyTree:
        """The maximizing theta given the expected statistics."""

    def log_prior(self, params: PyTree) -> Array:
        """log p(theta) up to a constant; 0 for maximum likelihood."""
