"""A conditionally conjugate model from a user's log-joint, its updates derived by autodiff (Blei,
Kucukelbir and McAuliffe 2017, §4.1-4.2; the idea of Hoffman, Johnson and Tran 2018, *Autoconj*).

``log_joint(globals, locals, x)`` is log p(x_n, z_n | beta) of **one** datum, each variable entering only
through its sufficient statistics, laid out as its family's mean parameters (``Normal``: (mu, mu^2);
``Gamma``: (log tau, tau); ``Dirichlet``: (log pi,); ``Categorical``: (one-hot,)). The global priors are
families, not written in the log-joint; local priors are, with respect to each family's base measure.
Conditional conjugacy (eq. 36-37) makes the log-joint linear in each variable's statistics, so with
mean-field q, f_n(mu) = E_q[log p(x_n, z_n | beta)] is the log-joint at the mean parameters, and

- the global statistics are s_n = grad_{mu_beta} f_n: lambda = eta + sum_n s_n;
- a local variable's optimal natural parameter is grad_{mu_v} f_n (eq. 37-39), divided by its
  multiplicity when one q stands for several i.i.d. copies (``Local(q0, weight=counts)``);
- the local terms are f_n - <s_n, mu_beta> + sum_v weight_v (A(eta_v) - <eta_v, mu_v>).

Several locals are updated in sweeps until their mean parameters' mean absolute change is below ``tol``
(or ``max_iters``). Globals interact when the log-joint holds a product of their statistics (Bishop 2006,
§10.1.3); ``global_blocks`` colours them greedily into non-interacting blocks, which CAVI updates in turn.
The structure is read from the jaxpr of the log-joint's gradient (one datum's shapes, so also under ``jit``);
on concrete data ``check_conjugacy`` also tests linearity along random lines and the updates' domains.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from typing import Any, Callable, NamedTuple

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax._validate import ArgumentError, INT32_MAX, check_choice, check_finite, check_int, check_scalar
from vijax._validate import finite_values, is_tracer
from vijax.models._base import LocalResult, conjugate_posterior
from vijax.types import PRNGKey
from vijax.models._pytree import PytreeModel, TraceCache


# ------------------------------------------------------------------ the checks of a log-joint
def variables(model: DerivedConjugateModel, spec: dict) -> list:
    return [("global", n) for n in model.priors] + [("local", n) for n in spec]


CHECK_CHUNK = 2**22  # local statistics per chunk of check_conjugacy's local steps


def local_stats_shapes(model: DerivedConjugateModel, x) -> dict:
    """The locals' statistics for the datum ``x`` as ``jax.ShapeDtypeStruct`` leaves."""
    return jax.eval_shape(lambda x: {n: s.q0.mean_params() for n, s in model._spec(x).items()}, x)


def datum_shapes(batch):
    """One datum of ``batch`` as ``jax.ShapeDtypeStruct`` leaves."""
    return jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a)[1:], jnp.result_type(a)), batch)


# primitives whose one inner program maps its inputs to its outputs one to one (followed inside)
_CALLS = frozenset({"pjit", "jit", "closed_call", "core_call", "remat", "checkpoint", "custom_jvp_call"})


def _dependencies(jaxpr, inputs: list) -> list:
    """For each output of ``jaxpr``, the bit mask of the inputs it depends on (``inputs``: one
    mask per input), following inner ``jit``s; a loop or a branch depends on all its inputs."""
    env = {}

    def read(v):
        return 0 if isinstance(v, jax.extend.core.Literal) else env.get(v, 0)

    env.update(zip(jaxpr.invars, inputs))
    for eqn in jaxpr.eqns:
        masks = [read(v) for v in eqn.invars]
        inner = list(jax.extend.core.jaxprs_in_params(eqn.params))
        if (
            eqn.primitive.name in _CALLS
            and len(inner) == 1
            and len(inner[0].invars) == len(masks)
            and len(inner[0].outvars) == len(eqn.outvars)
        ):
            out = _dependencies(inner[0], masks)
        else:
            out = [functools.reduce(operator.or_, masks, 0)] * len(eqn.outvars)
        env.update(zip(eqn.outvars, out))
    return [read(v) for v in jaxpr.outvars]


