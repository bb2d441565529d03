"""What an algorithm offers beyond ``init`` and ``step``, as module functions over the algorithm and
its state (BlackJAX's ``vi`` modules' lesson): every factory returns ``VIAlgorithm(init, step)``,
whose ``step`` is the module's ``step`` with the factory's settings bound (``functools.partial``);
these functions read the settings they need (the guide, the log-joint, the decoder) from there.

- ``guide(alg)``: ``bbvi``'s variational family (``guide(alg).mean(state.q_global)``, ``.to_tfp``);
- ``sample(alg, key, state, num_samples)``: draws from q (``bbvi``, ``conjugate_split``: constrained
  parameters; ``ngvi``: structured like q) or, for ``aevb``, data from the generative model;
- ``log_weights(alg, key, state, batch, num_samples)``: log p(x, z_s) - log q(z_s) (``bbvi``,
  ``ngvi``), for PSIS (``vijax.metrics.psis``);
- ``elbo(alg, key, q_global, batch, **options)``: the ELBO estimate at ``q_global`` as a
  differentiable function (``bbvi``: the scalar ``step`` ascends; ``aevb``: per datum);
- ``iwae_log_likelihood``, ``reconstruct``, ``decoder_kl``: ``aevb``'s evaluations.

A function that takes a key takes it right after the algorithm, as ``step(key, state, batch)`` does.

An algorithm wrapped by a combinator (``restarts``, ``jit_step``...) no longer carries its factory's
settings: call these on the algorithm the factory returned.
"""

from __future__ import annotations

from typing import Any

from vijax._compile import EVALUATION_CPU_OPTIONS, as_one_program
from vijax._validate import check_key
from vijax.inference import _aevb, _bbvi, _ngvi, _split
from vijax.inference.base import check_step_state
from vijax.types import Array, PRNGKey, PyTree

_MODULES = {"bbvi": _bbvi, "ngvi": _ngvi, "aevb": _aevb, "conjugate_split": _split}


def _settings(alg: Any, what: str, kinds: tuple[str, ...]) -> tuple[str, dict]:
    """(the factory's name, the settings its step was built with), or ValueError naming ``alg``."""
    func = getattr(getattr(alg, "step", None), "func", None)
    for kind in kinds:
        if func is _MODULES[kind].step:
            return kind, alg.step.keywords
    raise ValueError(
        f"alg: {what} takes an algorithm returned by {' or '.join(kinds)} (as its factory returned it, not "
        f"wrapped by a combinator), got {type(alg).__name__}"
        + (f" stepping with {getattr(func, '__module__', '?')}.{getattr(func, '__name__', '?')}" if func else "")
    )


def guide(alg: Any):
    """``bbvi``'s variational family (``GaussianGuide``, ``ExpFamilyGuide``, or for a flowjax flow
    its guide, which adds ``flow(q_global)``, the fitted flow, and refuses ``to_tfp``): ``init()``,
    ``mean(q_global)`` (the parameter pytree at q's centre; a flow's by Monte Carlo),
    ``to_tfp(q_global)``, ``sample``..."""
    _, kw = _settings(alg, "guide", ("bbvi",))
    return kw["guide"]


def sample(alg: Any, key: PRNGKey, state: PyTree, num_samples: int) -> PyTree:
    """``num_samples`` draws, stacked on a leading axis: of the parameters from q (``bbvi``,
    constrained; ``ngvi``, structured like q; ``conjugate_split``, every site, constrained) or of
    data from the fitted model (``aevb``: E[x | z; theta] for z ~ N(0, I), theta ~ q(theta))."""
    kind, kw = _settings(alg, "sample", ("bbvi", "ngvi", "aevb", "conjugate_split"))
    check_step_state(state)  # as step checks them
    check_key("key", key)
    # called on concrete values, one program, not op by op (inside a caller's trace, inlined)
    return as_one_program(lambda: _sample(kind, kw, key, state, num_samples), "sample", options=EVALUATION_CPU_OPTIONS)


