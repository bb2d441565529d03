"""The Bayesian Gaussian mixture with full covariances (Normal-Wishart components).

Bishop (2006), *Pattern Recognition and Machine Learning*, §10.2; the fully Bayesian mixture of
the *Raise your ELBO* tutorial; the same model as scikit-learn's
``BayesianGaussianMixture(covariance_type="full", weight_concentration_prior_type="dirichlet_distribution")``::

    pi ~ Dirichlet(alpha0 1_K),   Lambda_k ~ Wishart(W0, nu0),   mu_k | Lambda_k ~ N(m0, (kappa0 Lambda_k)^-1),
    z_n ~ Categorical(pi),        x_n | z_n = k ~ N(mu_k, Lambda_k^-1).

Mean-field q(pi) Dirichlet, q(mu_k, Lambda_k) Normal-Wishart (``vijax.expfam.NormalWishart``),
q(z_n) Categorical. In the exponential-family form of ``vijax.models._base``, a datum assigned to k
contributes s = (x, -1/2, -x x^T / 2, 1/2) to the statistics (Lambda mu, mu^T Lambda mu, Lambda,
log|Lambda|) and z_n to the Dirichlet's log pi; log h = -D/2 log 2 pi. The local step is
Bishop's eq. (10.46)-(10.49) written with those mean parameters:

    log r_nk = E[log pi_k] + x_n^T E[Lambda mu]_k - E[mu^T Lambda mu]_k / 2 - x_n^T E[Lambda]_k x_n / 2
               + E[log|Lambda_k|] / 2 - D/2 log 2 pi - log Z_n.

It meets ``ConditionallyConjugateModel``, so CAVI, SVI, SSVI and SSVI-A run on it (SSVI draws the
Normal-Wishart by its Bartlett decomposition).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from vijax import expfam
from vijax._validate import finite_values
from vijax._validate import (
    check_allocation,
    check_choice,
    check_data_array,
    check_enough_points,
    check_float_dtype,
    check_int,
    check_nonconstant_columns,
    check_positive_fields,
    check_scalar,
    float_dtype,
    real_array,
)
from vijax.models._base import LocalResult, conjugate_posterior, entropy_of_probs
from vijax.models.gmm import _kmeanspp_centers
from vijax.types import Array, PRNGKey

_LOG_2PI = float(np.log(2.0 * np.pi))


@dataclasses.dataclass(frozen=True)
class FullGMM:
    """Bayesian Gaussian mixture with full precision matrices (Bishop 2006, §10.2).

    Args:
      num_components: K >= 1.
      dim: D >= 1.
      alpha0: Dirichlet concentration of each weight (> 0).
      loc0: prior mean m0 of each mean (scalar or (D,)).
      kappa0: prior precision scale of the means (> 0).
      dof0: Wishart degrees of freedom nu0 (> D - 1).
      scale_inv0: W0^-1, the inverse of the Wishart scale (SPD (D, D); scikit-learn's
        ``covariance_prior``), so that E[Lambda] = nu0 W0. Default: the identity.
      dtype: float dtype (default: JAX's default float).

    Examples:
        >>> model = FullGMM(num_components=3, dim=2, dof0=2.0)
        >>> [f.batch_shape for f in model.prior()]
        [(), (3,)]
    """

    num_components: int
    dim: int
    alpha0: float = 1.0
    loc0: Any = 0.0
    kappa0: float = 1.0
    dof0: float | None = None
    scale_inv0: Any = None
    dtype: Any = None
    local_methods = ("meanfield",)

    def __post_init__(self):
        check_int("num_components", self.num_components)
        check_int("dim", self.dim)
        check_positive_fields(self, ("alpha0", "kappa0"), scalar=True)
        check_float_dtype(self.dtype)
        check_allocation("num_components * dim**2", self.num_components * self.dim**2, float_dtype(self.dtype).itemsize)
        d = self.dim
        loc0 = real_array("loc0", self.loc0, f"a finite scalar or an array of shape ({d},)")
        if loc0.shape not in ((), (d,)) or not np.all(np.isfinite(loc0)):
            raise ValueError(f"loc0 must be a finite scalar or have shape ({d},), got {self.loc0!r}")
        if self.dof0 is None:
            object.__setattr__(self, "dof0", float(d))
        object.__setattr__(self, "dof0", check_scalar("dof0", self.dof0, low=d - 1.0))
        if self.scale_inv0 is None:
            object.__setattr__(self, "scale_inv0", np.eye(d))
        s = real_array("scale_inv0", self.scale_inv0, f"a symmetric positive-definite ({d}, {d}) matrix")
        if s.shape != (d, d):
            raise ValueError(f"scale_inv0 must have shape ({d}, {d}), got {s.shape}")
        if not np.all(np.isfinite(s)) or not np.allclose(s, s.T) or np.linalg.eigvalsh(s).min() <= 0:
            raise ValueError("scale_inv0 must be a finite, symmetric positive-definite matrix")

    def __hash__(self):  # arrays in the fields: hash by identity (a static jit argument needs one)
        return id(self)

    @classmethod
    def from_data(
        cls,
        x,
        num_components: int,
        *,
        alpha0: float | None = None,
        kappa0: float = 1.0,
        dof0: float | None = None,
        dtype=None,
    ) -> "FullGMM":
        """scikit-learn's defaults for ``BayesianGaussianMixture(covariance_type="full")``:
        m0 = mean(x), alpha0 = 1/K, nu0 = D, W0^-1 = the empirical covariance of x.

        Raises:
          ValueError: naming ``x`` when a column of ``x`` is constant (or all rows are equal), or
            when its empirical covariance is singular (linearly dependent columns): W0^-1 must be
            positive definite. Drop the column(s), or build :class:`FullGMM` with an explicit
            ``scale_inv0``.
        """
        check_data_array("x", x, ndim=2)
        check_int("num_components", num_components)
        x = np.asarray(x, dtype=float)
        d = x.shape[1]
        check_nonconstant_columns("x", x)
        cov = np.atleast_2d(np.cov(x.T))
        eig = np.linalg.eigvalsh(cov)
        if not eig[0] > 1e-12 * eig[-1]:
            raise ValueError(
                f"x has linearly dependent columns (empirical covariance of rank {int(np.sum(eig > 1e-12 * eig[-1]))} "
                f"< {d}, eigenvalues {eig[0]:.3g} to {eig[-1]:.3g}): from_data's W0^-1 is that covariance and must be "
                "positive definite; drop the dependent column(s) or give scale_inv0 explicitly"
            )
        return cls(
            num_components,
            d,
            alpha0=1.0 / num_components if alpha0 is None else alpha0,
            loc0=x.mean(0),
            kappa0=kappa0,
            dof0=float(d) if dof0 is None else dof0,
            scale_inv0=cov,
            dtype=dtype,
        )

    def prior(self):
        dt = float_dtype(self.dtype)
        k, d = self.num_components, self.dim
        scale = np.linalg.inv(np.asarray(self.scale_inv0, float))
        nw = expfam.NormalWishart.from_params(
            jnp.broadcast_to(jnp.asarray(self.loc0, dt), (k, d)),
            jnp.full((k,), self.kappa0, dt),
            jnp.broadcast_to(jnp.asarray(0.5 * (scale + scale.T), dt), (k, d, d)),
            jnp.full((k,), self.dof0, dt),
        )
        return expfam.Dirichlet.from_concentration(jnp.full((k,), self.alpha0, dt)), nw

    def batch_checks(self, x) -> list:
        """The value check of a step's batch: finite data."""
        return [finite_values("batch x", x)]

    def check_data(self, x) -> None:
        check_data_array("x", x, ndim=2, last_dim=self.dim)

    def _stats(self, x: Array, resp: Array):
        n_k = jnp.sum(resp, 0)
        sx = resp.T @ x  # (K, D)
        sxx = jnp.einsum("nk,nd,ne->kde", resp, x, x)
        return (n_k,), (sx, -0.5 * n_k, -0.5 * sxx, 0.5 * n_k)

    def posterior_from_responsibilities(self, x: Array, resp: Array):
        """The coordinate-optimal q(beta) for responsibilities ``resp`` (N, K) (the M-step)."""
        dt = float_dtype(self.dtype)
        return conjugate_posterior(self.prior(), self._stats(jnp.asarray(x, dt), jnp.asarray(resp, dt)))

    def init_globals(self, key: PRNGKey, x: Array | None = None):
        """Hard-assign each point to the nearest of K k-means++ seeds, then one M-step. Without
        data: the prior's components with their means at prior draws."""
        dt = float_dtype(self.dtype)
        if x is None:
            dirichlet, nw = self.prior()
            mu = nw.sample(key)[..., -1]  # a draw is [Lambda | mu]
            return dirichlet, expfam.NormalWishart.from_params(mu, nw.kappa, nw.scale, nw.dof)
        check_enough_points("num_components", self.num_components, np.shape(x)[0])
        x = jnp.asarray(x, dt)
        centers = _kmeanspp_centers(key, x, self.num_components)
        d2 = jnp.sum(x**2, 1)[:, None] - 2.0 * x @ centers.T + jnp.sum(centers**2, 1)[None, :]
        resp = jax.nn.one_hot(jnp.argmin(d2, 1), self.num_components, dtype=dt)
        return self.posterior_from_responsibilities(x, resp)

    def features(self, x: Array) -> Array:
        """x itself: the statistics are x and x x^T, formed inside the steps (the interface of
        ``DiagonalGMM.features``, so code written for either model takes both)."""
        return x

    def log_resp(self, globals_view, x: Array) -> Array:
        """log r_nk (normalized): Bishop eq. (10.46)-(10.49) in mean parameters."""
        (e_log_pi,), (e_lam_mu, e_mu_lam_mu, e_lam, e_logdet) = globals_view
        quad = jnp.einsum("nd,kde,ne->nk", x, e_lam, x)
        logits = (
            x @ e_lam_mu.T
            - 0.5 * quad
            + (e_log_pi - 0.5 * e_mu_lam_mu + 0.5 * e_logdet - 0.5 * self.dim * _LOG_2PI)[None, :]
        )
        return jax.nn.log_softmax(logits, axis=-1)

    def local_step(self, globals_view, x, key=None, method: str = "meanfield") -> LocalResult:
        check_choice("method", method, self.local_methods)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x must have shape (N, {self.dim}), got {x.shape}")
        log_r = self.log_resp(globals_view, x)
        r = jnp.exp(log_r)
        # log h = -D/2 log 2 pi per datum is in the logits' constant: subtract it from sum_n H[r_n]'s side
        local_terms = entropy_of_probs(r).sum() - 0.5 * x.shape[0] * self.dim * _LOG_2PI
        return LocalResult(self._stats(x, r), local_terms, r)

    def log_predictive(self, q, x: Array) -> Array:
        """Exact log posterior predictive under q, per point: a mixture over k with weights
        E[pi_k] of multivariate Student-t(nu_k + 1 - D, m_k, (kappa_k + 1) / (kappa_k (nu_k + 1 - D)) W_k^-1)
        (Bishop 2006, eq. 10.81-10.82)."""
        dirichlet, nw = q
        alpha = dirichlet.concentration
        log_w = jnp.log(alpha) - jnp.log(jnp.sum(alpha))
        d = self.dim
        nu, kappa, m = nw.dof, nw.kappa, nw.loc
        dof = nu + 1.0 - d
        shape = ((kappa + 1.0) / (kappa * dof))[:, None, None] * nw.scale_inv  # (K, D, D)
        chol = jnp.linalg.cholesky(shape)
        diff = x[:, None, :] - m[None]  # (N, K, D)
        z = jax.scipy.linalg.solve_triangular(chol[None], diff[..., None], lower=True)[..., 0]
        maha = jnp.sum(z**2, -1)
        log_det = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), -1)
        lp = (gammaln(0.5 * (dof + d)) - gammaln(0.5 * dof) - 0.5 * d * jnp.log(dof * jnp.pi) - 0.5 * log_det)[
            None
        ] - 0.5 * (dof + d)[None] * jnp.log1p(maha / dof[None])
        return jax.nn.logsumexp(lp + log_w[None], axis=-1)

    def point_estimates(self, q):
        """(weights E[pi], means E[mu], covariances E[Lambda]^-1) of a fitted q."""
        dirichlet, nw = q
        alpha = dirichlet.concentration
        return alpha / jnp.sum(alpha), nw.loc, nw.scale_inv / nw.dof[:, None, None]
