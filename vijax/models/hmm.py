"""Hidden Markov models with categorical or diagonal-Gaussian emissions: maximum-likelihood (MAP) fits by
Baum–Welch and Bayesian fits by CAVI/SVI/SSVI.

    z_0 ~ Categorical(pi),  z_t | z_{t-1} ~ Categorical(A[z_{t-1}]),  x_t | z_t = k ~ p(x | theta_k),

with p(x | theta_k) Categorical(B[k]) (``CategoricalHMM``) or prod_d N(mu_kd, sigma^2_kd)
(``GaussianHMM``). Rabiner (1989), A tutorial on hidden Markov models, §III; the tutorial *Raise
your ELBO*, §HMM. Exact inference (forward-backward, posterior marginals, Viterbi) is in log space,
with ``lax.scan`` or, for long sequences, ``lax.associative_scan`` (``schedule="parallel"``), exact
also where a state trails the others by more than float's range (block-diagonal or near-deterministic
chains on long sequences; ``_hmm_inference``).

Data: an array of observations, (B, T) ints or (B, T, D) floats, or an ``HMMData(obs, lengths)`` for
sequences of unequal length padded to T (steps t >= lengths[b] are ignored; their values may be
anything finite).

Two ways to fit:

- **EM** (``vijax.inference.em``; the ``EMModel`` protocol): ``e_step`` is forward-backward, whose
  expected counts give Baum–Welch's M-step (Rabiner 1989, eq. 40a-c, 53-54 for Gaussians; Dempster et
  al. 1977). With Dirichlet concentrations c > 1 on pi, the rows of A (and of B) the M-step is MAP,
  row <- (counts + c - 1)_+ / sum; c = 1 (the default) is maximum likelihood.
- **Bayesian** (``cavi``, ``svi``, ``ssvi``...; the ``ConditionallyConjugateModel`` protocol):
  q(pi) q(A) q(theta) q(z_{1:T}) with Dirichlet q(pi) and q(A[i]), Dirichlet q(B[k]) or
  Normal-Gamma q(mu_kd, tau_kd), and q(z) a Markov chain (the structured mean field of MacKay 1997
  and Beal 2003, ch. 3). The local step is forward-backward with pi~ = exp E[log pi], A~ = exp E[log A]
  and b~_t(k) = exp E[log p(x_t | theta_k)]; log Z~ of that tilted chain is E[log p(x, z | beta)] +
  H[q(z)], which gives the ELBO's local terms exactly. Hoffman and Blei (2015, §2) name HMMs among the
  models SSVI serves.

Parameters of the Gaussian model are means and variances; EM floors the variances at
``min_variance``. Every method taking ``HMMParams`` (``log_likelihood``, ``posterior``,
``pairwise_marginals``, ``viterbi``, ``e_step``, so also an EM step, ``log_prior``) checks them
(``check_params``): a ValueError naming the field, the value and where (e.g. ``params.transition_matrix
row sum 1.8 at [1] is not 1``), from the compiled computation when traced. The models compute in
float32 or float64 (``dtype``); parameters of the other one are cast to it, half precision is refused.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax._validate import (
    check_allocation,
    check_choice,
    check_data_dtype,
    check_float_dtype,
    check_int,
    check_key,
    check_positive_fields,
    check_positive_scalar,
    check_scalar,
    enforce_value_checks,
    finite_values,
    float_dtype,
    ids_in_range,
    is_tracer,
)
from vijax.models import _hmm_inference as inference
from vijax.models._hmm_params import CategoricalEmissions, GaussianEmissions, HMMData, HMMParams, param_checks
from vijax.models._base import LocalResult, conjugate_posterior
from vijax.types import Array, PRNGKey

_LOG_2PI = float(np.log(2.0 * np.pi))


def as_data(data) -> HMMData:
    """``data`` as ``HMMData`` (full lengths for a bare array)."""
    if isinstance(data, HMMData):
        return data
    if isinstance(data, tuple) and len(data) == 2:
        return HMMData(*data)
    obs = jnp.asarray(data)
    if obs.ndim < 2:
        raise ValueError(f"obs must have a batch and a time axis, (B, T) or (B, T, D), got shape {obs.shape}")
    return HMMData(obs, jnp.full((obs.shape[0],), obs.shape[1], jnp.int32))


@dataclasses.dataclass(frozen=True)
class _HMM:
    """Shared by both emission kinds; see the module docstring."""

    num_states: int
    _: dataclasses.KW_ONLY
    initial_concentration: float = 1.0
    transition_concentration: float = 1.0
    schedule: str = "sequential"
    dtype: Any = None
    local_methods = ("meanfield",)

    def _check_common(self):
        check_int("num_states", self.num_states)
        check_positive_fields(self, ("initial_concentration", "transition_concentration"), scalar=True)
        check_choice("schedule", self.schedule, inference.SCHEDULES)
        check_float_dtype(self.dtype)

    # -- data ---------------------------------------------------------------------------------------
    def check_data(self, data) -> None:
        """Raises ValueError naming the problem: obs's shape/dtype/values, lengths outside [1, T]."""
        data = as_data(data)
        if is_tracer(data.obs) or is_tracer(data.lengths):
            self._check_obs_shape(data.obs)
            if data.lengths.shape != data.obs.shape[:1] or not jnp.issubdtype(data.lengths.dtype, jnp.integer):
                raise ValueError(
                    f"lengths must be integers of shape ({data.obs.shape[0]},), got "
                    f"{data.lengths.dtype} {data.lengths.shape}"
                )
            return
        obs, lengths = np.asarray(data.obs), np.asarray(data.lengths)
        self._check_obs_shape(obs)
        b, t = obs.shape[:2]
        if b < 1 or t < 1:
            raise ValueError(f"obs must hold at least one sequence of at least one step, got shape {obs.shape}")
        if lengths.shape != (b,) or not np.issubdtype(lengths.dtype, np.integer):
            raise ValueError(f"lengths must be integers of shape ({b},), got {lengths.dtype} {lengths.shape}")
        if np.any(lengths < 1) or np.any(lengths > t):
            raise ValueError(
                f"lengths must be in [1, T={t}] (T: obs's padded length), got min {lengths.min()}, max {lengths.max()}"
            )
        self._check_obs_values(obs[np.arange(t)[None, :] < lengths[:, None]])

    def batch_checks(self, data) -> list:
        """The value checks of a step's batch: lengths in [1, T]; the observations at every unpadded
        step (symbols in range, or finite values)."""
        data = as_data(data)
        t = data.obs.shape[1]
        mask = jnp.arange(t)[None, :] < data.lengths[:, None]
        obs_check = self._obs_value_check(data.obs)
        if obs_check.bad.ndim == 3:
            mask = mask[..., None]
        return [ids_in_range("batch length", data.lengths, t + 1, low=1), obs_check._replace(bad=obs_check.bad & mask)]

    def _prepare(self, data) -> HMMData:
        data = as_data(data)
        mask = jnp.arange(data.obs.shape[1])[None, :] < data.lengths[:, None]
        return HMMData(self._clean_obs(data.obs, mask), data.lengths), mask

    # -- inference (a batch at a time) ---------------------------------------------------------------
    def _posterior(self, log_init, log_trans, log_em, lengths) -> inference.Posterior:
        return inference.posterior(log_init, log_trans, log_em, lengths, self.schedule)

    def _local(self, view, data):
        """Forward-backward at a view ((log pi,), (log A,), emission view): (stats, log Z (B,), gamma)."""
        data, mask = self._prepare(data)
        (log_init,), (log_trans,), em_view = view
        post = self._posterior(log_init, log_trans, self._log_emissions(em_view, data.obs), data.lengths)
        stats = (
            (jnp.sum(post.marginals[:, 0], 0),),
            (jnp.sum(post.transition_counts, 0),),
            self._emission_stats(data.obs, post.marginals),
        )
        return stats, post.log_likelihood, post.marginals

    def _view(self, params: HMMParams):
        """The plug-in statistics t(beta) of point parameters (cast to the model's dtype), in the layout
        of ``prior()``'s mean params."""
        dt = float_dtype(self.dtype)
        params = jax.tree_util.tree_map(lambda a: jnp.asarray(a).astype(dt), params)
        return (
            (jnp.log(params.initial_probs),),
            (jnp.log(params.transition_matrix),),
            self._emission_view(params.emissions),
        )

    def check_params(self, params: HMMParams) -> None:
        """Raises ValueError naming the field (``params.transition_matrix``...): not an ``HMMParams``,
        emissions of the other kind, half-precision or non-real dtypes, shapes that do not fit the model,
        and, at once for concrete parameters or from the compiled computation for traced ones (the
        value checks of ``vijax._validate``; off under ``value_checks(False)``), negative or non-finite
        probabilities, rows that do not sum to 1 (within 1e-4), non-finite means, variances that are
        not finite and > 0."""
        enforce_value_checks(param_checks(params, self.num_states, self._emissions_type, self._emission_width))

    def _checked(self, params: HMMParams, data) -> HMMData:
        self.check_params(params)
        self.check_data(data)
        return as_data(data)

    def log_likelihood(self, params: HMMParams, data) -> Array:
        """log p(x_b | params) per sequence, (B,) (Rabiner 1989, eq. 21)."""
        return _jit_posterior(self, params, self._checked(params, data)).log_likelihood

    def posterior(self, params: HMMParams, data) -> inference.Posterior:
        """Per-sequence log-likelihood (B,), marginals p(z_t | x) (B, T, K) and expected transition counts
        (B, K, K) (Rabiner 1989, eq. 27, 38)."""
        return _jit_posterior(self, params, self._checked(params, data))

    def pairwise_marginals(self, params: HMMParams, data) -> Array:
        """p(z_{t-1} = i, z_t = j | x) for t = 1..T-1, (B, T-1, K, K); zero at padded steps."""
        return _jit_pairwise(self, params, self._checked(params, data))

    def viterbi(self, params: HMMParams, data) -> tuple[Array, Array]:
        """Most probable paths (B, T) (-1 at padded steps) and their log p(x, path) (B,) (Rabiner 1989, §III-B)."""
        return _jit_viterbi(self, params, self._checked(params, data))

    # -- EM (vijax.models.EMModel) -------------------------------------------------------------------
    def e_step(self, params: HMMParams, data):
        """Expected counts under p(z | x, params) and log p(x | params) summed over the batch.
        ``params`` are checked (``check_params``), so also the estimate of an EM step; the batch is
        the step's to check (``check_data``, ``batch_checks``)."""
        self.check_params(params)
        stats, log_lik, _ = self._local(self._view(params), data)
        return stats, jnp.sum(log_lik)

    def m_step(self, stats) -> HMMParams:
        """Baum–Welch re-estimation (Rabiner 1989, eq. 40a-b), MAP under the Dirichlet concentrations."""
        (n0,), (nt,), em_stats = stats
        return HMMParams(
            _map_rows(n0, self.initial_concentration),
            _map_rows(nt, self.transition_concentration),
            self._emission_m_step(em_stats),
        )

    def log_prior(self, params: HMMParams) -> Array:
        """sum (c - 1) log p over pi and the rows of A (and B): log p(params) up to a constant (0 for c = 1).
        ``params`` are checked (``check_params``)."""
        self.check_params(params)
        params = jax.tree_util.tree_map(lambda a: jnp.asarray(a).astype(float_dtype(self.dtype)), params)
        terms = [
            (self.initial_concentration, params.initial_probs),
            (self.transition_concentration, params.transition_matrix),
        ] + self._emission_prior_terms(params)
        total = jnp.zeros((), float_dtype(self.dtype))
        for c, p in terms:
            if c != 1.0:
                total = total + (c - 1.0) * jnp.sum(jnp.log(p))
        return total

    def init_params(self, key: PRNGKey, data=None) -> HMMParams:
        """pi and the rows of A drawn from Dirichlet(1); emissions from ``_init_emissions`` (``data``, when
        given, checked by ``check_data``)."""
        check_key("key", key)
        if data is not None:
            self.check_data(data)
        dt = float_dtype(self.dtype)
        k = self.num_states
        k1, k2, k3 = jax.random.split(key, 3)
        pi = jax.random.dirichlet(k1, jnp.ones(k, dt), dtype=dt)
        trans = jax.random.dirichlet(k2, jnp.ones(k, dt), (k,), dtype=dt)
        return HMMParams(pi, trans, self._init_emissions(k3, None if data is None else self._prepare(data)))

    # -- Bayesian (vijax.models.ConditionallyConjugateModel) -----------------------------------------
    def prior(self):
        """(Dirichlet q(pi), Dirichlet rows of A (K, K), emission prior)."""
        dt = float_dtype(self.dtype)
        k = self.num_states
        return (
            expfam.Dirichlet.from_concentration(jnp.full((k,), self.initial_concentration, dt)),
            expfam.Dirichlet.from_concentration(jnp.full((k, k), self.transition_concentration, dt)),
            self._emission_prior(),
        )

    def init_globals(self, key: PRNGKey, data=None):
        """The prior updated by one E-step at ``init_params(key, data)`` (without data: by one
        pseudo-observation of those parameters per state)."""
        params = self.init_params(key, data)
        if data is None:
            stats = ((params.initial_probs,), (params.transition_matrix,), self._pseudo_stats(params.emissions))
        else:
            stats = self._local(self._view(params), data)[0]
        return conjugate_posterior(self.prior(), stats)

    def local_step(self, globals_view, data, key=None, method: str = "meanfield") -> LocalResult:
        """Forward-backward with exp E[log pi], exp E[log A] and exp E[log p(x | theta)];
        local_terms = sum_b log Z~_b - <stats, E[t(beta)]> = E[log h] + H[q(z)]."""
        check_choice("method", method, self.local_methods)
        stats, log_z, gamma = self._local(globals_view, data)
        return LocalResult(stats, jnp.sum(log_z) - expfam.tree_inner(stats, globals_view), gamma)

    def expected_params(self, q) -> HMMParams:
        """The posterior means of pi, A and the emission parameters under q(beta)."""
        q_init, q_trans, q_em = q
        mean = lambda d: d.concentration / jnp.sum(d.concentration, -1, keepdims=True)
        return HMMParams(mean(q_init), mean(q_trans), self._expected_emissions(q_em))


