"""A conditionally conjugate model from a user's log-joint: the local and global updates derived by
autodiff (Blei, Kucukelbir and McAuliffe 2017, §4.1-4.2; the idea of Hoffman, Johnson and Tran
2018, *Autoconj*, without a term-rewriting system: the user writes the log-joint in the
statistics, and vijax checks the linearity instead of finding it).

The user writes ``log_joint(globals, locals, x) -> scalar``: log p(x_n, z_n | beta) of **one**
datum, with every variable entering only through its sufficient statistics t(.) — ``globals`` and
``locals`` are dicts of tuples of arrays laid out as the mean parameters of the variable's family
(``Normal``: (mu, mu^2); ``Gamma``: (log tau, tau); ``Dirichlet``: (log pi,); ``NormalGamma``:
(tau mu, tau mu^2, tau, log tau); ``Categorical``: (one-hot,)). The global priors p(beta) are given
as families, not written in the log-joint; the local priors (p(z_n | pi), p(theta_d | alpha))
are part of it, written with respect to each family's base measure h (h = 1 for every family
above). Conditional conjugacy (Blei et al. 2017, eq. 36-37) is then the statement that the
log-joint is *linear* in the statistics of each variable separately (multilinear overall), so
with mean-field q every expectation is the log-joint at the mean parameters,
f_n(mu) = E_q[log p(x_n, z_n | beta)], and

- the global statistics are s_n = grad_{mu_beta} f_n (constant in mu_beta): the update is
  lambda = eta + sum_n s_n, exactly the ``LocalResult.suff_stats`` of a hand-written model;
- a local variable's optimal natural parameter is grad_{mu_v} f_n (its complete conditional,
  Blei et al. 2017, eq. 37-39), divided by its multiplicity when one q stands for several i.i.d.
  copies (the tokens of one word in a document: ``Local(q0, weight=counts)``);
- the local terms are f_n - <s_n, mu_beta> + sum_v weight_v (A(eta_v) - <eta_v, mu_v>), i.e.
  E_q[log h(x_n, z_n)] + H[q(z_n)] with the families' own E log h included.

Several local variables (LDA's theta_d and z_d) are updated in the order given, in sweeps until
the mean absolute change of their mean parameters is below ``tol`` or ``max_iters`` sweeps; one
local variable is exact after one sweep. ``check_conjugacy(batch)`` (run by ``init_globals`` on
concrete data) verifies the linearity with a Hessian-vector product per variable and the domain of
each derived update, and names the variable that fails.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from vijax import expfam
from vijax._validate import finite_values
from vijax._validate import check_choice, check_int, check_scalar, is_tracer
from vijax.models._base import LocalResult, conjugate_posterior
from vijax.types import PRNGKey


class Local(NamedTuple):
    """One datum's local variable: ``q0`` its starting q (a family whose batch shape is the
    variable's shape for this datum) and ``weight`` (None, or an array of q0's batch shape): how
    many i.i.d. copies each element stands for (a count; 0 = padding, contributes nothing)."""

    q0: Any
    weight: Any = None


def _stats_layout(families: dict) -> str:
    return ", ".join(
        f"{name}: {type(f).__name__} with statistics of shapes {[tuple(m.shape) for m in f.mean_params()]}"
        for name, f in families.items()
    )


@dataclasses.dataclass(frozen=True, eq=False)
class DerivedConjugateModel:
    """A :class:`~vijax.models.ConditionallyConjugateModel` whose local step is derived from
    ``log_joint`` (module docstring). Build it with :func:`conjugate_model`.

    Fields:
      log_joint: ``(globals_stats, locals_stats, x) -> scalar`` for one datum.
      priors: dict name -> family, the globals' priors p(beta).
      locals: ``x -> dict name -> Local`` for one datum (its shapes may depend on the datum), or None.
      max_iters, tol: the local sweeps (ignored with one local variable).
      init: optional ``(key, batch) -> q_global``; default :meth:`init_globals`.
    """

    log_joint: Callable
    priors: dict
    locals: Callable | None
    max_iters: int = 100
    tol: float = 1e-6
    init: Callable | None = None
    local_methods = ("meanfield",)

    def prior(self) -> dict:
        return self.priors

    # ------------------------------------------------------------------ per datum
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
                    w = jnp.asarray(w, g[0].dtype)
                    nd = spec[n].q0._event_ndims
                    g = tuple(
                        jnp.where(_expand(w, e) > 0, gi / jnp.where(_expand(w, e) > 0, _expand(w, e), 1.0), s)
                        for gi, s, e in zip(g, spec[n].q0.natural_params, nd)
                    )
                new_q[n] = spec[n].q0.replace_natural(g)
                mu = {**mu, n: new_q[n].mean_params()}
            return new_q, mu

        if len(names) <= 1:
            q, mu = update(mu)
            return q, mu

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
        """Mean-field local step derived from ``log_joint``: the locals of every datum by
        coordinate ascent, the statistics sum_n grad_{mu_beta} f_n and the local terms (compiled
        once per model and shapes; inlined inside an outer ``jit``)."""
        check_choice("method", method, self.local_methods)
        return _local_step(self, dict(globals_view), batch)

    def _local_step(self, view: dict, batch) -> LocalResult:
        q, f, ent = jax.vmap(self._datum_terms, (None, 0))(view, batch)
        mu_local = jax.tree_util.tree_map(lambda fam: fam.mean_params(), q, is_leaf=expfam.is_family)

        def total(v):
            return jnp.sum(jax.vmap(self.log_joint, (None, 0, 0))(v, mu_local, batch))

        stats = jax.grad(total)(view)
        local_terms = jnp.sum(f) - expfam.tree_inner(stats, view) + jnp.sum(ent)
        return LocalResult(stats, local_terms, q)

    # ------------------------------------------------------------------ start and checks
    def init_globals(self, key: PRNGKey, batch=None) -> dict:
        """``init(key, batch)`` if given; otherwise, with data, one global update from locals whose
        natural parameters are the starts' plus standard-normal noise (breaks the symmetry of a
        mixture's components); without data, the prior."""
        if batch is not None and not _traced((key, batch)):  # concrete: outside jit/vmap
            self.check_conjugacy(batch)
        if self.init is not None:
            return self.init(key, batch)
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
        """Every leaf of ``batch`` has the same leading size >= 1 and finite values, and
        ``log_joint`` gives a scalar for one datum of it (checked on its shapes alone, so also at
        trace time): a batch of other widths than ``log_joint`` reads is refused here, not by an
        obscure error from inside the derived update."""
        leaves = jax.tree_util.tree_leaves(batch)
        if not leaves:
            raise ValueError("batch holds no arrays")
        sizes = {np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in leaves}
        if len(sizes) != 1 or None in sizes or 0 in sizes:
            raise ValueError(
                f"batch: every array must have the same leading (data) size >= 1, got {sorted(map(str, sizes))}"
            )
        self._check_datum_shape(batch)
        for leaf in leaves:
            if (
                not is_tracer(leaf)
                and jnp.issubdtype(jnp.result_type(leaf), jnp.inexact)
                and not np.all(np.isfinite(np.asarray(leaf)))
            ):
                raise ValueError("batch must be finite (no NaN or inf)")

    def _check_datum_shape(self, batch) -> None:
        """ValueError unless ``log_joint`` runs on one datum of ``batch`` (abstractly, at the
        priors' and the locals' starting statistics) and returns a scalar."""
        datum = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a)[1:], jnp.result_type(a)), batch)
        shapes = jax.tree_util.tree_map(lambda a: tuple(a.shape), datum)

        if self.locals is not None:  # a malformed locals spec gets its own named error first
            jax.eval_shape(lambda x: (_check_spec(self._spec(x)), jnp.zeros(()))[1], datum)

        def one(x):
            mu = {n: s.q0.mean_params() for n, s in self._spec(x).items()}
            return self.log_joint(expfam.tree_mean_params(self.priors), mu, x)

        try:
            out = jax.eval_shape(one, datum)
        except Exception as err:
            raise ValueError(
                f"batch: log_joint failed on one datum (per-datum shapes {shapes}) with the statistics of the "
                f"globals ({_stats_layout(self.priors)}): {type(err).__name__}: {err}"
            ) from None
        if jnp.shape(out) != ():
            raise ValueError(
                f"batch: log_joint returns shape {jnp.shape(out)} for one datum of per-datum shapes {shapes}, "
                "not a scalar: is the batch wider than the data log_joint was written for?"
            )

    def check_conjugacy(self, batch, num_checked: int = 8) -> None:
        """Raises ValueError naming the variable unless ``log_joint``, on the first
        ``num_checked`` data of ``batch``, (1) runs on the statistics of the families, (2) is
        linear in each variable's statistics (a Hessian-vector product along a random direction
        within each variable is zero) and (3) derives updates inside the families' domains."""
        self.check_data(batch)
        sub = jax.tree_util.tree_map(lambda a: jnp.asarray(a)[:num_checked], batch)
        view = expfam.tree_mean_params(self.priors)
        x0 = jax.tree_util.tree_map(lambda a: a[0], sub)
        spec = self._spec(x0)
        if self.locals is not None:
            _check_spec(spec)
        try:
            mu0 = {n: s.q0.mean_params() for n, s in spec.items()}
            value = self.log_joint(view, mu0, x0)
        except Exception as err:
            raise ValueError(
                f"log_joint failed on one datum with the statistics of the globals ({_stats_layout(self.priors)}) "
                f"and of the locals ({_stats_layout({n: s.q0 for n, s in spec.items()})}): "
                f"{type(err).__name__}: {err}"
            ) from err
        if jnp.shape(value) != ():
            raise ValueError(f"log_joint must return a scalar for one datum, got shape {jnp.shape(value)}")
        clash = set(spec) & set(self.priors)
        if clash:
            raise ValueError(f"locals and priors name the same variables: {sorted(clash)}")

        sizes, bends = _curvatures(self, sub)
        for (where, name), size, bend in zip(_variables(self, spec), sizes, bends):
            size, bend = max(float(size), 1.0), float(bend)
            if not np.isfinite(bend) or bend > 1e-6 * size:
                raise ValueError(
                    f"log_joint is not conjugate in {where} variable {name!r}: it is not linear in "
                    f"{name}'s statistics (its gradient with respect to them changes with them; "
                    f"relative curvature {bend / size:.3g}). Write every term as a coefficient times "
                    f"E[t({name})], e.g. E[mu^2] from the statistics, never E[mu]**2."
                )
        loc = _local_step(self, view, sub)
        bad = jax.tree_util.tree_map(
            lambda fam: bool(jnp.all(fam.is_valid())), loc.local_params, is_leaf=expfam.is_family
        )
        for name, ok in bad.items():
            if not ok:
                raise ValueError(
                    f"the derived update of local variable {name!r} leaves its family "
                    f"{type(spec[name].q0).__name__}'s domain: does the family match the "
                    f"variable's support and its use in log_joint?"
                )
        post = conjugate_posterior(self.priors, loc.suff_stats)
        for name, fam in post.items():
            if not bool(jnp.all(fam.is_valid())):
                raise ValueError(
                    f"the derived update of global variable {name!r} leaves its prior family "
                    f"{type(fam).__name__}'s domain: does priors[{name!r}] match the variable's "
                    f"support and its use in log_joint?"
                )
        if not np.isfinite(float(loc.local_terms)):
            raise ValueError("log_joint gives a non-finite ELBO on the data at the prior's statistics")


