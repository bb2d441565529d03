"""The finite approximation to a Dirichlet-process mixture of Bernoullis (Hoffman & Blei 2015, §4.2)::

    pi ~ Dirichlet(alpha / K 1_K),   phi_kd ~ Beta(a, b),
    z_n ~ Categorical(pi),           y_nd | z_n = k ~ Bernoulli(phi_kd),   y_n in {0, 1}^D,

which approaches a DP(alpha) mixture as K grows (Ishwaran and Zarepour, 2002); also the plug-in
predictive p(y | pi, phi) and the MAP assignments that ``vijax.metrics`` builds on.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from vijax.models._components import BetaBernoulli, bernoulli_log_lik, check_binary
from vijax.models.mixture import DirichletWeights, Mixture, check_mixture_sizes
from vijax.types import Array


class BernoulliMixture(Mixture):
    """Finite (K-component) Dirichlet-process mixture of D-dimensional Bernoulli vectors: a
    :class:`~vijax.models.Mixture` of :class:`~vijax.models.BetaBernoulli` components with
    ``DirichletWeights(K, alpha / K)``, whose local step is (Hoffman & Blei 2015, §2.5, §4.2)::

        log r_nk = E[log pi_k] + sum_d y_nd E[log phi_kd] + (1 - y_nd) E[log(1 - phi_kd)] - log Z_n.

    Args:
      num_components: K >= 1 (the truncation level).
      dim: D >= 1.
      alpha: DP concentration (> 0); each weight has Dirichlet parameter alpha / K.
      a: the first parameter of the Beta(a, b) prior of each phi_kd (> 0).
      b: its second (> 0).
      init_pseudo_count: the weight of a seed datum in the initial q(phi) (> 0).
      dtype: float dtype of the prior and the initial q (default: JAX's default float).

    Examples:
        >>> model = BernoulliMixture(num_components=4, dim=3, alpha=2.0)
        >>> [f.batch_shape for f in model.prior()]
        [(), (4, 3)]
        >>> y = jnp.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
        >>> from vijax import expfam
        >>> model.local_step(expfam.tree_mean_params(model.prior()), y, None).local_params.shape
        (2, 4)
    """

    def __init__(
        self,
        num_components: int,
        dim: int,
        alpha: float = 1.0,
        a: float = 1.0,
        b: float = 1.0,
        init_pseudo_count: float = 1.0,
        dtype: Any = None,
    ):
        check_mixture_sizes(num_components, dim, ("alpha", alpha), dtype)
        component = BetaBernoulli(dim, a=a, b=b, init_pseudo_count=init_pseudo_count, dtype=dtype)
        super().__init__(component, DirichletWeights(num_components, float(alpha) / num_components))
        self._alpha = float(alpha)

    alpha = property(lambda self: self._alpha, doc="alpha: the DP concentration; each weight's is alpha / K.")
    dim = property(lambda self: self.component.dim, doc="D: the number of binary features of a datum.")
    a = property(lambda self: self.component.a, doc="a: the Beta(a, b) prior's parameter for the exponent of phi_kd.")
    b = property(lambda self: self.component.b, doc="b: the Beta(a, b) prior's parameter for that of 1 - phi_kd.")
    init_pseudo_count = property(lambda self: self.component.init_pseudo_count, doc="c: a seed datum's weight.")

    @staticmethod
    def component_log_lik(beta_view, y: Array) -> Array:
        """sum_d y_nd E[log phi_kd] + (1 - y_nd) E[log(1 - phi_kd)], (N, K), at a Beta view, each (K, D)."""
        return BetaBernoulli.expected_log_lik(None, beta_view, y)


def _log_weights(weights: Array) -> Array:
    return jnp.where(weights > 0, jnp.log(jnp.where(weights > 0, weights, 1.0)), -jnp.inf)


def mixture_log_prob(weights: Array, probs: Array, y: Array) -> Array:
    """log p(y_n | pi, phi) = log sum_k pi_k prod_d phi_kd^y_nd (1 - phi_kd)^(1 - y_nd), shape (N,), for pi (K,)
    on the simplex, phi (K, D) in [0, 1] and binary y (N, D)."""
    return jax.nn.logsumexp(_log_weights(weights)[None, :] + bernoulli_log_lik(probs, y), axis=-1)


def map_assignments(weights: Array, probs: Array, y: Array) -> Array:
    """argmax_k p(z_n = k | y_n, pi, phi) per datum, shape (N,) int32."""
    return jnp.argmax(_log_weights(weights)[None, :] + bernoulli_log_lik(probs, y), axis=-1).astype(jnp.int32)


__all__ = ["BernoulliMixture", "check_binary", "map_assignments", "mixture_log_prob"]
