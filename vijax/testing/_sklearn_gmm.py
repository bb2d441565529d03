"""A bridge to scikit-learn's ``BayesianGaussianMixture`` (diag, Dirichlet weights) with priors
matched to a ``DiagonalGMM``, for tests and benchmarks. Needs scikit-learn (extras ``test``/``bench``).

Prior mapping (scikit-learn's diagonal Wishart is a product of Gammas):
  weight_concentration_prior = alpha0, mean_prior = m0, mean_precision_prior = kappa0,
  degrees_of_freedom_prior = 2 a0, covariance_prior = 2 b0.
Posterior mapping: a_k = nu_k / 2, b_kd = nu_k covariances_kd / 2 (its covariances are
normalized by nu_k), kappa_k = mean_precision_k.
"""

from __future__ import annotations

import numpy as np

from vijax import expfam


def matched_sklearn_bgmm(model, resp0=None, **kwargs):
    """A ``BayesianGaussianMixture`` with ``model``'s priors, ``reg_covar`` 0 (the M-steps agree exactly) and, if
    ``resp0`` (N, K) is given, initialised from those responsibilities."""
    from sklearn.mixture import BayesianGaussianMixture

    d = model.dim
    params = dict(
        n_components=model.num_components,
        covariance_type="diag",
        weight_concentration_prior_type="dirichlet_distribution",
        weight_concentration_prior=float(model.alpha0),
        mean_prior=np.broadcast_to(np.asarray(model.loc0, float), (d,)).copy(),
        mean_precision_prior=float(model.kappa0),
        degrees_of_freedom_prior=2.0 * float(model.a0),
        covariance_prior=2.0 * np.broadcast_to(np.asarray(model.b0, float), (d,)).copy(),
        reg_covar=0.0,
    )
    params.update(kwargs)

    class _FromResponsibilities(BayesianGaussianMixture):
        def _initialize_parameters(self, X, random_state, xp=None):
            self._initialize(X, np.asarray(resp0, dtype=X.dtype))

    cls = BayesianGaussianMixture if resp0 is None else _FromResponsibilities
    return cls(**params)


def sklearn_to_q(est, dtype=None):
    """scikit-learn's fitted variational parameters as vijax's q = (Dirichlet, NormalGamma)."""
    import jax.numpy as jnp

    dt = dtype or jnp.result_type(float)
    nu = np.asarray(est.degrees_of_freedom_)[:, None]
    cov = np.asarray(est.covariances_)
    kappa = np.broadcast_to(np.asarray(est.mean_precision_)[:, None], cov.shape)
    dirichlet = expfam.Dirichlet.from_concentration(jnp.asarray(est.weight_concentration_, dt))
    ng = expfam.NormalGamma.from_params(
        jnp.asarray(est.means_, dt),
        jnp.asarray(kappa, dt),
        jnp.asarray(np.broadcast_to(nu / 2, cov.shape), dt),
        jnp.asarray(nu * cov / 2, dt),
    )
    return dirichlet, ng
