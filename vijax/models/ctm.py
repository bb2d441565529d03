"""Correlated topic model (Blei & Lafferty 2007) by proximal-gradient SVI (Khan et al. 2016, §3.1, §6.2, app. A.3)::

    z_d ~ N(mu, Sigma) in R^(K-1),   p(word w | z_d) = sum_k beta_kw softmax((z_d, 0))_k,
    psi(z) = log p(y_d | z_d) = sum_n y_dn lse_k(log beta_{k w_n} + z_k) - W_d lse_k(z_k)   (+ const).

q(z_d) = N(m_d, V_d), full ("PG-SVI") or diagonal ("PG-SVI-MF"). Split (app. A.3): f_d = -E_q[psi(z_d)] (Bonnet's and
Price's gradients by Monte Carlo), h_d = KL(q(z_d) || N(mu, Sigma)); local step lambda <- r lambda + (1 - r)(eta + g),
r = 1/(1 + beta_local). The global statistics (``CTMGlobals``) move by s <- r s + (1 - r) s_hat; their M-step
(``params``): beta_k ∝ s_topic_k + smoothing, mu = mean E[z], Sigma = (1 - kappa)(mean E[z z^T] - mu mu^T) + kappa I
(§6.2). Held-out words: log (1/S) sum_s sum_k beta_kw softmax(z_s)_k, z_s ~ q fitted to the observed half.

Baselines (``local_method``; P the prior precision, C(z) = diag(s) - s s', s = softmax((z, 0))): ``laplace`` (Wang &
Blei 2013), N(z_hat, (P + W C(z_hat))^-1) at the posterior mode; ``delta`` (Wang & Blei 2013), E_q[lse(z)] ~ lse(m) +
tr(C(m) V) / 2 by coordinate ascent, V = (P + W C(m))^-1 then a Newton step in m; ``meanfield`` (Blei & Lafferty 2007,
§3), prod_i N(lambda_i, nu2_i) with E_q[lse(z)] <= (1/zeta) sum_k exp(lambda_k + nu2_k / 2) - 1 + log zeta.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp, xlogy

from vijax._validate import INT32_MAX, ArgumentError, check_allocation, check_choice, check_int
from vijax._validate import check_positive_fields, check_scalar
from vijax.models._base import bow_batch_checks, check_bow_data, rows_with_data
from vijax.models._nonconjugate import ProxUpdate
from vijax.types import Array, PRNGKey
from vijax.models._pytree import PytreeModel

COVARIANCES = ("full", "diagonal")
LOCAL_METHODS = ("prox", "laplace", "delta", "meanfield")
_METHOD_COVARIANCE = {"laplace": "full", "delta": "full", "meanfield": "diagonal"}
_STEP_TOL = 1e-7  # Newton loops stop when the largest coordinate of the accepted step is below this
_BACKTRACK = 0.5 ** np.arange(16)  # candidate step lengths of the line search
_ARMIJO = 1e-4
_LAMBDA_NEWTON = 4  # Newton steps on lambda per mean-field sweep
_BISECTION = 64  # bisection steps on each log nu2_i


class CTMGlobals(NamedTuple):
    """The globals' statistics: scaled topic-word counts (K, V), mean E_q[z_d] (K-1,) and E_q[z_d z_d^T] (K-1, K-1)."""

    topic_stats: Array
    mean_stats: Array
    second_stats: Array


class CTMParams(NamedTuple):
    log_topics: Array  # (K, V), rows log-normalised
    mu: Array  # (K-1,)
    sigma: Array  # (K-1, K-1)


class LocalQ(NamedTuple):
    """q(z_d) = N(mean, cov) (``cov`` (K-1, K-1) for full, the (K-1,) variances for diagonal)."""

    mean: Array
    cov: Array


_PREC_FLOOR = 0.1  # a local step may not bring q's precision below this fraction of the prior's smallest eigenvalue


def _sym(a):
    return 0.5 * (a + jnp.swapaxes(a, -1, -2))


