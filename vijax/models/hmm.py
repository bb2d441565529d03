"""Hidden Markov models over any conjugate emission component (Rabiner 1989, §III; *Raise your ELBO*, §HMM)::

    z_0 ~ Categorical(pi),  z_t | z_{t-1} ~ Categorical(A[z_{t-1}]),  x_t | z_t = k ~ p(x | theta_k).

**EM** (a :class:`~vijax.models.PointEstimateComponent`): forward-backward and Baum–Welch (Rabiner 1989, eq. 40a-c,
53-54), MAP under Dirichlet(c) on pi and A's rows: row <- (counts + c - 1)_+ / sum. **Bayesian** (any emissions):
q(pi) q(A) q(theta) q(z_{1:T}), q(z) a Markov chain (MacKay 1997; Beal 2003, ch. 3) by forward-backward with exp
E[log pi], exp E[log A], exp E[log p(x_t | theta_k)]; the tilted chain's log Z~ is E[log p(x, z | beta)] + H[q(z)].
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax._validate import ArgumentError, check_allocation, check_choice, check_data_dtype, check_float_dtype
from vijax._validate import check_int, check_key, check_positive_scalar, check_scalar, enforce_value_checks
from vijax._validate import finite_nonnegative, float_dtype, ids_in_range, implements, is_tracer, values_match
from vijax.models import _hmm_inference as inference
from vijax.models._base import LocalResult, conjugate_posterior, describe_batch
from vijax.models._components import CategoricalEmissions, Component, DirichletCategorical, GaussianEmissions
from vijax.models._components import NormalGammaDiagonal, PointEstimateComponent, check_component, check_statistics
from vijax.models._components import gaussian_point_checks, map_rows
from vijax.models._pytree import PytreeModel
from vijax.types import Array, PRNGKey


class HMMData(NamedTuple):
    """Padded sequences: ``obs`` (B, T) ints or (B, T, D) floats, ``lengths`` (B,) ints in [1, T]."""

    obs: Array
    lengths: Array


class HMMParams(NamedTuple):
    initial_probs: Array  # (K,)
    transition_matrix: Array  # (K, K), rows: previous state
    emissions: Any  # CategoricalEmissions or GaussianEmissions


_SUM_RTOL = 5e-5  # a probability vector must sum to 1 within 2 * _SUM_RTOL = 1e-4 (values_match's scale)


def _field(name: str, value, shape: tuple, what: str = "") -> Array:
    """``value`` as an array, checked (also a tracer) to be float32 or float64 of ``shape``."""
    a = value if isinstance(value, jax.Array) else np.asarray(value)
    check_float_dtype(a.dtype, name)
    if tuple(a.shape) != tuple(shape):
        raise ArgumentError(name, f"{name} must have shape {tuple(shape)}{what}, got {tuple(a.shape)}")
    return jnp.asarray(a)


def _probability_checks(name: str, p: Array) -> list:
    return [
        finite_nonnegative(name, p),
        values_match(
            f"{name} row sum" if p.ndim > 1 else f"{name} sum",
            jnp.sum(p, -1),
            jnp.ones((), p.dtype),
            "1 (within 1e-4: probabilities sum to 1)",
            rtol=_SUM_RTOL,
        ),
    ]


def param_checks(
    params, num_states: int | None = None, emissions_type=None, emission_width: int | None = None, emission_checks=None
) -> list:
    """The checks of HMM parameters: raises ValueError naming the field for the type, dtype or shapes (K =
    ``num_states`` or from ``initial_probs``); returns the ``ValueCheck``s of the values."""
    if not isinstance(params, HMMParams):
        raise ArgumentError(
            "params",
            f"params must be HMMParams(initial_probs, transition_matrix, emissions), got {type(params).__name__}",
        )
    kinds = (CategoricalEmissions, GaussianEmissions) if emissions_type is None else (emissions_type,)
    em = params.emissions
    if not isinstance(em, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise ArgumentError("params", f"params.emissions must be {names}, got {type(em).__name__}")
    if num_states is None:
        shape = np.shape(params.initial_probs)
        if len(shape) != 1:
            raise ArgumentError("params", f"params.initial_probs must have shape (K,), got {shape}")
        pi = _field("params.initial_probs", params.initial_probs, shape)
        k, from_ = shape[0], " (K, from params.initial_probs)"
    else:
        k, from_ = num_states, ""
        pi = _field("params.initial_probs", params.initial_probs, (k,), " (K = num_states)")
    trans = _field("params.transition_matrix", params.transition_matrix, (k, k), from_)
    checks = _probability_checks("params.initial_probs", pi) + _probability_checks("params.transition_matrix", trans)
    if not isinstance(em, (CategoricalEmissions, GaussianEmissions)):
        return checks + list(emission_checks(em, k) if emission_checks else [])
    if isinstance(em, CategoricalEmissions):
        width = np.shape(em.probs)[-1:] if emission_width is None else (emission_width,)
        probs = _field("params.emissions.probs", em.probs, (k, *width), from_ or " (K, num_symbols)")
        return checks + _probability_checks("params.emissions.probs", probs)
    width = np.shape(em.means)[-1:] if emission_width is None else (emission_width,)
    means = _field("params.emissions.means", em.means, (k, *width), from_ or " (K, dim)")
    var = _field("params.emissions.variances", em.variances, (k, *width), from_ or " (K, dim)")
    return checks + gaussian_point_checks(means, var)


def as_data(data) -> HMMData:
    """``data`` as ``HMMData`` (full lengths for a bare array); ValueError naming ``batch`` for another container."""
    if isinstance(data, HMMData):
        return data
    if isinstance(data, tuple) and len(data) == 2 and not hasattr(data, "_fields"):
        return HMMData(*data)
    if data is None or isinstance(data, (tuple, dict)):  # another model's batch (a BowBatch), a dict
        given = "None" if data is None else describe_batch(data)
        raise ArgumentError(
            "batch",
            "batch is not what an HMM takes (an array of observations, (B, T) ints or (B, T, D) floats, "
            f"a pair (obs, lengths) or HMMData(obs, lengths)): got {given}",
        )
    obs = jnp.asarray(data)
    if obs.ndim < 2:
        raise ValueError(f"obs must have a batch and a time axis, (B, T) or (B, T, D), got shape {obs.shape}")
    return HMMData(obs, jnp.full((obs.shape[0],), obs.shape[1], jnp.int32))


def _needs_em(emissions: Component, what: str) -> None:
    if not implements(emissions, PointEstimateComponent):
        raise ArgumentError(
            "emissions",
            f"{what} needs emissions with point estimates (a PointEstimateComponent: point_view, "
            f"point_m_step, init_point, ...); {type(emissions).__name__} is not one: fit this HMM by a "
            "Bayesian algorithm (cavi, svi, ssvi)",
        )


class HMM(PytreeModel):
    """A hidden Markov model with ``emissions`` any conjugate :class:`~vijax.models.Component`.

    Args:
      num_states: K >= 1.
      emissions: the emission component (e.g. ``DirichletCategorical``, ``GammaPoisson``); its ``dtype`` is the model's.
      initial_concentration: Dirichlet concentration (> 0) on pi (1: maximum likelihood under EM).
      transition_concentration: Dirichlet concentration (> 0) on the rows of A.
      forward_backward: ``"sequential"`` (O(T K^2)), ``"parallel"`` (O(T K^3) in O(log T) depth) or None (by device).

    Examples:
        >>> from vijax.models import GammaPoisson
        >>> model = HMM(2, GammaPoisson(dim=3))
        >>> [f.batch_shape for f in model.prior()]
        [(), (2,), (2, 3)]
    """

    local_methods = ("meanfield",)

    def __init__(
        self,
        num_states: int,
        emissions: Component,
        *,
        initial_concentration: float = 1.0,
        transition_concentration: float = 1.0,
        forward_backward: Optional[str] = None,
    ):
        check_int("num_states", num_states)
        check_positive_scalar("initial_concentration", initial_concentration)
        check_positive_scalar("transition_concentration", transition_concentration)
        if forward_backward is not None:
            check_choice("forward_backward", forward_backward, inference.FORWARD_BACKWARD)
        if not isinstance(emissions, Component):
            raise ArgumentError(
                "emissions", f"emissions must be a vijax.models.Component, got {type(emissions).__name__}"
            )
        check_component(emissions, "emissions")
        self.num_states = num_states
        self.emissions = emissions
        self.initial_concentration = float(initial_concentration)
        self.transition_concentration = float(transition_concentration)
        self.forward_backward = forward_backward

    dtype = property(lambda self: self.emissions.dtype, doc="The float dtype of the emissions' families.")

    def __repr__(self):
        return f"{type(self).__name__}({self.num_states}, {self.emissions!r})"

    def check_data(self, data) -> None:
        """Raises ValueError naming the problem: obs's shape/dtype/values, lengths outside [1, T]."""
        data = as_data(data)
        traced = is_tracer(data.obs) or is_tracer(data.lengths)
        obs, lengths = (data.obs, data.lengths) if traced else (np.asarray(data.obs), np.asarray(data.lengths))
        if self.emissions.event_ndim == 0:
            if obs.ndim != 2 or not jnp.issubdtype(obs.dtype, jnp.integer):
                raise ArgumentError("obs", f"obs must be integers of shape (B, T), got {obs.dtype} {obs.shape}")
        else:
            check_data_dtype("obs", obs)
            d = self.emissions.dim
            if obs.ndim != 3 or obs.shape[2] != d or not jnp.issubdtype(obs.dtype, jnp.number):
                raise ArgumentError("obs", f"obs must be numbers of shape (B, T, dim={d}), got {obs.dtype} {obs.shape}")
        b, t = obs.shape[:2]
        if not traced and (b < 1 or t < 1):
            raise ValueError(f"obs must hold at least one sequence of at least one step, got shape {obs.shape}")
        if lengths.shape != (b,) or not jnp.issubdtype(lengths.dtype, jnp.integer):
            raise ValueError(f"lengths must be integers of shape ({b},), got {lengths.dtype} {lengths.shape}")
        if traced:
            return
        if np.any(lengths < 1) or np.any(lengths > t):
            raise ValueError(
                f"lengths must be in [1, T={t}] (T: obs's padded length), got min {lengths.min()}, max {lengths.max()}"
            )
        observed = obs[np.arange(t)[None, :] < lengths[:, None]]
        self.emissions.check_data(observed, "obs (at its unpadded steps)")
        check_statistics(self.emissions, observed, "obs", "emissions")

    def batch_checks(self, data) -> list:
        """The value checks of a step's batch: lengths in [1, T]; the emissions' checks at every unpadded step."""
        data = as_data(data)
        t = data.obs.shape[1]
        mask = jnp.arange(t)[None, :] < data.lengths[:, None]
        checks = [ids_in_range("batch length", data.lengths, t + 1, low=1)]
        for c in self.emissions.batch_checks(data.obs, "obs"):
            m = mask.reshape(mask.shape + (1,) * (c.bad.ndim - 2))
            checks.append(c._replace(bad=c.bad & m))
        return checks

    def _prepare(self, data) -> tuple[HMMData, Array]:
        data = as_data(data)
        mask = jnp.arange(data.obs.shape[1])[None, :] < data.lengths[:, None]
        m = mask.reshape(mask.shape + (1,) * (data.obs.ndim - 2))
        obs = self.emissions.prepare(jnp.where(m, data.obs, 0), float_dtype(self.dtype))
        return HMMData(obs, data.lengths), mask

    def _log_emissions(self, em_view, obs) -> Array:
        """E[log p(x_bt | theta_k)], (B, T, K)."""
        b, t = obs.shape[:2]
        flat = obs.reshape((b * t,) + obs.shape[2:])
        return self.emissions.expected_log_lik(em_view, flat).reshape(b, t, -1)

    def _posterior(self, log_init, log_trans, log_em, lengths) -> inference.Posterior:
        return inference.posterior(log_init, log_trans, log_em, lengths, _mode(self))

    def _local(self, view, data):
        """Forward-backward at a view ((log pi,), (log A,), emission view): (stats, log Z (B,), gamma)."""
        data, _ = self._prepare(data)
        (log_init,), (log_trans,), em_view = view
        post = self._posterior(log_init, log_trans, self._log_emissions(em_view, data.obs), data.lengths)
        b, t, k = post.marginals.shape
        em_stats = self.emissions.stats(data.obs.reshape((b * t,) + data.obs.shape[2:]), post.marginals.reshape(-1, k))
        stats = ((jnp.sum(post.marginals[:, 0], 0),), (jnp.sum(post.transition_counts, 0),), em_stats)
        return stats, post.log_likelihood, post.marginals

    def _view(self, params: HMMParams):
        """t(beta) at point parameters (in the model's dtype), laid out as ``prior()``'s mean params."""
        dt = float_dtype(self.dtype)
        params = jax.tree_util.tree_map(lambda a: jnp.asarray(a).astype(dt), params)
        return (
            (jnp.log(params.initial_probs),),
            (jnp.log(params.transition_matrix),),
            self.emissions.point_view(params.emissions),
        )

    def check_params(self, params: HMMParams) -> None:
        """Raises ValueError naming the field for what :func:`param_checks` refuses (traced: from the computation)."""
        _needs_em(self.emissions, "an HMM's point parameters")
        em = self.emissions
        enforce_value_checks(
            lambda: param_checks(params, self.num_states, em.point_type, em.point_width, em.point_checks)
        )

    def _checked(self, params: HMMParams, data) -> HMMData:
        self.check_params(params)
        self.check_data(data)
        return as_data(data)

    def log_likelihood(self, params: HMMParams, data) -> Array:
        """log p(x_b | params) per sequence, (B,) (Rabiner 1989, eq. 21)."""
        return _jit_posterior(self, params, self._checked(params, data)).log_likelihood

    def posterior(self, params: HMMParams, data) -> inference.Posterior:
        """Log-likelihoods (B,), marginals p(z_t | x) (B, T, K), transition counts (B, K, K) (Rabiner, eq. 27, 38)."""
        return _jit_posterior(self, params, self._checked(params, data))

    def pairwise_marginals(self, params: HMMParams, data) -> Array:
        """p(z_{t-1} = i, z_t = j | x) for t = 1..T-1, (B, T-1, K, K); zero at padded steps."""
        return _jit_pairwise(self, params, self._checked(params, data))

    def viterbi(self, params: HMMParams, data) -> tuple[Array, Array]:
        """Most probable paths (B, T) (-1 at padded steps) and their log p(x, path) (B,) (Rabiner 1989, §III-B)."""
        return _jit_viterbi(self, params, self._checked(params, data))

    # -- EM (vijax.models.EMModel)
    def e_step(self, params: HMMParams, data):
        """Expected counts under p(z | x, params) and log p(x | params) summed over the batch."""
        self.check_params(params)
        stats, log_lik, _ = self._local(self._view(params), data)
        return stats, jnp.sum(log_lik)

    def m_step(self, stats) -> HMMParams:
        """Baum–Welch re-estimation (Rabiner 1989, eq. 40a-b), MAP under the Dirichlet concentrations."""
        (n0,), (nt,), em_stats = stats
        return HMMParams(
            map_rows(n0, self.initial_concentration),
            map_rows(nt, self.transition_concentration),
            self.emissions.point_m_step(em_stats),
        )

    def log_prior(self, params: HMMParams) -> Array:
        """log p(params) up to a constant: sum (c - 1) log p over pi and A's rows, plus ``point_log_prior``."""
        self.check_params(params)
        dt = float_dtype(self.dtype)
        params = jax.tree_util.tree_map(lambda a: jnp.asarray(a).astype(dt), params)
        total = self.emissions.point_log_prior(params.emissions).astype(dt)
        for c, p in zip((self.initial_concentration, self.transition_concentration), params[:2]):
            if c != 1.0:
                total = total + (c - 1.0) * jnp.sum(jnp.log(p))
        return total

    def init_params(self, key: PRNGKey, data=None) -> HMMParams:
        """pi and the rows of A drawn from Dirichlet(1); emissions from the component's ``init_point``."""
        check_key("key", key)
        _needs_em(self.emissions, "init_params")
        if data is not None:
            self.check_data(data)
        dt = float_dtype(self.dtype)
        k = self.num_states
        k1, k2, k3 = jax.random.split(key, 3)
        pi = jax.random.dirichlet(k1, jnp.ones(k, dt), dtype=dt)
        trans = jax.random.dirichlet(k2, jnp.ones(k, dt), (k,), dtype=dt)
        prepared = None
        if data is not None:
            d, mask = self._prepare(data)
            b, t = mask.shape
            prepared = (d.obs.reshape((b * t,) + d.obs.shape[2:]), mask.reshape(-1))
        return HMMParams(pi, trans, self.emissions.init_point(k3, k, prepared))

    # -- Bayesian (vijax.models.ConditionallyConjugateModel)
    def prior(self):
        """(Dirichlet q(pi), Dirichlet rows of A (K, K), the emissions' prior of K copies)."""
        dt = float_dtype(self.dtype)
        k = self.num_states
        return (
            expfam.Dirichlet.from_concentration(jnp.full((k,), self.initial_concentration, dt)),
            expfam.Dirichlet.from_concentration(jnp.full((k, k), self.transition_concentration, dt)),
            self.emissions.prior(k),
        )

    def init_globals(self, key: PRNGKey, data=None):
        """The prior updated by one E-step at ``init_params(key, data)``, or by the component's ``initial_q``."""
        if implements(self.emissions, PointEstimateComponent):
            params = self.init_params(key, data)
            if data is None:
                stats = (
                    (params.initial_probs,),
                    (params.transition_matrix,),
                    self.emissions.pseudo_stats(params.emissions),
                )
            else:
                stats = _jit_stats(self, self._view(params), as_data(data))
            return conjugate_posterior(self.prior(), stats)
        observed = None
        if data is not None:
            self.check_data(data)
            d = as_data(data)
            observed = np.asarray(d.obs)[np.arange(d.obs.shape[1])[None, :] < np.asarray(d.lengths)[:, None]]
        q_em, _ = self.emissions.initial_q(key, self.num_states, observed)
        prior = self.prior()
        if data is None:
            return prior[0], prior[1], q_em
        stats = _jit_stats(self, expfam.tree_mean_params((prior[0], prior[1], q_em)), as_data(data))
        return conjugate_posterior(prior[:2], stats[:2]) + (q_em,)

    def local_step(self, globals_view, data, key=None, method: str = "meanfield") -> LocalResult:
        """Forward-backward at the tilted chain; local_terms = sum_b log Z~_b - <stats, E[t(beta)]> = E[log h] + H[q(z)]."""
        check_choice("method", method, self.local_methods)
        stats, log_z, gamma = self._local(globals_view, data)
        return LocalResult(stats, jnp.sum(log_z) - expfam.tree_inner(stats, globals_view), gamma)

    def expected_params(self, q) -> HMMParams:
        """The posterior means of pi, A and the emission parameters under q(beta)."""
        q_init, q_trans, q_em = q
        mean = lambda d: d.concentration / jnp.sum(d.concentration, -1, keepdims=True)
        em = self.emissions
        point = em.expected_point(q_em) if implements(em, PointEstimateComponent) else em.point_estimate(q_em)
        return HMMParams(mean(q_init), mean(q_trans), point)