def blocks_of(model: DerivedConjugateModel, datum) -> tuple:
    """The blocks of globals for one datum of shapes ``datum`` (module docstring). ValueError for a
    variable whose gradient depends on its own statistics."""
    spec = local_stats_shapes(model, datum)
    clash = set(spec) & set(model.priors)
    if clash:
        raise ValueError(f"locals and priors name the same variables: {sorted(clash)}")
    view = jax.tree_util.tree_map(
        lambda a: jax.ShapeDtypeStruct(jnp.shape(a), jnp.result_type(a)), expfam.tree_mean_params(model.priors)
    )
    names = variables(model, spec)
    index = {name: i for i, (_, name) in enumerate(names)}
    labels = (
        {n: jax.tree_util.tree_map(lambda _: index[n], view[n]) for n in view},
        {n: jax.tree_util.tree_map(lambda _: index[n], spec[n]) for n in spec},
    )

    def grad(stats, x):
        return jax.grad(lambda s: model.log_joint(s[0], s[1], x))(stats)

    closed = jax.make_jaxpr(grad)((view, spec), datum)
    inputs = [1 << i for i in jax.tree_util.tree_leaves(labels)]
    inputs += [0] * (len(closed.jaxpr.invars) - len(inputs))  # the datum's leaves
    outputs = _dependencies(closed.jaxpr, inputs)
    depends = [0] * len(names)  # per variable: the variables its gradient depends on
    for i, mask in zip(jax.tree_util.tree_leaves(labels), outputs):
        depends[i] |= mask
    for i, (where, name) in enumerate(names):
        if depends[i] >> i & 1:
            raise ValueError(
                f"log_joint is not conjugate in {where} variable {name!r}: it is not linear in {name}'s "
                f"statistics (its gradient with respect to them depends on them: a product or power of "
                f"them, a log, abs, max or another function of them). Write every term as a coefficient "
                f"times E[t({name})], e.g. E[mu^2] from the statistics, never E[mu]**2."
            )
    blocks: list = []  # greedy colouring of the globals' interaction graph, in the order of priors
    for i, name in enumerate(model.priors):
        for block in blocks:
            if not any((depends[i] >> index[o] & 1) or (depends[index[o]] >> i & 1) for o in block):
                block.append(name)
                break
        else:
            blocks.append([name])
    return tuple(tuple(b) for b in blocks)


def directions(model: DerivedConjugateModel, x0) -> dict:
    """Per variable, a fixed standard-normal direction shaped like its statistics for the datum ``x0``."""
    stats = {**expfam.tree_mean_params(model.priors)}
    stats.update(local_stats_shapes(model, x0))
    rng = np.random.default_rng(0)
    return {
        n: tuple(rng.standard_normal(jnp.shape(t)).astype(jnp.result_type(t)) for t in part)
        for n, part in stats.items()
    }


@jax.jit
def secant_gaps(model: DerivedConjugateModel, sub, directions: dict) -> jax.Array:
    """(variables, data): the largest relative gap |f(p + h r) - f(p) - h <grad f(p), r>| / (|f(p)| +
    |f(p + h r)| + |h <grad f(p), r>| + 1) for h in (1, 10), r the direction scaled by 1 + |p| (NaN where
    only f(p + h r) is not finite)."""
    view = expfam.tree_mean_params(model.priors)

    def one(x, where, name):
        mu = {n: s.q0.mean_params() for n, s in model._spec(x).items()}
        part = view[name] if where == "global" else mu[name]
        r = tuple(d * (1 + jnp.abs(t)) for d, t in zip(directions[name], part))
        dt = jnp.result_type(part[0])

        def along(h):
            p = tuple(t + h * d for t, d in zip(part, r))
            args = ({**view, name: p}, mu) if where == "global" else (view, {**mu, name: p})
            return model.log_joint(*args, x)

        f0, slope = jax.jvp(along, (jnp.zeros((), dt),), (jnp.ones((), dt),))
        gaps = []
        for h in (1.0, 10.0):
            fh = along(jnp.asarray(h, dt))
            gap = jnp.abs(fh - f0 - h * slope) / (jnp.abs(f0) + jnp.abs(fh) + jnp.abs(h * slope) + 1.0)
            gaps.append(jnp.where(jnp.isfinite(fh), gap, jnp.nan))
        return jnp.where(jnp.isfinite(f0) & jnp.isfinite(slope), jnp.maximum(*gaps), 0.0)

    x0 = jax.tree_util.tree_map(lambda a: a[0], sub)
    return jnp.stack(
        [jax.vmap(lambda x: one(x, where, name))(sub) for where, name in variables(model, model._spec(x0))]
    )