@dataclasses.dataclass(frozen=True, eq=False)
class CTM(PytreeModel):
    """Correlated topic model for ``prox_svi`` (module docstring).

    Args:
      num_topics: K.
      vocab_size: V.
      covariance: ``"full"`` (PG-SVI) or ``"diagonal"`` (PG-SVI-MF) local q(z_d).
      local_steps: KL-proximal steps (or a baseline's iterations) per document and minibatch.
      local_step_size: beta of the local steps (r = 1/(1 + beta)).
      topic_smoothing: pseudo-count added to every topic-word statistic in the M-step.
      cov_shrinkage: kappa in Sigma = (1 - kappa) S + kappa I, S the moment estimate.
      init_mass: total initial topic-word pseudo-count per topic (random, Exp(1) entries).
      eval_local_steps: local steps of ``log_predictive``.
      eval_samples: its draws from q.
      eval_seed: its seed.
      local_method: ``"prox"``, or ``"laplace"``/``"delta"`` (``covariance="full"``), ``"meanfield"`` (``"diagonal"``).

    A batch is a ``vijax.data.BowBatch`` of M documents (padding rows: all-zero counts).

    Examples:
        >>> model = CTM(num_topics=3, vocab_size=20)
        >>> g = model.init_variational(jax.random.PRNGKey(0))
        >>> model.params(g).log_topics.shape
        (3, 20)
    """

    num_topics: int
    vocab_size: int
    covariance: str = "full"
    local_steps: int = 15
    local_step_size: float = 0.3
    topic_smoothing: float = 0.01
    cov_shrinkage: float = 0.01
    init_mass: float = 100.0
    eval_local_steps: int = 50
    eval_samples: int = 1000
    eval_seed: int = 0
    local_method: str = "prox"
    present_rows = staticmethod(rows_with_data)  # documents with a token: prox_svi's N / S counts these

    def __post_init__(self):
        check_int("num_topics", self.num_topics, minimum=2)
        check_int("vocab_size", self.vocab_size)
        check_choice("covariance", self.covariance, COVARIANCES)
        check_choice("local_method", self.local_method, LOCAL_METHODS)
        need = _METHOD_COVARIANCE.get(self.local_method, self.covariance)
        if self.covariance != need:
            raise ArgumentError(
                "local_method",
                f"local_method={self.local_method!r} needs covariance={need!r}, got covariance={self.covariance!r}",
                self.local_method,
            )
        check_int("local_steps", self.local_steps, maximum=INT32_MAX)
        check_int("eval_local_steps", self.eval_local_steps, maximum=INT32_MAX)
        check_int("eval_samples", self.eval_samples)
        check_positive_fields(self, ("local_step_size", "topic_smoothing", "init_mass"), scalar=True)
        check_scalar("cov_shrinkage", self.cov_shrinkage, low=0.0, high=1.0, include_low=True)
        k, v = self.num_topics, self.vocab_size
        check_allocation("num_topics * vocab_size", k * v + (k - 1) ** 2, jnp.result_type(float).itemsize)

    def batch_checks(self, batch) -> list:
        """The value checks of a step's batch: word ids in [0, V), counts finite and >= 0."""
        return bow_batch_checks(batch, self.vocab_size)

    def check_data(self, batch) -> None:
        """Raises ValueError naming ``word_ids`` or ``counts`` (shapes and dtypes also of tracers)."""
        check_bow_data(batch, self.vocab_size)

    def init_variational(self, key: PRNGKey, batch=None) -> CTMGlobals:
        """Random topics (Exp(1) pseudo-counts, ``init_mass`` per topic), mu = 0, Sigma = I."""
        if batch is not None:
            self.check_data(batch)
        dt = jnp.result_type(float)
        k, v, d = self.num_topics, self.vocab_size, self.num_topics - 1
        topics = jax.random.exponential(key, (k, v), dt) * (self.init_mass / v)
        return CTMGlobals(topics, jnp.zeros((d,), dt), jnp.eye(d, dtype=dt))

    def params(self, g: CTMGlobals) -> CTMParams:
        """The M-step: theta from the stored statistics."""
        t = g.topic_stats + self.topic_smoothing
        log_topics = jnp.log(t) - jnp.log(jnp.sum(t, -1, keepdims=True))
        mu = g.mean_stats
        eye = jnp.eye(mu.shape[0], dtype=mu.dtype)
        sigma = (1.0 - self.cov_shrinkage) * _sym(g.second_stats - mu[:, None] * mu[None, :]) + self.cov_shrinkage * eye
        return CTMParams(log_topics, mu, sigma)

    def _draws(self, q: LocalQ, key, num_samples):
        eps = jax.random.normal(key, (num_samples, q.mean.shape[0]), q.mean.dtype)
        if self.covariance == "full":
            chol = jnp.linalg.cholesky(q.cov)
            return q.mean[None, :] + eps @ chol.T
        return q.mean[None, :] + eps * jnp.sqrt(q.cov)[None, :]

    def expected_loglik_grads(self, q: LocalQ, a, counts, key, num_samples):
        """(E psi, dE psi/dm, dE psi/dV) by Bonnet/Price with S draws (dV: (K, K), or (K,) diagonal)."""
        z = self._draws(q, key, num_samples)
        psi, grad, hess, _ = psi_terms(z, a, counts)
        dv = 0.5 * jnp.mean(hess, 0)
        if self.covariance == "diagonal":
            dv = jnp.diagonal(dv)
        return jnp.mean(psi), jnp.mean(grad, 0), dv

    def kl_local(self, q: LocalQ, params: CTMParams) -> Array:
        """KL(N(m, V) || N(mu, Sigma))."""
        k = q.mean.shape[0]
        chol_s = jnp.linalg.cholesky(params.sigma)
        diff = q.mean - params.mu
        sol = jax.scipy.linalg.cho_solve((chol_s, True), diff)
        cov = q.cov if self.covariance == "full" else jnp.diag(q.cov)
        tr = jnp.trace(jax.scipy.linalg.cho_solve((chol_s, True), cov))
        logdet_s = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol_s)))
        logdet_v = (
            2.0 * jnp.sum(jnp.log(jnp.diagonal(jnp.linalg.cholesky(q.cov))))
            if self.covariance == "full"
            else jnp.sum(jnp.log(q.cov))
        )
        return 0.5 * (tr + diff @ sol - k + logdet_s - logdet_v)

    def prior_local(self, params: CTMParams) -> LocalQ:
        """The prior N(mu, Sigma) as a local q(z_d) (its diagonal for ``covariance="diagonal"``)."""
        if self.covariance == "full":
            return LocalQ(params.mu, params.sigma)
        return LocalQ(params.mu, jnp.diagonal(params.sigma))

    def local_prox_step(self, q: LocalQ, params: CTMParams, prec0: Array, a, counts, key, num_samples, beta):
        """One closed-form KL-proximal step for q(z_d), halved (up to 8 times) while its precision is too small."""
        _, dm, dv = self.expected_loglik_grads(q, a, counts, key, num_samples)
        r = 1.0 / (1.0 + beta)
        if self.covariance == "full":
            prec = jnp.linalg.inv(q.cov)
            prec = _sym(prec)
            eta1 = prec @ q.mean
            t_prec = _sym(prec0 - 2.0 * dv)
            t_eta1 = prec0 @ params.mu + dm - 2.0 * dv @ q.mean
        else:
            prec = 1.0 / q.cov
            eta1 = prec * q.mean
            d0 = jnp.diagonal(prec0)
            t_prec = d0 - 2.0 * dv
            offdiag = prec0 - jnp.diag(d0)
            t_eta1 = prec0 @ params.mu + dm - 2.0 * dv * q.mean - offdiag @ q.mean

        floor = _PREC_FLOOR * jnp.linalg.eigvalsh(prec0)[0]
        factors = 0.5 ** jnp.arange(9, dtype=q.mean.dtype)
        rho = (1.0 - r) * factors  # candidate weights of the target

        def candidate(w):
            p = (1.0 - w) * prec + w * t_prec
            e = (1.0 - w) * eta1 + w * t_eta1
            if self.covariance == "full":
                chol = jnp.linalg.cholesky(p)
                ok = jnp.all(jnp.isfinite(chol)) & (jnp.linalg.eigvalsh(p)[0] >= floor)
                cov = jax.scipy.linalg.cho_solve((chol, True), jnp.eye(p.shape[0], dtype=p.dtype))
                new = LocalQ(cov @ e, _sym(cov))
            else:
                ok = jnp.min(p) >= floor
                new = LocalQ(e / p, 1.0 / p)
            ok = ok & jnp.all(jnp.isfinite(new.mean)) & jnp.all(jnp.isfinite(new.cov))
            return ok, new

        oks, cands = jax.vmap(candidate)(rho)
        first = jnp.argmax(oks)
        any_ok = jnp.any(oks)
        new = jax.tree_util.tree_map(lambda c: c[first], cands)
        return jax.tree_util.tree_map(lambda n, o: jnp.where(any_ok, n, o), new, q)

    def fit_local(self, params: CTMParams, word_ids, counts, key, num_samples: int, steps: int) -> LocalQ:
        """q(z_d) for one document: ``steps`` KL-proximal steps from the prior, averaged over the last half."""
        a = params.log_topics[:, word_ids]  # (K, L)
        prec0 = _sym(jnp.linalg.inv(params.sigma))

        def body(q, k):
            q = self.local_prox_step(q, params, prec0, a, counts, k, num_samples, self.local_step_size)
            return q, q

        _, path = jax.lax.scan(body, self.prior_local(params), jax.random.split(key, steps))
        tail = steps - steps // 2
        return jax.tree_util.tree_map(lambda x: jnp.mean(x[-tail:], 0), path)

    def _fit_batch_baseline(self, params, batch, steps):
        """(q, counts * phi) of the minibatch's documents by ``local_method`` (not ``"prox"``)."""
        prec0 = _sym(jnp.linalg.inv(params.sigma))

        def one(ids, counts):
            fit = {"laplace": laplace_fit, "delta": delta_fit, "meanfield": meanfield_fit}[self.local_method]
            mean, cov, resp = fit(params.mu, prec0, params.log_topics[:, ids], counts, steps)
            return LocalQ(mean, cov), resp

        return jax.vmap(one)(batch.word_ids, batch.counts)

    def _fit_batch(self, params, batch, key, num_samples, steps):
        if self.local_method != "prox":
            return self._fit_batch_baseline(params, batch, steps)[0]
        keys = jax.random.split(key, batch.word_ids.shape[0])
        return jax.vmap(lambda i, c, k: self.fit_local(params, i, c, k, num_samples, steps))(
            batch.word_ids, batch.counts, keys
        )

    def local_elbo(self, q: LocalQ, params: CTMParams, word_ids, counts, key, num_samples) -> Array:
        """E_q[log p(y_d | z_d)] (Monte Carlo; without the multinomial coefficient) - KL(q || prior)."""
        a = params.log_topics[:, word_ids]
        z = self._draws(q, key, num_samples)
        psi = psi_terms(z, a, counts)[0]
        return jnp.mean(psi) - self.kl_local(q, params)

    def prox_step(self, g: CTMGlobals, batch, key: PRNGKey, beta, num_samples: int, num_data: int):
        """One PG-SVI step: local steps, then the statistics move by r = 1/(1 + beta); (new globals, ELBO estimate)."""
        params = self.params(g)
        k_fit, k_stats, k_elbo = jax.random.split(key, 3)
        m = batch.word_ids.shape[0]
        valid = (jnp.sum(batch.counts, -1) > 0).astype(params.mu.dtype)
        n_valid = jnp.maximum(jnp.sum(valid), 1.0)
        scale = num_data / n_valid  # N / S over the documents with a token (padding rows are not data)

        def doc_stats(q, ids, counts, kk):
            p = psi_terms(self._draws(q, kk, num_samples), params.log_topics[:, ids], counts)[3]
            return jnp.mean(p, 0) * counts[:, None]  # (L, K)

        if self.local_method == "prox":
            qs = self._fit_batch(params, batch, k_fit, num_samples, self.local_steps)
            kss = jax.random.split(k_stats, m)
            resp = jax.vmap(doc_stats)(qs, batch.word_ids, batch.counts, kss)  # (M, L, K)
        else:  # the baselines' q(t_n) = phi_n
            qs, resp = self._fit_batch_baseline(params, batch, self.local_steps)
        topic_hat = (
            jnp.zeros_like(g.topic_stats).at[:, batch.word_ids.reshape(-1)].add(resp.reshape(-1, self.num_topics).T)
        )
        topic_hat = jnp.where(jnp.isfinite(topic_hat), topic_hat, jnp.inf)  # caught by `finite` below
        covs = qs.cov if self.covariance == "full" else jax.vmap(jnp.diag)(qs.cov)
        second = covs + qs.mean[:, :, None] * qs.mean[:, None, :]
        mean_hat = jnp.sum(valid[:, None] * qs.mean, 0) / n_valid
        second_hat = jnp.sum(valid[:, None, None] * second, 0) / n_valid
        r = 1.0 / (1.0 + beta)
        finite = jnp.all(jnp.isfinite(topic_hat)) & jnp.all(jnp.isfinite(mean_hat)) & jnp.all(jnp.isfinite(second_hat))
        has = (jnp.sum(valid) > 0) & finite  # a minibatch whose statistics are not finite is skipped
        w = jnp.where(has, 1.0 - r, 0.0).astype(params.mu.dtype)
        new = CTMGlobals(
            (1.0 - w) * g.topic_stats + w * scale * topic_hat,
            (1.0 - w) * g.mean_stats + w * mean_hat,
            _sym((1.0 - w) * g.second_stats + w * second_hat),
        )
        return new, self._batch_elbo(params, qs, batch, k_elbo, num_samples, num_data)

    def prox_update(self, g: CTMGlobals, batch, key: PRNGKey, beta, num_samples: int, num_data: int) -> ProxUpdate:
        """``prox_svi``'s step: ``prox_step`` with the first of two keys split from ``key``."""
        new, elbo = self.prox_step(g, batch, jax.random.split(key)[0], beta, num_samples, num_data)
        return ProxUpdate(new, elbo, jnp.zeros((), jnp.int32))

    def elbo(self, g: CTMGlobals, batch, key: PRNGKey, num_samples: int, num_data: int) -> Array:
        """Full-data ELBO estimate (locals fitted to the minibatch, scaled by N/S over documents with a token)."""
        params = self.params(g)
        k_fit, k_elbo = jax.random.split(key)
        qs = self._fit_batch(params, batch, k_fit, num_samples, self.local_steps)
        return self._batch_elbo(params, qs, batch, k_elbo, num_samples, num_data)

    def _batch_elbo(self, params, qs, batch, key, num_samples, num_data) -> Array:
        """(N / S) sum_d local_elbo_d over the S documents with a token."""
        keys = jax.random.split(key, batch.word_ids.shape[0])
        elbos = jax.vmap(lambda q, i, c, kk: self.local_elbo(q, params, i, c, kk, num_samples))(
            qs, batch.word_ids, batch.counts, keys
        )
        valid = (jnp.sum(batch.counts, -1) > 0).astype(elbos.dtype)
        return num_data / jnp.maximum(jnp.sum(valid), 1.0) * jnp.sum(valid * elbos)

    def log_predictive(self, g: CTMGlobals, observed, heldout) -> Array:
        """Per document (M,), the held-out words' log predictive (module docstring)."""
        params = self.params(g)
        key = jax.random.PRNGKey(self.eval_seed)
        k_fit, k_eval = jax.random.split(key)
        qs = self._fit_batch(params, observed, k_fit, 10, self.eval_local_steps)
        keys = jax.random.split(k_eval, observed.word_ids.shape[0])

        def score(q, ids, counts, kk):
            z = self._draws(q, kk, self.eval_samples)
            z = jnp.concatenate([z, jnp.zeros((z.shape[0], 1), z.dtype)], -1)
            log_theta = jax.nn.log_softmax(z, -1)  # (S, K)
            lp = logsumexp(log_theta[:, :, None] + params.log_topics[None, :, ids], axis=1)  # (S, L)
            lp = logsumexp(lp, 0) - jnp.log(self.eval_samples)
            return jnp.sum(counts * lp)

        return jax.vmap(score)(qs, heldout.word_ids, heldout.counts, keys)