def _mode(model: HMM) -> str:
    if model.forward_backward is not None:
        return model.forward_backward
    return "sequential" if jax.default_backend() == "cpu" else "parallel"


def _log_terms(model: HMM, params: HMMParams, data: HMMData):
    data, _ = model._prepare(data)
    (li,), (lt,), ev = model._view(params)
    return li, lt, model._log_emissions(ev, data.obs), data.lengths


@jax.jit
def _jit_stats(model: HMM, view, data: HMMData):
    return model._local(view, data)[0]


@jax.jit
def _jit_posterior(model: HMM, params: HMMParams, data: HMMData) -> inference.Posterior:
    li, lt, le, lengths = _log_terms(model, params, data)
    return model._posterior(li, lt, le, lengths)


@jax.jit
def _jit_pairwise(model: HMM, params: HMMParams, data: HMMData) -> Array:
    li, lt, le, lengths = _log_terms(model, params, data)
    return inference.pairwise_marginals(li, lt, le, lengths, _mode(model))


@jax.jit
def _jit_viterbi(model: HMM, params: HMMParams, data: HMMData):
    li, lt, le, lengths = _log_terms(model, params, data)
    return jax.vmap(lambda e, n: inference.viterbi(li, lt, e, n))(le, lengths)


def _check_sizes(num_states, dtype, width_name: str, width, per_state: str, num_floats) -> None:
    check_int("num_states", num_states)
    check_float_dtype(dtype)
    check_int(width_name, width)
    check_allocation(
        f"num_states * (num_states + {per_state})", num_floats(num_states, width), float_dtype(dtype).itemsize
    )


