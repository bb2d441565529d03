"""Latent Dirichlet allocation (Blei et al. 2003), conditionally conjugate, with mean-field, CVB0 and Gibbs local steps.

The generative process (Hoffman & Blei 2015, eq. 25)::

    beta_k ~ Dirichlet(eta 1_V),   theta_d ~ Dirichlet(alpha 1_K),
    z_dn | theta_d ~ Categorical(theta_d),   w_dn | z_dn, beta ~ Categorical(beta_{z_dn}).

q(beta_k) = Dirichlet(lambda_k). The complete-data likelihood is linear in t(beta) = log beta with statistic
c_kv = sum_n 1[w_dn = v] 1[z_dn = k] (Hoffman & Blei 2015, eq. 26), so lambda = eta + sum_d E[c_d] (Blei et al.
2017, appendix C). alpha and eta are hyperparameters (Hoffman et al. 2010): ``prior``, ``local_step`` and
``log_predictive`` take a ``hyper`` dict of (possibly traced) scalars.

References:
  Blei, Ng and Jordan (2003). Latent Dirichlet allocation. JMLR 3.
  Hoffman, Blei and Bach (2010). Online learning for latent Dirichlet allocation. NIPS.
  Asuncion, Welling, Smyth and Teh (2009). On smoothing and inference for topic models. UAI.
  Mimno, Hoffman and Blei (2012). Sparse stochastic inference for latent Dirichlet allocation. ICML.
  Hoffman and Blei (2015). Structured stochastic variational inference. AISTATS.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from vijax import expfam
from vijax._validate import ArgumentError, INT32_MAX, check_allocation, check_bool, check_choice
from vijax._validate import check_float_dtype, check_int, check_positive_fields, check_scalar, enforce_value_checks
from vijax._validate import float_dtype, is_tracer, real_array
from vijax._compile import gamma_on_host
from vijax.expfam import digamma, digamma_and_gammaln_with_total
from vijax.models._base import LocalResult, bow_batch_checks, check_bow_data, entropy_of_probs, rows_with_data
from vijax.models._pytree import PytreeModel
from vijax.solvers import by_length_tiles, collapsed_gibbs_allocations, iterate_per_row, squarem_per_row
from vijax.solvers import tile_spread, tile_sum
from vijax.types import Array, PRNGKey

TILE_WIDTH = 32  # word slots per chunk of the E-steps' tiles
CPU_SLOTS = 512  # default least slots per tile on a CPU
ACCELERATOR_SLOTS = 32768  # ... and on an accelerator


ESTEPS = ("tiles", "dense")  # layouts of the mean-field E-step (LDA(estep=...))


def estep_layout(estep: str | None) -> str:
    """``estep``, else ``"tiles"`` on a CPU and ``"dense"`` on an accelerator (chosen when the step is traced)."""
    if estep is not None:
        return estep
    return "tiles" if jax.default_backend() == "cpu" else "dense"


def estep_slots(tile_slots: int | None) -> int:
    """``tile_slots``, else ``CPU_SLOTS`` on a CPU and ``ACCELERATOR_SLOTS`` elsewhere."""
    if tile_slots is not None:
        return int(tile_slots)
    return CPU_SLOTS if jax.default_backend() == "cpu" else ACCELERATOR_SLOTS


def largest_precise_concentration(dtype) -> float:
    """2^-10 / eps of ``dtype`` (8,192 in float32): the largest concentration whose KL error (2 eps lambda) is < 1 %."""
    return 2.0**-10 / float(np.finfo(dtype).eps)


def concentration_bounds(name: str, dtype) -> tuple[float, float]:
    """``(low, high)`` of ``"alpha"`` (smallest normal) or ``"eta"`` (2^9 eps) in ``dtype``; high: largest precise."""
    finfo = np.finfo(dtype)
    low = float(finfo.tiny) if name == "alpha" else 2.0**9 * float(finfo.eps)
    return low, largest_precise_concentration(dtype)


@dataclasses.dataclass(frozen=True, eq=False)
class LDA(PytreeModel):
    """Latent Dirichlet allocation with symmetric priors and three local steps.

    A local step returns ``suff_stats = (c,)`` (K, V), ``local_params = gamma`` (S, K) and ``local_terms`` such
    that :func:`~vijax.models.conjugate_elbo` is the batch's mean-field ELBO (Blei et al. 2003, eq. 15)::

        local_terms = sum_d (-KL(Dir(gamma_d) || Dir(alpha 1_K)) + sum_wk n_dw phi_dwk (E[log theta_dk] - log phi_dwk)).

    ``"meanfield"``: coordinate ascent per document (Blei et al. 2003, eq. 6-7; Hoffman et al. 2010, Algorithm 2),
    phi_dwk ∝ exp(E[log theta_dk] + log_beta_kw), gamma_dk = alpha + sum_w n_dw phi_dwk, from alpha + N_d / K until
    gamma_d's mean absolute change is below ``tol``, with safeguarded SQUAREM extrapolations (``accelerate``);
    ``estep`` chooses the layout, with the same fixed point: documents packed by length into tiles that run in turn
    (``"tiles"``), or the whole minibatch at once as two matrix products per iteration over its distinct words
    (``"dense"``).
    ``"cvb0"``: the zero-order collapsed update (Asuncion et al. 2009, eq. 5), beta fixed, g_dwk ∝ (alpha + N_dk -
    g_dwk) b_kw, Jacobi sweeps from g_dwk ∝ b_kw; the ELBO is the mean-field one at phi = g, gamma = alpha + N_d.
    ``"gibbs"``: collapsed Gibbs sampling of each token's topic, beta fixed (Mimno et al. 2012), p(z_dn = k | z_d^{-n},
    w, b) ∝ (alpha + N_dk^{-n}) b_{k w_dn}, slot counts averaged after ``gibbs_burn_in``; the ELBO at the implied phi.

    Args:
      num_topics: K >= 1.
      vocab_size: V >= 1.
      alpha: document-topic concentration, in :func:`concentration_bounds` (at most 8,192 in float32).
      eta: topic-word concentration, in :func:`concentration_bounds` (>= 6.1e-5 in float32).
      max_iters: cap on the mean-field iterations (>= 1).
      tol: mean-field / CVB0 threshold on the mean absolute change (>= 0).
      cvb0_iters: cap on the CVB0 sweeps (>= 1).
      gibbs_sweeps: Gibbs sweeps after the initialization pass (>= 1).
      gibbs_burn_in: how many of those are discarded (0 <= burn_in < gibbs_sweeps).
      init_scale: scale of the random initial lambda (:meth:`init_globals`), in eta's interval.
      dtype: float dtype of the prior and of the initial q (default: JAX's default float).
      accelerate: interleave the mean-field updates with safeguarded SQUAREM (default True).
      tile_slots: least word slots per tile of the E-steps (None: 512 on a CPU, 32,768 on an accelerator).
      estep: the mean-field layout, ``"tiles"`` or ``"dense"`` (None: tiles on a CPU, dense on an accelerator);
        CVB0 always runs in tiles.

    Examples:
        >>> model = LDA(num_topics=3, vocab_size=10, alpha=0.1, eta=0.01)
        >>> model.prior().batch_shape
        (3,)
        >>> model.hyperparameters()
        {'alpha': 0.1, 'eta': 0.01}
        >>> float(model.prior(hyper={"eta": 0.5}).concentration[0, 0])
        0.5
    """

    num_topics: int
    vocab_size: int
    alpha: float = 0.1
    eta: float = 0.01
    max_iters: int = 100
    tol: float = 1e-3
    cvb0_iters: int = 100
    gibbs_sweeps: int = 10
    gibbs_burn_in: int = 5
    init_scale: float = 1.0
    dtype: Any = None
    accelerate: bool = True
    tile_slots: Optional[int] = None
    estep: Optional[str] = None
    local_methods = ("meanfield", "cvb0", "gibbs")
    present_rows = staticmethod(rows_with_data)  # documents with a token: SVI's N / S counts these
    static_floats = ("alpha", "eta", "tol", "init_scale")

    def __post_init__(self):
        check_int("num_topics", self.num_topics)
        check_int("vocab_size", self.vocab_size)
        check_positive_fields(self, ("alpha", "eta"))
        check_int("max_iters", self.max_iters, maximum=INT32_MAX)
        check_scalar("tol", self.tol, low=0.0, include_low=True)
        check_int("cvb0_iters", self.cvb0_iters, maximum=INT32_MAX)
        check_int("gibbs_sweeps", self.gibbs_sweeps, maximum=INT32_MAX)
        check_int("gibbs_burn_in", self.gibbs_burn_in, minimum=0)
        if self.gibbs_burn_in >= self.gibbs_sweeps:
            raise ValueError(
                f"gibbs_burn_in must be < gibbs_sweeps ({self.gibbs_sweeps}) so that at least "
                f"one sweep is kept, got {self.gibbs_burn_in}"
            )
        check_float_dtype(self.dtype)
        self.check_hyperparameters(self.hyperparameters())
        low, high = concentration_bounds("eta", float_dtype(self.dtype))  # lambda's start: held as eta's
        check_scalar("init_scale", self.init_scale, low=low, high=high, include_low=True)
        check_allocation("num_topics * vocab_size", self.num_topics * self.vocab_size, float_dtype(self.dtype).itemsize)
        check_bool("accelerate", self.accelerate)
        if self.tile_slots is not None:
            check_int("tile_slots", self.tile_slots, maximum=2**24)
        if self.estep is not None:
            check_choice("estep", self.estep, ESTEPS)

    def hyperparameters(self) -> dict[str, float]:
        """``{"alpha": alpha, "eta": eta}``: the defaults of every ``hyper`` argument."""
        return {"alpha": self.alpha, "eta": self.eta}

    def check_hyperparameters(self, values: Mapping[str, Any]) -> None:
        """Raises :class:`~vijax.ArgumentError` naming the key unless each value is in :func:`concentration_bounds`."""
        dt = np.dtype(float_dtype(self.dtype))
        for name, value in values.items():
            if name not in ("alpha", "eta"):
                raise ArgumentError(name, f"{name} is not a hyperparameter of LDA; choose from ['alpha', 'eta']")
            if is_tracer(value):
                continue
            low, high = concentration_bounds(name, dt)
            expected = f"a finite number in [{low:.6g}, {high:.6g}] in {dt.name} (or an array of them)"
            a = real_array(name, value, expected)
            bad = ~(np.isfinite(a) & (a >= low) & (a <= high))
            if np.any(bad):
                raise ArgumentError(
                    name,
                    f"{name} must be {expected}, got {float(a[bad].flat[0])!r}: outside it the ELBO's "
                    "Dirichlet terms are not computed precisely (vijax.models.lda.concentration_bounds)",
                    value,
                )

    def _resolve_hyper(self, hyper, dtype) -> tuple[Array, Array]:
        """(alpha, eta) as scalar arrays of ``dtype``: from ``hyper`` where given, else the fields."""
        hyper = {} if hyper is None else hyper
        unknown = set(hyper) - {"alpha", "eta"}
        if unknown:
            raise ArgumentError("hyper", f"hyper may only hold 'alpha' and 'eta', got {sorted(unknown)}")
        out = []
        for name in ("alpha", "eta"):
            value = hyper.get(name, getattr(self, name))
            if name in hyper and not isinstance(value, jax.Array):  # host numbers: checked here, free
                self.check_hyperparameters({name: value})
            if jnp.ndim(value) != 0:
                raise ArgumentError(
                    "hyper",
                    f"hyper[{name!r}] must be a scalar (LDA's priors are symmetric), got shape {jnp.shape(value)}",
                )
            out.append(jnp.asarray(value, dtype))
        return out[0], out[1]

    def hyper_objective(self, hyper: dict, q_global: expfam.Dirichlet, local: LocalResult, scale=1.0) -> Array:
        """The ELBO's terms that depend on (alpha, eta) (Blei et al. 2003, eq. 15; Hoffman et al. 2010), concave::

            L(alpha, eta) = scale * sum_d [ lgamma(K alpha) - K lgamma(alpha) + (alpha - 1) sum_k E[log theta_dk] ]
                            + sum_k [ lgamma(V eta) - V lgamma(eta) + (eta - 1) sum_v E[log beta_kv] ].

        Args:
          hyper: ``{"alpha": scalar, "eta": scalar}``.
          q_global: q(beta), ``Dirichlet`` with concentration lambda (K, V).
          local: a :class:`LocalResult` of ``local_step``; its ``local_params`` are gamma (S, K).
          scale: the weight (N / S) of the batch's documents: a scalar or one per document (S,).
        """
        gamma = local.local_params
        k, v = self.num_topics, self.vocab_size
        alpha, eta = self._resolve_hyper(hyper, gamma.dtype)
        (e_log_beta,) = q_global.mean_params()  # (K, V)
        t_docs = jnp.sum(digamma(gamma), axis=-1) - k * digamma(jnp.sum(gamma, axis=-1))  # (S,)
        l_alpha = jnp.sum(scale * (gammaln(k * alpha) - k * gammaln(alpha) + (alpha - 1.0) * t_docs))
        l_eta = k * (gammaln(v * eta) - v * gammaln(eta)) + (eta - 1.0) * jnp.sum(e_log_beta)
        return l_alpha + l_eta

    def prior(self, hyper: dict | None = None) -> expfam.Dirichlet:
        """p(beta): K independent Dirichlet(eta 1_V), batch shape (K,); eta from ``hyper`` if given."""
        dt = float_dtype(self.dtype)
        _, eta = self._resolve_hyper(hyper, dt)
        return expfam.Dirichlet.from_concentration(jnp.broadcast_to(eta, (self.num_topics, self.vocab_size)))

    def init_globals(self, key: PRNGKey, batch=None) -> expfam.Dirichlet:
        """Online LDA's start (Hoffman et al. 2010): lambda_kv = init_scale * g_kv, g_kv ~ Gamma(100, 100)."""
        g = gamma_on_host(key, (self.num_topics, self.vocab_size), 100.0, 100.0, float_dtype(self.dtype))
        return _start_from(self, g)

    @staticmethod
    def expected_topics(q: expfam.Dirichlet) -> Array:
        """E_q[beta] = lambda / sum_v lambda_v, shape (K, V)."""
        lam = q.concentration
        return lam / jnp.sum(lam, axis=-1, keepdims=True)

    def batch_checks(self, batch) -> list:
        """The value checks of a step's batch: word ids in [0, V), counts finite and >= 0."""
        return bow_batch_checks(batch, self.vocab_size)

    def check_data(self, batch) -> None:
        """Raises ValueError unless ``batch`` is a BowBatch of ids in [0, V) and integer counts >= 0, both (S, L)."""
        check_bow_data(batch, self.vocab_size, integer_counts=True)

    def local_step(
        self, globals_view, batch, key: PRNGKey | None = None, method: str = "meanfield", hyper: dict | None = None
    ) -> LocalResult:
        """The local step ``method`` (class docstring) for the batch.

        Args:
          globals_view: ``(log_beta,)`` with log_beta (K, V): E_q[log beta] or log of a sample.
          batch: a BowBatch of S documents, ``word_ids`` (S, L) int, ``counts`` (S, L).
          key: PRNG key; required by ``"gibbs"``.
          method: ``"meanfield"``, ``"cvb0"`` or ``"gibbs"``.
          hyper: optional ``{"alpha": scalar}`` replacing the model's alpha (``"eta"`` is ignored).
        """
        check_choice("method", method, self.local_methods)
        (log_beta,) = globals_view
        k, v = self.num_topics, self.vocab_size
        if log_beta.shape != (k, v):
            raise ArgumentError(
                "globals_view",
                f"globals_view must be (log_beta,) with log_beta of shape ({k}, {v}), got {log_beta.shape}",
            )
        ids, counts = batch.word_ids, batch.counts
        if ids.ndim != 2 or ids.shape != counts.shape or ids.shape[0] < 1:
            raise ValueError(f"word_ids and counts must both be (S, L) with S >= 1, got {ids.shape} and {counts.shape}")
        if method == "gibbs" and key is None:
            raise ValueError("local_step(method='gibbs') needs a PRNG key")
        if not (is_tracer(ids) or is_tracer(counts)):  # a bare call: the steps' checks (a traced batch: by the step)
            enforce_value_checks(lambda: self.batch_checks(batch))
        log_beta = jnp.asarray(log_beta)
        alpha, _ = self._resolve_hyper(hyper, log_beta.dtype)
        return _local_step(self, method, log_beta, jnp.asarray(ids), jnp.asarray(counts), key, alpha)

    def _meanfield(self, log_beta: Array, ids: Array, n: Array, alpha: Array) -> tuple[Array, Array, Array]:
        """Mean-field coordinate ascent in the layout of ``estep``: gamma (S, K), c (K, V) and the local terms.

        With b_kw = exp(log_beta_kw - max_j log_beta_jw), e_dk = exp(E[log theta_dk]), z_dw = sum_k e_dk b_kw
        (Hoffman et al. 2010): gamma_d = alpha + e_d * sum_w (n_dw / z_dw) b_w, n_dw phi_dwk = (n_dw / z_dw) e_dk b_kw.
        SQUAREM keeps an extrapolation unless it lowers f(gamma) = sum_w n_w log z_w - KL(Dir(gamma) || Dir(alpha));
        the z-part of the local terms is sum_dw n_dw log z_dw - sum_kv c_kv log b_kv.
        """
        log_b = (log_beta - jnp.max(log_beta, axis=0, keepdims=True)).T  # (V, K), <= 0, max 0 per word
        b = jnp.exp(log_b)
        fit = self._meanfield_dense if estep_layout(self.estep) == "dense" else self._meanfield_tiles
        gamma, stats, zterm = fit(b, ids, n, alpha)  # stats_vk = sum_{d,l: w_dl = v} (n_dl / z_dl) e_dk
        stats = stats * b  # c_vk
        return gamma, stats.T, zterm - jnp.sum(stats * log_b)

    def _fixed_point(self, update_and_objective, gamma0: Array, alpha: Array) -> Array:
        """gamma at the fixed point of ``update_and_objective`` (per document), by SQUAREM if ``accelerate``."""
        if self.accelerate and self.max_iters >= 3:
            return squarem_per_row(update_and_objective, gamma0, self.tol, self.max_iters, alpha)
        return iterate_per_row(lambda g: update_and_objective(g)[0], lambda g: g, gamma0, self.tol, self.max_iters)

    def _meanfield_tiles(self, b: Array, ids: Array, n: Array, alpha: Array) -> tuple[Array, Array, Array]:
        """:meth:`_meanfield`'s iterations in length-sorted tiles of documents, run in turn."""
        v, k = b.shape
        tiny = jnp.finfo(b.dtype).tiny

        def fit_tile(tile, acc):
            stats, zterm = acc
            ids_t, n_t = tile.ids, tile.n
            # clip: the ids are in range (checked)
            bb = jnp.transpose(jnp.take(b, ids_t, axis=0, mode="clip"), (0, 2, 1))  # (chunks, K, width)

            def update_and_objective(gamma):
                e_log_theta, kl = _theta_terms(gamma, alpha)
                e = jnp.exp(e_log_theta)
                z = jnp.maximum(jnp.einsum("ckl,ck->cl", bb, tile_spread(tile, e)), tiny)
                sums = tile_sum(
                    tile,
                    jnp.concatenate(
                        [jnp.einsum("ckl,cl->ck", bb, n_t / z), jnp.sum(n_t * jnp.log(z), axis=-1, keepdims=True)], -1
                    ),
                )
                return alpha + e * sums[:, :k], sums[:, k] - kl

            gamma0 = alpha + jnp.broadcast_to(
                tile_sum(tile, jnp.sum(n_t, axis=1))[:, None] / k, (tile.member.shape[0], k)
            )
            gamma = self._fixed_point(update_and_objective, gamma0, alpha)
            e = tile_spread(tile, jnp.exp(_theta_terms(gamma, alpha)[0]))  # (chunks, K)
            z = jnp.maximum(jnp.einsum("ckl,ck->cl", bb, e), tiny)
            u = (n_t / z)[..., None] * e[:, None, :]  # (chunks, width, K): n_dw phi_dwk / b_kw
            stats = stats.at[ids_t.reshape(-1)].add(u.reshape(-1, k))
            return gamma, (stats, zterm + jnp.sum(n_t * jnp.log(z)))

        init = (jnp.zeros((v, k), b.dtype), jnp.zeros((), b.dtype))
        gamma, (stats, zterm) = by_length_tiles(ids, n, k, fit_tile, init, estep_slots(self.tile_slots), TILE_WIDTH)
        return gamma, stats, zterm

    def _meanfield_dense(self, b: Array, ids: Array, n: Array, alpha: Array) -> tuple[Array, Array, Array]:
        """:meth:`_meanfield`'s iterations for the whole minibatch at once over its U distinct words: with the
        counts N (S, U) and B = b_words (U, K), Z = E B^T and gamma = alpha + E * ((N / Z) B), two matrix products."""
        v, k = b.shape
        s = ids.shape[0]
        words, cols = _distinct_words(ids, v)
        bw = jnp.take(b, words, axis=0)  # (U, K)
        counts = jnp.zeros((s, words.shape[0]), b.dtype).at[jnp.arange(s)[:, None], cols].add(n)  # (S, U)
        z_of = lambda e: jnp.maximum(e @ bw.T, jnp.finfo(b.dtype).tiny)  # (S, U)

        def update_and_objective(gamma):
            e_log_theta, kl = _theta_terms(gamma, alpha)
            e = jnp.exp(e_log_theta)
            z = z_of(e)
            return alpha + e * ((counts / z) @ bw), jnp.sum(counts * jnp.log(z), axis=-1) - kl

        gamma0 = alpha + jnp.broadcast_to(jnp.sum(n, axis=1)[:, None] / k, (s, k))
        gamma = self._fixed_point(update_and_objective, gamma0, alpha)
        e = jnp.exp(_theta_terms(gamma, alpha)[0])
        z = z_of(e)
        stats = jnp.zeros((v, k), b.dtype).at[words].add((counts / z).T @ e)  # padding columns add 0
        return gamma, stats, jnp.sum(counts * jnp.log(z))

    def _cvb0(self, log_beta: Array, ids: Array, n: Array, alpha: Array) -> tuple[Array, Array, Array]:
        """CVB0 for a batch in the tiles of :meth:`_meanfield`: gamma = alpha + N_d, c and the local terms."""
        k, v = log_beta.shape
        dt = log_beta.dtype
        log_b = (log_beta - jnp.max(log_beta, axis=0, keepdims=True)).T  # (V, K); the shift cancels in g

        def fit_tile(tile, acc):
            stats, term = acc
            ids_t, n_t = tile.ids, tile.n
            logb = jnp.take(log_b, ids_t, axis=0)  # (chunks, width, K)
            present = (n_t > 0).astype(dt)[..., None]  # a padding slot has no own token to remove

            def topic_counts(g):
                return tile_sum(tile, jnp.sum(n_t[..., None] * g, axis=1))  # (documents, K)

            def update(g):
                others = jnp.maximum(tile_spread(tile, topic_counts(g))[:, None, :] - present * g, 0.0)  # N_dk^{-dw}
                return jax.nn.softmax(jnp.log(alpha + others) + logb, axis=-1)

            g0 = jax.nn.softmax(logb, axis=-1)
            g = iterate_per_row(update, topic_counts, g0, self.tol, self.cvb0_iters, groups=tile.row)
            gamma = alpha + topic_counts(g)
            stats = stats.at[ids_t.reshape(-1)].add((n_t[..., None] * g).reshape(-1, k))
            e_log_theta = digamma(gamma) - digamma(jnp.sum(gamma, axis=-1, keepdims=True))
            elt = tile_spread(tile, e_log_theta)[:, None, :]
            term = term + jnp.sum(n_t * (jnp.sum(g * elt, axis=-1) + entropy_of_probs(g)))
            return gamma, (stats, term)

        init = (jnp.zeros((v, k), dt), jnp.zeros((), dt))
        gamma, (stats, term) = by_length_tiles(ids, n, k, fit_tile, init, estep_slots(self.tile_slots), TILE_WIDTH)
        return gamma, stats.T, term

    def log_predictive(
        self, q_global: expfam.Dirichlet, batch_observed, batch_heldout, hyper: dict | None = None
    ) -> Array:
        """Held-out log probability per document (S,) by document completion (Hoffman et al. 2013, §4): gamma_d fitted
        on the observed words at beta = E_q[beta], a held-out word w scored log sum_k E[theta_dk] E_q[beta_kw]."""
        if batch_observed.word_ids.shape[0] != batch_heldout.word_ids.shape[0]:
            raise ArgumentError(
                "batch_observed",
                "batch_observed and batch_heldout must hold the same number of documents, got "
                f"{batch_observed.word_ids.shape[0]} and {batch_heldout.word_ids.shape[0]}",
            )
        topics = self.expected_topics(q_global)
        gamma = self.local_step((jnp.log(topics),), batch_observed, None, method="meanfield", hyper=hyper).local_params
        e_theta = gamma / jnp.sum(gamma, axis=-1, keepdims=True)
        held_topics = jnp.take(topics.T, batch_heldout.word_ids, axis=0)  # (S, L, K)
        p = jnp.sum(held_topics * e_theta[:, None, :], axis=-1)
        n = jnp.asarray(batch_heldout.counts).astype(p.dtype)
        return jnp.sum(jnp.where(n > 0, n * jnp.log(jnp.where(n > 0, p, 1.0)), 0.0), axis=-1)


@jax.jit
def _start_from(model: LDA, g: Array) -> expfam.Dirichlet:
    return expfam.Dirichlet.from_natural((model.init_scale * g - 1.0,))


@functools.partial(jax.jit, static_argnums=1)
def _local_step(model: LDA, method: str, log_beta: Array, ids: Array, counts: Array, key, alpha: Array) -> LocalResult:
    """The body of ``LDA.local_step`` (``alpha`` an array argument, possibly traced)."""
    dt = log_beta.dtype
    if ids.shape[1] == 0:  # documents without a word slot: one padding slot, which contributes nothing
        ids, counts = jnp.zeros((ids.shape[0], 1), ids.dtype), jnp.zeros((counts.shape[0], 1), counts.dtype)
    alpha, n = alpha.astype(dt), jnp.asarray(counts).astype(dt)
    # floored: a sampled beta with exact zeros (log = -inf) gives zero weight, not NaN (spread evenly)
    log_beta = jnp.maximum(log_beta, 0.5 * jnp.finfo(dt).min)
    if method in ("meanfield", "cvb0"):
        fit = model._meanfield if method == "meanfield" else model._cvb0
        gamma, stats, term = fit(log_beta, ids, n, alpha)
        return LocalResult((stats,), term - jnp.sum(_kl_theta(gamma, alpha)), gamma)
    logb = jnp.take(log_beta.T, ids, axis=0)  # log b_{k, w_dl}, (S, L, K)
    expected = collapsed_gibbs_allocations(logb, n, key, alpha, model.gibbs_sweeps, model.gibbs_burn_in)
    gamma = alpha + jnp.sum(expected, axis=1)
    phi = expected / jnp.maximum(n, 1.0)[..., None]
    k = model.num_topics
    stats = jnp.zeros((model.vocab_size, k), dt).at[ids.reshape(-1)].add((n[..., None] * phi).reshape(-1, k)).T
    e_log_theta = digamma(gamma) - digamma(jnp.sum(gamma, axis=-1, keepdims=True))
    z_terms = n * (jnp.sum(phi * e_log_theta[:, None, :], axis=-1) + entropy_of_probs(phi))  # (S, L)
    return LocalResult((stats,), jnp.sum(z_terms) - jnp.sum(_kl_theta(gamma, alpha)), gamma)


def _distinct_words(ids: Array, v: int) -> tuple[Array, Array]:
    """The words (U,) that a batch's slots (S, L) may hold and each slot's column among them: all V words when
    S L >= V, else the batch's distinct ids padded to U = S L with V - 1 (sorted, so a slot finds its first copy)."""
    if ids.size >= v:
        return jnp.arange(v, dtype=ids.dtype), ids
    words = jnp.unique(ids, size=ids.size, fill_value=v - 1)
    return words, jnp.searchsorted(words, ids).astype(ids.dtype)


def _theta_terms(gamma: Array, alpha: Array) -> tuple[Array, Array]:
    """E[log theta_d] (S, K) and KL(Dir(gamma_d) || Dir(alpha 1_K)) (S,) less the prior's log normalizer."""
    k = gamma.shape[-1]
    psi, lgam = digamma_and_gammaln_with_total(gamma)
    e_log_theta = psi[:, :k] - psi[:, k:]
    return e_log_theta, lgam[:, k] + jnp.sum((gamma - alpha) * e_log_theta - lgam[:, :k], axis=-1)


def _kl_theta(gamma: Array, alpha: Array) -> Array:
    """KL(Dir(gamma_d) || Dir(alpha 1_K)) per document, (S,)."""
    k = gamma.shape[-1]
    return _theta_terms(gamma, alpha)[1] + k * gammaln(alpha) - gammaln(k * alpha)


__all__ = ["LDA", "concentration_bounds", "largest_precise_concentration"]
