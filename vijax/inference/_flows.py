"""Normalizing flows from flowjax as a variational family of ``vijax.inference.bbvi``.

A flowjax distribution q (``flowjax.flows.masked_autoregressive_flow``,
``block_neural_autoregressive_flow``, ``coupling_flow``... over a vector of shape (d,)) is a
guide on the flat unconstrained parameter vector, d the number of unconstrained parameters
(``jax.flatten_util.ravel_pytree`` of ``init_params`` after each leaf's bijector inverse, or of a
target's ``init_params``), mapped to the parameter pytree as the Gaussian families are
(``GaussianGuide.constrain``: the bijectors, or a target's own transform, and their log-Jacobian).

The variational parameters are the flow's trainable arrays: ``equinox.partition`` with
``equinox.is_inexact_array``, a ``paramax.NonTrainable`` wrapper kept whole in the static part
(flowjax's own fitting functions split a flow this way), so that the optimizer moves them and the
state is a pytree. The flow is rebuilt with ``equinox.combine`` and evaluated after
``paramax.unwrap``. Draws and log q come together from ``sample_and_log_prob`` (one pass through
the flow, no inverse) for the ``"reparam"``, ``"iwae"`` and ``"renyi"`` estimators; ``"stl"`` and
``"score"`` evaluate ``log_prob`` at the draws, so they need the flow's inverse too (analytic for
the affine autoregressive and coupling flows, a root finder for a block neural autoregressive
flow). A flow has no closed-form entropy or KL: the entropy is estimated by Monte Carlo, and
``entropy="analytic"`` (with ``"reparam"`` or ``"score"``) and ``prior`` are refused.

Neither flowjax nor Equinox is imported until a flow is given: ``is_flow`` looks for flowjax
among the modules already imported (a flowjax distribution cannot exist otherwise).
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

from vijax._validate import ArgumentError
from vijax.inference._guides import GaussianGuide
from vijax.types import Array, PRNGKey, PyTree

NUM_MEAN_DRAWS = 1000  # the draws of q whose average ``FlowGuide.mean`` takes (a flow has no closed-form mean)


def is_flow(family: Any) -> bool:
    """Whether ``family`` is a flowjax distribution (without importing flowjax)."""
    module = sys.modules.get("flowjax.distributions")
    return module is not None and isinstance(family, module.AbstractDistribution)


def _typed_key(key: PRNGKey):
    """flowjax takes typed keys (``jax.random.key``); a raw uint32 key is wrapped."""
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    return jax.random.wrap_key_data(key)


class FlowGuide:
    """A flowjax distribution over the flat unconstrained parameter vector (see the module docstring).

    Args:
      flow: an unconditional flowjax distribution of shape (d,), its arrays the initial q.
      template: the parameter pytree (its structure and shapes; the flow, not the template, places
        q's start), or a target's unconstrained ``init_params`` with ``transform``.
      bijectors: as for ``GaussianGuide``.
      transform: a target's map ``u -> (params, log |det J|)`` (``vijax.interop.Target.transform``).

    Raises:
      ValueError: naming ``family`` for a conditional flow, a flow whose shape is not (d,), or one
        without trainable arrays; ``init_params`` or ``bijectors`` as ``GaussianGuide`` does.
    """

    def __init__(
        self,
        flow: Any,
        template: PyTree,
        *,
        bijectors: PyTree = None,
        transform: Optional[Callable[[PyTree], tuple[PyTree, Array]]] = None,
    ):
        import equinox as eqx
        import paramax

        self._space = GaussianGuide(template, "meanfield", bijectors=bijectors, transform=transform)
        self.dim = self._space.dim
        if flow.cond_shape is not None:
            raise ArgumentError(
                "family",
                f"family: a conditional flow (cond_shape {flow.cond_shape}) cannot be q; give an unconditional one",
            )
        if tuple(flow.shape) != (self.dim,):
            raise ArgumentError(
                "family",
                f"family: the flow's shape is {tuple(flow.shape)}, but the flat unconstrained parameter vector "
                f"has shape ({self.dim},)",
            )
        params, self._static = eqx.partition(
            flow, eqx.is_inexact_array, is_leaf=lambda leaf: isinstance(leaf, paramax.NonTrainable)
        )
        if not jax.tree_util.tree_leaves(params):
            raise ArgumentError("family", "family: the flow has no trainable arrays")
        self._params = params
        self.identity = False  # no analytic KL to a prior

    def init(self) -> PyTree:
        """The flow's trainable arrays (the rest of the flow, with None in their places, is static)."""
        return self._params

    def flow(self, vparams: PyTree):
        """The flowjax distribution at ``vparams`` (``equinox.combine`` with the static part)."""
        import equinox as eqx

        return eqx.combine(vparams, self._static)

    def _dist(self, vparams: PyTree):
        import paramax

        return paramax.unwrap(self.flow(vparams))

    def sample(self, vparams: PyTree, key: PRNGKey) -> Array:
        """One reparameterized draw z, shape (d,)."""
        with jax.numpy_rank_promotion("allow"):  # flowjax relies on NumPy's broadcasting
            return self._dist(vparams).sample(_typed_key(key))

    def sample_and_log_prob(self, vparams: PyTree, key: PRNGKey) -> tuple[Array, Array]:
        """(z, log q(z)) in one pass through the flow (the draw of ``sample`` with the same key)."""
        with jax.numpy_rank_promotion("allow"):
            return self._dist(vparams).sample_and_log_prob(_typed_key(key))

    def log_prob(self, vparams: PyTree, z: Array) -> Array:
        """log q(z) for one draw z of shape (d,) (through the flow's inverse)."""
        with jax.numpy_rank_promotion("allow"):
            return self._dist(vparams).log_prob(z)

    def entropy(self, vparams: PyTree) -> Array:
        """Refused: a flow has no closed-form entropy (``entropy="mc"``)."""
        raise ArgumentError("entropy", "entropy: a flow has no closed-form entropy; give entropy='mc'")

    def kl(self, vparams: PyTree, prior: Any) -> Array:
        """Refused: a flow has no closed-form KL to a prior."""
        raise ArgumentError("prior", "prior: a flow has no closed-form KL; put the prior in log_density or log_prior")

    def to_tfp(self, vparams: PyTree):
        """Refused: a flowjax flow has no TFP counterpart (``flow(vparams)`` is the flowjax distribution)."""
        raise ArgumentError(
            "family", "family: a flowjax flow has no TFP distribution; guide.flow(q_global) returns the flowjax one"
        )

    def constrain(self, z: Array) -> tuple[PyTree, Array]:
        """(params, log |det dT/dz|) for one flat draw z (as ``GaussianGuide.constrain``)."""
        return self._space.constrain(z)

    def mean(self, vparams: PyTree) -> PyTree:
        """T(E_q[z]) with E_q[z] the average of ``NUM_MEAN_DRAWS`` draws under a fixed key: the
        parameters at q's centre, a Monte Carlo estimate (a flow has no closed-form mean)."""
        keys = jax.random.split(jax.random.PRNGKey(0), NUM_MEAN_DRAWS)
        z = jax.vmap(self.sample, (None, 0))(vparams, keys)
        return self.constrain(jnp.mean(z, axis=0))[0]


ONE_PASS = ("reparam", "iwae", "renyi")  # the estimators that take log q at q's own parameters


def draws(guide: Any, vparams: PyTree, key: PRNGKey, num_samples: int, estimator: str) -> tuple[Any, Any]:
    """(z, log q(z)) for ``num_samples`` draws of any guide (vmapped over split keys): for a flow and
    an estimator of ``ONE_PASS``, both from ``sample_and_log_prob``; otherwise log q is None (the
    caller evaluates it where it needs it: ``"stl"`` at stopped parameters, ``"score"`` at stopped
    draws)."""
    keys = jax.random.split(key, num_samples)
    if isinstance(guide, FlowGuide) and estimator in ONE_PASS:
        return jax.vmap(guide.sample_and_log_prob, (None, 0))(vparams, keys)
    return jax.vmap(guide.sample, (None, 0))(vparams, keys), None


def flow_guide(
    flow: Any,
    init_params: PyTree,
    bijectors: PyTree = None,
    target: Any = None,
    *,
    estimator: str,
    entropy: str,
    prior: Any = None,
) -> FlowGuide:
    """The ``FlowGuide`` of ``bbvi(..., family=flow)`` on ``init_params`` and ``bijectors``, or on a
    ``vijax.interop.Target``'s ``init_params`` and ``transform`` when ``target`` is given, after
    the checks of the settings a flow cannot take: ``entropy="analytic"`` with ``"reparam"`` or
    ``"score"`` (the other estimators are Monte Carlo by definition) and ``prior`` (an analytic
    KL), each an ArgumentError naming it."""
    if entropy == "analytic" and estimator in ("reparam", "score"):
        raise ArgumentError(
            "entropy",
            f"entropy: a flow has no closed-form entropy; give entropy='mc' (estimator={estimator!r}), "
            "or estimator='stl', 'iwae' or 'renyi'",
        )
    if prior is not None:
        raise ArgumentError("prior", "prior: a flow has no closed-form KL; put the prior in log_density or log_prior")
    if target is None and init_params is None:
        raise ArgumentError(
            "init_params", "init_params: a flow family needs the parameter pytree (its structure and shapes)"
        )
    if target is not None:
        return FlowGuide(flow, target.init_params, transform=target.transform)
    return FlowGuide(flow, init_params, bijectors=bijectors)


__all__ = ["FlowGuide", "NUM_MEAN_DRAWS", "ONE_PASS", "draws", "flow_guide", "is_flow"]