class CategoricalHMM(HMM):
    """An HMM with categorical emissions (Rabiner 1989, §III): ``HMM(K, DirichletCategorical(num_symbols, ...))``.

    Args:
      num_states: K >= 1.
      num_symbols: V >= 1.
      initial_concentration: as :class:`HMM`.
      transition_concentration: as :class:`HMM`.
      forward_backward: as :class:`HMM`.
      emission_concentration: Dirichlet concentration (> 0) on the rows of B.
      dtype: float32 or float64 (default: JAX's default float).

    Examples:
        >>> model = CategoricalHMM(num_states=2, num_symbols=3)
        >>> params = model.init_params(jax.random.PRNGKey(0))
        >>> model.log_likelihood(params, jnp.array([[0, 2, 1]])).shape
        (1,)
    """

    def __init__(
        self,
        num_states: int,
        num_symbols: int,
        *,
        initial_concentration: float = 1.0,
        transition_concentration: float = 1.0,
        emission_concentration: float = 1.0,
        forward_backward: Optional[str] = None,
        dtype: Any = None,
    ):
        _check_sizes(num_states, dtype, "num_symbols", num_symbols, "num_symbols", lambda k, v: k * (k + v))
        check_positive_scalar("emission_concentration", emission_concentration)
        emissions = DirichletCategorical(num_symbols, float(emission_concentration), dtype=dtype)
        chain = dict(initial_concentration=initial_concentration, transition_concentration=transition_concentration)
        super().__init__(num_states, emissions, forward_backward=forward_backward, **chain)

    num_symbols = property(lambda self: self.emissions.num_symbols, doc="V: the number of emission symbols.")
    emission_concentration = property(lambda self: self.emissions.concentration, doc="The concentration on B's rows.")