def _log_terms(model: _HMM, params: HMMParams, data: HMMData):
    data, _ = model._prepare(data)
    (li,), (lt,), ev = model._view(params)
    return li, lt, model._log_emissions(ev, data.obs), data.lengths


@functools.partial(jax.jit, static_argnums=0)
def _jit_posterior(model: _HMM, params: HMMParams, data: HMMData) -> inference.Posterior:
    li, lt, le, lengths = _log_terms(model, params, data)
    return model._posterior(li, lt, le, lengths)


@functools.partial(jax.jit, static_argnums=0)
def _jit_pairwise(model: _HMM, params: HMMParams, data: HMMData) -> Array:
    li, lt, le, lengths = _log_terms(model, params, data)
    return inference.pairwise_marginals(li, lt, le, lengths, model.schedule)


@functools.partial(jax.jit, static_argnums=0)
def _jit_viterbi(model: _HMM, params: HMMParams, data: HMMData):
    li, lt, le, lengths = _log_terms(model, params, data)
    return jax.vmap(lambda e, n: inference.viterbi(li, lt, e, n))(le, lengths)


def _map_rows(counts: Array, concentration: float) -> Array:
    """argmax of Dirichlet(c) x Multinomial(counts) per row: (counts + c - 1)_+ normalized (uniform
    for an all-zero row)."""
    c = jnp.maximum(counts + (concentration - 1.0), 0.0)
    tot = jnp.sum(c, -1, keepdims=True)
    return jnp.where(tot > 0, c / jnp.where(tot > 0, tot, 1.0), 1.0 / c.shape[-1])


