r"""Dirichlet-process mixtures by stick-breaking, with the two truncations of the tutorial *Raise
your ELBO* (its section on DPMMs): Blei and Jordan (2006) and Kurihara, Welling and Vlassis (2007).

The model (Sethuraman's stick-breaking construction of a DP(alpha) mixture)::

    v_k ~ Beta(1, alpha),   pi_k = v_k prod_{j<k} (1 - v_j),   eta_k ~ p(eta)   (k = 1, 2, ...)
    z_n ~ Categorical(pi),  x_n | z_n = k ~ p(x | eta_k),

with the components p(x | eta) either diagonal Gaussians under Normal-Gamma priors (the
components of :class:`~vijax.models.DiagonalGMM`) or products of Bernoullis under Beta priors
(those of :class:`~vijax.models.BernoulliMixture`, the DP mixture of Bernoullis of Hoffman and
Blei 2015, §4.2). Mean-field q(v_k) = Beta(gamma_k1, gamma_k2), q(eta_k) in the prior's family,
q(z_n) = Categorical(r_n).

**Why it is conditionally conjugate.** log p(z_n = k | v) = log v_k + sum_{j<k} log(1 - v_j) is
linear in t(v_j) = (log v_j, log(1 - v_j)): a datum contributes (1[z_n = j], 1[z_n > j]) to stick
j's statistics. So the protocol of ``vijax.models._base`` applies with the sticks as one more
global family, and the optimal q(v_j) = Beta(1 + sum_n r_nj, alpha + sum_n q(z_n > j)).

**Blei and Jordan (2006): v_T = 1.** The model itself is truncated: pi_k = 0 for k > T. The sticks
v_1..v_{T-1} are global (a Beta of batch shape (T - 1,)); E[log pi_k] = E[log v_k] + sum_{j<k}
E[log(1 - v_j)] with E[log v_T] = 0; r_nk ∝ exp(E[log pi_k] + E[log p(x_n | eta_k)]) over
k = 1..T, and the ELBO is that of a finite mixture.

**Kurihara et al. (2007): the tail tied to the prior.** The model stays infinite; q(v_k, eta_k) =
p(v_k, eta_k) for k > T, so q(v_1..v_T), q(eta_1..eta_T) are global (T sticks) and the KL of
the tail vanishes. Write s_nk = exp(E[log pi_k] + E[log p(x_n | eta_k)]). For k > T every
expectation of a tail factor is under the prior, w ~ Beta(1, alpha):

    E_p[log w] = psi(1) - psi(1 + alpha),   log g := E_p[log(1 - w)] = psi(alpha) - psi(1 + alpha) = -1/alpha,
    c_n := E_p[log p(x_n | eta)]  (the same for every k > T),

so with A_n = sum_{j<=T} E[log(1 - v_j)] + E_p[log w] + c_n,

    log s_nk = A_n + (k - T - 1) log g      (k > T),

a geometric series: sum_{k>T} s_nk = e^{A_n} / (1 - g), 1 - g = -expm1(-1/alpha). Hence

    S_n = sum_{k<=T} s_nk + e^{A_n} / (1 - g),   r_nk = s_nk / S_n,
    R_n := q(z_n > T) = e^{A_n} / ((1 - g) S_n),   q(z_n > j) = sum_{j<k<=T} r_nk + R_n  (j <= T),

(the tutorial's eq. 14). The stick statistics are (r_nj, q(z_n > j)) for j = 1..T (the tail's
mass enters every q(z_n > j)) and the component statistics use r_n1..r_nT only (q(eta_k) for
k > T is not free). The ELBO's data term per datum is sum_{k>=1} r_nk (E[log pi_k] + E[log
p(x_n | eta_k)] - log r_nk). Its part linear in the free globals' t(.) is <s_n, E t> (the
statistics above, with the tail's R_n E[log(1 - v_j)] in the sticks'); what is left of the tail,
with rho_n = r_{n,T+1} = e^{A_n} / S_n and r_nk = rho_n g^m for k = T + 1 + m, is

    sum_{m>=0} rho_n g^m (E_p[log w] + m log g + c_n - log rho_n - m log g) = R_n (E_p[log w] + c_n - log rho_n):

the m log g terms cancel, so the infinite sum is closed. ``local_terms`` holds that plus
sum_{k<=T} r_nk (log h(x_n) - log r_nk) (c_n includes log h; the code's logits leave the common
log h out of every s_nk, k <= T and k > T alike). The tutorial reaches the same
value as log S_n at the optimal r (its eq. 13 and the line after).

Under SSVI the stick and component views are a draw's t(.) for k <= T; the tail keeps the
prior's expectations above (its factors are not part of q's free parameters, and there are
infinitely many).

**scikit-learn.** ``BayesianGaussianMixture(weight_concentration_prior_type="dirichlet_process")``
keeps T free sticks (as Kurihara et al.) but sets q(z_n > T) = 0 (a truncation of q(z), neither of
the two above); its q(v_k) = Beta(1 + N_k, alpha + sum_{j>k} N_j). From the same responsibilities
the M-steps coincide: for Blei and Jordan on sticks 1..T-1 and every component, for Kurihara et
al. (with no tail mass in the responsibilities) on all T sticks and components.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import digamma

from vijax import expfam
from vijax._validate import check_choice, check_int, check_positive_scalar, float_dtype
from vijax.models._base import LocalResult, conjugate_posterior, entropy_of_probs
from vijax.models.bernoulli_mixture import BernoulliMixture, _component_log_lik
from vijax.models.gmm import _LOG_2PI, DiagonalGMM
from vijax.types import Array, PRNGKey

TRUNCATIONS = ("blei_jordan", "kurihara")


@dataclasses.dataclass(frozen=True)
class DPMixture:
    """A stick-breaking DP(alpha) mixture truncated at T (see the module docstring).

    Build it with :meth:`gaussian`, :meth:`gaussian_from_data` or :meth:`bernoulli`; the
    ``components`` field is the finite mixture whose component family (prior, statistics and
    expected log-likelihood) the DP mixture uses, with ``num_components`` = T (its weight prior is
    not used).

    Globals: ``(Beta sticks, components)``, the sticks of batch shape (T - 1,) for
    ``truncation="blei_jordan"`` and (T,) for ``"kurihara"``; the components' family as in the
    finite mixture (``NormalGamma`` (T, D) or ``Beta`` (T, D)). A globals view is the same
    structure of mean parameters (or of a draw's t(.) under SSVI).

    ``local_params`` of a local step: r (N, T) for Blei and Jordan; for Kurihara et al. (N, T + 1),
    the last column the tail mass q(z_n > T).

    Args:
      components: a :class:`DiagonalGMM` or :class:`BernoulliMixture` with ``num_components`` = T.
      alpha: DP concentration (> 0); each stick is Beta(1, alpha).
      truncation: ``"blei_jordan"`` (v_T = 1) or ``"kurihara"`` (q = prior beyond T).

    Examples:
        >>> model = DPMixture.bernoulli(4, 3, alpha=2.0)
        >>> [f.batch_shape for f in model.prior()]
        [(3,), (4, 3)]
        >>> DPMixture.bernoulli(4, 3, truncation="kurihara").prior()[0].batch_shape
        (4,)
    """

    components: Any
    alpha: float = 1.0
    truncation: str = "blei_jordan"
    local_methods = ("meanfield",)

    def __post_init__(self):
        if not isinstance(self.components, (DiagonalGMM, BernoulliMixture)):
            raise ValueError(
                "components must be a DiagonalGMM or a BernoulliMixture (the component family), "
                f"got {type(self.components).__name__}"
            )
        check_positive_scalar("alpha", self.alpha)
        object.__setattr__(self, "alpha", float(self.alpha))
        check_choice("truncation", self.truncation, TRUNCATIONS)

    # -- constructors ---------------------------------------------------------------------------
    @classmethod
    def gaussian(
        cls,
        truncation_level: int,
        dim: int,
        *,
        alpha: float = 1.0,
        truncation: str = "blei_jordan",
        loc0: Any = 0.0,
        kappa0: float = 1.0,
        a0: float = 1.0,
        b0: Any = 1.0,
        dtype=None,
    ) -> "DPMixture":
        """Diagonal-Gaussian components with Normal-Gamma priors (those of :class:`DiagonalGMM`)."""
        t = check_int("truncation_level", truncation_level)
        return cls(DiagonalGMM(t, dim, loc0=loc0, kappa0=kappa0, a0=a0, b0=b0, dtype=dtype), alpha, truncation)

    @classmethod
    def gaussian_from_data(
        cls,
        x,
        truncation_level: int,
        *,
        alpha: float = 1.0,
        truncation: str = "blei_jordan",
        kappa0: float = 1.0,
        a0: float | None = None,
        dtype=None,
    ) -> "DPMixture":
        """Gaussian components with the empirical-Bayes priors of :meth:`DiagonalGMM.from_data`
        (scikit-learn's defaults: m0 = mean(x), a0 = D / 2, b0 = a0 var(x))."""
        t = check_int("truncation_level", truncation_level)
        return cls(DiagonalGMM.from_data(x, t, kappa0=kappa0, a0=a0, dtype=dtype), alpha, truncation)

    @classmethod
    def bernoulli(
        cls,
        truncation_level: int,
        dim: int,
        *,
        alpha: float = 1.0,
        truncation: str = "blei_jordan",
        a: float = 1.0,
        b: float = 1.0,
        init_pseudo_count: float = 1.0,
        dtype=None,
    ) -> "DPMixture":
        """Bernoulli components with Beta(a, b) priors (those of :class:`BernoulliMixture`)."""
        t = check_int("truncation_level", truncation_level)
        return cls(
            BernoulliMixture(t, dim, a=a, b=b, init_pseudo_count=init_pseudo_count, dtype=dtype), alpha, truncation
        )

    # -- the model ------------------------------------------------------------------------------
    @property
    def truncation_level(self) -> int:
        """T."""
        return self.components.num_components

    @property
    def dim(self) -> int:
        return self.components.dim

    @property
    def num_sticks(self) -> int:
        """T - 1 (Blei and Jordan) or T (Kurihara et al.)."""
        return self.truncation_level - (self.truncation == "blei_jordan")

    @property
    def _gaussian(self) -> bool:
        return isinstance(self.components, DiagonalGMM)

    def _dtype(self):
        return float_dtype(self.components.dtype)

    def prior(self):
        """(Beta(1, alpha) sticks, the components' prior)."""
        dt = self._dtype()
        s = self.num_sticks
        sticks = expfam.Beta.from_concentrations(jnp.ones((s,), dt), jnp.full((s,), self.alpha, dt))
        return sticks, self.components.prior()[1]

    def batch_checks(self, x) -> list:
        """The component family's value checks."""
        return self.components.batch_checks(x)

    def check_data(self, x) -> None:
        """The component family's check (``x`` for Gaussian, binary ``y`` for Bernoulli)."""
        self.components.check_data(x)

    def _component_stats(self, x: Array, resp: Array):
        return self.components.stats(x, resp)[1]

    def stick_stats(self, resp: Array, tail: Array | None = None):
        """The sticks' statistics (sum_n r_nj, sum_n q(z_n > j)) for j = 1..num_sticks, from
        responsibilities ``resp`` (N, T) and, for Kurihara et al., the tail mass ``tail`` (N,)."""
        n_k = jnp.sum(resp, 0)
        above = jnp.cumsum(n_k[::-1])[::-1] - n_k  # sum_{k > j, k <= T} N_k
        if tail is not None:
            above = above + jnp.sum(tail)
        s = self.num_sticks
        return n_k[:s], above[:s]

    def posterior_from_responsibilities(self, x: Array, resp: Array, tail: Array | None = None):
        """The coordinate-optimal q(beta) for responsibilities ``resp`` (N, T) (and tail mass
        ``tail`` (N,) for Kurihara et al.; None = no mass beyond T): the M-step."""
        x = jnp.asarray(x, self._dtype())
        resp = jnp.asarray(resp, self._dtype())
        return conjugate_posterior(self.prior(), (self.stick_stats(resp, tail), self._component_stats(x, resp)))

    def init_globals(self, key: PRNGKey, x: Array | None = None):
        """The components as the finite mixture starts them (k-means++ hard assignments for
        Gaussians, seeds drawn from the data for Bernoullis) and sticks as if each of the T
        components held N / T data: q(v_k) = Beta(1 + N / T, alpha + (T - k) N / T). Without data
        the sticks are the prior's."""
        dt = self._dtype()
        if x is not None and self._gaussian:  # T may exceed N (an upper bound): extra components start empty
            comps = self.components._seeded_globals(key, x)[1]
        else:
            comps = self.components.init_globals(key, x)[1]
        t, s = self.truncation_level, self.num_sticks
        if x is None:
            return self.prior()[0], comps
        per = jnp.asarray(x).shape[0] / t
        k = jnp.arange(1, s + 1, dtype=dt)
        sticks = expfam.Beta.from_concentrations(jnp.full((s,), 1.0 + per, dt), self.alpha + (t - k) * per)
        return sticks, comps

    def expected_log_weights(self, stick_view: tuple[Array, Array]) -> Array:
        """E[log pi_k] = E[log v_k] + sum_{j<k} E[log(1 - v_j)] for k = 1..T (E[log v_T] = 0 for
        Blei and Jordan), from the sticks' view (E[log v], E[log(1 - v)])."""
        e_log_v, e_log_1m = stick_view
        if self.truncation == "blei_jordan":
            e_log_v = jnp.concatenate([e_log_v, jnp.zeros((1,), e_log_v.dtype)])
            e_log_1m = jnp.concatenate([e_log_1m, jnp.zeros((1,), e_log_1m.dtype)])
        return e_log_v + jnp.cumsum(e_log_1m) - e_log_1m

    def _log_h(self, dtype) -> Array:
        """log h(x_n) per datum: -D/2 log 2 pi (Gaussian) or 0 (Bernoulli)."""
        return jnp.asarray(-0.5 * self.dim * _LOG_2PI if self._gaussian else 0.0, dtype)

    def _prior_tail_constants(self, x: Array):
        """(E_p[log w], log g, c_n - log h(x_n) (N,)) of the module docstring (log h is common to
        every component, so the logits leave it out)."""
        dt = x.dtype
        a = jnp.asarray(self.alpha, dt)
        e_log_w = digamma(jnp.ones((), dt)) - digamma(1.0 + a)
        log_g = digamma(a) - digamma(1.0 + a)
        view = jax.tree_util.tree_map(lambda u: u[:1], expfam.tree_mean_params(self.components.prior()[1]))
        c = self.components.component_log_lik(view, x)[:, 0]
        return e_log_w, log_g, c

    def local_step(self, globals_view, x: Array, key: PRNGKey | None = None, method: str = "meanfield") -> LocalResult:
        """The mean-field q(z_n) at a globals view, with the closed-form tail for Kurihara et al.

        Returns:
          ``LocalResult(suff_stats, local_terms, local_params)``: see the class docstring.
        """
        check_choice("method", method, self.local_methods)
        stick_view, comp_view = globals_view
        dt = stick_view[0].dtype
        if self._gaussian:
            if x.ndim != 2 or x.shape[1] not in (self.dim, 2 * self.dim):
                raise ValueError(f"x must have shape (N, {self.dim}) (or features (N, {2 * self.dim})), got {x.shape}")
        elif x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"y must have shape (N, {self.dim}), got {x.shape}")
        x = x.astype(dt)
        n = x.shape[0]
        log_h = self._log_h(dt)
        log_s = self.expected_log_weights(stick_view)[None, :] + self.components.component_log_lik(comp_view, x)
        if self.truncation == "blei_jordan":
            log_r = jax.nn.log_softmax(log_s, axis=-1)
            r = jnp.exp(log_r)
            local_terms = jnp.sum(entropy_of_probs(r)) + n * log_h
            stats = (self.stick_stats(r), self._component_stats(x, r))
            return LocalResult(stats, local_terms, r)
        e_log_w, log_g, c = self._prior_tail_constants(x)
        log_tail_first = jnp.sum(stick_view[1]) + e_log_w + c  # log s_{n, T+1} = A_n
        log_tail_sum = log_tail_first - jnp.log(-jnp.expm1(log_g))  # A_n - log(1 - g)
        log_norm = jax.nn.logsumexp(jnp.concatenate([log_s, log_tail_sum[:, None]], axis=1), axis=1)  # log S_n
        log_r = log_s - log_norm[:, None]
        r = jnp.exp(log_r)
        tail = jnp.exp(log_tail_sum - log_norm)  # R_n = q(z_n > T)
        log_rho = log_tail_first - log_norm
        local_terms = (
            jnp.sum(entropy_of_probs(r))
            + n * log_h  # log h: sum_{k<=T} r_nk + R_n = 1
            + jnp.sum(tail * (e_log_w + c - log_rho))
        )
        stats = (self.stick_stats(r, tail), self._component_stats(x, r))
        return LocalResult(stats, local_terms, jnp.concatenate([r, tail[:, None]], axis=1))

    # -- point estimates and the predictive -----------------------------------------------------
    def expected_weights(self, q) -> Array:
        """E_q[pi_k] = E[v_k] prod_{j<k} E[1 - v_j] (independent sticks), k = 1..T; for Kurihara
        et al. a last entry E_q[sum_{k>T} pi_k] = prod_{j<=T} E[1 - v_j]. Sums to one."""
        sticks = q[0]
        a, b = sticks.concentration1, sticks.concentration0
        ev = a / (a + b)
        # v_T = 1 (Blei and Jordan), or the tail's total as a last "stick" equal to 1 (Kurihara et al.)
        ev = jnp.concatenate([ev, jnp.ones((1,), ev.dtype)])
        rest = jnp.concatenate([jnp.ones((1,), ev.dtype), jnp.cumprod(1.0 - ev[:-1])])
        return ev * rest

    def _component_log_predictive(self, comps, x: Array) -> Array:
        if self._gaussian:
            return DiagonalGMM.component_log_predictive(comps, x)
        a, b = comps.concentration1, comps.concentration0
        return _component_log_lik(a / (a + b), x)

    def log_predictive(self, q, x: Array) -> Array:
        """log p(x_n | q) per row: sum_k E[pi_k] p_k(x_n), each component's predictive under q(eta_k)
        (Student-t products, or Bernoulli products at E[phi]: exact for a factorized q), and for
        Kurihara et al. the tail's mass times the prior predictive."""
        x = jnp.asarray(x, self._dtype())
        w = self.expected_weights(q)
        lp = self._component_log_predictive(q[1], x)
        if self.truncation == "kurihara":
            prior1 = jax.tree_util.tree_map(lambda u: u[:1], self.components.prior()[1])
            lp = jnp.concatenate([lp, self._component_log_predictive(prior1, x)], axis=1)
        log_w = jnp.log(jnp.maximum(w, jnp.finfo(w.dtype).tiny))
        return jax.nn.logsumexp(lp + log_w[None, :], axis=-1)

    def clusters_found(self, resp: Array, min_count: float = 1.0) -> int:
        """The number of components k <= T with expected count sum_n r_nk >= ``min_count``
        (``resp`` the ``local_params`` of a local step; a Kurihara tail column is not counted)."""
        n_k = np.asarray(jnp.sum(resp[:, : self.truncation_level], 0))
        return int(np.sum(n_k >= min_count))


__all__ = ["DPMixture", "TRUNCATIONS"]
