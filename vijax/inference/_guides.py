"""Variational families of ``vijax.inference.bbvi``: q(z) with ``constrain(z) -> (params, log|det J|)``, so that
ELBO = E_q(z)[log p(x, T(z)) + log |det dT/dz|] + H[q(z)] (Blei, Kucukelbir and McAuliffe 2017, §5):
:class:`GaussianGuide` (z = m + S eps; S diagonal, a scaled unit Cholesky factor, or low rank plus diagonal),
:class:`ExpFamilyGuide` (drawn by inversion, Hoffman and Blei 2015, app. B) and :class:`FlowGuide` (a flowjax flow).
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from vijax import expfam
from vijax._compile import jit_or_eager, setup_jit
from vijax._validate import ArgumentError, check_float_tree, check_int, check_scalar, check_shapes, check_structures
from vijax.types import Array, PRNGKey, PyTree, tfp_jax

if TYPE_CHECKING:
    from vijax.interop import Target

KINDS = ("meanfield", "fullrank", "lowrank")
_LOG_2PI_E = math.log(2.0 * math.pi) + 1.0


def family_sum(fn: Callable, q: PyTree, *trees: PyTree) -> Array:
    """sum over the families f of ``q`` (and the matching leaves x of ``trees``) of sum(fn(f, *x))."""
    terms = jax.tree_util.tree_map(lambda f, *x: jnp.sum(fn(f, *x)), q, *trees, is_leaf=expfam.is_family)
    return sum(jax.tree_util.tree_leaves(terms))


def _softplus_inv(x):
    return x + jnp.log(-jnp.expm1(-x))


def _path(path) -> str:
    return "params" + jax.tree_util.keystr(path)


def _bijector_or_none(b) -> bool:
    return b is None or isinstance(b, tfp_jax().bijectors.Bijector)


class GaussianGuide:
    """A Gaussian over the flat unconstrained parameter vector.

    Args:
      template: the parameter pytree (its structure, shapes, dtype, and q's initial centre).
      kind: ``"meanfield"``, ``"fullrank"`` or ``"lowrank"``.
      bijectors: None or a pytree like ``template`` of ``tfp.bijectors.Bijector`` or None leaves.
      init_scale: q's initial standard deviation, > 0.
      rank: the number of columns of W for ``"lowrank"``.
      transform: instead of ``bijectors``, a target's map ``u -> (params, log |det J|)``.

    Raises:
      ValueError: a bad ``kind``, ``bijectors`` or template, or ``bijectors`` with ``transform``.
    """

    def __init__(
        self,
        template: PyTree,
        kind: str = "meanfield",
        *,
        bijectors: PyTree = None,
        init_scale: float = 0.1,
        rank: int = 1,
        transform: Optional[Callable[[PyTree], tuple[PyTree, Array]]] = None,
    ):
        if kind not in KINDS:
            raise ValueError(f"family: unknown Gaussian family {kind!r}; choose one of {KINDS}")
        check_float_tree("init_params", template)
        if transform is not None and bijectors is not None:
            raise ArgumentError(
                "bijectors", "bijectors: a guide with a transform (a target's own map) takes no bijectors"
            )
        self.transform = transform
        if bijectors is None:
            bijectors = jax.tree.map(lambda _: None, template)
        check_structures("bijectors", bijectors, template, "init_params", is_leaf=_bijector_or_none)
        self.kind, self.init_scale = kind, check_scalar("init_scale", init_scale, low=0.0)
        self.rank = check_int("rank", rank) if kind == "lowrank" else 0
        self.bijectors = bijectors
        self._bij_leaves = jax.tree_util.tree_leaves(bijectors, is_leaf=_bijector_or_none)
        unconstrained = []
        for (path, leaf), b in zip(jax.tree_util.tree_leaves_with_path(template), self._bij_leaves):
            u = np.asarray(leaf) if b is None else b.inverse(jnp.asarray(leaf))
            if not np.all(np.isfinite(np.asarray(u))):
                raise ValueError(
                    f"init_params: {_path(path)} lies outside the support of its bijector "
                    f"{type(b).__name__} (its inverse is not finite there)"
                )
            unconstrained.append(u)
        tree = jax.tree_util.tree_structure(template)
        self.loc0, self._unravel = ravel_pytree(jax.tree_util.tree_unflatten(tree, unconstrained))
        self.dim = int(self.loc0.shape[0])
        self.identity = transform is None and all(b is None for b in self._bij_leaves)

    def init(self) -> dict:
        """vparams at q's start: centre at the template, standard deviation ``init_scale``."""
        d, dt = self.dim, self.loc0.dtype
        rho = jnp.full((d,), self.init_scale + math.log(-math.expm1(-self.init_scale)), dt)  # _softplus_inv
        if self.kind == "meanfield":
            return {"loc": self.loc0, "scale": rho}
        if self.kind == "fullrank":
            return {"loc": self.loc0, "scale": rho, "chol": jnp.zeros((d, d), dt)}
        return {"loc": self.loc0, "factor": jnp.zeros((d, self.rank), dt), "scale": rho}

    def _scale_tril(self, vparams) -> Array:
        """L = diag(s) (I + U), U the strict lower triangle of ``chol`` (NumPyro's ``scaled_unit_lower_cholesky``)."""
        raw = vparams["chol"]
        unit = jnp.tril(raw, -1) + jnp.eye(raw.shape[0], dtype=raw.dtype)
        return jax.nn.softplus(vparams["scale"])[:, None] * unit

    def sample(self, vparams, key: PRNGKey) -> Array:
        """One reparameterized draw z = m + S eps, shape (dim,)."""
        loc = vparams["loc"]
        if self.kind == "meanfield":
            return loc + jax.nn.softplus(vparams["scale"]) * jax.random.normal(key, loc.shape, loc.dtype)
        if self.kind == "fullrank":
            return loc + self._scale_tril(vparams) @ jax.random.normal(key, loc.shape, loc.dtype)
        k1, k2 = jax.random.split(key)
        w = vparams["factor"]
        e1 = jax.random.normal(k1, (w.shape[1],), loc.dtype)
        return loc + w @ e1 + jax.nn.softplus(vparams["scale"]) * jax.random.normal(k2, loc.shape, loc.dtype)

    def log_prob(self, vparams, z: Array) -> Array:
        """log q(z) for one draw z of shape (dim,)."""
        loc, half_log_2pi = vparams["loc"], 0.5 * self.dim * math.log(2.0 * math.pi)
        if self.kind == "meanfield":
            s = jax.nn.softplus(vparams["scale"])
            return -0.5 * jnp.sum(((z - loc) / s) ** 2) - jnp.sum(jnp.log(s)) - half_log_2pi
        if self.kind == "fullrank":
            chol = self._scale_tril(vparams)
            r = jax.scipy.linalg.solve_triangular(chol, z - loc, lower=True)
            return -0.5 * jnp.sum(r * r) - jnp.sum(jnp.log(jnp.diag(chol))) - half_log_2pi
        r, log_det = self._lowrank_solve(vparams, z - loc)
        return -0.5 * (r + log_det) - half_log_2pi

    def _lowrank_solve(self, vparams, r: Optional[Array] = None):
        """(r^T Sigma^-1 r, log det Sigma) for Sigma = W W^T + diag(d^2) (Woodbury, determinant lemma)."""
        w, d = vparams["factor"], jax.nn.softplus(vparams["scale"])
        wd = w / (d * d)[:, None]  # D^-2 W
        cap = jnp.eye(w.shape[1], dtype=w.dtype) + w.T @ wd  # I + W^T D^-2 W
        chol = jnp.linalg.cholesky(cap)
        log_det = 2.0 * jnp.sum(jnp.log(jnp.diag(chol))) + 2.0 * jnp.sum(jnp.log(d))
        if r is None:
            return None, log_det
        u = jax.scipy.linalg.solve_triangular(chol, wd.T @ r, lower=True)
        return jnp.sum(r * r / (d * d)) - jnp.sum(u * u), log_det

    def entropy(self, vparams) -> Array:
        """H[q(z)] in closed form."""
        if self.kind == "lowrank":
            log_det = 0.5 * self._lowrank_solve(vparams)[1]
        else:  # diag(L) = softplus(scale) for both
            log_det = jnp.sum(jnp.log(jax.nn.softplus(vparams["scale"])))
        return log_det + 0.5 * self.dim * _LOG_2PI_E

    def to_tfp(self, vparams):
        """q(z) as a TFP distribution over the flat unconstrained vector."""
        loc = vparams["loc"]
        if self.kind == "meanfield":
            return tfp_jax().distributions.MultivariateNormalDiag(loc, jax.nn.softplus(vparams["scale"]))
        if self.kind == "fullrank":
            return tfp_jax().distributions.MultivariateNormalTriL(loc, self._scale_tril(vparams))
        return tfp_jax().distributions.MultivariateNormalDiagPlusLowRankCovariance(
            loc, cov_diag_factor=jax.nn.softplus(vparams["scale"]) ** 2, cov_perturb_factor=vparams["factor"]
        )

    def kl(self, vparams, prior) -> Array:
        """KL(q || prior) in closed form, ``prior`` a TFP distribution over the flat vector."""
        if not self.identity:
            raise ArgumentError(
                "prior",
                "prior: an analytic KL needs every bijector to be the identity (a prior on the "
                "unconstrained vector); with bijectors put the prior inside log_density",
            )
        return tfp_jax().distributions.kl_divergence(self.to_tfp(vparams), prior)

    def constrain(self, z: Array) -> tuple[PyTree, Array]:
        """(params, log |det dT/dz|) for one flat draw z."""
        u = self._unravel(z)
        if self.transform is not None:
            params, log_det = self.transform(u)
            return params, jnp.asarray(log_det, z.dtype)
        leaves, tree = jax.tree_util.tree_flatten(u)
        out, log_det = [], jnp.zeros((), z.dtype)
        for leaf, b in zip(leaves, self._bij_leaves):
            if b is None:
                out.append(leaf)
            else:
                out.append(b.forward(leaf))
                log_det = log_det + jnp.sum(b.forward_log_det_jacobian(leaf, event_ndims=jnp.ndim(leaf)))
        return jax.tree_util.tree_unflatten(tree, out), log_det

    def mean(self, vparams) -> PyTree:
        """The parameters at q's centre, T(m)."""
        return self.constrain(vparams["loc"])[0]


# each family's canonical parameters (all positive but a Normal's mean, moved through softplus) and the constructor back
_CANONICAL: dict[type, tuple[Callable, Callable]] = {
    expfam.Gamma: (lambda q: (q.concentration, q.rate), lambda a, b: expfam.Gamma(a - 1.0, -b)),
    expfam.Beta: (lambda q: (q.concentration1, q.concentration0), lambda a, b: expfam.Beta(a - 1.0, b - 1.0)),
    expfam.Dirichlet: (lambda q: (q.concentration,), lambda a: expfam.Dirichlet(a - 1.0)),
    expfam.Normal: (lambda q: (q.mean, jnp.sqrt(q.variance)), lambda m, s: expfam.Normal(m / (s * s), -0.5 / (s * s))),
}


class ExpFamilyGuide:
    """q = a pytree of ``vijax.expfam`` families, one per parameter leaf.

    Args:
      family: the initial q, a pytree of Gamma, Beta, Dirichlet or Normal families.

    Raises:
      ValueError: a family without a reparameterized sampler, or an initial q outside its domain.
    """

    def __init__(self, family: PyTree):
        fams = jax.tree_util.tree_leaves(family, is_leaf=expfam.is_family)
        if not fams or not all(expfam.is_family(f) for f in fams):
            raise ArgumentError(
                "family",
                "family must be 'meanfield', 'fullrank', 'lowrank' or a pytree of vijax.expfam "
                f"families, got {family!r}",
                value=family,
            )
        for f in fams:
            if type(f) not in _CANONICAL or not expfam.implements(f, "reparam_sample_and_stats"):
                raise ArgumentError(
                    "family",
                    f"family: {type(f).__name__} has no reparameterized sampler for bbvi; use one of "
                    f"{sorted(c.__name__ for c in _CANONICAL)} or a Gaussian family",
                )
        expfam.check_in_domain("family", family)
        self.family = family
        self.identity = True

    def init(self) -> PyTree:
        """Each family's canonical parameters, the positive ones through the inverse softplus."""

        def canon(f):
            return tuple(
                _softplus_inv(p) if i or type(f) is not expfam.Normal else p
                for i, p in enumerate(_CANONICAL[type(f)][0](f))
            )

        return jax.tree_util.tree_map(canon, self.family, is_leaf=expfam.is_family)

    def q(self, vparams) -> PyTree:
        """The pytree of families at ``vparams``."""

        def build(f, p):
            real = type(f) is expfam.Normal  # its mean
            return _CANONICAL[type(f)][1](*(x if real and not i else jax.nn.softplus(x) for i, x in enumerate(p)))

        return jax.tree_util.tree_map(build, self.family, vparams, is_leaf=expfam.is_family)

    def sample(self, vparams, key: PRNGKey) -> PyTree:
        """A reparameterized draw z ~ q(vparams), shaped like the parameters."""
        return expfam.reparam_sample(self.q(vparams), key)

    def log_prob(self, vparams, z: PyTree) -> Array:
        """log q(z), summed over families and elements."""
        return family_sum(lambda f, x: f.log_prob(x), self.q(vparams), z)

    def entropy(self, vparams) -> Array:
        """H[q]: the sum of the families' closed-form entropies."""
        return family_sum(lambda f: f.entropy(), self.q(vparams))

    def kl(self, vparams, prior) -> Array:
        """KL(q || prior) in closed form, ``prior`` a pytree of families of the same types."""
        check_structures("prior", prior, self.family, "family", is_leaf=expfam.is_family)
        return expfam.tree_kl(self.q(vparams), prior)

    def to_tfp(self, vparams):
        """q(vparams) as a pytree of TFP (JAX substrate) distributions."""
        return jax.tree_util.tree_map(lambda f: f.to_tfp(), self.q(vparams), is_leaf=expfam.is_family)

    def constrain(self, z: PyTree) -> tuple[PyTree, Array]:
        """(z, 0): q's draws lie in the parameters' domains already."""
        return z, jnp.zeros((), jax.tree_util.tree_leaves(z)[0].dtype)

    def mean(self, vparams) -> PyTree:
        """E_q[z], a pytree shaped like the parameters (each family's mean)."""
        return jax.tree_util.tree_map(lambda f: f.to_tfp().mean(), self.q(vparams), is_leaf=expfam.is_family)


def make_guide(family: Any, init_params: PyTree = None, *, bijectors=None, init_scale=0.1, rank=1, transform=None):
    """The guide for ``family`` (a Gaussian kind with ``init_params``, or a pytree of families).

    Raises:
      ValueError: naming ``family``, ``init_params`` or ``bijectors`` when they do not fit together.
    """
    if isinstance(family, str):
        if init_params is None:
            raise ArgumentError(
                "init_params",
                f"init_params: the {family!r} family needs the parameter pytree (its structure, "
                "shapes and q's initial centre)",
            )
        return GaussianGuide(
            init_params, family, bijectors=bijectors, init_scale=init_scale, rank=rank, transform=transform
        )
    if bijectors is not None:
        raise ArgumentError(
            "bijectors",
            "bijectors: an expfam family samples in its own support; bijectors are for the Gaussian families",
        )
    guide = ExpFamilyGuide(family)
    if init_params is not None:
        draw = jax.eval_shape(lambda k: guide.sample(guide.init(), k), jax.random.PRNGKey(0))
        check_shapes("family", draw, init_params, "init_params")  # q's draws shaped as the parameters
    return guide


DEFAULT_INIT_SCALE = 0.1  # auto_family's spread


def auto_family(target: Target, *, init_scale: float = DEFAULT_INIT_SCALE) -> dict:
    """Exponential families matched to a target's supports, centred at its start x: Normal(x, s^2) on the reals, Gamma
    of shape 1 / s^2 and mean x on the positive reals, Beta and Dirichlet of mean x and total concentration 1 / s^2
    (each at least 1) on the unit interval and simplex.

    Args:
      target: a ``vijax.interop.Target`` (``vijax.from_numpyro``, ``vijax.from_tfp``).
      init_scale: s > 0.

    Returns:
      A dict site name -> family, the ``family`` argument of ``ngvi`` and ``bbvi``.

    Raises:
      ValueError: naming a site whose support no family matches.

    Examples:
        >>> import jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> import vijax
        >>> def model(k):
        ...     rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
        ...     numpyro.sample("k", dist.Poisson(rate), obs=k)
        >>> q = auto_family(vijax.from_numpyro(model, jnp.array(3.0)))
        >>> type(q["rate"]).__name__
        'Gamma'
    """
    from vijax.interop import Target

    if not isinstance(target, Target):
        raise ArgumentError(
            "target",
            f"target must be a vijax.interop.Target (vijax.from_numpyro, from_tfp), got {target!r}",
            value=target,
        )
    s = check_scalar("init_scale", init_scale, low=0.0)
    return jit_or_eager(_matched_families_jit, _matched_families)(target, s)


def _matched_families(target, s: float) -> dict:
    start = target.constrain(target.init_params)
    conc = 1.0 / (s * s)
    families = {}
    for name, site in target.sites.items():
        x = jnp.asarray(start[name])
        if site.support == "real":
            families[name] = expfam.Normal.from_mean_variance(x, jnp.full(x.shape, s * s, x.dtype))
        elif site.support == "positive":
            families[name] = expfam.Gamma.from_shape_rate(jnp.full(x.shape, conc, x.dtype), conc / x)
        elif site.support == "unit_interval":
            families[name] = expfam.Beta.from_concentrations(
                jnp.maximum(conc * x, 1.0), jnp.maximum(conc * (1.0 - x), 1.0)
            )
        elif site.support == "simplex":
            families[name] = expfam.Dirichlet.from_concentration(jnp.maximum(conc * x, 1.0))
        else:
            raise ValueError(
                f"site {name!r}: no exponential family of vijax.expfam matches its support {site.constraint}; "
                "fit it with a Gaussian family of bbvi (family='meanfield', 'fullrank' or 'lowrank'), "
                "which goes through the model's own bijector"
            )
    return families


_matched_families_jit = setup_jit(_matched_families, static_argnums=(0, 1))
NUM_MEAN_DRAWS = 1000  # the draws of q whose average ``FlowGuide.mean`` takes


def is_flow(family: Any) -> bool:
    """Whether ``family`` is a flowjax distribution (flowjax is not imported for the test)."""
    module = sys.modules.get("flowjax.distributions")
    return module is not None and isinstance(family, module.AbstractDistribution)


def _typed_key(key: PRNGKey):
    return key if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) else jax.random.wrap_key_data(key)