@dataclasses.dataclass(frozen=True)
class CategoricalHMM(_HMM):
    """An HMM with categorical emissions over ``num_symbols`` symbols (Rabiner 1989, §III).

    Args:
      num_states: K >= 1.
      num_symbols: V >= 1.
      initial_concentration: Dirichlet concentration (> 0) on pi (1: maximum likelihood under EM).
      transition_concentration: Dirichlet concentration (> 0) on the rows of A.
      emission_concentration: Dirichlet concentration (> 0) on the rows of B.
      schedule: ``"sequential"`` or ``"parallel"`` forward-backward.
      dtype: float32 or float64 (default: JAX's default float); half precision is refused.

    Examples:
        >>> model = CategoricalHMM(num_states=2, num_symbols=3)
        >>> params = model.init_params(jax.random.PRNGKey(0))
        >>> model.log_likelihood(params, jnp.array([[0, 2, 1]])).shape
        (1,)
    """

    num_symbols: int
    _: dataclasses.KW_ONLY
    emission_concentration: float = 1.0

    _emissions_type = CategoricalEmissions

    def __post_init__(self):
        self._check_common()
        check_int("num_symbols", self.num_symbols)
        k, itemsize = self.num_states, float_dtype(self.dtype).itemsize
        check_allocation("num_states * (num_states + num_symbols)", k * (k + self.num_symbols), itemsize)
        check_positive_scalar("emission_concentration", self.emission_concentration)

    @property
    def _emission_width(self) -> int:
        return self.num_symbols

    def _check_obs_shape(self, obs):
        if obs.ndim != 2 or not np.issubdtype(obs.dtype, np.integer):
            raise ValueError(f"obs must be integers of shape (B, T), got {obs.dtype} {obs.shape}")

    def _obs_value_check(self, obs):
        return ids_in_range("batch obs symbol", obs, self.num_symbols)

    def _check_obs_values(self, observed):
        if np.any(observed < 0) or np.any(observed >= self.num_symbols):
            raise ValueError(
                f"obs must hold symbols in [0, num_symbols={self.num_symbols}) at every unpadded step, "
                f"got values in [{observed.min()}, {observed.max()}]"
            )

    def _clean_obs(self, obs, mask):
        return jnp.where(mask, obs, 0)

    def _log_emissions(self, em_view, obs):
        (log_b,) = em_view  # (K, V)
        return jnp.take(log_b.T, obs, axis=0, mode="clip")  # (B, T, K)

    def _emission_stats(self, obs, gamma):
        k = gamma.shape[-1]
        return (jax.ops.segment_sum(gamma.reshape(-1, k), obs.reshape(-1), num_segments=self.num_symbols).T,)

    def _emission_view(self, emissions):
        return (jnp.log(emissions.probs),)

    def _emission_m_step(self, em_stats):
        return CategoricalEmissions(_map_rows(em_stats[0], self.emission_concentration))

    def _emission_prior_terms(self, params):
        return [(self.emission_concentration, params.emissions.probs)]

    def _init_emissions(self, key, data):
        dt = float_dtype(self.dtype)
        v = self.num_symbols
        return CategoricalEmissions(jax.random.dirichlet(key, jnp.ones(v, dt), (self.num_states,), dtype=dt))

    def _emission_prior(self):
        dt = float_dtype(self.dtype)
        conc = jnp.full((self.num_states, self.num_symbols), self.emission_concentration, dt)
        return expfam.Dirichlet.from_concentration(conc)

    def _pseudo_stats(self, emissions):
        return (emissions.probs,)

    def _expected_emissions(self, q_em):
        return CategoricalEmissions(q_em.concentration / jnp.sum(q_em.concentration, -1, keepdims=True))


