"""Per-document steps of the correlated topic model other than PG-SVI's (used by ``vijax.models.ctm``).

One document: word counts y_n (n = 1..L, padding words have y_n = 0), a (K, L) = log beta[:, w_n],
prior N(mu, P^-1) on z in R^D, D = K - 1, logits (z, 0). With W = sum_n y_n,

    psi(z) = sum_n y_n lse_k(a_nk + z_k) - W lse_k(z_k),       log p(z | y, beta) = -(z - mu)' P (z - mu) / 2 + psi(z) + c.

The three methods keep the topic assignments t_n with a multinomial q(t_n) = phi_n, as in the
papers, and differ in how they treat the non-conjugate term -W E_q[lse(z)]:

* ``laplace`` (Wang & Blei 2013, "Variational Inference in Nonconjugate Models", Laplace
  variational inference): q(z) = N(z_hat, -H^-1), z_hat the mode of f(z) = E_q(t)[log p(z, t, y)],
  H its Hessian there. With phi_n = softmax(a_n + z) (phi's update given q(z); E_q[z] = z_hat)
  the joint fixed point has grad log p(z | y, beta) = grad f = 0, so z_hat is the mode of the
  marginal log posterior, found by Newton's method on it (exact Hessian; where that is not negative
  definite, the Hessian of f, which always is), with an Armijo backtracking line search. The
  covariance is -H^-1 = (P + W C(z_hat))^-1, C(z) = diag(s) - s s' (in the free coordinates),
  s = softmax((z, 0)): the curvature of f at fixed phi (the word terms are linear in z there).
* ``delta`` (Wang & Blei 2013, delta-method variational inference): q(z) = N(m, V) and the
  non-conjugate expectation by its second-order Taylor expansion around the mean,
  E_q[lse(z)] ~ lse(m) + tr(C(m) V) / 2. The resulting bound, with phi at its optimum,

      J(m, V) = psi(m) - W tr(C(m) V) / 2 - (m - mu)' P (m - mu) / 2 - tr(P V) / 2 + log|V| / 2 (+ c),

  is maximised by coordinate ascent: V = (P + W C(m))^-1 exactly, then a Newton step in m (exact
  Hessian of J, which includes the third derivatives of lse; the matrix P + W C(m) where that is
  not negative definite) with backtracking, until the step is below tolerance.
* ``meanfield`` (Blei & Lafferty 2007, "A correlated topic model of science", §3): q(z) =
  prod_i N(lambda_i, nu2_i) and the bound E_q[lse(z)] <= (1/zeta) sum_k exp(lambda_k + nu2_k / 2)
  - 1 + log zeta (lambda_K = nu2_K = 0). Coordinate ascent over zeta (closed form), phi (closed
  form), lambda (Newton steps on a strictly concave function, with backtracking) and each nu2_i
  (a one-dimensional concave problem, solved by bisection on its monotone derivative), each of
  which cannot lower the bound (``mf_elbo``), until a sweep changes lambda and nu2 by less than
  the tolerance.

Every loop is a ``lax.while_loop`` (or ``fori_loop``) and every function works on one document:
``vmap`` over documents.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp, xlogy

LOCAL_METHODS = ("prox", "laplace", "delta", "meanfield")

_STEP_TOL = 1e-7  # Newton loops stop when the largest coordinate of the accepted step is below this
_BACKTRACK = 0.5 ** np.arange(16)  # candidate step lengths of the line search (NumPy: no JAX call at import)
_ARMIJO = 1e-4
_LAMBDA_NEWTON = 4  # Newton steps on lambda per mean-field sweep
_BISECTION = 64  # bisection steps on each log nu2_i


def _ext(z):
    """(z, 0): the K logits of the K - 1 free coordinates."""
    return jnp.concatenate([z, jnp.zeros(z.shape[:-1] + (1,), z.dtype)], -1)


def psi_terms(z, a, counts):
    """psi(z_s), its gradient and Hessian in the K - 1 free coordinates, and the responsibilities
    p_n = softmax(a_n + (z_s, 0)), for draws z (S, K-1); a (K, L) = log beta[:, words]."""
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
    """The first of the step lengths 1, 1/2, ... whose point satisfies Armijo's condition for
    maximising ``fn``; returns (new point, its value, accepted) (the old point where none does)."""
    slope = grad @ direction
    cands = x[None, :] + _BACKTRACK[:, None].astype(x.dtype) * direction[None, :]
    vals = jax.vmap(fn)(cands)
    ok = jnp.isfinite(vals) & (vals >= f0 + _ARMIJO * _BACKTRACK.astype(x.dtype) * slope)
    i = jnp.argmax(ok)
    accepted = jnp.any(ok) & (slope > 0)
    return jnp.where(accepted, cands[i], x), jnp.where(accepted, vals[i], f0), accepted


def _newton_direction(hess, fallback):
    """-hess^-1 grad's matrix: the Cholesky factor of -hess where it is positive definite, else of
    ``fallback`` (positive definite)."""
    chol = jnp.linalg.cholesky(-hess)
    ok = jnp.all(jnp.isfinite(chol))
    return jnp.where(ok, chol, jnp.linalg.cholesky(fallback))


def _solve(chol, g):
    return jax.scipy.linalg.cho_solve((chol, True), g)


def _newton_loop(fn, x0, step_matrices, max_iter):
    """Maximises ``fn`` from ``x0`` by damped Newton steps: ``step_matrices(x)`` gives (value,
    gradient, Hessian, a positive definite matrix used where -Hessian is not); stops after
    ``max_iter`` steps, when a step is below _STEP_TOL or when the line search accepts none."""

    def body(carry):
        x, it, _ = carry
        f0, g, hess, fallback = step_matrices(x)
        chol = _newton_direction(hess, fallback)
        new, _, accepted = _line_search(fn, x, f0, g, _solve(chol, g))
        done = ~accepted | (jnp.max(jnp.abs(new - x)) < _STEP_TOL)
        return new, it + 1, done

    x, _, _ = jax.lax.while_loop(
        lambda c: (c[1] < max_iter) & ~c[2], body, (x0, jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    )
    return x


# ------------------------------------------------------------------ Laplace
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
    """f(z) = E_q(t)[log p(z, t, y)] up to a constant, for q(t_n) = phi_n (L, K): the function whose
    mode and Hessian Laplace variational inference takes."""
    diff = z - mu
    words = jnp.sum(counts[:, None] * phi * (a.T + _ext(z)[None, :]))
    return -0.5 * diff @ prec0 @ diff + words - jnp.sum(counts) * logsumexp(_ext(z))


# ------------------------------------------------------------------ delta method
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

    def m_step(m, it):
        v = cov_at(m)

        def fn(x):
            return delta_objective(x, v, mu, prec0, a, counts)

        def step_matrices(x):
            return fn(x), jax.grad(fn)(x), jax.hessian(fn)(x), prec0 + w * softmax_cov(x)

        return _newton_loop(fn, m, step_matrices, 1)

    def body(carry):
        m, it, _ = carry
        new = m_step(m, it)
        return new, it + 1, jnp.max(jnp.abs(new - m)) < _STEP_TOL

    m, _, _ = jax.lax.while_loop(
        lambda c: (c[1] < max_iter) & ~c[2], body, (mu, jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    )
    return m, cov_at(m), responsibilities(m, a, counts)


# ------------------------------------------------------------------ mean field (Blei & Lafferty)
def mf_elbo(lam, nu2, zeta, phi, mu, prec0, a, counts):
    """The mean-field CTM bound of one document (Blei & Lafferty 2007, §3), exact up to the
    multinomial coefficient: E_q[log p(z)] + E_q[log p(t, y | z)] (with the zeta bound) + H[q]."""
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
    """One sweep of coordinate ascent: zeta, phi, lambda, zeta, nu2. Returns the new state and, with
    ``trace``, the bound after each of the five updates (else None)."""
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
    """Mean-field CTM for one document: (lambda, nu2, counts * phi) after sweeps until one changes
    no lambda_i or nu2_i by more than _STEP_TOL, or ``max_iter`` sweeps. (The bound is flat along
    some directions: a relative change of 1e-10 in it still left lambda 2e-4 from the fixed point.)"""

    def body(carry):
        s, it, _ = carry
        new = mf_sweep(s, mu, prec0, a, counts)[0]
        change = jnp.maximum(jnp.max(jnp.abs(new[0] - s[0])), jnp.max(jnp.abs(new[1] - s[1])))
        return new, it + 1, change < _STEP_TOL

    init = (mf_init(mu, prec0, a, counts), jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    s, _, _ = jax.lax.while_loop(lambda c: (c[1] < max_iter) & ~c[2], body, init)
    lam, nu2, _, phi = s
    return lam, nu2, counts[:, None] * phi


def fit_document(method, mu, prec0, a, counts, max_iter):
    """(mean, cov, counts * phi) of one document by ``method`` in ("laplace", "delta", "meanfield")."""
    fit = {"laplace": laplace_fit, "delta": delta_fit, "meanfield": meanfield_fit}[method]
    return fit(mu, prec0, a, counts, max_iter)
