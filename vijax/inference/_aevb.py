"""Auto-encoding variational Bayes (AEVB) and its fully Bayesian version (Kingma and Welling 2014;
*Raise your ELBO* 2019, §AEVB, §Fully Bayesian AEVB). An ``AEVBModel`` has an encoder
q_phi(z | x) = N(mu_phi(x), diag(sigma_phi(x)^2)), a decoder p(x | z; theta) and p(z) = N(0, I); with a
point theta the objective is

    L(phi, theta) ~= (N/M) sum_{n in batch} [ (1/S) sum_s log p(x_n | z_ns; theta) - KL(q(z_n | x_n) || p(z)) ];

with ``bayesian_decoder=True``, theta ~ N(0, prior_scale^2 I) has a mean-field Gaussian q(theta):
one reparameterized theta per step and KL(q(theta) || p(theta)) subtracted once.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
import optax

from vijax._validate import batch_size, check_bool, check_choice, check_int, check_key, check_scalar
from vijax.inference._guides import GaussianGuide
from vijax.inference._optax_vi import ascend, resolve_optimizer
from vijax.inference._scale import check_num_data
from vijax.inference.base import VIAlgorithm, check_protocol, guarded_algorithm, safe_increment, validated_step
from vijax.inference.base import checked_start
from vijax.models import AEVBModel, filter_jit
from vijax.types import Array, PRNGKey, PyTree

THETA_DRAWS = ("sample", "mean")


class AEVBState(NamedTuple):
    """q_global: {"encoder": phi, "decoder": theta, or q(theta)'s {"loc", "scale"}}; opt_state; count."""

    q_global: PyTree
    opt_state: PyTree
    count: Array


class AEVBInfo(NamedTuple):
    """elbo: the minibatch ELBO estimate (scaled to N) before the step."""

    elbo: Array


def gaussian_kl(loc: Array, scale: Array, prior_scale: float) -> Array:
    """KL(N(loc, diag(scale^2)) || N(0, prior_scale^2 I)) summed over the coordinates."""
    r = scale / prior_scale
    return jnp.sum(-jnp.log(r) + 0.5 * (r * r + (loc / prior_scale) ** 2) - 0.5)


class _Decoder:
    """How theta is obtained from ``q_global["decoder"]``: the point itself, or draws of q(theta)."""

    def __init__(self, template: PyTree, bayesian: bool, init_scale: float, prior_scale: float):
        self.bayesian, self.prior_scale = bayesian, prior_scale
        self.guide = GaussianGuide(template, "meanfield", init_scale=init_scale) if bayesian else None

    def init(self, template: PyTree) -> PyTree:
        return self.guide.init() if self.bayesian else template

    def draw(self, vparams: PyTree, key: PRNGKey) -> PyTree:
        """One theta: a reparameterized draw of q(theta), or the point."""
        if not self.bayesian:
            return vparams
        return self.guide.constrain(self.guide.sample(vparams, key))[0]

    def draws(self, vparams: PyTree, key: PRNGKey, num: int, how: str) -> tuple[PyTree, Any]:
        """(thetas, vmap axis): ``num`` stacked draws (axis 0), or one theta (axis None)."""
        if not self.bayesian:
            return vparams, None
        if how == "mean":
            return self.guide.mean(vparams), None
        return jax.vmap(self.draw, (None, 0))(vparams, jax.random.split(key, num)), 0

    def point(self, vparams: PyTree) -> PyTree:
        return self.guide.mean(vparams) if self.bayesian else vparams

    def kl(self, vparams: PyTree) -> Array:
        if not self.bayesian:
            return jnp.zeros((), jax.tree_util.tree_leaves(vparams)[0].dtype)
        return gaussian_kl(vparams["loc"], jax.nn.softplus(vparams["scale"]), self.prior_scale)


def _batch_elbo(model, enc, theta, x, key, num_samples):
    """(M,) per-datum (1/S) sum_s log p(x_n | z_ns; theta) - KL(q(z_n | x_n) || p(z)), one key per datum."""

    def datum(xn, kn):
        mean, log_scale = model.encode(enc, xn)
        z = model.sample_latent(mean, log_scale, kn, num_samples)
        ll = jax.vmap(model.log_likelihood, (None, 0, None))(theta, z, xn)
        return jnp.mean(ll) - model.kl_to_prior(mean, log_scale)

    return jax.vmap(datum)(x, jax.random.split(key, x.shape[0]))


def init(
    key: PRNGKey, batch: PyTree = None, *, model, decoder: _Decoder, optimizer: optax.GradientTransformation
) -> AEVBState:
    """The networks' parameters (q(theta) centred on the decoder's) and the optimizer's state."""
    checked_start(key, batch, model)
    params = model.network_params()
    q = {"encoder": params["encoder"], "decoder": decoder.init(params["decoder"])}
    return AEVBState(q, optimizer.init(q), jnp.zeros((), jnp.int32))


@validated_step
def step(
    key: PRNGKey, state: AEVBState, batch: Array, *, model, decoder, optimizer, num_data, num_samples: int
) -> tuple[AEVBState, AEVBInfo]:
    """One optimizer step on the minibatch ELBO (see the module docstring)."""
    if num_data is not None:
        check_num_data(num_data, model, batch, state.count)

    def objective(q):  # the minibatch ELBO estimate of the module docstring
        k_theta, k_z = jax.random.split(key)
        per = _batch_elbo(model, q["encoder"], decoder.draw(q["decoder"], k_theta), batch, k_z, num_samples)
        scale = 1.0 if num_data is None else num_data / batch_size(batch)
        return scale * jnp.sum(per) - decoder.kl(q["decoder"])

    elbo, grads = jax.value_and_grad(objective)(state.q_global)
    new, opt_state = ascend(optimizer, grads, state.opt_state, state.q_global)
    return AEVBState(new, opt_state, safe_increment(state.count)), AEVBInfo(elbo)


def as_top_level_api(
    model,
    *,
    num_data: Optional[int] = None,
    schedule=None,
    optimizer: Union[str, optax.GradientTransformation] = "adam",
    num_samples: int = 1,
    bayesian_decoder: bool = False,
    prior_scale: float = 1.0,
    init_scale: float = 0.01,
    **hyper: Any,
) -> VIAlgorithm:
    """AEVB or fully Bayesian AEVB for ``model`` (module docstring).

    Args:
      model: an ``AEVBModel`` (``vijax.models.VAE``).
      num_data: N for the N / M scaling of a minibatch of M (None: every batch is the whole data).
      schedule: the learning rate of a named optimizer (default ``DEFAULT_LEARNING_RATES``).
      optimizer: a name in ``OPTIMIZERS`` (hyperparameters in ``hyper``) or an ``optax.GradientTransformation``.
      num_samples: S >= 1 draws of z per datum and step.
      bayesian_decoder: a mean-field Gaussian q(theta) over the decoder's parameters.
      prior_scale: the prior's sd, theta ~ N(0, prior_scale^2 I) (Bayesian decoder).
      init_scale: q(theta)'s initial sd (Bayesian decoder).

    Raises:
      ValueError: naming the argument: a model that is not an ``AEVBModel``, a bad setting.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.models import VAE, mlp
        >>> k1, k2 = jax.random.split(jax.random.PRNGKey(0))
        >>> vae = VAE(mlp(k1, (4, 8, 4)), mlp(k2, (2, 8, 4)), latent_dim=2, data_dim=4)
        >>> alg = aevb(vae, num_data=100, schedule=1e-2)
        >>> x = jnp.ones((10, 4))
        >>> state, info = jax.jit(alg.step)(jax.random.PRNGKey(2), alg.init(jax.random.PRNGKey(1)), x)
        >>> from vijax.inference import iwae_log_likelihood
        >>> bool(info.accepted), iwae_log_likelihood(alg, jax.random.PRNGKey(3), state, x, 64).shape
        (True, (10,))
    """
    check_protocol(model, AEVBModel, "aevb")
    if num_data is not None:
        num_data = check_int("num_data", num_data)
    num_samples = check_int("num_samples", num_samples)
    bayesian_decoder = check_bool("bayesian_decoder", bayesian_decoder)
    prior_scale = check_scalar("prior_scale", prior_scale, low=0.0)
    init_scale = check_scalar("init_scale", init_scale, low=0.0)
    optimizer = resolve_optimizer(optimizer, schedule, **hyper)
    decoder = _Decoder(model.network_params()["decoder"], bayesian_decoder, init_scale, prior_scale)
    settings = dict(model=model, decoder=decoder, optimizer=optimizer, num_data=num_data, num_samples=num_samples)
    return guarded_algorithm(init, step, ("model", "decoder", "optimizer"), AEVBExtras(model, decoder), **settings)


def _as_float(x) -> Array:
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.result_type(float))


