"""A numerical argmin for checking closed-form proximal steps."""

from __future__ import annotations

import numpy as np
import scipy.optimize


def fd_hessian(grad, t, *args, h=1e-5):
    """Symmetrised central differences of an exact gradient at a 1-D ``t`` (cheaper to compile than
    ``jax.hessian``; Newton still stops where the exact gradient vanishes)."""
    t = np.asarray(t, float)
    diff = [(np.asarray(grad(t + e, *args)) - np.asarray(grad(t - e, *args))) / (2 * h) for e in h * np.eye(t.size)]
    hess = np.stack(diff, 1)
    return 0.5 * (hess + hess.T)


def newton_argmin(f, grad, x0, *args, gtol=1e-12, maxiter=1000):
    """argmin_x f(x, *args) by scipy's ``trust-exact`` with the exact gradient ``grad`` and its finite-difference
    Hessian; returns scipy's result."""
    return scipy.optimize.minimize(
        lambda x: float(f(x, *args)),
        np.asarray(x0, float),
        jac=lambda x: np.asarray(grad(x, *args)),
        hess=lambda x: fd_hessian(grad, x, *args),
        method="trust-exact",
        options={"gtol": gtol, "maxiter": maxiter},
    )


__all__ = ["fd_hessian", "newton_argmin"]
