"""The finite approximation to a Dirichlet-process mixture of Bernoullis (Hoffman & Blei 2015, §4.2).

Generative process, with K components, total concentration alpha and Beta(a, b) priors::

    pi ~ Dirichlet(alpha / K 1_K),   phi_kd ~ Beta(a, b),
    z_n ~ Categorical(pi),           y_nd | z_n = k ~ Bernoulli(phi_kd),   y_n in {0, 1}^D.

As K grows this approaches a DP(alpha) mixture (Ishwaran and Zarepour, 2002). In the
exponential-family form of ``vijax.models._base`` the complete-data likelihood is

    log p(y_n, z_n | pi, phi) = sum_k z_nk ( log pi_k + sum_d y_nd log phi_kd + (1 - y_nd) log(1 - phi_kd) ),

linear in t(beta) = ((log pi,), (log phi, log(1 - phi))), the sufficient statistics of the prior
(Dirichlet, Beta); log h = 0. A datum contributes s(y_n, z_n) = ((z_n,), (z_n y_n^T, z_n (1 - y_n)^T)).

Besides the model this module holds the plug-in predictive p(y | pi, phi)
(:func:`mixture_log_prob`) and the MAP assignments (:func:`map_assignments`) that the §4.2
experiment's metrics build on: the number of components a fit uses and KL(p(y | pi, phi) ||
p(y | pi_hat, phi_hat)) are in ``vijax.metrics`` (``components_used``, ``bernoulli_mixture_kl``,
``bernoulli_mixture_kl_exact``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax._validate import values_in_set
from vijax._validate import (
    check_choice,
    check_data_array,
    check_allocation,
    check_float_dtype,
    check_int,
    check_positive_fields,
    float_dtype,
    set_static_floats,
)
from vijax.models._base import LocalResult, conjugate_posterior, entropy_of_probs
from vijax.types import Array, PRNGKey


def check_binary(name: str, y: Any) -> None:
    """Raises ValueError naming ``name`` unless every entry of concrete ``y`` is 0 or 1 (tracers pass)."""
    if isinstance(y, jax.core.Tracer):
        return
    a = np.asarray(y)
    if a.dtype == bool:
        return
    if not np.issubdtype(a.dtype, np.number):
        raise ValueError(f"{name} must be numeric binary data (0/1), got dtype {a.dtype}")
    bad = ~((a == 0) | (a == 1))
    if np.any(bad):
        raise ValueError(f"{name} must hold only 0 and 1 (binary data), got {a[bad].ravel()[0]!r}")


def _floor_log(v: Array) -> Array:
    """-inf -> a large finite negative number (log 0 from a sampled pi_k or phi_kd that underflowed),
    small enough that D + 1 of them still sum to a finite number, so that 0 * floor = 0 in the
    E-step's matrix products instead of 0 * (-inf) = NaN."""
    dt = v.dtype
    return jnp.maximum(v, jnp.finfo(dt).min / (4.0 * (v.shape[-1] + 1)))


