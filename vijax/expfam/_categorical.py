"""Categorical(p) over K outcomes: t(x) = one_hot(x), eta = logits (overparameterized)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp
import numpy as np

from vijax._validate import ArgumentError, check_finite, check_positive
from vijax.expfam._base import AbstractExpFamily, as_float, not_integer, register_family
from vijax.types import tfp_jax


@register_family
class Categorical(AbstractExpFamily):
    """Categorical distribution over ``{0, ..., K-1}`` with logits ``eta`` (last axis = event).

    p(x = k) = exp(eta_k - A(eta)),  A(eta) = logsumexp(eta),  grad A = softmax(eta) = p,
    hess A = diag(p) - p p^T.

    The parameterization is overcomplete (the Fisher's null space is span(1)), so ``inv_fisher_vp`` is
    the Moore-Penrose pseudo-inverse. Draws are int32 indices (as in TFP).

    Examples:
        >>> q = Categorical.from_probs([0.2, 0.3, 0.5])
        >>> q.num_categories
        3
    """

    eta: jax.Array  # logits, shape batch + (K,)
    _event_ndims = (1,)
    _sample_ndims = 0

    @classmethod
    def from_logits(cls, logits) -> "Categorical":
        """Raises ``ValueError`` naming ``logits`` when they are not finite or have no event axis."""
        check_finite("logits", logits)
        logits = as_float(logits)
        if logits.ndim < 1:
            raise ArgumentError("logits", f"logits must have at least one (event) axis, got shape {logits.shape}")
        return cls(logits)

    @classmethod
    def from_probs(cls, probs) -> "Categorical":
        """From strictly positive probabilities summing to one (to 1e-4) along the last axis, renormalized.

        Raises:
            ValueError: naming ``probs`` when not finite, not > 0, or not summing to one.
        """
        check_positive("probs", probs)
        p = as_float(probs)
        if p.ndim < 1:
            raise ArgumentError("probs", f"probs must have at least one (event) axis, got shape {p.shape}")
        if not isinstance(probs, jax.core.Tracer):
            sums = np.sum(np.asarray(p, np.float64), -1)
            if not np.allclose(sums, 1.0, rtol=0.0, atol=1e-4):
                raise ArgumentError("probs", f"probs must sum to 1 along the last axis, got sums {sums!r}")
        log_p = jnp.log(p)
        return cls(log_p - logsumexp(log_p, -1, keepdims=True))

    @property
    def logits(self) -> jax.Array:
        """The logits ``eta`` (the natural parameter itself), shape batch + (K,)."""
        return self.eta

    @property
    def probs(self) -> jax.Array:
        """softmax(eta), shape batch + (K,)."""
        return jax.nn.softmax(self.eta, -1)

    @property
    def num_categories(self) -> int:
        """K, the number of outcomes (the size of the last axis)."""
        return self.eta.shape[-1]

    def log_normalizer(self):
        return logsumexp(self.eta, -1)

    def mean_params(self):
        return (jax.nn.softmax(self.eta, -1),)

    def fisher_vp(self, v):
        (v,) = v
        p = jax.nn.softmax(self.eta, -1)
        pv = p * v
        return (pv - p * jnp.sum(pv, -1, keepdims=True),)

    def inv_fisher_vp(self, v):
        """F^+ v = P (diag(p)^-1 P v), P = I - 1 1^T / K: for u = P v, F (u / p) = u, and P (u / p) is the
        minimum-norm solution (1 / p_k = exp(A - eta_k), without division)."""
        (v,) = v
        u = v - jnp.mean(v, -1, keepdims=True)
        inv_p = jnp.exp(logsumexp(self.eta, -1, keepdims=True) - self.eta)
        w = u * inv_p
        return (w - jnp.mean(w, -1, keepdims=True),)

    def sufficient_stats(self, x):
        x = jnp.asarray(x)
        if not jnp.issubdtype(x.dtype, jnp.floating):
            return (jax.nn.one_hot(x, self.num_categories, dtype=self.dtype),)
        # a whole-number float index counts as its integer (log_prob sends the others to -inf); NaN stays NaN
        t = jax.nn.one_hot(x.astype(jnp.int32), self.num_categories, dtype=self.dtype)
        return (jnp.where(jnp.isnan(x)[..., None], jnp.asarray(jnp.nan, self.dtype), t),)

    def sample(self, key, shape=()):
        """int32 draws of shape ``shape + batch_shape`` (Gumbel-max; not reparameterizable)."""
        shape = tuple(shape) + self.batch_shape
        logits = jnp.broadcast_to(self.eta, shape + (self.num_categories,))
        return jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)

    def is_valid(self):
        return jnp.all(jnp.isfinite(self.eta), -1)

    def outside_support(self, x):
        """An index outside 0, ..., K - 1 or not a whole number (one-hot would make it a row of
        zeros, log p = -A: a finite value for a category that does not exist)."""
        x = jnp.asarray(x)
        return (x < 0) | (x > self.num_categories - 1) | not_integer(x)

    def _support_point(self, x):
        return jnp.zeros_like(x)

    def to_tfp(self):
        tfp = tfp_jax()
        return tfp.distributions.Categorical(logits=self.eta)
