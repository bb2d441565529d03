r"""One Bayesian mixture over any conjugate component with finite (Dirichlet) or Dirichlet-process (stick-breaking)
weights: pi ~ weights prior, theta_k ~ p(theta), z_n ~ Categorical(pi), x_n | z_n = k ~ p(x | theta_k).

Mean-field q(pi) q(theta) q(z) (Blei et al. 2017, §4.2; Bishop 2006, §10.2): log r_nk = E[log pi_k] + E[log p(x_n |
theta_k)] - log Z_n, ``local_terms`` = sum_n H[r_n] + sum_n log h(x_n). :class:`StickBreaking`: v_k ~ Beta(1, alpha),
pi_k = v_k prod_{j<k} (1 - v_j), truncated as in *Raise your ELBO* (§DPMM): Blei and Jordan (2006), v_T = 1, or
Kurihara, Welling and Vlassis (2007), q = prior beyond T; q(v_j) = Beta(1 + sum_n r_nj, alpha + sum_n q(z_n > j)).

**The Kurihara et al. tail.** Beyond T: E_p[log w] = psi(1) - psi(1 + alpha), log g := E_p[log(1 - w)] = -1/alpha,
c_n := E_p[log p(x_n | theta)]. With s_nk = exp(E[log pi_k] + E[log p(x_n | theta_k)]) and A_n = sum_{j<=T}
E[log(1 - v_j)] + E_p[log w] + c_n, log s_nk = A_n + (k - T - 1) log g for k > T: S_n = sum_{k<=T} s_nk + e^{A_n} /
(1 - g), r_nk = s_nk / S_n, R_n := q(z_n > T) = e^{A_n} / ((1 - g) S_n), q(z_n > j) = sum_{j<k<=T} r_nk + R_n (the
tutorial's eq. 14). With rho_n = e^{A_n} / S_n the tail's ELBO terms sum in closed form:

    sum_{m>=0} rho_n g^m (E_p[log w] + m log g + c_n - log rho_n - m log g) = R_n (E_p[log w] + c_n - log rho_n).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import digamma

from vijax import expfam
from vijax._validate import ArgumentError, check_allocation, check_choice, check_enough_points, check_finite
from vijax._validate import check_float_dtype, check_int, check_positive_scalar, float_dtype, is_tracer
from vijax.models._base import LocalResult, check_one_array, conjugate_posterior, entropy_of_probs, program_argument
from vijax.models._components import Component, check_component, check_statistics, floor_log
from vijax.types import Array, PRNGKey
from vijax.models._pytree import PytreeModel

TRUNCATIONS = ("blei_jordan", "kurihara")


def check_mixture_sizes(num_components, dim, concentration: tuple, dtype, squared: bool = False) -> None:
    """A finite mixture's constructor checks: K, D, the concentration ``(name, value)``, dtype and memory."""
    check_int("num_components", num_components)
    check_int("dim", dim)
    check_positive_scalar(*concentration)
    check_float_dtype(dtype)
    name = "num_components * dim**2" if squared else "num_components * dim"
    check_allocation(name, num_components * dim ** (1 + squared), float_dtype(dtype).itemsize)


@dataclasses.dataclass(frozen=True, eq=False)
class DirichletWeights(PytreeModel):
    """Finite mixture weights pi ~ Dirichlet(concentration 1_K).

    Args:
      num_components: K >= 1.
      concentration: the Dirichlet parameter of each weight (> 0).
    """

    num_components: int
    concentration: float = 1.0
    has_tail = False
    finite = True
    local_methods = ("meanfield", "exact", "gibbs")
    static_floats = ("concentration",)

    def __post_init__(self):
        check_int("num_components", self.num_components)
        check_positive_scalar("concentration", self.concentration)

    def prior(self, dtype) -> expfam.Dirichlet:
        """p(pi) = Dirichlet(concentration 1_K), event shape (K,)."""
        return expfam.Dirichlet.from_concentration(jnp.full((self.num_components,), self.concentration, dtype))

    def expected_log_weights(self, view) -> Array:
        """E[log pi] (K,) from the view (E[log pi],)."""
        return view[0]

    def stats(self, resp: Array, tail: Array | None = None) -> tuple:
        """(sum_n r_n,)."""
        return (jnp.sum(resp, 0),)

    def initial_q(self, counts: Array, num_data: int | None, dtype) -> expfam.Dirichlet:
        """The prior updated by ``counts`` (K,) data per component."""
        return conjugate_posterior(self.prior(dtype), (counts,))

    def expected_weights(self, q: expfam.Dirichlet) -> Array:
        """E_q[pi] (K,)."""
        return q.concentration / jnp.sum(q.concentration, -1, keepdims=True)