class Local(NamedTuple):
    """One datum's local variable: ``q0`` its starting q (batch shape: the variable's shape) and
    ``weight`` (None, or q0's batch shape): how many i.i.d. copies each element stands for (0 = padding)."""

    q0: Any
    weight: Any = None


@dataclasses.dataclass(frozen=True, eq=False)
class DerivedConjugateModel(PytreeModel):
    """A :class:`~vijax.models.ConditionallyConjugateModel` whose local step is derived from
    ``log_joint`` (module docstring); its fields are :func:`conjugate_model`'s arguments."""

    log_joint: Callable
    priors: dict
    locals: Callable | None
    max_iters: int = 100
    tol: float = 1e-6
    init: Callable | None = None
    # the blocks of globals found for each datum shape (_structure), read at trace time
    _blocks: TraceCache = dataclasses.field(default_factory=TraceCache, init=False, repr=False, compare=False)
    local_methods = ("meanfield",)

    def __post_init__(self):
        check_int("max_iters", self.max_iters, maximum=INT32_MAX)
        check_scalar("tol", self.tol, low=0.0)

    def prior(self) -> dict:
        """The globals' priors p(beta): the ``priors`` dict, name -> family."""
        return self.priors

    def _spec(self, x) -> dict:
        return {} if self.locals is None else self.locals(x)

    def _fit_datum(self, view: dict, x) -> tuple[dict, dict]:
        """Coordinate ascent on one datum's locals at ``view``: (families, mean params)."""
        spec = self._spec(x)
        names = list(spec)
        q = {n: spec[n].q0 for n in names}
        mu = {n: q[n].mean_params() for n in names}

        def update(mu):
            new_q = {}
            for n in names:
                g = jax.grad(lambda m_n: self.log_joint(view, {**mu, n: m_n}, x))(mu[n])
                w = spec[n].weight
                if w is not None:  # eta = grad / multiplicity; a zero-weight element keeps its start
                    ws = [_expand(jnp.asarray(w, g[0].dtype), e) for e in spec[n].q0._event_ndims]
                    g = tuple(
                        jnp.where(wi > 0, gi / jnp.where(wi > 0, wi, 1.0), s)
                        for gi, s, wi in zip(g, spec[n].q0.natural_params, ws)
                    )
                new_q[n] = spec[n].q0.replace_natural(g)
                mu = {**mu, n: new_q[n].mean_params()}
            return new_q, mu

        if len(names) <= 1:
            return update(mu)

        def change(a, b):
            leaves = jax.tree_util.tree_leaves(jax.tree_util.tree_map(lambda u, v: jnp.abs(u - v), a, b))
            return sum(jnp.sum(leaf) for leaf in leaves) / sum(leaf.size for leaf in leaves)

        def cond(carry):
            _, _, it, delta = carry
            return (it < self.max_iters) & (delta >= self.tol)

        def body(carry):
            _, mu, it, _ = carry
            new_q, new_mu = update(mu)
            return new_q, new_mu, it + 1, change(new_mu, mu)

        first_q, first_mu = update(mu)
        q, mu, _, _ = jax.lax.while_loop(cond, body, (first_q, first_mu, jnp.asarray(1), change(first_mu, mu)))
        return q, mu

    def _datum_terms(self, view: dict, x):
        """(local families, f_n, sum_v weight (A - <eta, mu>)) for one datum at ``view``."""
        spec = self._spec(x)
        q, mu = self._fit_datum(view, x)
        f = self.log_joint(view, mu, x)
        ent = 0.0
        for n, fam in q.items():
            h = fam.log_normalizer() - expfam.inner(fam, fam.natural_params, mu[n])
            if spec[n].weight is not None:
                h = h * jnp.asarray(spec[n].weight, h.dtype)
            ent = ent + jnp.sum(h)
        return q, f, ent

    def local_step(self, globals_view, batch, key: PRNGKey | None = None, method: str = "meanfield") -> LocalResult:
        """The derived mean-field local step: every datum's locals, sum_n grad_{mu_beta} f_n and the local terms."""
        check_choice("method", method, self.local_methods)
        self._structure(batch)  # the log-joint's linearity, from the shapes (cached): also under jit
        return _local_step(self, dict(globals_view), batch)

    def global_blocks(self, batch) -> tuple:
        """The globals as blocks to update in turn: a tuple of dicts name -> bool, from ``batch``'s shapes.

        Raises:
          ValueError: as :meth:`check_data`, or naming a variable the log-joint is not linear in.
        """
        return tuple({name: name in block for name in self.priors} for block in self._structure(batch))

    def _structure(self, batch) -> tuple:
        """The blocks of globals (tuples of names) for ``batch``'s per-datum shapes, cached."""
        datum = datum_shapes(batch)
        sig = (jax.tree_util.tree_structure(datum), tuple((a.shape, a.dtype) for a in jax.tree_util.tree_leaves(datum)))
        if sig not in self._blocks:
            self._blocks[sig] = blocks_of(self, datum)
        return self._blocks[sig]

    def _local_step(self, view: dict, batch) -> LocalResult:
        q, f, ent = jax.vmap(self._datum_terms, (None, 0))(view, batch)
        mu_local = jax.tree_util.tree_map(lambda fam: fam.mean_params(), q, is_leaf=expfam.is_family)

        def total(v):
            return jnp.sum(jax.vmap(self.log_joint, (None, 0, 0))(v, mu_local, batch))

        stats = jax.grad(total)(view)
        local_terms = jnp.sum(f) - expfam.tree_inner(stats, view) + jnp.sum(ent)
        return LocalResult(stats, local_terms, q)

    def init_globals(self, key: PRNGKey, batch=None) -> dict:
        """``init(key, batch)`` if given; otherwise one global update from the locals' starts plus standard-normal
        noise in their natural parameters (without data: the prior)."""
        if batch is not None and not any(is_tracer(a) for a in jax.tree_util.tree_leaves((key, batch))):
            self.check_conjugacy(batch)
        if self.init is not None:
            q = self.init(key, batch)
            _check_like_priors("init(key, batch)", q, self.priors, "init must have the structure of priors")
            return q
        if batch is None:
            return self.priors
        view = expfam.tree_mean_params(self.priors)
        n = jax.tree_util.tree_leaves(batch)[0].shape[0]
        keys = jax.random.split(key, n)

        def noisy_mu(x, k):
            spec = self._spec(x)
            out = {}
            for i, (name, loc) in enumerate(spec.items()):
                nat = tuple(
                    p + jax.random.normal(jax.random.fold_in(k, 2 * i + j), p.shape, p.dtype)
                    for j, p in enumerate(loc.q0.natural_params)
                )
                fam = loc.q0.replace_natural(nat)
                out[name] = jax.tree_util.tree_map(
                    lambda a, b: jnp.where(_expand(fam.is_valid(), a.ndim - fam.is_valid().ndim), a, b),
                    fam.mean_params(),
                    loc.q0.mean_params(),
                )
            return out

        mu_local = jax.vmap(noisy_mu)(batch, keys)
        stats = jax.grad(lambda v: jnp.sum(jax.vmap(self.log_joint, (None, 0, 0))(v, mu_local, batch)))(view)
        return conjugate_posterior(self.priors, stats)

    def batch_checks(self, batch) -> list:
        """The value checks of a step's batch: every float leaf finite."""
        return [
            finite_values("batch", leaf)
            for leaf in jax.tree_util.tree_leaves(batch)
            if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact)
        ]

    def check_data(self, batch) -> None:
        """Every leaf of ``batch`` has one leading size >= 1 and finite values, and ``log_joint`` gives a
        scalar for one datum and is linear in each variable's statistics (from the shapes)."""
        leaves = jax.tree_util.tree_leaves(batch)
        if not leaves:
            raise ArgumentError("batch", "batch holds no arrays")
        sizes = {np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in leaves}
        if len(sizes) != 1 or None in sizes or 0 in sizes:
            raise ArgumentError(
                "batch",
                f"batch: every array must have the same leading (data) size >= 1, got {sorted(map(str, sizes))}",
            )
        datum = datum_shapes(batch)  # log_joint must run (abstractly) on one datum and return a scalar
        shapes = jax.tree_util.tree_map(lambda a: tuple(a.shape), datum)

        if self.locals is not None:  # a malformed locals spec gets its own named error first
            jax.eval_shape(lambda x: (_check_spec(self._spec(x)), jnp.zeros(()))[1], datum)

        def one(x):
            mu = {n: s.q0.mean_params() for n, s in self._spec(x).items()}
            return self.log_joint(expfam.tree_mean_params(self.priors), mu, x)

        try:
            out = jax.eval_shape(one, datum)
        except Exception as err:
            layout = ", ".join(
                f"{n}: {type(f).__name__} with statistics of shapes {[tuple(m.shape) for m in f.mean_params()]}"
                for n, f in self.priors.items()
            )
            raise ArgumentError(
                "batch",
                f"batch: log_joint failed on one datum (per-datum shapes {shapes}) with the statistics of the "
                f"globals ({layout}): {type(err).__name__}: {err}",
            ) from None
        if jnp.shape(out) != ():
            raise ArgumentError(
                "batch",
                f"batch: log_joint returns shape {jnp.shape(out)} for one datum of per-datum shapes {shapes}, "
                "not a scalar: is the batch wider than the data log_joint was written for?",
            )
        self._structure(batch)
        for leaf in leaves:
            if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
                check_finite("batch", leaf)

    def check_conjugacy(self, batch, num_checked: int = 64) -> None:
        """Raises ValueError naming the variable unless ``log_joint`` passes :meth:`check_data`, is linear along a
        random line through each variable's statistics at ``num_checked`` data, and derives updates inside the
        families' domains and a finite ELBO."""
        check_int("num_checked", num_checked)
        self.check_data(batch)
        n = jax.tree_util.tree_leaves(batch)[0].shape[0]
        picks = np.unique(np.linspace(0, n - 1, min(n, num_checked)).round().astype(int))
        sub = jax.tree_util.tree_map(lambda a: jnp.asarray(a)[picks], batch)
        x0 = jax.tree_util.tree_map(lambda a: a[0], sub)
        names = variables(self, self._spec(x0))
        gaps = np.asarray(secant_gaps(self, sub, directions(self, x0)))  # (variables, data)
        view = expfam.tree_mean_params(self.priors)
        tol = 1e4 * float(jnp.finfo(jnp.result_type(*jax.tree_util.tree_leaves(view))).eps)  # 1e4 ulps
        for (where, name), gap in zip(names, gaps):
            worst = int(np.argmax(np.where(np.isnan(gap), np.inf, gap)))
            if not gap[worst] <= tol:
                raise ValueError(
                    f"log_joint is not conjugate in {where} variable {name!r}: it is not linear in {name}'s "
                    f"statistics along a random line through them (relative gap {gap[worst]:.3g} at datum "
                    f"{int(picks[worst])}): a step, rounding or comparison of them has a zero gradient but is "
                    "not linear. Write every term as a coefficient times E[t(" + name + ")]."
                )
        per_datum = sum(int(np.prod(a.shape)) for a in jax.tree_util.tree_leaves(local_stats_shapes(self, x0)))
        size = max(1, CHECK_CHUNK // max(per_datum, 1))  # the locals of about 2^22 numbers at a time
        stats, local_ok, local_terms = None, {}, 0.0
        for start in range(0, n, size):
            chunk = jax.tree_util.tree_map(lambda a: jnp.asarray(a)[start : start + size], batch)
            loc = _local_step(self, view, chunk)
            stats = loc.suff_stats if stats is None else jax.tree_util.tree_map(jnp.add, stats, loc.suff_stats)
            local_terms = local_terms + loc.local_terms
            for name, fam in loc.local_params.items():
                local_ok[name] = local_ok.get(name, True) & jnp.all(fam.is_valid())
        for name, ok in local_ok.items():
            if not bool(ok):
                raise ValueError(
                    f"the derived update of local variable {name!r} leaves its family "
                    f"{type(self._spec(x0)[name].q0).__name__}'s "
                    "domain: does the family match the variable's support and its use in log_joint?"
                )
        post = conjugate_posterior(self.priors, stats)
        for name, fam in post.items():
            if not bool(jnp.all(fam.is_valid())):
                raise ValueError(
                    f"the derived update of global variable {name!r} leaves its prior family "
                    f"{type(fam).__name__}'s domain: does priors[{name!r}] match the variable's "
                    f"support and its use in log_joint?"
                )
        if not np.isfinite(float(local_terms)):
            raise ValueError("log_joint gives a non-finite ELBO on the data at the prior's statistics")


@jax.jit
def _local_step(model: DerivedConjugateModel, view: dict, batch) -> LocalResult:
    return model._local_step(view, batch)


def _check_spec(spec) -> None:
    if not isinstance(spec, dict) or not spec:
        raise ValueError("locals(x) must return a non-empty dict name -> Local(q0, weight)")
    for name, loc in spec.items():
        if not isinstance(loc, Local) or not expfam.is_family(loc.q0):
            raise ValueError(
                f"locals(x)[{name!r}] must be Local(q0, weight) with q0 a vijax.expfam family, got {type(loc).__name__}"
            )


def _describe(tree) -> str:
    """A pytree of families as the errors show it: name -> family and its parameters' shapes."""
    if isinstance(tree, dict):
        return "{" + ", ".join(f"{n!r}: {_describe(v)}" for n, v in tree.items()) + "}"
    if expfam.is_family(tree):
        return f"{type(tree).__name__} with natural parameters of shapes {[tuple(jnp.shape(p)) for p in tree.natural_params]}"
    return type(tree).__name__


def _check_like_priors(name: str, q, priors: dict, structure_error: str) -> None:
    """ValueError naming ``name`` unless ``q`` has the priors' names, types and shapes, inside the domain."""
    same = isinstance(q, dict) and set(q) == set(priors)
    for n, p in priors.items():
        same = same and expfam.is_family(q[n]) and type(q[n]) is type(p)
        same = same and [jnp.shape(a) for a in q[n].natural_params] == [jnp.shape(a) for a in p.natural_params]
    if not same:
        raise ArgumentError(name, f"{structure_error}: expected {_describe(priors)}, got {_describe(q)}")
    expfam.check_in_domain(name, q)


def _expand(w, event_ndims: int):
    return jnp.reshape(w, jnp.shape(w) + (1,) * event_ndims)


def conjugate_model(
    log_joint: Callable,
    *,
    priors: dict,
    locals: Callable | None = None,
    max_iters: int = 100,
    tol: float = 1e-6,
    init: Callable | None = None,
    example=None,
) -> DerivedConjugateModel:
    """A conditionally conjugate model whose CAVI/SVI/SSVI updates are derived from ``log_joint``.

    Args:
      log_joint: ``log_joint(globals, locals, x) -> scalar``, log p(x, z | beta) of one datum (module docstring).
      priors: dict name -> ``vijax.expfam`` family, the globals' priors.
      locals: ``locals(x) -> {name: Local(q0, weight)}`` for one datum, in update order, or None.
      max_iters: cap of the local sweeps (with several local variables).
      tol: their tolerance.
      init: optional ``(key, batch) -> q_global``.
      example: optional data for ``check_conjugacy`` now (otherwise at ``init`` or at a step's first trace).

    Raises:
      ValueError: naming the argument or the variable (``check_conjugacy``).

    Examples:
        >>> import jax.numpy as jnp
        >>> from vijax import expfam
        >>> def log_joint(g, l, x):  # univariate GMM with unit variances (Blei et al. 2017, §3)
        ...     (mu, mu2), (z,) = g["mu"], l["z"]
        ...     return jnp.sum(z * (x * mu - 0.5 * mu2)) - 0.5 * x**2 - 0.5 * jnp.log(2 * jnp.pi) - jnp.log(3.0)
        >>> model = conjugate_model(log_joint, priors={"mu": expfam.Normal.from_mean_variance(jnp.zeros(3), 10 * jnp.ones(3))},
        ...                         locals=lambda x: {"z": Local(expfam.Categorical.from_logits(jnp.zeros(3)))})
        >>> model.local_methods
        ('meanfield',)
    """
    if not callable(log_joint):
        raise ArgumentError("log_joint", f"log_joint must be callable, got {type(log_joint).__name__}")
    if not isinstance(priors, dict) or not priors:
        raise ArgumentError("priors", "priors must be a non-empty dict name -> vijax.expfam family")
    for name, fam in priors.items():
        if not expfam.is_family(fam):
            raise ArgumentError("priors", f"priors[{name!r}] must be a vijax.expfam family, got {type(fam).__name__}")
    _check_like_priors("priors", priors, priors, "priors")
    if locals is not None and not callable(locals):
        raise ArgumentError(
            "locals", "locals must be None (no local variables) or a function x -> {name: Local(q0, weight)}"
        )
    model = DerivedConjugateModel(log_joint, dict(priors), locals, max_iters, tol, init)
    if example is not None:
        model.check_conjugacy(example)
    return model


__all__ = ["DerivedConjugateModel", "Local", "conjugate_model"]