@dataclasses.dataclass(frozen=True)
class BernoulliMixture:
    """Finite (K-component) Dirichlet-process mixture of D-dimensional Bernoulli vectors.

    Mean-field q(pi) = Dirichlet, q(phi_kd) = Beta, q(z_n) = Categorical(r_n). The globals view
    a local step takes is structured like the prior's mean parameters,
    ``((E[log pi],), (E[log phi], E[log(1 - phi)]))`` with shapes (K,), (K, D), (K, D): either
    E_q[t(beta)] (CAVI, SVI) or t(beta) of a sample beta ~ q (SSVI, Hoffman & Blei 2015, Algorithm 1).

    The local step (``local_methods``)::

        log r_nk = E[log pi_k] + sum_d y_nd E[log phi_kd] + (1 - y_nd) E[log(1 - phi_kd)] - log Z_n,

    ``"meanfield"`` returns r; ``"exact"`` is the same formula at a sample's t(beta): with one z
    per datum q(z_n) is unrestricted, so the optimal q(z_n | beta) *is* the exact conditional
    p(z_n | y_n, beta) (Hoffman & Blei 2015, §2.5) and both names give the same numbers; ``"gibbs"`` samples
    z_n ~ Categorical(r_n) and returns one-hot statistics (an unbiased estimate of the exact ones;
    it needs a key). The statistics are ((sum_n r_n,), (R^T Y, R^T (1 - Y))) and ``local_terms`` is
    sum_n H[r_n] (log h = 0), so ``conjugate_elbo`` is the mean-field ELBO.

    Args:
      num_components: K >= 1 (the truncation level).
      dim: D >= 1.
      alpha: DP concentration (> 0); each weight has Dirichlet parameter alpha / K.
      a: Beta prior parameter of each phi_kd for the exponent of phi (> 0).
      b: Beta prior parameter for the exponent of 1 - phi (> 0).
      init_pseudo_count: weight of the data in the initial q(phi), see :meth:`init_globals` (> 0).
      dtype: float dtype of the prior and the initial q (default: JAX's default float).

    Examples:
        >>> model = BernoulliMixture(num_components=4, dim=3, alpha=2.0)
        >>> [f.batch_shape for f in model.prior()]
        [(), (4, 3)]
        >>> y = jnp.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
        >>> view = expfam.tree_mean_params(model.prior())
        >>> model.local_step(view, y, None).local_params.shape
        (2, 4)
    """

    num_components: int
    dim: int
    alpha: float = 1.0
    a: float = 1.0
    b: float = 1.0
    init_pseudo_count: float = 1.0
    dtype: Any = None
    local_methods = ("meanfield", "exact", "gibbs")

    def __post_init__(self):
        check_int("num_components", self.num_components)
        check_int("dim", self.dim)
        check_positive_fields(self, ("alpha", "a", "b", "init_pseudo_count"), scalar=True)
        set_static_floats(self, ("alpha", "a", "b", "init_pseudo_count"))  # hashable, static under jit
        check_float_dtype(self.dtype)
        check_allocation("num_components * dim", self.num_components * self.dim, float_dtype(self.dtype).itemsize)

    # -- the model ------------------------------------------------------------------------------
    def prior(self) -> tuple[expfam.Dirichlet, expfam.Beta]:
        """(Dirichlet(alpha / K 1_K), Beta(a, b) with batch shape (K, D))."""
        dt = float_dtype(self.dtype)
        k, d = self.num_components, self.dim
        return (
            expfam.Dirichlet.from_concentration(jnp.full((k,), self.alpha / k, dt)),
            expfam.Beta.from_concentrations(jnp.full((k, d), self.a, dt), jnp.full((k, d), self.b, dt)),
        )

    def batch_checks(self, y) -> list:
        """The value check of a step's batch: binary data (0 or 1)."""
        return [values_in_set("batch y", y, (0, 1))]

    def check_data(self, y) -> None:
        """``y`` must be an (N, D) array of 0s and 1s; ValueError naming ``y`` otherwise."""
        if not isinstance(y, jax.core.Tracer) and np.asarray(y).dtype == bool:
            y = np.asarray(y, float)
        check_data_array("y", y, ndim=2, last_dim=self.dim)
        check_binary("y", y)

    def stats(self, y: Array, resp: Array):
        """The statistics ((sum_n r_n,), (R^T Y, R^T (1 - Y))) of responsibilities ``resp`` (N, K)."""
        n_k = jnp.sum(resp, 0)
        ones = resp.T @ y
        return (n_k,), (ones, n_k[:, None] - ones)

    def posterior_from_responsibilities(self, y: Array, resp: Array):
        """The coordinate-optimal q(beta) for given responsibilities ``resp`` (N, K) (the M-step)."""
        return conjugate_posterior(self.prior(), self.stats(y, resp))

    def init_globals(self, key: PRNGKey, y: Array | None = None):
        """A random starting q(beta).

        With data: each component k is seeded by one distinct datum y_(k) chosen at random (with
        replacement when N < K), q(phi_kd) = Beta(a + c y_(k)d, b + c (1 - y_(k)d)) with
        c = ``init_pseudo_count``, and q(pi) = Dirichlet(alpha / K + N / K), as if each component
        held N / K data. Without data: the same with y_(k) drawn uniformly from {0, 1}^D.
        """
        dt = float_dtype(self.dtype)
        k, d = self.num_components, self.dim
        if y is None:
            seeds = jax.random.bernoulli(key, 0.5, (k, d)).astype(dt)
            n = float(k)
        else:
            y = jnp.asarray(y, dt)
            n = y.shape[0]
            seeds = y[jax.random.choice(key, n, (k,), replace=n < k)]
        c = self.init_pseudo_count
        return (
            expfam.Dirichlet.from_natural((jnp.full((k,), self.alpha / k + n / k - 1.0, dt),)),
            expfam.Beta.from_natural((self.a - 1.0 + c * seeds, self.b - 1.0 + c * (1.0 - seeds))),
        )

    def log_resp(self, globals_view, y: Array) -> Array:
        """log r_nk (normalized over k) at a globals view (see the class docstring), shape (N, K)."""
        (e_log_pi,), beta_view = globals_view
        logits = _floor_log(e_log_pi)[None, :] + self.component_log_lik(beta_view, y)
        return jax.nn.log_softmax(logits, axis=-1)

    @staticmethod
    def component_log_lik(beta_view, y: Array) -> Array:
        """sum_d y_nd E[log phi_kd] + (1 - y_nd) E[log(1 - phi_kd)], shape (N, K), at a Beta view
        (E[log phi], E[log(1 - phi)]), each (K, D)."""
        e_log_phi, e_log_1m = beta_view
        return y @ _floor_log(e_log_phi).T + (1.0 - y) @ _floor_log(e_log_1m).T

    def local_step(self, globals_view, y: Array, key: PRNGKey | None = None, method: str = "meanfield") -> LocalResult:
        """The local step ``method`` for the batch ``y`` (S, D); see the class docstring.

        Returns:
          ``LocalResult(suff_stats, local_terms, local_params=r)`` with r (S, K) the
          responsibilities (for ``"gibbs"``: the one-hot samples).
        """
        check_choice("method", method, self.local_methods)
        if y.ndim != 2 or y.shape[1] != self.dim:
            raise ValueError(f"y must have shape (N, {self.dim}), got {y.shape}")
        if method == "gibbs" and key is None:
            raise ValueError("local_step(method='gibbs') needs a PRNG key")
        y = y.astype(globals_view[1][0].dtype)
        log_r = self.log_resp(globals_view, y)
        r = jnp.exp(log_r)
        local_terms = jnp.sum(entropy_of_probs(r))
        if method == "gibbs":
            z = jax.random.categorical(key, log_r, axis=-1)
            r = jax.nn.one_hot(z, self.num_components, dtype=r.dtype)
        return LocalResult(self.stats(y, r), local_terms, r)

    # -- point estimates and the predictive -----------------------------------------------------
    @staticmethod
    def point_estimates(q) -> tuple[Array, Array]:
        """(E_q[pi] (K,), E_q[phi] (K, D)), the posterior means of a fitted q.

        Because q factorizes, the variational predictive of a new y equals the plug-in
        p(y | E[pi], E[phi]) exactly: sum_k E[pi_k] prod_d E[phi_kd^y_d (1 - phi_kd)^(1 - y_d)].
        """
        dirichlet, beta = q
        alpha = dirichlet.concentration
        a, b = beta.concentration1, beta.concentration0
        return alpha / jnp.sum(alpha, -1, keepdims=True), a / (a + b)

    def log_predictive(self, q, y: Array) -> Array:
        """log p(y_n | q) per row of ``y``: :func:`mixture_log_prob` at :meth:`point_estimates`."""
        w, p = self.point_estimates(q)
        return mixture_log_prob(w, p, y)