class FlowGuide:
    """A flowjax distribution over the flat unconstrained vector, mapped as ``GaussianGuide`` maps its draws.

    Args:
      flow: an unconditional flowjax distribution of shape (d,), its arrays the initial q.
      template: the parameter pytree (or a target's unconstrained ``init_params`` with ``transform``).
      bijectors: as for ``GaussianGuide``.
      transform: a target's map ``u -> (params, log |det J|)``.

    Raises:
      ValueError: naming ``family`` for a conditional flow, one not of shape (d,) or without trainable arrays.
    """

    def __init__(self, flow: Any, template: PyTree, *, bijectors: PyTree = None, transform: Optional[Callable] = None):
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
        self.identity = False

    def init(self) -> PyTree:
        """The flow's trainable arrays."""
        return self._params

    def flow(self, vparams: PyTree):
        """The flowjax distribution at ``vparams``."""
        import equinox as eqx

        return eqx.combine(vparams, self._static)

    def _dist(self, vparams: PyTree):
        import paramax

        return paramax.unwrap(self.flow(vparams))

    def sample(self, vparams: PyTree, key: PRNGKey) -> Array:
        """One reparameterized draw z, shape (d,)."""
        with jax.numpy_rank_promotion("allow"):  # flowjax broadcasts by rank
            return self._dist(vparams).sample(_typed_key(key))

    def sample_and_log_prob(self, vparams: PyTree, key: PRNGKey) -> tuple[Array, Array]:
        """(z, log q(z)) in one pass through the flow (``sample``'s draw with the same key)."""
        with jax.numpy_rank_promotion("allow"):
            return self._dist(vparams).sample_and_log_prob(_typed_key(key))

    def log_prob(self, vparams: PyTree, z: Array) -> Array:
        """log q(z) for one draw z of shape (d,)."""
        with jax.numpy_rank_promotion("allow"):
            return self._dist(vparams).log_prob(z)

    def entropy(self, vparams: PyTree) -> Array:
        raise ArgumentError("entropy", "entropy: a flow has no closed-form entropy; give entropy='mc'")

    def kl(self, vparams: PyTree, prior: Any) -> Array:
        raise ArgumentError("prior", "prior: a flow has no closed-form KL; put the prior in log_density or log_prior")

    def to_tfp(self, vparams: PyTree):
        raise ArgumentError(
            "family", "family: a flowjax flow has no TFP distribution; guide.flow(q_global) returns the flowjax one"
        )

    def constrain(self, z: Array) -> tuple[PyTree, Array]:
        """(params, log |det dT/dz|) for one flat draw z."""
        return self._space.constrain(z)

    def mean(self, vparams: PyTree) -> PyTree:
        """T(E_q[z]), E_q[z] the average of ``NUM_MEAN_DRAWS`` draws under a fixed key."""
        keys = jax.random.split(jax.random.PRNGKey(0), NUM_MEAN_DRAWS)
        z = jax.vmap(self.sample, (None, 0))(vparams, keys)
        return self.constrain(jnp.mean(z, axis=0))[0]


ONE_PASS = ("reparam", "iwae", "renyi")  # the estimators that take log q at q's own parameters


def draws(guide: Any, vparams: PyTree, key: PRNGKey, num_samples: int, estimator: str = "") -> tuple[Any, Any]:
    """(z, log q(z)) for ``num_samples`` draws; log q is None except for a flow and ``ONE_PASS``."""
    keys = jax.random.split(key, num_samples)
    if isinstance(guide, FlowGuide) and estimator in ONE_PASS:
        return jax.vmap(guide.sample_and_log_prob, (None, 0))(vparams, keys)
    return jax.vmap(guide.sample, (None, 0))(vparams, keys), None
