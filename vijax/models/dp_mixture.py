r"""Dirichlet-process mixtures by stick-breaking (Sethuraman's construction of a DP(alpha) mixture)::

    v_k ~ Beta(1, alpha),   pi_k = v_k prod_{j<k} (1 - v_j),   eta_k ~ p(eta)   (k = 1, 2, ...)
    z_n ~ Categorical(pi),  x_n | z_n = k ~ p(x | eta_k),

with any conjugate component p(x | eta) and the two truncations of the tutorial *Raise your ELBO*:
Blei and Jordan (2006) and Kurihara, Welling and Vlassis (2007). The derivations are in ``vijax.models.mixture``.
"""

from __future__ import annotations

from typing import Any

from vijax._validate import ArgumentError, check_int, check_positive_scalar
from vijax.models._components import Component
from vijax.models.bernoulli_mixture import BernoulliMixture
from vijax.models.gmm import DiagonalGMM
from vijax.models.mixture import TRUNCATIONS, DirichletWeights, Mixture, StickBreaking
from vijax.types import Array


class DPMixture(Mixture):
    """A stick-breaking DP(alpha) mixture truncated at T: a :class:`~vijax.models.Mixture` with
    ``StickBreaking(T, alpha, truncation)`` weights, built by :meth:`gaussian`, :meth:`gaussian_from_data`,
    :meth:`bernoulli` or from any component: ``DPMixture(GammaPoisson(dim=3), truncation_level=20)``.

    Args:
      components: a finite :class:`~vijax.models.Mixture` (``DiagonalGMM``, ``BernoulliMixture``, ...)
        whose ``num_components`` is T, or a :class:`~vijax.models.Component` (then give ``truncation_level``).
      alpha: DP concentration (> 0); each stick is Beta(1, alpha).
      truncation: ``"blei_jordan"`` (v_T = 1) or ``"kurihara"`` (q = prior beyond T).
      truncation_level: T, with a bare component.

    Examples:
        >>> model = DPMixture.bernoulli(4, 3, alpha=2.0)
        >>> [f.batch_shape for f in model.prior()]
        [(3,), (4, 3)]
        >>> DPMixture.bernoulli(4, 3, truncation="kurihara").prior()[0].batch_shape
        (4,)
    """

    def __init__(self, components, alpha: float = 1.0, truncation: str = "blei_jordan", truncation_level=None):
        if isinstance(components, Component):
            components = Mixture(components, DirichletWeights(check_int("truncation_level", truncation_level)))
        elif not isinstance(components, Mixture) or not components.weights.finite:
            raise ArgumentError(
                "components",
                "components must be a finite Mixture (DiagonalGMM, BernoulliMixture, ...) or a Component, "
                f"got {type(components).__name__}",
            )
        check_positive_scalar("alpha", alpha)
        super().__init__(components.component, StickBreaking(components.num_components, float(alpha), truncation))
        self._components = components

    components = property(lambda self: self._components, doc="The finite Mixture (T components) it was built from.")
    alpha = property(lambda self: self.weights.alpha, doc="alpha: the DP concentration, v_k ~ Beta(1, alpha).")
    truncation = property(lambda self: self.weights.truncation, doc="``'blei_jordan'`` or ``'kurihara'``.")
    truncation_level = property(lambda self: self.weights.truncation_level, doc="T: the components q represents.")
    num_sticks = property(lambda self: self.weights.num_sticks, doc="The Beta sticks in q: T - 1 or T (Kurihara).")
    dim = property(lambda self: self.component.dim, doc="D: the component's data dimension.")

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
        """Gaussian components with the empirical-Bayes priors of :meth:`DiagonalGMM.from_data`."""
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

    def stick_stats(self, resp: Array, tail: Array | None = None):
        """The sticks' statistics (:meth:`StickBreaking.stats`)."""
        return self.weights.stats(resp, tail)

    def expected_log_weights(self, stick_view) -> Array:
        """E[log pi_k] for k = 1..T from the sticks' view (:meth:`StickBreaking.expected_log_weights`)."""
        return self.weights.expected_log_weights(stick_view)


__all__ = ["DPMixture", "TRUNCATIONS"]
