"""A Bayesian last layer: a Gaussian q(W) over a linear head W = (w, b) on a network's features phi_theta,

    y_n | x_n, W ~ p(y_n | w^T phi_theta(x_n) + b),   W ~ N(0, s^2 I),

p Gaussian (noise scale sigma), Bernoulli (logistic link) or categorical (softmax link, w (F, K)).
q(W) on the flat (w, b) and the point theta maximise one ELBO, ``bbvi``'s on (features, labels)
(Blei, Kucukelbir and McAuliffe 2017, §5; Snoek et al. 2015; Harrison, Willes and Snoek 2024):

    L(theta, lambda) = (N / M) sum_{n in batch} E_q[log p(y_n | W, phi_theta(x_n))] - KL(q || p(W)).
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from vijax._validate import ArgumentError, check_choice, check_int, check_key, check_scalar
from vijax.inference._bbvi import bbvi
from vijax.inference.base import VIAlgorithm
from vijax.inference._guides import KINDS
from vijax.models import Network, check_network
from vijax.types import Array, PRNGKey, PyTree, tfp_jax

LIKELIHOODS = ("gaussian", "bernoulli", "categorical")
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class LastLayer(NamedTuple):
    """A Bayesian last layer on ``net``: head ``{"w": (F,) or (F, K), "b": () or (K,)}``, ``batch`` ``(x, y)``.

    Attributes:
      net: the network giving the features.
      vi: the head's ``bbvi`` algorithm on batches ``(features (M, F), y (M,))``.
      init: ``key -> vparams``: q's start, its mean drawn N(0, 1/F).
      elbo: ``(net_params, vparams, batch, key) -> scalar``, differentiable in both.
      features: ``(net_params, x (M, ...)) -> (M, F)``.
      log_likelihood: ``(head_params, features (M, F), y (M,)) -> (M,)``.
      log_predictive: ``(net_params, vparams, batch, key, num_samples) -> (M,)``: log (1/S) sum_s p(y_n | W_s).
      predict: ``(net_params, vparams, x, key, num_samples)``: the predictive mean of y over S draws of W.
    """

    net: Network
    vi: VIAlgorithm
    init: Callable[[PRNGKey], PyTree]
    elbo: Callable[[PyTree, PyTree, Any, PRNGKey], Array]
    features: Callable[[PyTree, Array], Array]
    log_likelihood: Callable[[PyTree, Array, Array], Array]
    log_predictive: Callable
    predict: Callable


def linear(head: PyTree, feats: Array) -> Array:
    """The head's output ``feats @ w + b``: (M,) for a vector ``w``, (M, K) for a matrix."""
    b = head["b"]
    return feats @ head["w"] + (b[None] if jnp.ndim(b) else b)


def head_log_likelihood(likelihood: str, noise_scale: float = 1.0) -> Callable:
    """``(head_params, features (M, F), y (M,)) -> (M,)`` for ``likelihood`` in ``LIKELIHOODS``."""
    check_choice("likelihood", likelihood, LIKELIHOODS)

    def log_lik(head, feats, y):
        out = linear(head, feats)
        if likelihood == "gaussian":
            r = (y - out) / noise_scale
            return -0.5 * r * r - math.log(noise_scale) - _HALF_LOG_2PI
        if likelihood == "bernoulli":
            y = jnp.asarray(y, out.dtype)
            return y * jax.nn.log_sigmoid(out) + (1.0 - y) * jax.nn.log_sigmoid(-out)
        logp = jax.nn.log_softmax(out, axis=-1)
        return jnp.take_along_axis(logp, jnp.asarray(y, jnp.int32)[:, None], axis=-1)[:, 0]

    return log_lik