def _ext(z):
    """(z, 0): the K logits of the K - 1 free coordinates."""
    return jnp.concatenate([z, jnp.zeros(z.shape[:-1] + (1,), z.dtype)], -1)


def psi_terms(z, a, counts):
    """psi(z_s), its gradient and Hessian in z (S, K-1), and p_n = softmax(a_n + (z_s, 0)); a (K, L) = log beta."""
    w = jnp.sum(counts)
    z = _ext(z)
    logits = a.T[None, :, :] + z[:, None, :]  # (S, L, K)
    lse = logsumexp(logits, -1)  # (S, L)
    p = jnp.exp(logits - lse[..., None])
    s = jax.nn.softmax(z, -1)  # (S, K)
    psi = jnp.sum(counts[None, :] * lse, -1) - w * logsumexp(z, -1)
    grad = jnp.einsum("l,slk->sk", counts, p) - w * s
    yp = counts[None, :, None] * p
    hess = (
        jax.vmap(jnp.diag)(jnp.sum(yp, 1))
        - jnp.einsum("slk,slj->skj", yp, p)
        - w * (jax.vmap(jnp.diag)(s) - s[:, :, None] * s[:, None, :])
    )
    return psi, grad[:, :-1], hess[:, :-1, :-1], p


def softmax_cov(z):
    """C(z) = diag(s) - s s' in the free coordinates, s = softmax((z, 0)): the Hessian of lse((z, 0))."""
    s = jax.nn.softmax(_ext(z))[:-1]
    return jnp.diag(s) - s[:, None] * s[None, :]