@filter_jit
def _elbo_eval(q, x, key, *, model, decoder, num_samples, theta):
    k_theta, k_z = jax.random.split(key)
    if decoder.bayesian and theta == "sample":  # one theta per Monte Carlo sample, shared by the data
        thetas, _ = decoder.draws(q["decoder"], k_theta, num_samples, "sample")
        per = jax.vmap(lambda th, k: _batch_elbo(model, q["encoder"], th, x, k, 1))(
            thetas, jax.random.split(k_z, num_samples)
        )
        return jnp.mean(per, axis=0)
    return _batch_elbo(model, q["encoder"], decoder.point(q["decoder"]), x, k_z, num_samples)


@filter_jit
def _iwae_eval(q, x, key, *, model, decoder, k_total, chunk, theta):
    def log_weights(xn, kn, th, axis):  # (chunk,) log p(x_n | z_k; theta_k) + log p(z_k) - log q(z_k | x_n)
        mean, log_scale = model.encode(q["encoder"], xn)
        z = model.sample_latent(mean, log_scale, kn, chunk)
        lq = jax.vmap(model.log_q, (None, None, 0))(mean, log_scale, z)
        return jax.vmap(model.log_likelihood, (axis, 0, None))(th, z, xn) + jax.vmap(model.log_prior)(z) - lq

    def one(acc, i):
        k_theta, k_z = jax.random.split(jax.random.fold_in(key, i))
        th, axis = decoder.draws(q["decoder"], k_theta, chunk, theta)
        keys = jax.random.split(k_z, x.shape[0])
        w = jax.vmap(lambda xn, kn: log_weights(xn, kn, th, axis), out_axes=1)(x, keys)  # (chunk, N)
        valid = (i * chunk + jnp.arange(chunk)) < k_total  # the last chunk's surplus draws weigh nothing
        w = jnp.where(valid[:, None], w, -jnp.inf)
        return jnp.logaddexp(acc, jax.scipy.special.logsumexp(w, axis=0)), None

    start = jnp.full((x.shape[0],), -jnp.inf, x.dtype)
    acc, _ = jax.lax.scan(one, start, jnp.arange(-(-k_total // chunk)))
    return acc - math.log(k_total)


@filter_jit
def _reconstruct_eval(q, x, *, model, decoder):
    th = decoder.point(q["decoder"])
    return jax.vmap(lambda xn: model.mean(th, model.encode(q["encoder"], xn)[0]))(x)


@filter_jit
def _sample_eval(q, key, *, model, decoder, num_samples):
    k_theta, k_z = jax.random.split(key)
    thetas, axis = decoder.draws(q["decoder"], k_theta, num_samples, "sample")
    z = jax.random.normal(k_z, (num_samples, model.latent_dim), jnp.result_type(float))
    return jax.vmap(model.mean, (axis, 0))(thetas, z)


class AEVBExtras:
    """``aevb``'s ``VIAlgorithm.extras``: the evaluations of the module docstring."""

    def __init__(self, model, decoder: _Decoder):
        self.model, self.decoder = model, decoder

    def _check(self, x, key, num_samples, theta) -> int:
        check_key("key", key)
        self.model.check_data(x, "x")
        check_choice("theta", theta, THETA_DRAWS)
        return check_int("num_samples", num_samples)

    def sample(self, key: PRNGKey, state, num_samples: int) -> Array:
        """(S, D): E[x | z; theta] for z ~ N(0, I) and theta ~ q(theta)."""
        s = check_int("num_samples", num_samples)
        return _sample_eval(state.q_global, key, model=self.model, decoder=self.decoder, num_samples=s)

    def elbo(self, key: PRNGKey, q_global: PyTree, x, num_samples: int = 1, theta: str = "sample") -> Array:
        """(N,) per-datum ELBO estimates at ``q_global``."""
        s = self._check(x, key, num_samples, theta)
        kw = dict(model=self.model, decoder=self.decoder, num_samples=s, theta=theta)
        return _elbo_eval(q_global, _as_float(x), key, **kw)

    def iwae_log_likelihood(self, key, state, x, num_samples: int, chunk_size: int, theta: str) -> Array:
        """(N,) importance-sampled log p(x_n), K = ``num_samples`` in chunks of ``chunk_size``."""
        k_total = self._check(x, key, num_samples, theta)
        c = min(check_int("chunk_size", chunk_size), k_total)
        kw = dict(model=self.model, decoder=self.decoder, k_total=k_total, chunk=c, theta=theta)
        return _iwae_eval(state.q_global, _as_float(x), key, **kw)

    def reconstruct(self, state, x) -> Array:
        """(N, D): E[x | z = mu_phi(x); theta] at q's mean theta."""
        self.model.check_data(x, "x")
        return _reconstruct_eval(state.q_global, _as_float(x), model=self.model, decoder=self.decoder)

    def decoder_kl(self, state) -> Array:
        """KL(q(theta) || p(theta)) (0 for a point decoder)."""
        return self.decoder.kl(state.q_global["decoder"])


aevb = as_top_level_api