@dataclasses.dataclass(frozen=True)
class GaussianHMM(_HMM):
    """An HMM with diagonal-Gaussian emissions in ``dim`` dimensions (Rabiner 1989, §IV-A, eq. 52-54).

    The Bayesian model puts a Normal-Gamma prior on each (mu_kd, tau_kd = 1 / sigma^2_kd):
    tau ~ Gamma(a0, b0), mu | tau ~ N(loc0, 1 / (kappa0 tau)), as ``DiagonalGMM`` does. EM is
    maximum likelihood for the emissions (the prior is not used), with variances floored at
    ``min_variance``.

    Args:
      num_states: K >= 1.
      dim: D >= 1.
      initial_concentration: Dirichlet concentration (> 0) on pi.
      transition_concentration: Dirichlet concentration (> 0) on the rows of A.
      loc0: the Normal-Gamma prior's location (a scalar).
      kappa0: the Normal-Gamma prior's precision scale (a scalar > 0).
      a0: the Normal-Gamma prior's Gamma shape (a scalar > 0).
      b0: the Normal-Gamma prior's Gamma rate (a scalar > 0).
      min_variance: EM's variance floor (>= 0).
      schedule: ``"sequential"`` or ``"parallel"``.
      dtype: float32 or float64 (default: JAX's default float); half precision is refused.
    """

    dim: int
    _: dataclasses.KW_ONLY
    loc0: float = 0.0
    kappa0: float = 1.0
    a0: float = 1.0
    b0: float = 1.0
    min_variance: float = 1e-6

    _emissions_type = GaussianEmissions

    def __post_init__(self):
        self._check_common()
        check_int("dim", self.dim)
        k, itemsize = self.num_states, float_dtype(self.dtype).itemsize
        check_allocation("num_states * (num_states + 2 * dim)", k * (k + 2 * self.dim), itemsize)
        check_positive_fields(self, ("kappa0", "a0", "b0"), scalar=True)
        check_scalar("loc0", self.loc0)
        check_scalar("min_variance", self.min_variance, low=0.0, include_low=True)

    @property
    def _emission_width(self) -> int:
        return self.dim

    def _check_obs_shape(self, obs):
        check_data_dtype("obs", obs)
        if obs.ndim != 3 or obs.shape[2] != self.dim or not jnp.issubdtype(obs.dtype, jnp.number):
            raise ValueError(f"obs must be numbers of shape (B, T, dim={self.dim}), got {obs.dtype} {obs.shape}")

    def _obs_value_check(self, obs):
        return finite_values("batch obs", obs)

    def _check_obs_values(self, observed):
        if not np.all(np.isfinite(observed)):
            raise ValueError("obs must be finite (no NaN or inf) at every unpadded step")

    def _clean_obs(self, obs, mask):
        return jnp.where(mask[..., None], obs, 0.0).astype(float_dtype(self.dtype))

    def _log_emissions(self, em_view, obs):
        e_tm, e_tm2, e_t, e_logt = em_view  # (K, D) each
        w = jnp.concatenate([e_tm, -0.5 * e_t], axis=1)  # (K, 2D)
        const = jnp.sum(0.5 * e_logt - 0.5 * e_tm2, axis=1) - 0.5 * self.dim * _LOG_2PI
        feats = jnp.concatenate([obs, obs**2], axis=-1)
        return feats @ w.T + const.reshape((1,) * (feats.ndim - 1) + (-1,))

    def _emission_stats(self, obs, gamma):
        n = jnp.sum(gamma, (0, 1))
        s1 = jnp.einsum("btk,btd->kd", gamma, obs)
        s2 = jnp.einsum("btk,btd->kd", gamma, obs**2)
        half_n = jnp.broadcast_to(0.5 * n[:, None], s1.shape)
        return (s1, -half_n, -0.5 * s2, half_n)

    def _emission_view(self, emissions):
        tau = 1.0 / emissions.variances
        return (tau * emissions.means, tau * emissions.means**2, tau, jnp.log(tau))

    def _emission_m_step(self, em_stats):
        s1, neg_half_n, neg_half_s2, _ = em_stats
        n = -2.0 * neg_half_n
        safe = jnp.where(n > 0, n, 1.0)
        means = jnp.where(n > 0, s1 / safe, 0.0)
        var = jnp.where(n > 0, -2.0 * neg_half_s2 / safe - means**2, 1.0)
        return GaussianEmissions(means, jnp.maximum(var, self.min_variance))

    def _emission_prior_terms(self, params):
        return []

    def _init_emissions(self, key, prepared):
        dt = float_dtype(self.dtype)
        k, d = self.num_states, self.dim
        if prepared is None:
            return GaussianEmissions(jax.random.normal(key, (k, d), dt), jnp.ones((k, d), dt))
        data, mask = prepared
        x = data.obs.reshape(-1, d)
        w = mask.reshape(-1).astype(dt)
        n = jnp.sum(w)
        mean = w @ x / n
        var = jnp.maximum(w @ (x - mean[None]) ** 2 / n, max(self.min_variance, 1e-6))
        rows = jax.random.choice(key, x.shape[0], (k,), replace=bool(x.shape[0] < k), p=w / n)
        return GaussianEmissions(x[rows], jnp.broadcast_to(var, (k, d)))

    def _emission_prior(self):
        dt = float_dtype(self.dtype)
        full = lambda v: jnp.full((self.num_states, self.dim), v, dt)
        return expfam.NormalGamma.from_params(full(self.loc0), full(self.kappa0), full(self.a0), full(self.b0))

    def _pseudo_stats(self, emissions):
        m, v = emissions.means, emissions.variances
        half = jnp.full_like(m, 0.5)
        return (m, -half, -0.5 * (m**2 + v), half)

    def _expected_emissions(self, q_em):
        return GaussianEmissions(q_em.loc, q_em.rate / jnp.maximum(q_em.concentration - 1.0, 1e-12))


__all__ = [
    "CategoricalEmissions",
    "CategoricalHMM",
    "GaussianEmissions",
    "GaussianHMM",
    "HMMData",
    "HMMParams",
    "as_data",
]
