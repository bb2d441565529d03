"""The checks of ``conjugate_model``'s log-joint (see ``vijax.models.derived``): which variables'
statistics each gradient depends on, read from the program of the gradient (linearity in each
variable, and the blocks of globals that interact), and the finite-difference test along a line
through each variable's statistics."""

from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np

from vijax import expfam

if TYPE_CHECKING:  # pragma: no cover
    from vijax.models.derived import DerivedConjugateModel


def variables(model: DerivedConjugateModel, spec: dict) -> list:
    return [("global", n) for n in model.priors] + [("local", n) for n in spec]


CHECK_CHUNK = 2**22  # numbers of local statistics per chunk of check_conjugacy's local steps


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
    mask per input), following the data flow through every equation (into inner ``jit``s; any
    other inner program, a loop or a branch, as depending on all its inputs)."""
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
    """The blocks of globals for one datum of shapes ``datum`` (module docstring), from the
    program of the log-joint's gradient in every variable's statistics: which statistics each
    gradient depends on. ValueError for a variable whose gradient depends on its own statistics."""
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


def secant_tol(sub, priors) -> float:
    """The relative gap a linear log-joint stays under along a line: 1e4 ulps of the statistics'
    float type (2e-12 in float64, 1e-3 in float32)."""
    dtype = jnp.result_type(*jax.tree_util.tree_leaves(expfam.tree_mean_params(priors)))
    return 1e4 * float(jnp.finfo(dtype).eps)


def directions(model: DerivedConjugateModel, x0) -> dict:
    """Per variable, a fixed pseudo-random direction within its statistics (standard normal, the
    same for every datum), shaped like its statistics for the datum ``x0``."""
    stats = {**expfam.tree_mean_params(model.priors)}
    stats.update(local_stats_shapes(model, x0))
    rng = np.random.default_rng(0)
    return {
        n: tuple(rng.standard_normal(jnp.shape(t)).astype(jnp.result_type(t)) for t in part)
        for n, part in stats.items()
    }


@jax.jit
def secant_gaps(model: DerivedConjugateModel, sub, directions: dict) -> jax.Array:
    """(variables, data): per datum of ``sub`` and variable (globals, then locals), the largest
    relative gap |f(p + h r) - f(p) - h <grad f(p), r>| / (|f(p)| + |f(p + h r)| + |h <grad f(p), r>| + 1)
    for h in (1, 10), p the priors' and the locals' starting statistics and r the variable's
    direction scaled by 1 + |p| (zero where f is linear in them; NaN where f(p + h r) is not
    finite though f(p) is; 0 where f(p) is not finite, left to the ELBO check)."""
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
