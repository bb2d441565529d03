"""Black-box VI for a target with discrete latent sites not summed out (``Target.discrete``): Rao-Blackwellized
score-function gradients (Ranganath, Gerrish and Blei 2014, "Black Box Variational Inference", §3).

q(u, z) = q_lambda(u) prod_j q_j(z_j): a Gaussian on the continuous sites' unconstrained space (as ``bbvi``), and
each element z_j of a discrete site its own Bernoulli (logits), Categorical (logits) or Poisson (log rate). With S
draws (u_s, z_s) of q and f(u, z) = log p(x, T(u), z) + log |det dT/du|:

- the continuous sites' gradient is the reparameterized one, of (1/S) sum_s f(u_s, z_s) + H[q_lambda(u)];
- z_j's is E_q[grad log q_j(z_j) (log p_j(x, u, z) - log q_j(z_j))], log p_j the log-joint's terms in z_j's Markov
  blanket (``Target.blanket_terms``: its own and its children's, at z_j's indices of the plates they share): the
  other terms do not depend on z_j, and their product with the score has mean zero (Rao-Blackwellization, §3.1).
  Its estimate subtracts the leave-one-out baseline b_js = (1/(S-1)) sum_{r != s} f_jr (a control variate, §3.2, as
  ``bbvi(estimator="score")``'s):

      g_j = (1/S) sum_s (f_js - b_js) grad log q_j(z_js),   f_js = log p_j(x, u_s, z_s) - log q_j(z_js).

The ELBO reported is (1/S) sum_s [f(u_s, z_s) - log q(z_s)] + H[q_lambda(u)].
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
import optax

from vijax import expfam
from vijax._validate import ArgumentError, check_int, check_key, check_scalar
from vijax.interop import Target
from vijax.models import filter_jit
from vijax.inference._guides import KINDS, GaussianGuide, draws
from vijax.inference._optax_vi import ascend, resolve_optimizer
from vijax.inference.base import VIAlgorithm, check_no_options, guarded_algorithm, safe_increment, validated_step
from vijax.types import Array, PRNGKey, PyTree

# q's family of each discrete support (``vijax.interop.DISCRETE_SUPPORTS``)
_FAMILIES = {"binary": expfam.Bernoulli, "finite": expfam.Categorical, "count": expfam.Poisson}


class DiscreteBBVIState(NamedTuple):
    """q_global: ``{"continuous": q(u)'s Gaussian parameters ({} without continuous sites), "discrete": {site:
    its q, a vijax.expfam family of the site's shape}}``; opt_state; count."""

    q_global: PyTree
    opt_state: PyTree
    count: Array


class DiscreteBBVIInfo(NamedTuple):
    """elbo: the Monte Carlo ELBO estimate before the step; grad_norm: |g|."""

    elbo: Array
    grad_norm: Array


def discrete_q(target: Target) -> dict:
    """site -> q's start for each discrete site: uniform over {0, 1} or {0, ..., K - 1}, Poisson of rate 1."""
    return {
        n: _FAMILIES[s.support](jnp.zeros(s.unconstrained_shape, jnp.result_type(float)))
        for n, s in target.discrete.items()
    }


def _draws(q: PyTree, key: PRNGKey, num_samples: int, guide) -> tuple:
    """S draws of q on a leading axis: the continuous sites' unconstrained draws u (reparameterized; None without
    continuous sites), their constrained values by site name and log |det J|, the discrete sites' values (stopped)."""
    k_u, k_z = jax.random.split(key)
    keys = jax.random.split(k_z, len(q["discrete"]))
    z = {n: jax.lax.stop_gradient(f.sample(k, (num_samples,))) for k, (n, f) in zip(keys, q["discrete"].items())}
    if guide is None:
        return None, {}, jnp.zeros((num_samples,)), z
    u = draws(guide, q["continuous"], k_u, num_samples)[0]
    params, log_det = jax.vmap(guide.constrain)(u)
    return u, params, log_det, z


def surrogate(q: PyTree, batch: PyTree, key: PRNGKey, *, target, guide, num_samples: int) -> tuple[Array, Array]:
    """(a scalar whose gradient in ``q`` is the module docstring's estimate, the ELBO estimate)."""
    _, params, log_det, z = _draws(q, key, num_samples, guide)
    both = {**params, **z}
    log_p = jax.vmap(target.log_prob, (0, None))(both, batch) + log_det  # (S,)
    terms = jax.vmap(target.blanket_terms, (0, None))(jax.lax.stop_gradient(both), batch)  # site -> (S, *shape)
    h = guide.entropy(q["continuous"]) if guide is not None else 0.0
    out, log_q_total = jnp.mean(log_p) + h, 0.0
    for n, f in q["discrete"].items():
        log_q = f.log_prob(z[n])  # (S, *shape)
        signal = jax.lax.stop_gradient(terms[n] - log_q)
        baseline = (jnp.sum(signal, axis=0, keepdims=True) - signal) / (num_samples - 1)
        out = out + jnp.sum(jnp.mean((signal - baseline) * log_q, axis=0))
        log_q_total = log_q_total + jnp.sum(log_q.reshape(num_samples, -1), axis=1)
    return out, jax.lax.stop_gradient(jnp.mean(log_p - log_q_total) + h)


def init(key: PRNGKey, batch: PyTree = None, *, model, guide, optimizer) -> DiscreteBBVIState:
    """q at its start (``guide.init()``, ``discrete_q``) and the optimizer's state."""
    check_key("key", key)
    if batch is not None:
        model.check_data(batch)
    q = {"continuous": guide.init() if guide is not None else {}, "discrete": discrete_q(model)}
    return DiscreteBBVIState(q, optimizer.init(q), jnp.zeros((), jnp.int32))


@validated_step
def step(
    key: PRNGKey, state: DiscreteBBVIState, batch: PyTree, *, model, guide, optimizer, num_samples: int
) -> tuple[DiscreteBBVIState, DiscreteBBVIInfo]:
    """One optimizer step on the module docstring's estimate."""
    settings = dict(target=model, guide=guide, num_samples=num_samples)
    (_, elbo), grads = jax.value_and_grad(surrogate, has_aux=True)(state.q_global, batch, key, **settings)
    new, opt_state = ascend(optimizer, grads, state.opt_state, state.q_global)
    info = DiscreteBBVIInfo(elbo, optax.tree.norm(grads))
    return DiscreteBBVIState(new, opt_state, safe_increment(state.count)), info


def as_top_level_api(
    target: Target,
    *,
    num_data: Optional[int] = None,
    schedule=None,
    family: str = "meanfield",
    optimizer: Union[str, optax.GradientTransformation] = "adam",
    num_samples: int = 8,
    init_scale: float = 0.1,
    **hyper: Any,
) -> VIAlgorithm:
    """Black-box VI for a target with discrete latent sites (module docstring).

    Args:
      target: a ``vijax.from_numpyro`` target with discrete sites (``target.discrete``).
      num_data: None (the target scales its minibatches by its plates' N / M itself).
      schedule: the learning rate of a named optimizer (default ``DEFAULT_LEARNING_RATES``).
      family: q(u)'s Gaussian: ``"meanfield"``, ``"fullrank"`` or ``"lowrank"`` (``bbvi``'s).
      optimizer: a name in ``OPTIMIZERS`` (hyperparameters in ``hyper``) or an ``optax.GradientTransformation``.
      num_samples: S >= 2 draws of q per step (the leave-one-out baseline needs two).
      init_scale: q(u)'s initial sd.

    Returns:
      The ``VIAlgorithm``; ``vijax.inference.sample`` draws every site (constrained), ``log_weights`` and ``elbo``
      as ``bbvi``'s.

    Raises:
      ValueError: naming the argument: a target without discrete sites or with local ones, a bad setting.

    Examples:
        >>> import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> import vijax
        >>> from vijax.inference import discrete_bbvi
        >>> def model(y):
        ...     z = numpyro.sample("z", dist.Bernoulli(0.3))
        ...     numpyro.sample("y", dist.Normal(2.0 * z, 1.0), obs=y)
        >>> target = vijax.from_numpyro(model, 1.5)
        >>> [(s.name, s.support) for s in target.discrete.values()]
        [('z', 'binary')]
        >>> alg = discrete_bbvi(target, schedule=0.05)
        >>> state = alg.init(jax.random.PRNGKey(0))
        >>> float(state.q_global["discrete"]["z"].probs)  # q's start: uniform
        0.5
    """
    if not isinstance(target, Target) or not target.discrete:
        raise ArgumentError(
            "target",
            "target: discrete_bbvi fits a target with discrete latent sites (vijax.from_numpyro of a model with a "
            f"discrete site not summed out); got {type(target).__name__}"
            + (" without discrete sites (use bbvi or ngvi)" if isinstance(target, Target) else ""),
        )
    target.check_global("discrete_bbvi", discrete=True)
    if num_data is not None:
        raise ArgumentError("num_data", "num_data: a target scales by its own plates' N / M; give no num_data")
    if family not in KINDS:
        raise ArgumentError("family", f"family must be one of {KINDS} (q of the continuous sites), got {family!r}")
    num_samples = check_int("num_samples", num_samples)
    if num_samples < 2:
        raise ArgumentError(
            "num_samples",
            f"num_samples: the leave-one-out control variate needs num_samples >= 2, got {num_samples}",
            value=num_samples,
        )
    init_scale = check_scalar("init_scale", init_scale, low=0.0)
    optimizer = resolve_optimizer(optimizer, schedule, **hyper)
    guide = None
    if target.sites:
        guide = GaussianGuide(target.init_params, family, init_scale=init_scale, transform=target.transform)
    settings = dict(model=target, guide=guide, optimizer=optimizer, num_samples=num_samples)
    return guarded_algorithm(init, step, ("model", "guide", "optimizer"), DiscreteBBVIExtras(settings), **settings)


@filter_jit
def _sample(q_global: PyTree, key: PRNGKey, num_samples: int, guide) -> dict:
    _, params, _, z = _draws(q_global, key, num_samples, guide)
    return {**params, **z}


@filter_jit
def _log_weights(q_global: PyTree, batch: PyTree, key: PRNGKey, num_samples: int, guide, target) -> Array:
    u, params, log_det, z = _draws(q_global, key, num_samples, guide)
    log_q = sum(jnp.sum(f.log_prob(z[n]).reshape(num_samples, -1), axis=1) for n, f in q_global["discrete"].items())
    if guide is not None:
        log_q = log_q + jax.vmap(guide.log_prob, (None, 0))(q_global["continuous"], u)
    return jax.vmap(target.log_prob, (0, None))({**params, **z}, batch) + log_det - log_q


class DiscreteBBVIExtras:
    """``discrete_bbvi``'s ``VIAlgorithm.extras``: draws of q, their log-weights and the objective."""

    def __init__(self, settings: dict):
        self.settings = settings
        self.guide = settings["guide"]

    def sample(self, key: PRNGKey, state, num_samples: int) -> dict:
        """Draws of every site from q, constrained (the discrete sites' values), by site name on a leading axis."""
        check_key("key", key)
        return _sample(state.q_global, key, check_int("num_samples", num_samples), self.guide)

    def log_weights(self, key: PRNGKey, state, batch: PyTree, num_samples: int) -> Array:
        """(S,) log p(x, T(u_s), z_s) + log |det J| - log q(u_s, z_s) for draws of q."""
        check_key("key", key)
        s = self.settings
        return _log_weights(state.q_global, batch, key, check_int("num_samples", num_samples), s["guide"], s["model"])

    def elbo(self, key: PRNGKey, q_global: PyTree, batch: PyTree, **options: Any) -> Array:
        """stop(ELBO estimate) + surrogate - stop(surrogate): the estimate, its gradient in ``q_global`` the step's."""
        check_no_options(options, "discrete_bbvi")
        check_key("key", key)
        s = self.settings
        out, value = surrogate(q_global, batch, key, target=s["model"], guide=s["guide"], num_samples=s["num_samples"])
        return value + out - jax.lax.stop_gradient(out)


discrete_bbvi = as_top_level_api
