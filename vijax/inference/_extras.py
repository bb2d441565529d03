"""What an algorithm offers beyond ``init`` and ``step`` (its ``VIAlgorithm.extras``, implementing some
of the protocols below), as module functions over the algorithm and its state (as BlackJAX's ``vi``)."""

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


def _offered(alg: Any, protocol: type, what: str, factories: str, state=..., key=...) -> Any:
    """``alg.extras`` where it implements ``protocol`` (else an ArgumentError naming ``alg``), after
    checking ``state`` and ``key`` where given."""
    extras = alg.extras if isinstance(alg, VIAlgorithm) else None
    if not implements(extras, protocol):
        raise ArgumentError(
            "alg",
            f"alg: {what} takes an algorithm returned by {factories} (as its factory returned it, not wrapped "
            f"by a combinator), got {type(alg).__name__}",
        )
    if state is not ...:
        check_step_state(state)
    if key is not ...:
        check_key("key", key)
    return extras


def guide(alg: Any):
    """``bbvi``'s variational family (``GaussianGuide``, ``ExpFamilyGuide`` or ``FlowGuide``)."""
    return _offered(alg, OffersGuide, "guide", "bbvi").guide


def sample(alg: Any, key: PRNGKey, state: PyTree, num_samples: int) -> PyTree:
    """``num_samples`` draws, stacked on a leading axis: of the parameters from q (``bbvi``,
    ``ngvi``, ``conjugate_split``; ``amortized``: its global sites) or of data from the fitted model (``aevb``)."""
    extras = _offered(
        alg, SamplesQ, "sample", "bbvi or ngvi or amortized or discrete_bbvi or aevb or conjugate_split", state, key
    )
    return extras.sample(key, state, num_samples)


def log_weights(alg: Any, key: PRNGKey, state: PyTree, batch: PyTree, num_samples: int) -> Array:
    """(S,) log p(x, z_s) - log q(z_s) for draws z_s ~ q (``bbvi`` and ``laplace``: in the unconstrained space,
    the Jacobian included, ``laplace``'s params at their fitted values; ``ngvi``), for PSIS (``vijax.metrics.psis``)."""
    extras = _offered(alg, OffersLogWeights, "log_weights", "bbvi or ngvi or discrete_bbvi or laplace", state, key)
    return extras.log_weights(key, state, batch, num_samples)


def elbo(alg: Any, key: PRNGKey, q_global: PyTree, batch: PyTree, **options: Any) -> Array:
    """The ELBO estimate at ``q_global`` (``state.q_global``, or any parameters of its structure),
    differentiable in ``q_global`` and in anything ``batch`` depends on.

    - ``bbvi``: the scalar ``step`` ascends (q can be part of a larger model); no options.
    - ``amortized``: the scalar estimate at a batch (its plates' indices); no options.
    - ``aevb``: (N,) per-datum estimates; options ``num_samples=1``, ``theta="sample"``.
    """
    return _offered(alg, OffersElbo, "elbo", "bbvi or amortized or discrete_bbvi or aevb").elbo(
        key, q_global, batch, **options
    )


def iwae_log_likelihood(
    alg: Any, key: PRNGKey, state: PyTree, x: Array, num_samples: int = 1000, chunk_size: int = 256, theta="sample"
):
    """``aevb``: (N,) importance-sampled estimates of log p(x_n) (Burda, Grosse and Salakhutdinov
    2016), K = ``num_samples`` draws in chunks of ``chunk_size`` (see ``vijax.inference.aevb``)."""
    extras = _offered(alg, EvaluatesDecoder, "iwae_log_likelihood", "aevb", state)
    return extras.iwae_log_likelihood(key, state, x, num_samples, chunk_size, theta)


def reconstruct(alg: Any, state: PyTree, x: Array) -> Array:
    """``aevb``: (N, D) E[x | z = mu_phi(x); theta] at q's mean theta."""
    return _offered(alg, EvaluatesDecoder, "reconstruct", "aevb", state).reconstruct(state, x)


def decoder_kl(alg: Any, state: PyTree) -> Array:
    """``aevb``: KL(q(theta) || p(theta)) (0 for a point decoder)."""
    return _offered(alg, EvaluatesDecoder, "decoder_kl", "aevb", state).decoder_kl(state)