@functools.partial(jax.jit, static_argnums=0)
def _local_step(model: DerivedConjugateModel, view: dict, batch) -> LocalResult:
    return model._local_step(view, batch)


def _variables(model: DerivedConjugateModel, spec: dict) -> list:
    return [("global", n) for n in model.priors] + [("local", n) for n in spec]


@functools.partial(jax.jit, static_argnums=0)
def _curvatures(model: DerivedConjugateModel, sub) -> tuple[list, list]:
    """Per variable (globals, then locals): the summed |gradient| of the log-joint in its statistics
    and the summed |Hessian-vector product| along a random direction within them, over the data of
    ``sub`` (zero exactly when the log-joint is linear in them)."""
    view = expfam.tree_mean_params(model.priors)

    def one(x, where, name):
        mu = {n: s.q0.mean_params() for n, s in model._spec(x).items()}
        part = view[name] if where == "global" else mu[name]
        keys = jax.random.split(jax.random.key(0), len(part))
        r = tuple(jax.random.normal(k, t.shape, t.dtype) for k, t in zip(keys, part))

        def at(p):
            args = ({**view, name: p}, mu) if where == "global" else (view, {**mu, name: p})
            return model.log_joint(*args, x)

        def grad_in(p):
            return jax.grad(at)(p)

        g, hv = jax.jvp(grad_in, (part,), (r,))
        total = lambda t: sum(jnp.sum(jnp.abs(a)) for a in t)
        return total(g), total(hv)

    x0 = jax.tree_util.tree_map(lambda a: a[0], sub)
    sizes, bends = [], []
    for where, name in _variables(model, model._spec(x0)):
        g, hv = jax.vmap(lambda x: one(x, where, name))(sub)
        sizes.append(jnp.sum(g))
        bends.append(jnp.sum(hv))
    return sizes, bends


