"""Bernoulli(p) on {0, 1}: t(x) = x, eta = logit(p)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from vijax._validate import ArgumentError, check_finite, check_positive
from vijax.expfam._base import AbstractExpFamily, as_float, broadcast_draw, register_family
from vijax.types import tfp_jax


@register_family
class Bernoulli(AbstractExpFamily):
    """Bernoulli distribution with success probability ``p``, in natural (logit) form.

    p(x) = p^x (1-p)^(1-x) = exp(eta x - A(eta));  A(eta) = log(1 + e^eta) (softplus),
    grad A = sigmoid(eta) = p,  hess A = p (1 - p).

    Examples:
        >>> q = Bernoulli.from_probs(0.25)
        >>> round(float(q.mean_params()[0]), 6)
        0.25
    """

    eta: jax.Array  # logit(p) = log(p / (1 - p))
    _event_ndims = (0,)
    _sample_ndims = 0

    @classmethod
    def from_logits(cls, logits) -> "Bernoulli":
        """Raises ``ValueError`` naming ``logits`` when they are not finite."""
        check_finite("logits", logits)
        return cls(as_float(logits))

    @classmethod
    def from_probs(cls, probs) -> "Bernoulli":
        """From p in the open interval (0, 1) (the endpoints have infinite logits).

        Raises:
            ValueError: naming ``probs`` when it is not finite, or not inside (0, 1).
        """
        check_positive("probs", probs)
        if not isinstance(probs, jax.core.Tracer) and not np.all(np.asarray(probs) < 1):
            raise ArgumentError("probs", f"probs must be < 1, got max {np.asarray(probs).max()!r}")
        p = as_float(probs)
        return cls(jnp.log(p) - jnp.log1p(-p))

    @property
    def logits(self) -> jax.Array:
        """eta = log(p / (1 - p))."""
        return self.eta

    @property
    def probs(self) -> jax.Array:
        """p = sigmoid(eta)."""
        return jax.nn.sigmoid(self.eta)

    def log_normalizer(self):
        return jax.nn.softplus(self.eta)

    def mean_params(self):
        return (jax.nn.sigmoid(self.eta),)

    def fisher_vp(self, v):
        (v,) = v
        return (jax.nn.sigmoid(self.eta) * jax.nn.sigmoid(-self.eta) * v,)

    def inv_fisher_vp(self, v):
        # 1 / (p (1 - p)) = (1 + e^eta)(1 + e^-eta) = 2 (1 + cosh eta): no division by a small p.
        (v,) = v
        return (2.0 * (1.0 + jnp.cosh(self.eta)) * v,)

    def sufficient_stats(self, x):
        return (jnp.asarray(x).astype(self.dtype),)

    def sample(self, key, shape=()):
        """Draws 0./1. of shape ``shape + batch_shape`` (not reparameterizable)."""
        return broadcast_draw(self, jax.random.bernoulli, key, shape, self.probs)

    def is_valid(self):
        return jnp.isfinite(self.eta)

    def outside_support(self, x):
        """A value other than 0 and 1 (NaN: not outside)."""
        x = jnp.asarray(x)
        return (x != 0) & (x != 1) & ~jnp.isnan(x)

    def _support_point(self, x):
        return jnp.zeros_like(x)

    def to_tfp(self):
        tfp = tfp_jax()
        return tfp.distributions.Bernoulli(logits=self.eta, dtype=self.dtype)
