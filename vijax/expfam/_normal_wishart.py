"""Normal-Wishart over (mu, Lambda): Lambda ~ Wishart(W, nu), mu | Lambda ~ N(m, (kappa Lambda)^-1).

The conjugate prior of a multivariate Normal likelihood with unknown mean and precision matrix
(Bishop 2006, §2.3.6 and §10.2: the components of a full-covariance Bayesian Gaussian mixture).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve, solve_triangular
from jax.scipy.special import multigammaln

from vijax._validate import ArgumentError, check_finite, check_positive
from vijax.expfam._base import AbstractExpFamily, as_float, dense_inv_fisher_vp, param_layout, register_family
from vijax.expfam._base import standard_normal
from vijax.expfam._inversion import standard_log_gamma
from vijax.expfam._mvn import check_spd, eye_like, matvec, outer, sym
from vijax.expfam._special import digamma
from vijax.types import tfp_jax

_LOG_2 = float(np.log(2.0))
_LOG_2PI = float(np.log(2.0 * np.pi))


def _half_dfs(nu: jax.Array, d: int) -> jax.Array:
    """(nu - i + 1) / 2 for i = 1..d, shape ``nu.shape + (d,)``: the Bartlett chi-square halves."""
    offsets = jnp.arange(d, dtype=nu.dtype).reshape((1,) * jnp.ndim(nu) + (d,))
    return 0.5 * (nu[..., None] - offsets)


def _positive_definite(m):
    """(batch,) bool: the symmetric matrices ``m`` (..., D, D) that are positive definite, read from
    their Cholesky factor (finite, with a positive diagonal)."""
    chol = jnp.linalg.cholesky(m)
    return jnp.all(jnp.isfinite(chol), axis=(-2, -1)) & jnp.all(jnp.diagonal(chol, axis1=-2, axis2=-1) > 0, -1)


@register_family
class NormalWishart(AbstractExpFamily):
    """Normal-Wishart in natural form. A draw is one array of shape ``batch + (D, D + 1)``: the
    precision Lambda in the first D columns and the mean mu in the last.

    log p(mu, Lambda) = <eta, t> - A(eta) with
        t   = (Lambda mu, mu^T Lambda mu, Lambda, log|Lambda|),
        eta = (kappa m, -kappa / 2, -(W^-1 + kappa m m^T) / 2, (nu - D) / 2),
        A   = nu/2 log|W| + nu D / 2 log 2 + log Gamma_D(nu / 2) - D/2 log kappa + D/2 log 2 pi,   h = 1
    (inner products of matrices are traces: <eta3, Lambda> = tr(eta3 Lambda)).
    Mean parameters: (nu W m, nu m^T W m + D / kappa, nu W, sum_i psi((nu + 1 - i)/2) + D log 2 + log|W|).
    ``inv_fisher_vp`` is a dense pseudo-inverse per element (O(D^6), for small D).

    Domain: kappa > 0, nu > D - 1, W symmetric positive definite.

    Examples:
        >>> import jax.numpy as jnp
        >>> q = NormalWishart.from_params(jnp.zeros(2), 1.0, jnp.eye(2), 4.0)
        >>> q.mean_params()[2].tolist()  # E[Lambda] = nu W
        [[4.0, 0.0], [0.0, 4.0]]
    """

    eta1: jax.Array  # kappa m, (..., D)
    eta2: jax.Array  # -kappa / 2, (...)
    eta3: jax.Array  # -(W^-1 + kappa m m^T) / 2, (..., D, D)
    eta4: jax.Array  # (nu - D) / 2, (...)
    _event_ndims = (1, 0, 2, 0)
    _sample_ndims = 2

    @classmethod
    def from_params(cls, loc, kappa, scale, dof) -> "NormalWishart":
        """From the mean ``loc`` (m, (..., D)), the precision scale ``kappa`` (> 0), the Wishart scale ``scale`` (W,
        SPD, (..., D, D); E[Lambda] = nu W) and the degrees of freedom ``dof`` (nu > D - 1)."""
        check_finite("loc", loc)
        check_positive("kappa", kappa)
        check_spd("scale", scale)
        m = as_float(loc)
        d = m.shape[-1]
        if not isinstance(dof, jax.core.Tracer) and not np.all(np.asarray(dof, float) > d - 1):
            raise ArgumentError("dof", f"dof must be > D - 1 = {d - 1}, got {dof!r}", value=dof)
        k, nu = as_float(kappa), as_float(dof)
        w = as_float(scale)
        if w.shape[-2:] != (d, d):
            raise ArgumentError("scale", f"scale must have shape batch + ({d}, {d}) for loc's D = {d}, got {w.shape}")
        batch = jnp.broadcast_shapes(m.shape[:-1], jnp.shape(k), jnp.shape(nu), w.shape[:-2])
        m = jnp.broadcast_to(m, batch + (d,))
        k = jnp.broadcast_to(k, batch)
        nu = jnp.broadcast_to(nu, batch)
        w = jnp.broadcast_to(w, batch + (d, d))
        w_inv = cho_solve((jnp.linalg.cholesky(w), True), eye_like(w))
        return cls(k[..., None] * m, -0.5 * k, -0.5 * (sym(w_inv) + k[..., None, None] * outer(m, m)), 0.5 * (nu - d))

    @property
    def dim(self) -> int:
        """D, the dimension of mu (Lambda is D x D)."""
        return self.eta1.shape[-1]

    @property
    def kappa(self):
        """kappa = -2 eta2, the precision scale of mu given Lambda (mu | Lambda ~ N(m, (kappa Lambda)^-1))."""
        return -2.0 * self.eta2

    @property
    def loc(self):
        """m = eta1 / kappa, the mean of mu, shape batch + (D,)."""
        return self.eta1 / self.kappa[..., None]

    @property
    def dof(self):
        """nu = 2 eta4 + D, the Wishart degrees of freedom (> D - 1)."""
        return 2.0 * self.eta4 + self.dim

    @property
    def scale_inv(self):
        """W^-1 = -2 eta3 - kappa m m^T."""
        m = self.loc
        return sym(-2.0 * self.eta3 - self.kappa[..., None, None] * outer(m, m))

    def _scale_chol(self):
        """(chol(W^-1), chol(W), W), W = (C C^T)^-1 = C^-T C^-1 by a triangular solve."""
        c_inv = jnp.linalg.cholesky(self.scale_inv)
        c_inv_inv = solve_triangular(c_inv, eye_like(c_inv), lower=True)  # C^-1
        w = jnp.swapaxes(c_inv_inv, -1, -2) @ c_inv_inv
        return c_inv, jnp.linalg.cholesky(sym(w)), sym(w)

    @property
    def scale(self):
        """W, the Wishart scale matrix (E[Lambda] = nu W), shape batch + (D, D); inverted from ``scale_inv``."""
        return self._scale_chol()[2]

    def log_normalizer(self):
        d = self.dim
        c_inv = jnp.linalg.cholesky(self.scale_inv)
        log_det_w = -2.0 * jnp.sum(jnp.log(jnp.diagonal(c_inv, axis1=-2, axis2=-1)), -1)
        nu = self.dof
        return (
            0.5 * nu * log_det_w
            + 0.5 * nu * d * _LOG_2
            + multigammaln(0.5 * nu, d)
            - 0.5 * d * jnp.log(self.kappa)
            + 0.5 * d * _LOG_2PI
        )

    def mean_params(self):
        d = self.dim
        c_inv, _, w = self._scale_chol()
        log_det_w = -2.0 * jnp.sum(jnp.log(jnp.diagonal(c_inv, axis1=-2, axis2=-1)), -1)
        nu, m = self.dof, self.loc
        e_lam = nu[..., None, None] * w
        e_lam_m = matvec(e_lam, m)
        return (
            e_lam_m,
            jnp.sum(m * e_lam_m, -1) + d / self.kappa,
            e_lam,
            jnp.sum(digamma(_half_dfs(nu, d)), -1) + d * _LOG_2 + log_det_w,
        )

    def inv_fisher_vp(self, v):
        """The pseudo-inverse Fisher product: the dense Fisher plus the projector onto the antisymmetric eta3
        directions (where it is singular), applied to v with a symmetrised third block."""
        d, n = self.dim, sum(param_layout(self)[2])
        transpose = np.arange(d * d).reshape(d, d).T.ravel()
        proj = np.zeros((n, n))
        proj[d + 1 : d + 1 + d * d, d + 1 : d + 1 + d * d] = 0.5 * (np.eye(d * d) - np.eye(d * d)[transpose])
        return dense_inv_fisher_vp(self, (v[0], v[1], sym(v[2]), v[3]), jnp.asarray(proj, self.dtype))

    def sufficient_stats(self, x):
        lam, mu = x[..., :-1], x[..., -1]
        lam_mu = matvec(lam, mu)
        return lam_mu, jnp.sum(mu * lam_mu, -1), lam, jnp.linalg.slogdet(lam)[1]

    def _bartlett(self, log_chi2: jax.Array, normals: jax.Array, eps: jax.Array):
        """(Lambda, mu, log|Lambda|) from the Bartlett factors: Lambda = L A A^T L^T, L = chol(W), A lower-triangular
        with A_ii = sqrt(chi2_{nu - i + 1}) and N(0, 1) below; mu = m + (L A)^-T eps / sqrt(kappa)."""
        d = self.dim
        _, chol_w, _ = self._scale_chol()
        full = normals.shape[:-2]  # sample shape + batch shape
        a = jnp.tril(normals, -1) + jnp.einsum(
            "...i,ij->...ij", jnp.exp(0.5 * log_chi2), jnp.eye(d, dtype=normals.dtype)
        )
        la = jnp.broadcast_to(chol_w, full + (d, d)) @ a  # Lambda = (L A)(L A)^T
        lam = la @ jnp.swapaxes(la, -1, -2)
        # mu - m = (L A)^-T eps / sqrt(kappa): covariance (L A)^-T (L A)^-1 / kappa = (kappa Lambda)^-1
        z = solve_triangular(jnp.swapaxes(la, -1, -2), eps[..., None], lower=False)[..., 0]
        mu = jnp.broadcast_to(self.loc, full + (d,)) + z / jnp.broadcast_to(jnp.sqrt(self.kappa), full)[..., None]
        log_det = 2.0 * jnp.sum(jnp.log(jnp.abs(jnp.diagonal(la, axis1=-2, axis2=-1))), -1)
        return lam, mu, log_det

    def _draw(self, key, shape, log_gamma):
        """(x, Lambda, mu, log|Lambda|) of draws of ``shape`` (sample + batch), log chi2 / 2 by ``log_gamma``."""
        d = self.dim
        k_chi, k_norm, k_eps = jax.random.split(key, 3)
        log_chi2 = _LOG_2 + log_gamma(k_chi, jnp.broadcast_to(_half_dfs(self.dof, d), shape + (d,)))
        normals = standard_normal(k_norm, shape + (d, d), self.dtype)
        lam, mu, log_det = self._bartlett(log_chi2, normals, standard_normal(k_eps, shape + (d,), self.dtype))
        return jnp.concatenate([lam, mu[..., None]], axis=-1), lam, mu, log_det

    def sample(self, key, shape=()):
        log_gamma = lambda k, a: jnp.log(jax.random.gamma(k, a, dtype=self.dtype))
        return self._draw(key, tuple(shape) + self.batch_shape, log_gamma)[0]

    def reparam_sample_and_stats(self, key):
        """One draw by the Bartlett decomposition, chi-square diagonals by inversion (the implicit
        derivative in nu of ``standard_log_gamma``), and its statistics, differentiable in eta."""
        x, lam, mu, log_det = self._draw(key, self.batch_shape, standard_log_gamma)
        lam_mu = matvec(lam, mu)
        return x, (lam_mu, jnp.sum(mu * lam_mu, -1), lam, log_det)

    def is_valid(self):
        return (self.eta2 < 0.0) & (self.dof > self.dim - 1) & _positive_definite(self.scale_inv)

    def outside_support(self, x):
        """Lambda (x = [Lambda | mu]) not symmetric (beyond sqrt(eps)) or not positive definite; NaN is not outside."""
        x = jnp.asarray(x)
        lam = x[..., :-1]
        eps = float(np.sqrt(np.finfo(x.dtype).eps))
        scale = jnp.max(jnp.abs(lam), axis=(-2, -1))
        asym = jnp.max(jnp.abs(lam - jnp.swapaxes(lam, -1, -2)), axis=(-2, -1)) > eps * scale
        return ~jnp.any(jnp.isnan(x), axis=(-2, -1)) & (asym | ~_positive_definite(sym(lam)))

    def _support_point(self, x):
        eye = jnp.eye(x.shape[-2], dtype=x.dtype)
        point = jnp.concatenate([eye, jnp.zeros(eye.shape[:1] + (1,), x.dtype)], axis=-1)
        return jnp.broadcast_to(point, x.shape)

    def to_tfp(self):
        """A ``JointDistributionSequential`` over ``[Lambda, mu]``."""
        tfp = tfp_jax()
        tfd = tfp.distributions
        _, chol_w, _ = self._scale_chol()
        m, k = self.loc, self.kappa

        def mean_given(lam):
            cov = jnp.linalg.inv(k[..., None, None] * lam)
            return tfd.MultivariateNormalTriL(loc=m, scale_tril=jnp.linalg.cholesky(sym(cov)))

        return tfd.JointDistributionSequential([tfd.WishartTriL(df=self.dof, scale_tril=chol_w), mean_given])