@dataclasses.dataclass(frozen=True, eq=False)
class StickBreaking(PytreeModel):
    """Dirichlet-process weights by stick-breaking, v_k ~ Beta(1, alpha), truncated at T (module docstring).

    Args:
      truncation_level: T >= 1.
      alpha: DP concentration (> 0).
      truncation: ``"blei_jordan"`` (v_T = 1) or ``"kurihara"`` (q = prior beyond T, a closed-form tail).
    """

    truncation_level: int
    alpha: float = 1.0
    truncation: str = "blei_jordan"
    static_floats = ("alpha",)
    finite = False
    local_methods = ("meanfield",)

    def __post_init__(self):
        check_int("truncation_level", self.truncation_level)
        check_positive_scalar("alpha", self.alpha)
        check_choice("truncation", self.truncation, TRUNCATIONS)

    num_components = property(lambda self: self.truncation_level, doc="T.")
    has_tail = property(lambda self: self.truncation == "kurihara", doc="Whether q has a closed-form tail beyond T.")
    num_sticks = property(
        lambda self: self.truncation_level - (self.truncation == "blei_jordan"),
        doc="T - 1 (Blei and Jordan) or T (Kurihara et al.).",
    )

    def prior(self, dtype) -> expfam.Beta:
        """The sticks' prior v_k ~ Beta(1, alpha), batch shape (num_sticks,) (Blei & Jordan 2006)."""
        s = self.num_sticks
        return expfam.Beta.from_concentrations(jnp.ones((s,), dtype), jnp.full((s,), float(self.alpha), dtype))

    def expected_log_weights(self, view) -> Array:
        """E[log pi_k] = E[log v_k] + sum_{j<k} E[log(1 - v_j)], k = 1..T, from the view (E[log v], E[log(1 - v)])."""
        e_log_v, e_log_1m = view
        if self.truncation == "blei_jordan":
            e_log_v = jnp.concatenate([e_log_v, jnp.zeros((1,), e_log_v.dtype)])
            e_log_1m = jnp.concatenate([e_log_1m, jnp.zeros((1,), e_log_1m.dtype)])
        return e_log_v + jnp.cumsum(e_log_1m) - e_log_1m

    def stats(self, resp: Array, tail: Array | None = None) -> tuple:
        """(sum_n r_nj, sum_n q(z_n > j)) for j = 1..num_sticks, from ``resp`` (N, T) and the tail mass (N,)."""
        n_k = jnp.sum(resp, 0)
        above = jnp.cumsum(n_k[::-1])[::-1] - n_k  # sum_{k > j, k <= T} N_k
        if tail is not None:
            above = above + jnp.sum(tail)
        s = self.num_sticks
        return n_k[:s], above[:s]

    def initial_q(self, counts: Array, num_data: int | None, dtype) -> expfam.Beta:
        """Beta(1 + N / T, alpha + (T - k) N / T), as if each component held N / T data (without data: the prior)."""
        if num_data is None:
            return self.prior(dtype)
        t, s = self.truncation_level, self.num_sticks
        per = num_data / t
        k = jnp.arange(1, s + 1, dtype=dtype)
        return expfam.Beta.from_concentrations(jnp.full((s,), 1.0 + per, dtype), self.alpha + (t - k) * per)

    def tail_constants(self, dtype) -> tuple[Array, Array]:
        """(E_p[log w], log g) of the prior's sticks (the module docstring)."""
        a = jnp.asarray(self.alpha, dtype)
        return digamma(jnp.ones((), dtype)) - digamma(1.0 + a), digamma(a) - digamma(1.0 + a)

    def expected_weights(self, q: expfam.Beta) -> Array:
        """E_q[pi_k] = E[v_k] prod_{j<k} E[1 - v_j], k = 1..T (Kurihara et al.: and the mass beyond T)."""
        a, b = q.concentration1, q.concentration0
        ev = jnp.concatenate([a / (a + b), jnp.ones((1,), a.dtype)])
        rest = jnp.concatenate([jnp.ones((1,), ev.dtype), jnp.cumprod(1.0 - ev[:-1])])
        return ev * rest