def _check_spec(spec) -> None:
    if not isinstance(spec, dict) or not spec:
        raise ValueError("locals(x) must return a non-empty dict name -> Local(q0, weight)")
    for name, loc in spec.items():
        if not isinstance(loc, Local) or not expfam.is_family(loc.q0):
            raise ValueError(
                f"locals(x)[{name!r}] must be Local(q0, weight) with q0 a vijax.expfam family, got {type(loc).__name__}"
            )


def _expand(w, event_ndims: int):
    return jnp.reshape(w, jnp.shape(w) + (1,) * event_ndims)


def _traced(batch) -> bool:
    return any(is_tracer(leaf) for leaf in jax.tree_util.tree_leaves(batch))


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
      log_joint: ``log_joint(globals, locals, x) -> scalar``, log p(x, z | beta) of one datum written
        in the variables' sufficient statistics (module docstring), without the globals' prior.
      priors: dict name -> ``vijax.expfam`` family, the globals' priors.
      locals: ``locals(x) -> {name: Local(q0, weight)}`` for one datum, in update order; None for a
        model without local variables.
      max_iters: the most local sweeps when there are several local variables.
      tol: the local sweeps' convergence tolerance when there are several local variables.
      init: optional ``(key, batch) -> q_global``.
      example: optional data; when given, ``check_conjugacy(example)`` runs now.

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
        raise ValueError(f"log_joint must be callable, got {type(log_joint).__name__}")
    if not isinstance(priors, dict) or not priors:
        raise ValueError("priors must be a non-empty dict name -> vijax.expfam family")
    for name, fam in priors.items():
        if not expfam.is_family(fam):
            raise ValueError(f"priors[{name!r}] must be a vijax.expfam family, got {type(fam).__name__}")
        if not bool(jnp.all(fam.is_valid())):
            raise ValueError(f"priors[{name!r}] has natural parameters outside its domain")
    if locals is not None and not callable(locals):
        raise ValueError("locals must be None (no local variables) or a function x -> {name: Local(q0, weight)}")
    check_int("max_iters", max_iters)
    check_scalar("tol", tol, low=0.0)
    model = DerivedConjugateModel(log_joint, dict(priors), locals, max_iters, float(tol), init)
    if example is not None:
        model.check_conjugacy(example)
    return model
