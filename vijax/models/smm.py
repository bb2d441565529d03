"""The simple mixture model (SMM) of the tutorial *Raise your ELBO* (2019, §SMM), fitted by EM.

A datum is a symbol of a finite alphabet, P(x = w | z = k) = eta_kw with eta a stochastic matrix
(K, V), and pi_k = P(z = k). The E-step is Bayes' theorem, r_ik ∝ pi_k eta_{k x_i}, and the M-step
(the tutorial's eq. 2.7 and 2.8) sets pi_k = (1/m) sum_i r_ik and eta_kw ∝ sum_i r_ik 1[x_i = w].
With ``concentration`` c > 1, pi and each row of eta get a symmetric Dirichlet(c) prior and the M-step
is MAP: pi_k ∝ N_k + c - 1, eta_kw ∝ N_kw + c - 1; an empty component under c = 1 gets pi_k = 0 and a
uniform row. pLSA1 is this model with x_i a (document, word) pair (``vijax.models.PLSA``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from vijax._validate import check_allocation, check_float_dtype, check_int, check_scalar
from vijax._validate import float_dtype, ids_in_range
from vijax.models._base import check_index_array, program_argument
from vijax.models._components import map_rows
from vijax.types import Array, PRNGKey
from vijax.models._pytree import PytreeModel


class SMMParams(NamedTuple):
    """``weights`` pi, P(z = k), shape (K,); ``probs`` eta, P(x = w | z = k), shape (K, V)."""

    weights: Array
    probs: Array


class SMMStats(NamedTuple):
    """The expected counts of an E-step: ``component`` N_k (K,) and ``symbol`` N_kw (K, V)."""

    component: Array
    symbol: Array


@dataclasses.dataclass(frozen=True, eq=False)
class SMM(PytreeModel):
    """The tutorial's simple mixture model: K components over V symbols, fitted by ``vijax.inference.em``.

    Args:
      num_components: K >= 1.
      num_symbols: V >= 1, the size of the alphabet; data are integers in [0, V).
      concentration: c >= 1, the Dirichlet(c) prior of pi and of eta's rows (MAP-EM; 1: maximum likelihood).
      dtype: the float dtype of the parameters (None: JAX's default float).

    Examples:
        >>> import jax, numpy as np
        >>> from vijax.inference import em
        >>> x = np.array([0, 0, 1, 0, 2, 2, 2, 1, 2, 2])
        >>> model = SMM(num_components=2, num_symbols=3)
        >>> alg = em(model)
        >>> state = alg.init(jax.random.PRNGKey(0), x)
        >>> for t in range(20):
        ...     state, info = alg.step(jax.random.PRNGKey(t), state, x)
        >>> state.q_global.probs.shape
        (2, 3)
    """

    num_components: int
    num_symbols: int
    _: dataclasses.KW_ONLY
    concentration: float = 1.0
    dtype: Any = None

    def __post_init__(self):
        check_int("num_components", self.num_components)
        check_int("num_symbols", self.num_symbols)
        check_scalar("concentration", self.concentration, low=1.0, include_low=True)
        check_float_dtype(self.dtype)
        check_allocation(
            "num_components * num_symbols", self.num_components * self.num_symbols, float_dtype(self.dtype).itemsize
        )

    def batch_checks(self, batch) -> list:
        """The value checks of a step's batch: symbols in [0, V)."""
        return [ids_in_range("batch symbol", batch, self.num_symbols)]

    def check_data(self, batch, name: str = "x") -> None:
        """Raises ValueError naming ``name`` unless a non-empty 1-D integer array of symbols in [0, V)."""
        check_index_array(name, batch, self.num_symbols, "symbols", f"num_symbols={self.num_symbols}")

    def init_params(self, key: PRNGKey, batch=None) -> SMMParams:
        """eta's rows drawn from Dirichlet(1) (breaking the symmetry between components); pi uniform."""
        dt = float_dtype(self.dtype)
        k = self.num_components
        e = jax.random.exponential(key, (k, self.num_symbols), dt)  # normalized: Dirichlet(1) rows
        return SMMParams(jnp.full((k,), 1.0 / k, dt), e / jnp.sum(e, -1, keepdims=True))

    def responsibilities(self, params: SMMParams, x: Array) -> tuple[Array, Array]:
        """(r (m, K), log p(x_i | theta) (m,)): each datum's posterior over components and its log-likelihood."""
        logits = jnp.log(params.weights)[None, :] + jnp.log(params.probs).T[x]  # (m, K)
        log_px = jax.scipy.special.logsumexp(logits, axis=-1)
        return jnp.exp(logits - log_px[:, None]), log_px

    def e_step(self, params: SMMParams, batch) -> tuple[SMMStats, Array]:
        """(N_k, N_kw) under p(z | x, theta), and log p(x | theta) summed over the data."""
        x = jnp.asarray(batch)
        r, log_px = self.responsibilities(params, x)
        symbol = jax.ops.segment_sum(r, x, num_segments=self.num_symbols).T  # (K, V)
        return SMMStats(jnp.sum(r, 0), symbol), jnp.sum(log_px)

    def m_step(self, stats: SMMStats) -> SMMParams:
        """Eq. 2.7 and 2.8 (MAP with the Dirichlet(c) priors when c > 1)."""
        c = self.concentration
        return SMMParams(map_rows(stats.component, c), map_rows(stats.symbol, c))

    def log_prior(self, params: SMMParams) -> Array:
        """log p(theta) up to a constant: (c - 1)(sum_k log pi_k + sum_kw log eta_kw); 0 for c = 1."""
        if self.concentration == 1.0:
            return jnp.zeros((), params.weights.dtype)
        c1 = self.concentration - 1.0
        return c1 * (jnp.sum(jnp.log(params.weights)) + jnp.sum(jnp.log(params.probs)))

    def log_predictive(self, params: SMMParams, x: Array) -> Array:
        """(m,) log p(x_i | theta) = log sum_k pi_k eta_{k x_i} of held-out symbols."""
        return self._log_predictive(params, program_argument(x))

    @jax.jit
    def _log_predictive(self, params: SMMParams, x: Array) -> Array:
        return self.responsibilities(params, x)[1]


__all__ = ["SMM", "SMMParams", "SMMStats"]