def _sample(kind: str, kw: dict, key: PRNGKey, state: PyTree, num_samples: int) -> PyTree:
    if kind == "conjugate_split":
        return _split.sample(
            state, key, num_samples, inner=kw["inner"], conjugate=kw["conjugate"], bijectors=kw["bijectors"]
        )
    if kind == "bbvi":
        return _bbvi.sample(state.q_global, key, num_samples, guide=kw["guide"])
    if kind == "ngvi":
        return _ngvi.sample(state.q_global, key, num_samples)
    return _aevb.sample(state.q_global, key, num_samples, model=kw["model"], decoder=kw["decoder"])


def log_weights(alg: Any, key: PRNGKey, state: PyTree, batch: PyTree, num_samples: int) -> Array:
    """(S,) log p(x, z_s) - log q(z_s) for draws z_s ~ q (``bbvi``: in the unconstrained space, the
    Jacobian included; ``ngvi``), for PSIS (``vijax.metrics.psis``)."""
    kind, kw = _settings(alg, "log_weights", ("bbvi", "ngvi"))
    check_step_state(state)  # as step checks them
    check_key("key", key)

    def run():
        if kind == "bbvi":
            return _bbvi.log_weights(state.q_global, batch, key, num_samples, guide=kw["guide"], joint=kw["joint"])
        return _ngvi.log_weights(state.q_global, batch, key, num_samples, joint=kw["joint"], prior=kw["prior"])

    return as_one_program(run, "log_weights", options=EVALUATION_CPU_OPTIONS)  # one program, as sample


def elbo(alg: Any, key: PRNGKey, q_global: PyTree, batch: PyTree, **options: Any) -> Array:
    """The ELBO estimate at ``q_global`` (``state.q_global``, or any parameters of its structure),
    differentiable in ``q_global`` and in anything ``batch`` depends on.

    - ``bbvi``: the scalar ``step`` ascends (the configured estimator; the importance-weighted
      bound for ``"iwae"``, the Renyi bound for ``"renyi"``), so q can be one part of a larger model trained by the user's own
      ``jax.grad`` (docs/composition.md); no options.
    - ``aevb``: (N,) per-datum estimates; options ``num_samples=1``, ``theta="sample"``.
    """
    kind, kw = _settings(alg, "elbo", ("bbvi", "aevb"))
    if kind == "bbvi":
        if options:
            raise ValueError(f"{sorted(options)[0]}: bbvi's elbo takes no options (its settings are the factory's)")
        names = ("guide", "joint", "estimator", "entropy", "num_samples", "prior", "alpha")
        return _bbvi.elbo(q_global, batch, key, **{n: kw[n] for n in names})
    return _aevb.elbo(q_global, batch, key, **options, model=kw["model"], decoder=kw["decoder"])


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
    _, kw = _settings(alg, "iwae_log_likelihood", ("aevb",))
    check_step_state(state)  # as step checks it (the key: by the evaluation's own checks)
    return _aevb.iwae_log_likelihood(
        state.q_global, x, key, num_samples, chunk_size, theta, model=kw["model"], decoder=kw["decoder"]
    )


def reconstruct(alg: Any, state: PyTree, x: Array) -> Array:
    """``aevb``: (N, D) E[x | z = mu_phi(x); theta] at q's mean theta."""
    _, kw = _settings(alg, "reconstruct", ("aevb",))
    check_step_state(state)
    return _aevb.reconstruct(state.q_global, x, model=kw["model"], decoder=kw["decoder"])


def decoder_kl(alg: Any, state: PyTree) -> Array:
    """``aevb``: KL(q(theta) || p(theta)) (0 for a point decoder)."""
    _, kw = _settings(alg, "decoder_kl", ("aevb",))
    check_step_state(state)
    return _aevb.decoder_kl(state.q_global, decoder=kw["decoder"])


__all__ = ["decoder_kl", "elbo", "guide", "iwae_log_likelihood", "log_weights", "reconstruct", "sample"]