def log_posterior(z, mu, prec0, a, counts):
    """log p(z | y, beta, mu, P^-1) up to a constant (module docstring)."""
    diff = z - mu
    return -0.5 * diff @ prec0 @ diff + psi_terms(z[None], a, counts)[0][0]


def responsibilities(z, a, counts):
    """counts_n * phi_n with phi_n = softmax(a_n + (z, 0)): q(t_n) given E_q[z] = z, (L, K)."""
    return counts[:, None] * jax.nn.softmax(a.T + _ext(z)[None, :], -1)


def _line_search(fn, x, f0, grad, direction):
    """(new point, its value, accepted) at the first step length 1, 1/2, ... meeting Armijo's condition (maximising)."""
    slope = grad @ direction
    cands = x[None, :] + _BACKTRACK[:, None].astype(x.dtype) * direction[None, :]
    vals = jax.vmap(fn)(cands)
    ok = jnp.isfinite(vals) & (vals >= f0 + _ARMIJO * _BACKTRACK.astype(x.dtype) * slope)
    i = jnp.argmax(ok)
    accepted = jnp.any(ok) & (slope > 0)
    return jnp.where(accepted, cands[i], x), jnp.where(accepted, vals[i], f0), accepted


def _solve(chol, g):
    return jax.scipy.linalg.cho_solve((chol, True), g)


