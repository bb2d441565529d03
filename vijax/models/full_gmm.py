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

A :class:`~vijax.models.Mixture` of :class:`~vijax.models.NormalWishartFull` components with
:class:`~vijax.models.DirichletWeights`. It meets ``ConditionallyConjugateModel``, so CAVI, SVI, SSVI and SSVI-A run on it (SSVI draws the
Normal-Wishart by its Bartlett decomposition).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vijax._validate import (
    ArgumentError,
    check_allocation,
    check_data_array,
    check_float_dtype,
    check_int,
    check_nonconstant_columns,
    check_positive_scalar,
    float_dtype,
)
from vijax.models._components_gaussian import NormalWishartFull
from vijax.models.gmm import GaussianMixtureNames
from vijax.models.mixture import DirichletWeights, Mixture
from vijax.types import Array


class FullGMM(GaussianMixtureNames, Mixture):
    """Bayesian Gaussian mixture with full precision matrices (Bishop 2006, §10.2).

    Args:
      num_components: K >= 1.
      dim: D >= 1.
      alpha0: Dirichlet concentration of each weight (> 0).
      loc0: prior mean m0 of each mean (scalar or (D,)).
      kappa0: prior precision scale of the means (> 0).
      dof0: Wishart degrees of freedom nu0 (> D - 1; default D).
      scale_inv0: W0^-1, the inverse of the Wishart scale (SPD (D, D); scikit-learn's
        ``covariance_prior``), so that E[Lambda] = nu0 W0. Default: the identity.
      dtype: float dtype (default: JAX's default float).

    Examples:
        >>> model = FullGMM(num_components=3, dim=2, dof0=2.0)
        >>> [f.batch_shape for f in model.prior()]
        [(), (3,)]
    """

    def __init__(
        self,
        num_components: int,
        dim: int,
        alpha0: float = 1.0,
        loc0: Any = 0.0,
        kappa0: float = 1.0,
        dof0: float | None = None,
        scale_inv0: Any = None,
        dtype: Any = None,
    ):
        check_int("num_components", num_components)
        check_int("dim", dim)
        check_positive_scalar("alpha0", alpha0)
        check_float_dtype(dtype)
        check_allocation("num_components * dim**2", num_components * dim**2, float_dtype(dtype).itemsize)
        component = NormalWishartFull(dim, loc0=loc0, kappa0=kappa0, dof0=dof0, scale_inv0=scale_inv0, dtype=dtype)
        super().__init__(component, DirichletWeights(num_components, alpha0))

    dof0 = property(
        lambda self: self.component.degrees_of_freedom,
        doc="nu0: the Wishart degrees of freedom of the prior on each precision matrix.",
    )
    scale_inv0 = property(
        lambda self: self.component.scale_inv, doc="W0^-1: the inverse of the Wishart scale matrix, (D, D)."
    )

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
            raise ArgumentError(
                "x",
                f"x has linearly dependent columns (empirical covariance of rank {int(np.sum(eig > 1e-12 * eig[-1]))} "
                f"< {d}, eigenvalues {eig[0]:.3g} to {eig[-1]:.3g}): from_data's W0^-1 is that covariance and must be "
                "positive definite; drop the dependent column(s) or give scale_inv0 explicitly",
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

    def features(self, x: Array) -> Array:
        """x itself: the statistics are x and x x^T, formed inside the steps (the interface of
        ``DiagonalGMM.features``, so code written for either model takes both)."""
        return x