class GaussianHMM(HMM):
    """An HMM with diagonal-Gaussian emissions (Rabiner 1989, §IV-A, eq. 52-54): ``HMM(K, NormalGammaDiagonal(...))``.

    Args:
      num_states: K >= 1.
      dim: D >= 1.
      initial_concentration: as :class:`HMM`.
      transition_concentration: as :class:`HMM`.
      forward_backward: as :class:`HMM`.
      loc0: the Normal-Gamma prior's location.
      kappa0: its precision scale.
      a0: its Gamma shape.
      b0: its Gamma rate.
      min_variance: EM's variance floor (>= 0).
      dtype: float32 or float64 (default: JAX's default float).
    """

    def __init__(
        self,
        num_states: int,
        dim: int,
        *,
        initial_concentration: float = 1.0,
        transition_concentration: float = 1.0,
        loc0: float = 0.0,
        kappa0: float = 1.0,
        a0: float = 1.0,
        b0: float = 1.0,
        min_variance: float = 1e-6,
        forward_backward: Optional[str] = None,
        dtype: Any = None,
    ):
        _check_sizes(num_states, dtype, "dim", dim, "2 * dim", lambda k, d: k * (k + 2 * d))
        for name, v in (("kappa0", kappa0), ("a0", a0), ("b0", b0)):
            check_positive_scalar(name, v)
        check_scalar("loc0", loc0)
        check_scalar("min_variance", min_variance, low=0.0, include_low=True)
        emissions = NormalGammaDiagonal(
            dim, loc0=float(loc0), kappa0=kappa0, a0=a0, b0=b0, min_variance=float(min_variance), dtype=dtype
        )
        chain = dict(initial_concentration=initial_concentration, transition_concentration=transition_concentration)
        super().__init__(num_states, emissions, forward_backward=forward_backward, **chain)

    dim = property(lambda self: self.emissions.dim, doc="D: the dimension of an observation.")
    loc0 = property(lambda self: self.emissions.loc0, doc="The Normal-Gamma prior's location m0 of each emission mean.")
    kappa0 = property(lambda self: self.emissions.kappa0, doc="kappa0: the Normal-Gamma prior's precision scale.")
    a0 = property(lambda self: self.emissions.a0, doc="a0: the Normal-Gamma prior's Gamma shape.")
    b0 = property(lambda self: self.emissions.b0, doc="b0: the Normal-Gamma prior's Gamma rate.")
    min_variance = property(lambda self: self.emissions.min_variance, doc="EM's floor on the emission variances.")


__all__ = [
    "CategoricalEmissions",
    "CategoricalHMM",
    "GaussianEmissions",
    "GaussianHMM",
    "HMM",
    "HMMData",
    "HMMParams",
    "as_data",
    "map_rows",
    "param_checks",
]
