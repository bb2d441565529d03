"""What an algorithm offers beyond ``init`` and ``step``, as module functions over the algorithm and
its state (BlackJAX's ``vi`` modules' lesson). A factory declares what it offers in
``VIAlgorithm.extras``, an object implementing some of the protocols below:

- ``guide(alg)``: ``bbvi``'s variational family (``guide(alg).mean(state.q_global)``, ``.to_tfp``);
- ``sample(alg, key, state, num_samples)``: draws from q (``bbvi``, ``conjugate_split``: constrained
  parameters; ``ngvi``: structured like q) or, for ``aevb``, data from the generative model;
- ``log_weights(alg, key, state, batch, num_samples)``: log p(x, z_s) - log q(z_s) (``bbvi``,
  ``ngvi``), for PSIS (``vijax.metrics.psis``);
- ``elbo(alg, key, q_global, batch, **options)``: the ELBO estimate at ``q_global`` as a
  differentiable function (``bbvi``: the scalar ``step`` ascends; ``aevb``: per datum);
- ``iwae_log_likelihood``, ``reconstruct``, ``decoder_kl``: ``aevb``'s evaluations.

``reject_non_finite`` and ``with_value_checks`` keep ``extras``; a combinator that changes the state
(``restarts``, ``lock_step``...) does not: call these on the algorithm the factory returned.
"""

from __future__ import annotations

from typing import Any, Protocol

from vijax._validate import ArgumentError, check_key, implements
from vijax.inference.base import VIAlgorithm, check_step_state
from vijax.types import Array, PRNGKey, PyTree


class OffersGuide(Protocol):
    guide: Any  # bbvi's variational family


class SamplesQ(Protocol):
    def sample(self, key: PRNGKey, state: PyTree, num_samples: int) -> PyTree: ...


class OffersLogWeights(Protocol):
    def log_weights(self, key: PRNGKey, state: PyTree, batch: PyTree, num_samples: int) -> Array: ...


class OffersElbo(Protocol):
    def elbo(self, key: PRNGKey, q_global: PyTree, batch: PyTree, **options: Any) -> Array: ...


class EvaluatesDecoder(Protocol):
    def iwae_log_likelihood(self, key, state, x, num_samples: int, chunk_size: int, theta: str) -> Array: ...

    def reconstruct(self, state: PyTree, x: Array) -> Array: ...

    def decoder_kl(self, state: PyTree) -> Array: ...


def _offered(alg: Any, protocol: type, what: str, factories: str) -> Any:
    """``alg.extras`` where it implements ``protocol``, else an ArgumentError naming ``alg``."""
    extras = alg.extras if isinstance(alg, VIAlgorithm) else None
    if not implements(extras, protocol):
        raise ArgumentError(
            "alg",
            f"alg: {what} takes an algorithm returned by {factories} (as its factory returned it, not wrapped "
            f"by a combinator), got {type(alg).__name__}",
        )
    return extras


def guide(alg: Any):
    """``bbvi``'s variational family (``GaussianGuide``, ``ExpFamilyGuide`` or ``FlowGuide``)."""
    return _offered(alg, OffersGuide, "guide", "bbvi").guide


def sample(alg: Any, key: PRNGKey, state: PyTree, num_samples: int) -> PyTree:
    """``num_samples`` draws, stacked on a leading axis: of the parameters from q (``bbvi``,
    constrained; ``ngvi``, structured like q; ``conjugate_split``, every site, constrained) or of
    data from the fitted model (``aevb``: E[x | z; theta] for z ~ N(0, I), theta ~ q(theta))."""
    extras = _offered(alg, SamplesQ, "sample", "bbvi or ngvi or aevb or conjugate_split")
    check_step_state(state)
    check_key("key", key)
    return extras.sample(key, state, num_samples)


def log_weights(alg: Any, key: PRNGKey, state: PyTree, batch: PyTree, num_samples: int) -> Array:
    """(S,) log p(x, z_s) - log q(z_s) for draws z_s ~ q (``bbvi``: in the unconstrained space, the
    Jacobian included; ``ngvi``), for PSIS (``vijax.metrics.psis``)."""
    extras = _offered(alg, OffersLogWeights, "log_weights", "bbvi or ngvi")
    check_step_state(state)
    check_key("key", key)
    return extras.log_weights(key, state, batch, num_samples)


def elbo(alg: Any, key: PRNGKey, q_global: PyTree, batch: PyTree, **options: Any) -> Array:
    """The ELBO estimate at ``q_global`` (``state.q_global``, or any parameters of its structure),
    differentiable in ``q_global`` and in anything ``batch`` depends on.

    - ``bbvi``: the scalar ``step`` ascends (the configured estimator), so q can be one part of a
      larger model trained by the user's own ``jax.grad`` (docs/composition.md); no options.
    - ``aevb``: (N,) per-datum estimates; options ``num_samples=1``, ``theta="sample"``.
    """
    return _offered(alg, OffersElbo, "elbo", "bbvi or aevb").elbo(key, q_global, batch, **options)


def iwae_log_likelihood(
    alg: Any,
    key: PRNGKey,
    state: PyTree,
    x: Array,
    num_samples: int = 1000,
    chunk_size: int = 256,
    theta: str = "sample",
) -> Array:
    """``aevb``: (N,) importance-sampled estimates of log p(x_n) (Burda, Grosse and Salakhutdinov
    2016), K = ``num_samples`` draws in chunks of ``chunk_size`` (see ``vijax.inference.aevb``)."""
    extras = _offered(alg, EvaluatesDecoder, "iwae_log_likelihood", "aevb")
    check_step_state(state)
    return extras.iwae_log_likelihood(key, state, x, num_samples, chunk_size, theta)


def reconstruct(alg: Any, state: PyTree, x: Array) -> Array:
    """``aevb``: (N, D) E[x | z = mu_phi(x); theta] at q's mean theta."""
    extras = _offered(alg, EvaluatesDecoder, "reconstruct", "aevb")
    check_step_state(state)
    return extras.reconstruct(state, x)


def decoder_kl(alg: Any, state: PyTree) -> Array:
    """``aevb``: KL(q(theta) || p(theta)) (0 for a point decoder)."""
    extras = _offered(alg, EvaluatesDecoder, "decoder_kl", "aevb")
    check_step_state(state)
    return extras.decoder_kl(state)


__all__ = [
    "EvaluatesDecoder",
    "OffersElbo",
    "OffersGuide",
    "OffersLogWeights",
    "SamplesQ",
    "decoder_kl",
    "elbo",
    "guide",
    "iwae_log_likelihood",
    "log_weights",
    "reconstruct",
    "sample",
]