def bayesian_last_layer(
    net: Network,
    example: Array,
    *,
    num_features: Optional[int] = None,
    likelihood: str = "bernoulli",
    num_classes: Optional[int] = None,
    noise_scale: float = 1.0,
    prior_scale: float = 1.0,
    num_data: Optional[int] = None,
    family: str = "fullrank",
    estimator: str = "reparam",
    num_samples: int = 1,
    init_scale: float = 0.1,
    rank: int = 1,
    optimizer: Any = "adam",
    schedule: Any = None,
) -> LastLayer:
    """A Bayesian linear / logistic / softmax head on ``net``'s features (module docstring).

    Args:
      net: the feature map, a ``vijax.models.Network`` for one datum (``mlp``, ``from_equinox``).
      example: one input datum (its shape is all that is used).
      num_features: F, the head's input width (None: the network's output width).
      likelihood: one of ``LIKELIHOODS``.
      num_classes: K >= 2 for ``"categorical"`` (None otherwise).
      noise_scale: sigma > 0 of the ``"gaussian"`` likelihood.
      prior_scale: s > 0, W ~ N(0, s^2 I) (the bias included).
      num_data: N for the N / M scaling of a minibatch's log-likelihood (None: no scaling).
      family: q's Gaussian family, ``"fullrank"`` (default), ``"meanfield"`` or ``"lowrank"``.
      estimator: ``bbvi``'s gradient estimator (``vijax.inference.ESTIMATORS``).
      num_samples: S draws of W per ELBO estimate.
      init_scale: q's initial standard deviation.
      rank: the low-rank factor's columns (``"lowrank"``).
      optimizer: ``vi.step``'s optimizer, for fitting q(W) alone on fixed features.
      schedule: ``vi.step``'s learning rate.

    Raises:
      ValueError: naming the argument: a ``net`` not giving (``num_features``,), a bad setting or ``num_classes``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.models import mlp
        >>> net = mlp(jax.random.PRNGKey(0), [2, 8, 4])
        >>> head = bayesian_last_layer(net, jnp.zeros(2), likelihood="bernoulli", num_data=10)
        >>> x, y = jnp.ones((10, 2)), jnp.ones(10)
        >>> vparams = head.init(jax.random.PRNGKey(1))
        >>> g = jax.grad(head.elbo)(net.params, vparams, (x, y), jax.random.PRNGKey(2))
        >>> bool(jnp.any(g[0]["w"] != 0))
        True
    """
    check_choice("likelihood", likelihood, LIKELIHOODS)
    check_choice("family", family, KINDS)
    if likelihood == "categorical":
        if num_classes is None:
            raise ArgumentError(
                "num_classes", "num_classes: the categorical likelihood needs the number of classes K >= 2"
            )
        k = check_int("num_classes", num_classes, minimum=2)
    elif num_classes is not None:
        raise ArgumentError(
            "num_classes", f"num_classes is only taken by the categorical likelihood, not {likelihood!r}"
        )
    noise_scale = check_scalar("noise_scale", noise_scale, low=0.0)
    prior_scale = check_scalar("prior_scale", prior_scale, low=0.0)
    if not isinstance(net, Network):
        raise ArgumentError("net", f"net must be a vijax.models.Network (apply, params), got {type(net).__name__}")
    try:
        out = jax.eval_shape(net.apply, net.params, example)
    except Exception as err:
        raise ArgumentError(
            "net", f"net: applying it to one datum of shape {tuple(jnp.shape(example))} failed: {err}"
        ) from err
    if num_features is None:
        if not hasattr(out, "shape") or len(out.shape) != 1:
            raise ArgumentError(
                "net", f"net must map one datum to a vector of features, got {jax.tree.map(jnp.shape, out)}"
            )
        num_features = out.shape[0]
    f = check_int("num_features", num_features)
    check_network(net, example, (f,), "net")
    dtype = out.dtype
    outputs = (k,) if likelihood == "categorical" else ()
    head0 = {"w": jnp.zeros((f, *outputs), dtype), "b": jnp.zeros(outputs, dtype)}
    dim = sum(x.size for x in jax.tree_util.tree_leaves(head0))
    log_lik = head_log_likelihood(likelihood, noise_scale)

    def log_density(head, batch):
        feats, y = batch
        return jnp.sum(log_lik(head, feats, y))

    analytic = estimator in ("reparam", "score")
    prior = tfp_jax().distributions.MultivariateNormalDiag(jnp.zeros(dim, dtype), jnp.full((dim,), prior_scale, dtype))
    prior_kw = {"prior": prior} if analytic else {"log_prior": lambda head: prior.log_prob(ravel_pytree(head)[0])}
    options = dict(family=family, num_data=num_data, estimator=estimator, num_samples=num_samples, rank=rank)
    options.update(init_scale=init_scale, optimizer=optimizer, schedule=schedule, **prior_kw)
    vi = bbvi(log_density, init_params=head0, **options)
    guide = vi.extras.guide

    def features(net_params, x):
        return jax.vmap(net.apply, (None, 0))(net_params, x)

    def init(key):
        check_key("key", key)
        vparams = guide.init()
        loc = jax.random.normal(key, (dim,), dtype) / math.sqrt(f)
        return dict(vparams, loc=loc)

    def elbo(net_params, vparams, batch, key):
        x, y = batch
        return vi.extras.elbo(key, vparams, (features(net_params, x), y))

    def heads(vparams, key, num_samples):
        keys = jax.random.split(key, check_int("num_samples", num_samples))
        return jax.vmap(lambda kk: guide.constrain(guide.sample(vparams, kk))[0])(keys)

    def log_predictive(net_params, vparams, batch, key, num_samples):
        x, y = batch
        feats = features(net_params, x)
        ll = jax.vmap(lambda h: log_lik(h, feats, y))(heads(vparams, key, num_samples))
        return jax.scipy.special.logsumexp(ll, axis=0) - math.log(num_samples)

    def predict(net_params, vparams, x, key, num_samples):
        feats = features(net_params, x)

        def mean(h):
            out = linear(h, feats)
            if likelihood == "bernoulli":
                return jax.nn.sigmoid(out)
            return jax.nn.softmax(out, axis=-1) if likelihood == "categorical" else out

        return jnp.mean(jax.vmap(mean)(heads(vparams, key, num_samples)), axis=0)

    return LastLayer(net, vi, init, elbo, features, log_lik, log_predictive, predict)
