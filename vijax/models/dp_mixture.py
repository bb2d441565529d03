r"""Dirichlet-process mixtures by stick-breaking (Sethuraman's construction of a DP(alpha) mixture)::

    v_k ~ Beta(1, alpha),   pi_k = v_k prod_{j<k} (1 - v_j),   eta_k ~ p(eta)   (k = 1, 2, ...)
    z_n ~ Categorical(pi),  x_n | z_n = k ~ p(x | eta_k),

with any conjugate component p(x | eta) and the two truncations of the tutorial *Raise your ELBO*:
Blei and Jordan (2006) and Kurihara, Welling and Vlassis (2007). :class:`DPMixture` is a
:class:`~vijax.models.Mixture` with :class:`~vijax.models.StickBreaking` weights; the derivations are
in ``vijax.models.mixture``.
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
    """A stick-breaking DP(alpha) mixture truncated at T (see the module docstring): a
    :class:`~vijax.models.Mixture` with ``StickBreaking(T, alpha, truncation)`` weights.

    Build it with :meth:`gaussian`, :meth:`gaussian_from_data` or :meth:`bernoulli`, or from any
    component: ``DPMixture(GammaPoisson(dim=3), truncation_level=20)``. Globals: ``(Beta sticks,
    components)``, the sticks of batch shape (T - 1,) for ``"blei_jordan"`` and (T,) for
    ``"kurihara"``. ``local_params`` of a local step: r (N, T); for Kurihara et al. (N, T + 1), the last
    column the tail mass q(z_n > T).

    Args:
      components: a finite :class:`~vijax.models.Mixture` (``DiagonalGMM``, ``BernoulliMixture``, ...)
        whose ``num_components`` is T, or a :class:`~vijax.models.Component` (then give
        ``truncation_level``).
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
            t = check_int("truncation_level", truncation_level)
            components = Mixture(components, DirichletWeights(t))
        elif not isinstance(components, Mixture) or not components.weights.finite:
            raise ArgumentError(
                "components",
                "components must be a finite Mixture (DiagonalGMM, BernoulliMixture, ...) or a Component, "
                f"got {type(components).__name__}",
            )
        check_positive_scalar("alpha", alpha)
        super().__init__(components.component, StickBreaking(components.num_components, float(alpha), truncation))
        self._components = components

    components = property(
        lambda self: self._components,
        doc="The finite Mixture of the same component with T components that the model was built from.",
    )
    alpha = property(
        lambda self: self.weights.alpha,
        doc="alpha: the DP concentration of the stick-breaking prior v_k ~ Beta(1, alpha) (Blei & Jordan 2006).",
    )
    truncation = property(
        lambda self: self.weights.truncation,
        doc="The truncation: ``'blei_jordan'`` (v_T = 1) or ``'kurihara'`` (q = prior beyond T).",
    )
    truncation_level = property(
        lambda self: self.weights.truncation_level, doc="T: the number of components q represents."
    )
    num_sticks = property(
        lambda self: self.weights.num_sticks,
        doc="The number of Beta sticks in q: T - 1 for Blei and Jordan, T for Kurihara et al.",
    )
    dim = property(lambda self: self.component.dim, doc="D: the component's data dimension.")

    # -- constructors ---------------------------------------------------------------------------
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
        """Gaussian components with the empirical-Bayes priors of :meth:`DiagonalGMM.from_data`
        (scikit-learn's defaults: m0 = mean(x), a0 = D / 2, b0 = a0 var(x))."""
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

    # -- the sticks -----------------------------------------------------------------------------
    def stick_stats(self, resp: Array, tail: Array | None = None):
        """The sticks' statistics (sum_n r_nj, sum_n q(z_n > j)) for j = 1..num_sticks, from
        responsibilities ``resp`` (N, T) and, for Kurihara et al., the tail mass ``tail`` (N,)."""
        return self.weights.stats(resp, tail)

    def expected_log_weights(self, stick_view) -> Array:
        """E[log pi_k] = E[log v_k] + sum_{j<k} E[log(1 - v_j)] for k = 1..T (E[log v_T] = 0 for
        Blei and Jordan), from the sticks' view (E[log v], E[log(1 - v)])."""
        return self.weights.expected_log_weights(stick_view)


__all__ = ["DPMixture", "TRUNCATIONS"]
