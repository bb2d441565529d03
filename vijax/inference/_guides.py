"""Variational families for black-box VI on a user's log-density (``vijax.inference.bbvi``).

A guide is q(z) over an unconstrained space and a map ``constrain(z) -> (params, log|det J|)`` to
the user's parameter pytree, so that the ELBO of the pushed-forward q is

    ELBO = E_q(z)[ log p(x, T(z)) + log |det dT/dz| ] + H[q(z)]

(the change of variables of automatic differentiation VI; Blei, Kucukelbir and McAuliffe 2017, §5).

* :class:`GaussianGuide` (``"meanfield"``, ``"fullrank"``, ``"lowrank"``): a Gaussian on the flat
  vector of every unconstrained parameter (``jax.flatten_util.ravel_pytree`` of the template after
  each leaf's bijector inverse), with z = m + S eps, eps ~ N(0, I) and S = diag(softplus(rho)),
  a Cholesky factor (strict lower triangle free, diagonal softplus), or the low-rank-plus-diagonal
  covariance W W^T + diag(softplus(rho))^2. Constrained leaves go through TFP JAX bijectors.
* :class:`ExpFamilyGuide`: a pytree of ``vijax.expfam`` families shaped like the parameters, drawn
  by inversion with the implicit quantile derivatives of Hoffman and Blei (2015, appendix B)
  (Gamma, Beta, Dirichlet, Normal, MultivariateNormal): each family samples in its own support,
  so there is no bijector. The optimizer moves the families' positive canonical parameters through
  softplus (``_CANONICAL``).

Every guide offers ``init() -> vparams`` and, for variational parameters ``vparams``,
``sample(vparams, key) -> z`` (one draw), ``log_prob(vparams, z)``, ``entropy(vparams)``,
``constrain(z) -> (params, log_det)``, ``mean(vparams)`` (the parameters at q's centre) and
``to_tfp(vparams)``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from vijax import expfam
from vijax._compile import setup_jit
from vijax._validate import ArgumentError, check_int, check_scalar, check_structures
from vijax.types import Array, PRNGKey, PyTree, tfp_jax

if TYPE_CHECKING:  # vijax.interop is imported at first use (auto_family): not with svi and the others
    from vijax.interop import Target

KINDS = ("meanfield", "fullrank", "lowrank")
_LOG_2PI_E = math.log(2.0 * math.pi) + 1.0


def _softplus_inv(x):
    return x + jnp.log(-jnp.expm1(-x))


def _softplus_inv_host(x: float, dtype) -> np.ndarray:
    """``_softplus_inv`` of a number in ``dtype``, by numpy (no program to compile)."""
    x = np.asarray(x, dtype)
    return x + np.log(-np.expm1(-x))


def _ravel_host(tree: PyTree) -> tuple[Array, Callable]:
    """``jax.flatten_util.ravel_pytree`` of a pytree of concrete arrays, the flat vector made by
    numpy and the unravel function taken from an abstract trace: nothing to compile (op by op,
    each leaf's reshape and the concatenation are a compilation each)."""
    box = {}

    def flat(t):
        vec, box["unravel"] = ravel_pytree(t)
        return vec

    out = jax.eval_shape(flat, tree)
    leaves = [np.ravel(np.asarray(x)).astype(out.dtype) for x in jax.tree_util.tree_leaves(tree)]
    return jax.device_put(np.concatenate(leaves) if leaves else np.zeros((0,), out.dtype)), box["unravel"]


def _path(path) -> str:
    return "params" + jax.tree_util.keystr(path)


def _is_bijector(b) -> bool:
    return isinstance(b, tfp_jax().bijectors.Bijector)


class GaussianGuide:
    """A Gaussian over the flat unconstrained parameter vector (see the module docstring).

    Args:
      template: the parameter pytree (its structure, shapes, dtype, and q's initial centre).
      kind: ``"meanfield"``, ``"fullrank"`` or ``"lowrank"``.
      bijectors: None (every leaf unconstrained) or a pytree shaped like ``template`` whose leaves
        are ``tfp.bijectors.Bijector`` (unconstrained -> constrained) or None (identity).
      init_scale: q's initial standard deviation in every coordinate, > 0.
      rank: the number of columns of W for ``"lowrank"``.
      transform: instead of ``bijectors``, a map ``u -> (params, log |det J|)`` from a pytree
        shaped like ``template``, which is then the unconstrained starting point (a target's own
        map, ``vijax.interop.Target.transform``).

    Raises:
      ValueError: an unknown ``kind``, ``bijectors`` shaped unlike ``template``, a template leaf
        outside its bijector's image (named by its path), a non-float or non-finite template,
        both ``bijectors`` and ``transform``.
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
        leaves = jax.tree_util.tree_leaves(template)
        if not leaves:
            raise ValueError("init_params must hold at least one array")
        for path, leaf in jax.tree_util.tree_leaves_with_path(template):
            a = np.asarray(leaf)
            if not np.issubdtype(a.dtype, np.floating):
                raise ValueError(f"init_params: {_path(path)} must be a float array, got dtype {a.dtype}")
            if not np.all(np.isfinite(a)):
                raise ValueError(f"init_params: {_path(path)} has NaN or infinite entries")
        if transform is not None and bijectors is not None:
            raise ArgumentError(
                "bijectors", "bijectors: a guide with a transform (a target's own map) takes no bijectors"
            )
        self.transform = transform
        if bijectors is None:
            bijectors = jax.tree.map(lambda _: None, template)
        check_structures(
            "bijectors", bijectors, template, "init_params", is_leaf=lambda b: b is None or _is_bijector(b)
        )
        self.kind, self.init_scale = kind, check_scalar("init_scale", init_scale, low=0.0)
        self.rank = check_int("rank", rank) if kind == "lowrank" else 0
        self.bijectors = bijectors
        self._bij_leaves = jax.tree_util.tree_leaves(bijectors, is_leaf=lambda b: b is None or _is_bijector(b))
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
        self.loc0, self._unravel = _ravel_host(jax.tree_util.tree_unflatten(tree, unconstrained))
        self.dim = int(self.loc0.shape[0])
        self.identity = transform is None and all(b is None for b in self._bij_leaves)

    # ----------------------------------------------------------------- variational parameters
    def init(self) -> dict:
        """vparams at q's start: centre at the template, standard deviation ``init_scale``."""
        d, dt = self.dim, self.loc0.dtype
        # made by numpy and put on the device: nothing to compile (the inverse softplus to float rounding)
        rho = jax.device_put(np.full((d,), _softplus_inv_host(self.init_scale, dt), dt))
        if self.kind == "meanfield":
            return {"loc": self.loc0, "scale": rho}
        if self.kind == "fullrank":
            return {"loc": self.loc0, "scale": rho, "chol": jax.device_put(np.zeros((d, d), dt))}
        return {"loc": self.loc0, "factor": jax.device_put(np.zeros((d, self.rank), dt)), "scale": rho}

    def _scale_tril(self, vparams) -> Array:
        """L = diag(s) (I + U), U the strict lower triangle of ``chol``: each row's off-diagonal
        entries are relative to its scale, so that optimizer noise on the D(D-1)/2 free entries
        does not swamp a small posterior scale (NumPyro's ``scaled_unit_lower_cholesky``)."""
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
        loc = vparams["loc"]
        if self.kind == "meanfield":
            s = jax.nn.softplus(vparams["scale"])
            r = (z - loc) / s
            return -0.5 * jnp.sum(r * r) - jnp.sum(jnp.log(s)) - 0.5 * self.dim * math.log(2.0 * math.pi)
        if self.kind == "fullrank":
            chol = self._scale_tril(vparams)
            r = jax.scipy.linalg.solve_triangular(chol, z - loc, lower=True)
            return -0.5 * jnp.sum(r * r) - jnp.sum(jnp.log(jnp.diag(chol))) - 0.5 * self.dim * math.log(2.0 * math.pi)
        r, log_det = self._lowrank_solve(vparams, z - loc)
        return -0.5 * r - 0.5 * log_det - 0.5 * self.dim * math.log(2.0 * math.pi)

    def _lowrank_solve(self, vparams, r: Optional[Array] = None):
        """(r^T Sigma^-1 r, log det Sigma) for Sigma = W W^T + diag(d^2), by the Woodbury identity
        and the matrix determinant lemma (an r x r Cholesky factor, O(D r^2))."""
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
        if self.kind == "meanfield":
            log_det = jnp.sum(jnp.log(jax.nn.softplus(vparams["scale"])))
        elif self.kind == "fullrank":
            log_det = jnp.sum(jnp.log(jax.nn.softplus(vparams["scale"])))
        else:
            log_det = 0.5 * self._lowrank_solve(vparams)[1]
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

    # ----------------------------------------------------------------- constrained parameters
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


# The positive canonical parameters the optimizer moves (through softplus) for each family, and the
# constructor back: an expfam family's natural parameters live in a constrained domain.
_CANONICAL: dict[type, tuple[Callable, Callable]] = {
    expfam.Gamma: (lambda q: (q.concentration, q.rate), lambda a, b: expfam.Gamma(a - 1.0, -b)),
    expfam.Beta: (lambda q: (q.concentration1, q.concentration0), lambda a, b: expfam.Beta(a - 1.0, b - 1.0)),
    expfam.Dirichlet: (lambda q: (q.concentration,), lambda a: expfam.Dirichlet(a - 1.0)),
    expfam.Normal: (lambda q: (q.mean, jnp.sqrt(q.variance)), None),
}


class ExpFamilyGuide:
    """q = a pytree of ``vijax.expfam`` families, one per parameter leaf (see the module docstring).

    Args:
      family: the initial q, a family or pytree of families (Gamma, Beta, Dirichlet, Normal) whose
        draws have the shapes of the parameters.

    Raises:
      ValueError: a family without a reparameterized sampler or canonical parameters, or an
        initial q outside its domain.
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
        """The starting variational parameters: each family's canonical parameters, the positive ones
        through the inverse softplus (a Normal's mean as it is)."""

        def canon(f):
            return tuple(
                _softplus_inv(p) if i or type(f) is not expfam.Normal else p
                for i, p in enumerate(_CANONICAL[type(f)][0](f))
            )

        return jax.tree_util.tree_map(canon, self.family, is_leaf=expfam.is_family)

    def q(self, vparams) -> PyTree:
        """The pytree of families at ``vparams``."""

        def build(f, p):
            if type(f) is expfam.Normal:
                m, s = p[0], jax.nn.softplus(p[1])
                v = s * s
                return expfam.Normal(m / v, -0.5 / v)
            return _CANONICAL[type(f)][1](*(jax.nn.softplus(x) for x in p))

        return jax.tree_util.tree_map(build, self.family, vparams, is_leaf=expfam.is_family)

    def sample(self, vparams, key: PRNGKey) -> PyTree:
        """A reparameterized draw z ~ q(vparams), a pytree shaped like the parameters
        (``vijax.expfam.reparam_sample``)."""
        return expfam.reparam_sample(self.q(vparams), key)

    def log_prob(self, vparams, z: PyTree) -> Array:
        """log q(z): the sum over families and elements of their log densities at ``z``."""
        lp = jax.tree_util.tree_map(lambda f, x: jnp.sum(f.log_prob(x)), self.q(vparams), z, is_leaf=expfam.is_family)
        return sum(jax.tree_util.tree_leaves(lp))

    def entropy(self, vparams) -> Array:
        """H[q]: the sum of the families' closed-form entropies."""
        h = jax.tree_util.tree_map(lambda f: jnp.sum(f.entropy()), self.q(vparams), is_leaf=expfam.is_family)
        return sum(jax.tree_util.tree_leaves(h))

    def kl(self, vparams, prior) -> Array:
        """KL(q || prior) in closed form, ``prior`` a pytree of families of the same types."""
        check_structures("prior", prior, self.family, "family", is_leaf=expfam.is_family)
        return expfam.tree_kl(self.q(vparams), prior)

    def to_tfp(self, vparams):
        """q(vparams) as a pytree of TFP (JAX substrate) distributions."""
        return jax.tree_util.tree_map(lambda f: f.to_tfp(), self.q(vparams), is_leaf=expfam.is_family)

    def constrain(self, z: PyTree) -> tuple[PyTree, Array]:
        """(z, 0): q's draws already lie in the parameters' domains, so no transform and a zero
        log-Jacobian."""
        leaves = jax.tree_util.tree_leaves(z)
        return z, jnp.zeros((), leaves[0].dtype)

    def mean(self, vparams) -> PyTree:
        """E_q[z], a pytree shaped like the parameters (each family's mean)."""
        return jax.tree_util.tree_map(lambda f: f.to_tfp().mean(), self.q(vparams), is_leaf=expfam.is_family)


def make_guide(
    family: Any,
    init_params: PyTree = None,
    *,
    bijectors: PyTree = None,
    init_scale: float = 0.1,
    rank: int = 1,
    transform: Optional[Callable] = None,
):
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
        check_structures("family", draw, init_params, "init_params")
        for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(draw), jax.tree_util.tree_leaves(init_params)):
            if tuple(a.shape) != tuple(np.shape(b)):
                raise ArgumentError(
                    "family",
                    f"family: the draw for {_path(path)} has shape {tuple(a.shape)}, but init_params "
                    f"has {tuple(np.shape(b))}",
                )
    return guide


DEFAULT_INIT_SCALE = 0.1  # auto_family's spread: a Gaussian's standard deviation on the unconstrained space


def auto_family(target: Target, *, init_scale: float = DEFAULT_INIT_SCALE) -> dict:
    """Exponential families matched to the supports of a target's sites, for ``ngvi`` (its default
    with a target) or ``bbvi``: Normal for the real line, Gamma for the positive reals, Beta for the
    unit interval, Dirichlet for the simplex, each with the site's shape and centred at the target's
    starting point x = ``target.constrain(target.init_params)``.

    The spread matches a Gaussian of standard deviation s = ``init_scale`` on the unconstrained
    space (NumPyro's AutoNormal starts there): Normal(x, s^2); Gamma with shape 1 / s^2 and mean x
    (the coefficient of variation s, as exp of N(log x, s^2)); Beta and Dirichlet with mean x and
    total concentration 1 / s^2, each concentration at least 1 (so that every density is bounded
    at the start).

    Args:
      target: a ``vijax.interop.Target`` (``vijax.from_numpyro``, ``vijax.from_tfp``).
      init_scale: s > 0.

    Returns:
      A dict site name -> family, the ``family`` argument of ``ngvi`` and ``bbvi``.

    Raises:
      ValueError: naming the site whose support no family matches (``Site.support == "other"``:
        use a Gaussian family of ``bbvi``, which goes through the library's own bijector).

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
    return auto_family_checked(target, check_scalar("init_scale", init_scale, low=0.0))[0]


@setup_jit(static_argnums=(0, 1))
def auto_family_checked(target: Target, s: float) -> tuple[dict, list]:
    """(``auto_family(target, init_scale=s)``, whether each family, in the order of its leaves,
    has natural parameters inside its domain), as one compiled program (the target's start and the
    families' parameters; one per target and scale), not one per operation."""
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
    valid = [jnp.all(f.is_valid()) for f in jax.tree_util.tree_leaves(families, is_leaf=expfam.is_family)]
    return families, valid


__all__ = ["ExpFamilyGuide", "GaussianGuide", "KINDS", "auto_family", "make_guide"]