def _iterate(update, x0, max_iter):
    """``x <- update(x)`` (returning (new x, done)) from ``x0`` until done or ``max_iter`` updates."""

    def step(carry):
        x, it, _ = carry
        new, done = update(x)
        return new, it + 1, done

    init = (x0, jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    return jax.lax.while_loop(lambda c: (c[1] < max_iter) & ~c[2], step, init)[0]


def _newton_loop(fn, x0, step_matrices, max_iter):
    """Maximises ``fn`` by damped Newton steps; ``step_matrices(x)``: (value, gradient, Hessian, a PD fallback)."""

    def update(x):
        f0, g, hess, fallback = step_matrices(x)
        chol = jnp.linalg.cholesky(-hess)  # where -hess is not positive definite: the fallback's
        chol = jnp.where(jnp.all(jnp.isfinite(chol)), chol, jnp.linalg.cholesky(fallback))
        new, _, accepted = _line_search(fn, x, f0, g, _solve(chol, g))
        return new, ~accepted | (jnp.max(jnp.abs(new - x)) < _STEP_TOL)

    return _iterate(update, x0, max_iter)


def laplace_fit(mu, prec0, a, counts, max_iter):
    """Laplace variational inference for one document: (mode, covariance, counts * phi)."""
    w = jnp.sum(counts)

    def fn(z):
        return log_posterior(z, mu, prec0, a, counts)

    def step_matrices(z):
        psi, g, h, _ = psi_terms(z[None], a, counts)
        diff = z - mu
        value = -0.5 * diff @ prec0 @ diff + psi[0]
        return value, g[0] - prec0 @ diff, h[0] - prec0, prec0 + w * softmax_cov(z)

    z = _newton_loop(fn, mu, step_matrices, max_iter)
    cov = jnp.linalg.inv(prec0 + w * softmax_cov(z))
    return z, 0.5 * (cov + cov.T), responsibilities(z, a, counts)


def laplace_objective(z, phi, mu, prec0, a, counts):
    """E_q(t)[log p(z, t, y)] up to a constant, for q(t_n) = phi_n (L, K)."""
    diff = z - mu
    words = jnp.sum(counts[:, None] * phi * (a.T + _ext(z)[None, :]))
    return -0.5 * diff @ prec0 @ diff + words - jnp.sum(counts) * logsumexp(_ext(z))


def delta_lse(m, v):
    """The delta method's E_q[lse((z, 0))] for q = N(m, V): lse((m, 0)) + tr(C(m) V) / 2."""
    return logsumexp(_ext(m)) + 0.5 * jnp.sum(softmax_cov(m) * v)


def delta_objective(m, v, mu, prec0, a, counts):
    """J(m, V): the delta-method bound with phi at its optimum, up to a constant (module docstring)."""
    w = jnp.sum(counts)
    diff = m - mu
    words = jnp.sum(counts * logsumexp(a.T + _ext(m)[None, :], -1))
    logdet = jnp.linalg.slogdet(v)[1]
    return words - w * delta_lse(m, v) - 0.5 * diff @ prec0 @ diff - 0.5 * jnp.sum(prec0 * v) + 0.5 * logdet


def delta_fit(mu, prec0, a, counts, max_iter):
    """Delta-method variational inference for one document: (mean, covariance, counts * phi)."""
    w = jnp.sum(counts)

    def cov_at(m):
        c = jnp.linalg.inv(prec0 + w * softmax_cov(m))
        return 0.5 * (c + c.T)

    def m_step(m):
        v = cov_at(m)

        def fn(x):
            return delta_objective(x, v, mu, prec0, a, counts)

        def step_matrices(x):
            return fn(x), jax.grad(fn)(x), jax.hessian(fn)(x), prec0 + w * softmax_cov(x)

        return _newton_loop(fn, m, step_matrices, 1)

    def update(m):
        new = m_step(m)
        return new, jnp.max(jnp.abs(new - m)) < _STEP_TOL

    m = _iterate(update, mu, max_iter)
    return m, cov_at(m), responsibilities(m, a, counts)


def mf_elbo(lam, nu2, zeta, phi, mu, prec0, a, counts):
    """The mean-field CTM bound of one document (Blei & Lafferty 2007, §3), up to the multinomial coefficient."""
    d = lam.shape[0]
    w = jnp.sum(counts)
    diff = lam - mu
    log2pi = jnp.log(2.0 * jnp.pi)
    prior = -0.5 * diff @ prec0 @ diff - 0.5 * jnp.sum(jnp.diagonal(prec0) * nu2)
    prior = prior + 0.5 * jnp.linalg.slogdet(prec0)[1] - 0.5 * d * log2pi
    words = jnp.sum(counts[:, None] * (phi * (a.T + _ext(lam)[None, :]) - xlogy(phi, phi)))
    norm = -w * (jnp.sum(jnp.exp(_ext(lam) + 0.5 * _ext(nu2))) / zeta - 1.0 + jnp.log(zeta))
    entropy = 0.5 * jnp.sum(jnp.log(nu2) + log2pi + 1.0)
    return prior + words + norm + entropy


def mf_init(mu, prec0, a, counts):
    """lambda = mu, nu2_i = 1 / P_ii (the optimum with no words), zeta and phi at their optima."""
    lam, nu2 = mu, 1.0 / jnp.diagonal(prec0)
    zeta = _mf_zeta(lam, nu2)
    return lam, nu2, zeta, jax.nn.softmax(a.T + _ext(lam)[None, :], -1)


def _mf_zeta(lam, nu2):
    return jnp.sum(jnp.exp(_ext(lam) + 0.5 * _ext(nu2)))


def mf_sweep(state, mu, prec0, a, counts, trace: bool = False):
    """One coordinate-ascent sweep (zeta, phi, lambda, zeta, nu2): the new state and, with ``trace``, the 5 bounds."""
    lam, nu2, zeta, phi = state
    w = jnp.sum(counts)
    elbos = []

    def record(lam, nu2, zeta, phi):
        if trace:
            elbos.append(mf_elbo(lam, nu2, zeta, phi, mu, prec0, a, counts))

    zeta = _mf_zeta(lam, nu2)
    record(lam, nu2, zeta, phi)
    phi = jax.nn.softmax(a.T + _ext(lam)[None, :], -1)
    record(lam, nu2, zeta, phi)

    c = jnp.sum(counts[:, None] * phi, 0)[:-1]

    def lam_fn(x):
        diff = x - mu
        return -0.5 * diff @ prec0 @ diff + c @ x - (w / zeta) * jnp.sum(jnp.exp(x + 0.5 * nu2))

    def newton(_, x):
        g = -prec0 @ (x - mu) + c - (w / zeta) * jnp.exp(x + 0.5 * nu2)
        chol = jnp.linalg.cholesky(prec0 + (w / zeta) * jnp.diag(jnp.exp(x + 0.5 * nu2)))
        return _line_search(lam_fn, x, lam_fn(x), g, _solve(chol, g))[0]

    lam = jax.lax.fori_loop(0, _LAMBDA_NEWTON, newton, lam)
    record(lam, nu2, zeta, phi)
    zeta = _mf_zeta(lam, nu2)
    record(lam, nu2, zeta, phi)

    # nu2_i: the root of -P_ii / 2 - (W / 2 zeta) exp(lambda_i + x / 2) + 1 / (2 x), decreasing in
    # x > 0 and negative at x = 1 / P_ii; bisection on log x over [log(1 / P_ii) - 60, log(1 / P_ii)]
    pii = jnp.diagonal(prec0)
    coef = (w / zeta) * jnp.exp(lam)

    def deriv(u):
        x = jnp.exp(u)
        return -pii - coef * jnp.exp(0.5 * x) + 1.0 / x

    def bisect(_, lohi):
        lo, hi = lohi
        mid = 0.5 * (lo + hi)
        pos = deriv(mid) > 0
        return jnp.where(pos, mid, lo), jnp.where(pos, hi, mid)

    hi = -jnp.log(pii)
    lo, hi = jax.lax.fori_loop(0, _BISECTION, bisect, (hi - 60.0, hi))
    nu2 = jnp.exp(0.5 * (lo + hi))
    record(lam, nu2, zeta, phi)
    return (lam, nu2, zeta, phi), (jnp.stack(elbos) if trace else None)


def meanfield_fit(mu, prec0, a, counts, max_iter):
    """Mean-field CTM for one document: (lambda, nu2, counts * phi), sweeps until lambda and nu2 stop moving."""

    def update(s):
        new = mf_sweep(s, mu, prec0, a, counts)[0]
        change = jnp.maximum(jnp.max(jnp.abs(new[0] - s[0])), jnp.max(jnp.abs(new[1] - s[1])))
        return new, change < _STEP_TOL

    lam, nu2, _, phi = _iterate(update, mf_init(mu, prec0, a, counts), max_iter)
    return lam, nu2, counts[:, None] * phi


__all__ = ["COVARIANCES", "CTM", "CTMGlobals", "CTMParams", "LOCAL_METHODS", "LocalQ"]