class Mixture(PytreeModel):
    """A Bayesian mixture of a conjugate ``component`` with ``weights`` (module docstring). Globals: ``(q(pi) or q(v),
    q(theta))``; ``local_params``: r (N, K), for Kurihara et al. (N, T + 1) with q(z_n > T) last.

    Local methods of a finite mixture: ``"meanfield"``, ``"exact"`` (p(z_n | x_n, beta) at a draw, Hoffman & Blei
    2015, §2.5), ``"gibbs"`` (z_n ~ Categorical(r_n); needs a key). A DP mixture offers ``"meanfield"``.

    Args:
      component: a :class:`~vijax.models.Component` (e.g. ``NormalGammaDiagonal(dim=2)``).
      weights: :class:`DirichletWeights` or :class:`StickBreaking`.

    Examples:
        >>> from vijax.models import GammaPoisson
        >>> model = Mixture(GammaPoisson(dim=3), DirichletWeights(4))
        >>> [f.batch_shape for f in model.prior()]
        [(), (4, 3)]
    """

    def __init__(self, component: Component, weights):
        if not isinstance(component, Component):
            raise ArgumentError(
                "component", f"component must be a vijax.models.Component, got {type(component).__name__}"
            )
        if not isinstance(weights, (DirichletWeights, StickBreaking)):
            raise ArgumentError(
                "weights", f"weights must be DirichletWeights or StickBreaking, got {type(weights).__name__}"
            )
        check_component(component, "component")
        self._component = component
        self._weights = weights

    component = property(lambda self: self._component, doc="The conjugate component shared by the K components.")
    weights = property(lambda self: self._weights, doc="``DirichletWeights`` (finite) or ``StickBreaking`` (DP).")
    local_methods = property(lambda self: self._weights.local_methods, doc="The local-step methods the weights allow.")
    num_components = property(lambda self: self._weights.num_components, doc="K (the truncation level T of a DP).")
    dtype = property(lambda self: self._component.dtype, doc="The component's float dtype (None: JAX's default).")

    def _dtype(self):
        return float_dtype(self._component.dtype)

    def __repr__(self):
        return f"{type(self).__name__}({self._component!r}, {self._weights!r})"

    def prior(self):
        """(the weights' prior, the component's prior of K copies)."""
        return self._weights.prior(self._dtype()), self._component.prior(self.num_components)

    def check_data(self, x) -> None:
        """The component's checks of the data (one array) and of their statistics (``check_statistics``)."""
        comp = self._component
        check_one_array(self, x, f"one array {comp.data_name} of shape {comp.data_shape}")
        comp.check_data(x)
        check_statistics(comp, x, comp.data_name, "component")

    def batch_checks(self, x) -> list:
        """The component's value checks of a step's batch."""
        return self._component.batch_checks(x)

    def stats(self, x: Array, resp: Array, tail: Array | None = None):
        """The statistics (weights', component's) of responsibilities ``resp`` (N, K) (and tail mass (N,))."""
        return self._weights.stats(resp, tail), self._component.stats(x, resp)

    def posterior_from_responsibilities(self, x: Array, resp: Array, tail: Array | None = None):
        """The coordinate-optimal q(beta) for responsibilities ``resp`` (N, K) (the M-step).

        Raises:
          ValueError: naming ``x``, ``resp`` or ``tail`` for a wrong shape or a NaN, infinite or negative entry.
        """
        x, resp = program_argument(x), program_argument(resp)
        tail = None if tail is None else program_argument(tail)
        self._component.check_data(x)
        n, k = np.shape(x)[0], self.num_components
        for name, a, shape in (("resp", resp, (n, k)), ("tail", tail, (n,))):
            if a is None:
                continue
            if np.shape(a) != shape:
                raise ArgumentError(name, f"{name} must have shape {shape} (N = {n} rows of x), got {np.shape(a)}")
            check_finite(name, a)
            low = None if is_tracer(a) else float(np.min(a, initial=0.0))
            if low is not None and low < 0:
                raise ArgumentError(name, f"{name} must be >= 0, got min {low}")
        return self._posterior_from_responsibilities(x, resp, tail)

    @jax.jit
    def _posterior_from_responsibilities(self, x: Array, resp: Array, tail: Array | None):
        dt = self._dtype()
        x = self._component.prepare(x, dt)
        return conjugate_posterior(self.prior(), self.stats(x, jnp.asarray(resp, dt), tail))

    def init_globals(self, key: PRNGKey, x: Array | None = None):
        """The component's starting q (:meth:`Component.initial_q`) and the weights' q from its data counts.

        Raises:
          ValueError: naming ``num_components`` when k-means++ seeding is given fewer rows than components.
        """
        if x is None:
            q_comp, counts = self._component.initial_q(key, self.num_components, x)
            return self._weights.initial_q(counts, None, self._dtype()), q_comp
        if self._component.distinct_seeds and self._weights.finite:  # a DP's extra components start empty
            check_enough_points("num_components", self.num_components, np.shape(x)[0])
        return _initial_globals_from_data(self, key, x)

    def log_resp(self, globals_view, x: Array) -> Array:
        """log r_nk (normalized over k) at a globals view, shape (N, K) (finite weights)."""
        w_view, c_view = globals_view
        log_w = floor_log(self._weights.expected_log_weights(w_view))
        return jax.nn.log_softmax(log_w[None, :] + self._component.expected_log_lik(c_view, x), axis=-1)

    def local_step(self, globals_view, x: Array, key: PRNGKey | None = None, method: str = "meanfield") -> LocalResult:
        """The local step ``method`` (see the class docstring) for a batch ``x``."""
        check_choice("method", method, self.local_methods)
        comp = self._component
        comp.check_shape(x)
        if method == "gibbs" and key is None:
            raise ValueError("local_step(method='gibbs') needs a PRNG key")
        x = comp.prepare(x, jax.tree_util.tree_leaves(globals_view)[0].dtype)
        if self._weights.has_tail:
            return self._local_step_with_tail(globals_view, x)
        log_r = self.log_resp(globals_view, x)
        r = jnp.exp(log_r)
        local_terms = jnp.sum(entropy_of_probs(r)) + jnp.sum(comp.log_base_measure(x))
        if method == "gibbs":
            r = jax.nn.one_hot(jax.random.categorical(key, log_r, axis=-1), self.num_components, dtype=r.dtype)
        return LocalResult(self.stats(x, r), local_terms, r)

    def _local_step_with_tail(self, globals_view, x: Array) -> LocalResult:
        """Kurihara et al.'s truncation: the closed-form tail of the module docstring."""
        w_view, c_view = globals_view
        comp = self._component
        log_s = self._weights.expected_log_weights(w_view)[None, :] + comp.expected_log_lik(c_view, x)
        e_log_w, log_g = self._weights.tail_constants(log_s.dtype)
        prior_view = jax.tree_util.tree_map(lambda u: u[:1], expfam.tree_mean_params(comp.prior(1)))
        c = comp.expected_log_lik(prior_view, x)[:, 0]  # E_p[log p(x_n | theta)]
        log_tail_first = jnp.sum(w_view[1]) + e_log_w + c  # log s_{n, T+1} = A_n
        log_tail_sum = log_tail_first - jnp.log(-jnp.expm1(log_g))  # A_n - log(1 - g)
        log_norm = jax.nn.logsumexp(jnp.concatenate([log_s, log_tail_sum[:, None]], axis=1), axis=1)  # log S_n
        r = jnp.exp(log_s - log_norm[:, None])
        tail = jnp.exp(log_tail_sum - log_norm)  # R_n = q(z_n > T)
        log_rho = log_tail_first - log_norm
        h = comp.log_base_measure(x)
        # sum_{k<=T} r_nk (log h_n - log r_nk) + R_n (E_p[log w] + c_n - log rho_n), c_n including log h_n
        local_terms = jnp.sum(entropy_of_probs(r)) + jnp.sum((1.0 - tail) * h) + jnp.sum(tail * (e_log_w + c - log_rho))
        return LocalResult(self.stats(x, r, tail), local_terms, jnp.concatenate([r, tail[:, None]], axis=1))

    def expected_weights(self, q) -> Array:
        """E_q[pi] (K,), with a last entry for a Kurihara et al. tail's total mass."""
        return self._weights.expected_weights(q[0])

    @jax.jit
    def point_estimates(self, q):
        """(E_q[pi], the component's point estimate), e.g. (weights, means, variances) for Gaussians."""
        est = self._component.point_estimate(q[1])
        w = self.expected_weights(q)
        return (w, *est) if isinstance(est, tuple) else (w, est)

    def log_predictive(self, q, x: Array) -> Array:
        """log sum_k E[pi_k] p(x_n | q_k) per row (Kurihara et al.: plus the tail's mass times the prior predictive)."""
        x = program_argument(x)
        self._component.check_data(x)
        return self._log_predictive(q, x)

    @jax.jit
    def _log_predictive(self, q, x: Array) -> Array:
        comp = self._component
        x = comp.prepare(x, self._dtype())
        w = self.expected_weights(q)
        lp = comp.log_predictive(q[1], x)
        if self._weights.has_tail:
            lp = jnp.concatenate([lp, comp.log_predictive(comp.prior(1), x)], axis=1)
        log_w = jnp.log(jnp.maximum(w, jnp.finfo(w.dtype).tiny))
        return jax.nn.logsumexp(lp + log_w[None, :], axis=-1)

    def clusters_found(self, resp: Array, min_count: float = 1.0) -> int:
        """The number of components k <= K with sum_n r_nk >= ``min_count`` (``resp``: a local step's ``local_params``)."""
        n_k = np.asarray(jnp.sum(resp[:, : self.num_components], 0))
        return int(np.sum(n_k >= min_count))


@jax.jit
def _initial_globals_from_data(model: "Mixture", key: PRNGKey, x: Array):
    q_comp, counts = model._component.initial_q(key, model.num_components, x)
    return model._weights.initial_q(counts, np.shape(x)[0], model._dtype()), q_comp


__all__ = ["DirichletWeights", "Mixture", "StickBreaking", "TRUNCATIONS"]