# -- the experiment's quantities ------------------------------------------------------------------
def _component_log_lik(probs: Array, y: Array) -> Array:
    """log p(y_n | z_n = k, phi) = sum_d y log phi + (1 - y) log(1 - phi), shape (N, K); exact at
    phi = 0 or 1 (0 log 0 = 0)."""
    y = y.astype(probs.dtype)
    log_p = _floor_log(jnp.log(probs))
    log_q = _floor_log(jnp.log1p(-probs))
    return y @ log_p.T + (1.0 - y) @ log_q.T


def mixture_log_prob(weights: Array, probs: Array, y: Array) -> Array:
    """log p(y_n | pi, phi) = log sum_k pi_k prod_d phi_kd^y_nd (1 - phi_kd)^(1 - y_nd), shape (N,).

    Args:
      weights: pi, shape (K,), on the simplex (zeros allowed).
      probs: phi, shape (K, D), in [0, 1].
      y: binary data (N, D).
    """
    log_w = jnp.where(weights > 0, jnp.log(jnp.where(weights > 0, weights, 1.0)), -jnp.inf)
    return jax.nn.logsumexp(log_w[None, :] + _component_log_lik(probs, y), axis=-1)


def map_assignments(weights: Array, probs: Array, y: Array) -> Array:
    """argmax_k p(z_n = k | y_n, pi, phi) per datum, shape (N,) int32."""
    log_w = jnp.where(weights > 0, jnp.log(jnp.where(weights > 0, weights, 1.0)), -jnp.inf)
    return jnp.argmax(log_w[None, :] + _component_log_lik(probs, y), axis=-1).astype(jnp.int32)


__all__ = ["BernoulliMixture", "check_binary", "map_assignments", "mixture_log_prob"]
