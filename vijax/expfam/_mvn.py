"""MultivariateNormal(mu, Sigma) in natural form: t(x) = (x, x x^T), eta = (Lambda mu, -Lambda / 2)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve, solve_triangular

from vijax._validate import ArgumentError, check_finite
from vijax.expfam._base import AbstractExpFamily, as_float, register_family, standard_normal
from vijax.types import tfp_jax


def sym(m: jax.Array) -> jax.Array:
    """Symmetric part (M + M^T) / 2 of a batch of square matrices."""
    return 0.5 * (m + jnp.swapaxes(m, -1, -2))


def outer(a: jax.Array, b: jax.Array) -> jax.Array:
    return a[..., :, None] * b[..., None, :]


def matvec(m: jax.Array, v: jax.Array) -> jax.Array:
    return (m @ v[..., None])[..., 0]


def _cho_solve_vec(chol: jax.Array, b: jax.Array) -> jax.Array:
    """(L L^T)^-1 b for a batch of vectors ``b``."""
    return cho_solve((chol, True), b[..., None])[..., 0]


def eye_like(chol: jax.Array) -> jax.Array:
    return jnp.broadcast_to(jnp.eye(chol.shape[-1], dtype=chol.dtype), chol.shape)


def check_spd(name: str, m) -> None:
    """Raises ``ValueError`` naming ``name`` unless concrete ``m`` is a (batch of) finite, square,
    symmetric, positive-definite matrices. Tracers (inside ``jit``) are not checked."""
    if isinstance(m, jax.core.Tracer):
        return
    a = np.asarray(m, dtype=np.float64)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ArgumentError(name, f"{name} must be a (batch of) square matrices, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ArgumentError(name, f"{name} must be finite, got NaN or infinite entries")
    scale = np.max(np.abs(a), initial=0.0)
    if not np.allclose(a, np.swapaxes(a, -1, -2), rtol=1e-5, atol=1e-6 * scale):
        raise ArgumentError(name, f"{name} must be symmetric")
    if not np.all(np.linalg.eigvalsh(a) > 0):
        raise ArgumentError(
            name, f"{name} must be positive definite, got min eigenvalue {np.linalg.eigvalsh(a).min()!r}"
        )


@register_family
class MultivariateNormal(AbstractExpFamily):
    """D-dimensional Gaussian with mean ``mu`` and precision ``Lambda = Sigma^-1``, in natural form.

    With t(x) = (x, x x^T), h(x) = 1 and eta = (eta1, eta2) = (Lambda mu, -Lambda / 2)::

        A(eta) = 1/2 eta1^T Lambda^-1 eta1 - 1/2 log det Lambda + D/2 log(2 pi),
        Lambda = -(eta2 + eta2^T)   (only the symmetric part of eta2 matters),
        grad A = (mu, Sigma + mu mu^T).

    ``hess A`` vanishes on antisymmetric ``eta2`` directions, so ``inv_fisher_vp`` is its pseudo-inverse.

    Examples:
        >>> q = MultivariateNormal.from_mean_covariance(jnp.zeros(2), 2.0 * jnp.eye(2))
        >>> q.batch_shape, q.event_shape, round(float(q.covariance[0, 0]), 5)
        ((), (2,), 2.0)
    """

    eta1: jax.Array  # Lambda mu, shape batch + (D,)
    eta2: jax.Array  # -Lambda / 2, shape batch + (D, D)
    _event_ndims = (1, 2)
    _sample_ndims = 1

    @classmethod
    def from_mean_precision(cls, mean, precision) -> "MultivariateNormal":
        """From the mean ``mu`` (batch + (D,)) and the SPD precision ``Lambda`` (batch + (D, D)).

        Raises:
            ValueError: naming ``mean`` or ``precision``: non-finite, misshaped, not symmetric or not SPD.
        """
        mean, precision = _checked_mean_matrix(mean, precision, "precision")
        precision = sym(precision)
        return cls(matvec(precision, mean), -0.5 * precision)

    @classmethod
    def from_mean_covariance(cls, mean, cov) -> "MultivariateNormal":
        """From the mean ``mu`` (batch + (D,)) and the SPD covariance ``Sigma`` (batch + (D, D)).

        Raises:
            ValueError: naming ``mean`` or ``cov``: non-finite, misshaped, not symmetric or not SPD.
        """
        return cls(*_natural_of_mean_covariance(*_checked_mean_matrix(mean, cov, "cov")))

    @property
    def event_shape(self) -> tuple[int, ...]:
        """(D,): the shape of one draw."""
        return self.eta1.shape[-1:]

    @property
    def precision(self) -> jax.Array:
        """Lambda = -(eta2 + eta2^T), shape batch + (D, D)."""
        return -(self.eta2 + jnp.swapaxes(self.eta2, -1, -2))

    def _chol(self) -> jax.Array:
        """Lower Cholesky factor L of the precision, L L^T = Lambda (NaN outside the domain)."""
        return jnp.linalg.cholesky(self.precision)

    @property
    def mean(self) -> jax.Array:
        """mu = Lambda^-1 eta1, shape batch + (D,)."""
        return _cho_solve_vec(self._chol(), self.eta1)

    @property
    def covariance(self) -> jax.Array:
        """Sigma = Lambda^-1, shape batch + (D, D)."""
        chol = self._chol()
        return sym(cho_solve((chol, True), eye_like(chol)))

    def log_normalizer(self):
        chol = self._chol()
        z = solve_triangular(chol, self.eta1[..., None], lower=True)[..., 0]  # L^-1 eta1
        log_det = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), -1)
        d = self.eta1.shape[-1]
        return 0.5 * jnp.sum(z**2, -1) - 0.5 * log_det + 0.5 * d * math.log(2.0 * math.pi)

    def mean_params(self):
        chol = self._chol()
        mu = _cho_solve_vec(chol, self.eta1)
        sigma = sym(cho_solve((chol, True), eye_like(chol)))
        return mu, sigma + outer(mu, mu)

    def fisher_vp(self, v):
        """hess A . (v1, V2), in closed form with S = sym(V2)::

            d mu    = Sigma (v1 + 2 S mu)
            d Sigma = 2 Sigma S Sigma
            F v     = (d mu, d Sigma + d mu mu^T + mu d mu^T).

        Antisymmetric parts of V2 are mapped to zero, exactly as by the Hessian of A.
        """
        v1, v2 = v
        chol = self._chol()
        mu = _cho_solve_vec(chol, self.eta1)
        s = sym(v2)
        dmu = _cho_solve_vec(chol, v1 + 2.0 * matvec(s, mu))
        sigma_s = cho_solve((chol, True), s)  # Sigma S
        dsigma = sym(2.0 * cho_solve((chol, True), jnp.swapaxes(sigma_s, -1, -2)))  # 2 Sigma S Sigma
        return dmu, dsigma + outer(dmu, mu) + outer(mu, dmu)

    def inv_fisher_vp(self, v):
        """Pseudo-inverse Fisher product: maps mean-parameter perturbations (a, B) back to (v1, V2).

        Inverting the relations of ``fisher_vp`` with B replaced by sym(B)::

            d Sigma = sym(B) - a mu^T - mu a^T
            V2      = 1/2 Lambda d Sigma Lambda
            v1      = Lambda a - Lambda d Sigma eta1.

        The antisymmetric part of B (outside the Fisher's range) is dropped: the Moore-Penrose
        pseudo-inverse, ``inv_fisher_vp(fisher_vp((v1, V2))) == (v1, sym(V2))``.
        """
        a, b = v
        lam = self.precision
        mu = self.mean
        dsigma = sym(b) - outer(a, mu) - outer(mu, a)
        lam_dsigma = lam @ dsigma
        v2 = sym(0.5 * lam_dsigma @ lam)
        v1 = matvec(lam, a) - matvec(lam_dsigma, self.eta1)
        return v1, v2

    def sufficient_stats(self, x):
        return x, outer(x, x)

    def sample(self, key, shape=()):
        """Reparameterized draws x = mu + L^-T z, z ~ N(0, I), so that Cov[x] = (L L^T)^-1."""
        return self._affine(standard_normal(key, tuple(shape) + self.normal_shape(), self.dtype))

    def reparam_sample_and_stats(self, key):
        """One draw x = mu + L^-T z, explicit in the natural parameters, and t(x) = (x, x x^T)."""
        return self.from_normals(standard_normal(key, self.normal_shape(), self.dtype))

    def normal_shape(self):
        """d standard normals per member of the batch."""
        return self.batch_shape + (self.eta1.shape[-1],)

    def from_normals(self, z):
        """x = mu + L^-T z and t(x) = (x, x x^T) for ``z`` of shape ``sample_shape + batch_shape + (d,)``."""
        x = self._affine(z)
        return x, (x, outer(x, x))

    def _affine(self, z):
        """mu + L^-T z for ``z`` of shape ``sample_shape + batch_shape + (d,)``."""
        d = self.eta1.shape[-1]
        chol = self._chol()
        chol_b = jnp.broadcast_to(chol, z.shape[:-1] + (d, d))
        x = solve_triangular(chol_b, z[..., None], lower=True, trans="T")[..., 0]
        return x + jnp.broadcast_to(_cho_solve_vec(chol, self.eta1), z.shape)

    def is_valid(self):
        """Finite parameters and a positive-definite precision (its Cholesky factor exists)."""
        diag = jnp.diagonal(self._chol(), axis1=-2, axis2=-1)
        return (
            jnp.all(jnp.isfinite(diag) & (diag > 0), -1)
            & jnp.all(jnp.isfinite(self.eta1), -1)
            & jnp.all(jnp.isfinite(self.eta2), (-2, -1))
        )

    def to_tfp(self):
        tfp = tfp_jax()
        return tfp.distributions.MultivariateNormalTriL(loc=self.mean, scale_tril=jnp.linalg.cholesky(self.covariance))


@jax.jit
def _natural_of_mean_covariance(mean, cov) -> tuple:
    """(Sigma^-1 mu, -Sigma^-1 / 2)."""
    chol = jnp.linalg.cholesky(cov)
    precision = sym(cho_solve((chol, True), eye_like(chol)))
    return _cho_solve_vec(chol, mean), -0.5 * precision


def _checked_mean_matrix(mean, matrix, name: str):
    """Checks ``mean`` and the SPD ``matrix``, cast to a common float dtype and broadcast batch dimensions."""
    check_finite("mean", mean)
    check_spd(name, matrix)
    mean, matrix = as_float(mean), as_float(matrix)
    if mean.ndim < 1:
        raise ArgumentError("mean", f"mean must have at least one (event) axis, got shape {mean.shape}")
    if matrix.ndim < 2 or matrix.shape[-2:] != (mean.shape[-1], mean.shape[-1]):
        raise ArgumentError(name, f"{name} must have shape batch + {(mean.shape[-1],) * 2}, got {matrix.shape}")
    dtype = jnp.result_type(mean, matrix)
    batch = jnp.broadcast_shapes(mean.shape[:-1], matrix.shape[:-2])
    d = mean.shape[-1]
    return (jnp.broadcast_to(mean.astype(dtype), batch + (d,)), jnp.broadcast_to(matrix.astype(dtype), batch + (d, d)))
