"""Reparameterized samples by inversion and products with SSVI's matrix V (Hoffman & Blei 2015, eq. 8, 22, app. A-C).

Sampling by inversion sets beta = R(u; lambda), u ~ Uniform, R the quantile function of q(beta; lambda); SSVI needs
its implicit derivative at fixed u (eq. 23, appendix B; Figurnov et al. 2018)::

    dR/dlambda |_u = -(dQ/dlambda)(beta; lambda) / q(beta; lambda),      Q the CDF of q.

A draw is made by an exact rejection sampler (:func:`sample_log_gamma`), which *is* R(u; lambda) for u = Q(beta;
lambda), and a custom JVP attaches the implicit derivative.

* ``Gamma(a, rate b)``: beta = g / b, g ~ Gamma(a, 1) drawn in log space; d log g / da = -(dP/da)(a, g) / (g p(g; a)),
  P the regularized lower incomplete gamma function. Where g < sqrt(eps) the expansion P(a, g) = g^a / Gamma(a + 1)
  (1 - a g / (a + 1) + O(g^2)) gives d log g / da = (psi(a + 1) - log g + g / (a + 1)^2) / (a (1 - g / (a + 1))).
* ``Dirichlet(alpha)``: eq. 27-28, beta_k = g_k / sum_j g_j with g_k ~ Gamma(alpha_k, 1); t(beta) = log g -
  logsumexp(log g), finite even where beta_k underflows. ``Beta(a, b)``: the two-component Dirichlet (K = 2).
* ``Normal(mu, sigma^2)``: beta = mu + sigma eps, an explicit derivative.

References:
  Hoffman and Blei (2015), Structured stochastic variational inference, eq. 7-8, 13, 20-24, 27-28.
  Figurnov, Mohamed and Mnih (2018), Implicit reparameterization gradients.
"""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np
from jax.scipy.special import digamma

from vijax.expfam._base import implements, is_family, standard_normal, tree_from_natural, tree_natural_params
from vijax.types import Array, PRNGKey, PyTree
from vijax._validate import ArgumentError


QUANTILE_GRAD_BLOCK = 1024  # log_gamma_quantile_grad of more elements runs in blocks of this many, sorted by a


def log_gamma_quantile_grad(a: Array, log_g: Array) -> Array:
    """d log g / d a at fixed u for g = R(u; a), the Gamma(a, 1) quantile (Hoffman & Blei 2015, eq. 23), elementwise."""
    a = jnp.broadcast_to(jnp.asarray(a, log_g.dtype), log_g.shape)
    n, block = log_g.size, QUANTILE_GRAD_BLOCK
    if n <= 2 * block:
        return _log_gamma_quantile_grad(a, log_g)
    nb = -(-n // block)
    order = jnp.argsort(a.ravel())
    a_s = jnp.pad(a.ravel()[order], (0, nb * block - n), constant_values=1.0).reshape(nb, block)
    g_s = jnp.pad(log_g.ravel()[order], (0, nb * block - n)).reshape(nb, block)
    out = lax.map(lambda ag: _log_gamma_quantile_grad(*ag), (a_s, g_s)).ravel()[:n]
    return jnp.zeros_like(out).at[order].set(out, unique_indices=True).reshape(log_g.shape)


LARGE_SHAPE = 1e6  # above it, d log g / d a by the Wilson-Hilferty approximation (see below); float64
LARGE_SHAPE_FLOAT32 = 3e3  # ... in float32, whose series' rounding (relative 2e-5 at a = 3e3) is above its error


def large_shape(dtype) -> float:
    """The shape above which ``log_gamma_quantile_grad`` takes Wilson and Hilferty's approximation in ``dtype``."""
    return LARGE_SHAPE if jnp.finfo(dtype).bits > 32 else LARGE_SHAPE_FLOAT32


def _wilson_hilferty_grad(a: Array, log_g: Array) -> Array:
    """d log g / d a at fixed z from Wilson and Hilferty's (1931) Gamma(a, 1) quantile g = a (1 - 1/(9a) + z / (3
    sqrt(a)))^3, z the normal quantile of u (relative error O(a^(-3/2)))."""
    s = jnp.sqrt(a)
    z = 3.0 * s * (jnp.exp((log_g - jnp.log(a)) / 3.0) - 1.0 + 1.0 / (9.0 * a))
    inner = 1.0 - 1.0 / (9.0 * a) + z / (3.0 * s)
    return 1.0 / a + 3.0 * (1.0 / (9.0 * a**2) - z / (6.0 * a * s)) / inner


QUANTILE_GRAD_MAX_ITERS = 10_000  # iterations of _quantile_grad_terms' loop before it stops


def _quantile_grad_terms(a: Array, x: Array, log_x: Array) -> Array:
    """-(dP/da)(a, x) / (x p(x; a)) for x, a > 0 elementwise (d log g / d a at fixed u where g = x).

    The factor x^a e^-x / Gamma(a) of P, Q = 1 - P and x p(x; a) cancels. Where x <= max(1, a), the series P = x^a
    e^-x / Gamma(a) sum_n t_n, t_n = x^n / (a (a+1) ... (a+n)), gives -[(log x - psi(a + 1)) / a + sum_{n>=1} t_n
    (log x - psi(a + 1) - sum_{k=1..n} 1/(a+k))]. Elsewhere Legendre's continued fraction Q = x^a e^-x / Gamma(a)
    C(a, x), by the modified Lentz recurrence carrying C' = dC/da, gives (log x - psi(a)) C + C' (DLMF 8.7.1, 8.9.2)."""
    dt = a.dtype
    eps = jnp.finfo(dt).eps
    tiny = jnp.finfo(dt).tiny / eps
    finite = jnp.isfinite(a) & jnp.isfinite(x)
    upper = (x > 1.0) & (x > a)
    l1 = log_x - digamma(a + 1.0)
    t0 = 1.0 / a
    d0 = 1.0 / jnp.where(upper, x + 1.0 - a, 1.0)
    zero = jnp.zeros_like(a)

    def cond(carry):
        return (carry[0] < QUANTILE_GRAD_MAX_ITERS) & ~jnp.all(carry[1])

    def body(carry):
        n, done, t, k, r, c, dc, d, dd, h, dh = carry
        m = (n + 1).astype(dt)
        # the series: t_m, K_m = sum_{k=1..m} 1/(a+k) and the running sum r
        inv = 1.0 / (a + m)
        t_new = t * x * inv
        k_new = k + inv
        term = t_new * (l1 - k_new)
        r_new = r + term
        series_done = jnp.abs(term) <= eps * jnp.abs(l1 * t0 + r_new)
        # the continued fraction: a_m = -m (m - a) (d/da: m), b_m = x + 1 - a + 2m (d/da: -1)
        am = -m * (m - a)
        b = x + 1.0 - a + 2.0 * m
        dn = am * d + b
        ddn = m * d + am * dd - 1.0
        dn = jnp.where(jnp.abs(dn) < tiny, tiny, dn)
        ic = 1.0 / c
        cn = b + am * ic
        dcn = -1.0 + (m - am * dc * ic) * ic
        cn = jnp.where(jnp.abs(cn) < tiny, tiny, cn)
        d_new = 1.0 / dn
        dd_new = -ddn * d_new * d_new
        delta = d_new * cn
        h_new = h * delta
        dh_new = dh * delta + h * (dd_new * cn + d_new * dcn)
        fraction_done = (jnp.abs(delta - 1.0) <= eps) & (jnp.abs(dh_new - dh) <= eps * jnp.abs(dh_new))
        new = (t_new, k_new, r_new, cn, dcn, d_new, dd_new, h_new, dh_new)
        old = (t, k, r, c, dc, d, dd, h, dh)
        kept = tuple(jnp.where(done, o, v) for v, o in zip(new, old))
        return (n + 1, done | jnp.where(upper, fraction_done, series_done), *kept)

    init = (
        jnp.zeros((), jnp.int32),
        ~finite,
        t0,
        zero,
        zero,
        jnp.full_like(a, 1.0 / tiny),
        zero,
        d0,
        d0 * d0,
        d0,
        d0 * d0,
    )
    out = lax.while_loop(cond, body, init)
    r, h, dh = out[4], out[9], out[10]
    grad = jnp.where(upper, (l1 + t0) * h + dh, -(l1 * t0 + r))  # l1 + 1/a = log x - psi(a)
    return jnp.where(finite, grad, jnp.nan)


def _log_gamma_quantile_grad(a: Array, log_g: Array) -> Array:
    dt = log_g.dtype
    g = jnp.exp(log_g)
    small = g < jnp.sqrt(jnp.finfo(dt).eps)
    large = a > large_shape(dt)
    cheap = small | large
    safe_a = jnp.where(cheap, 1.0, a)
    safe_g = jnp.where(cheap, 1.0, g)
    safe_log_g = jnp.where(cheap, 0.0, log_g)
    exact = _quantile_grad_terms(safe_a, safe_g, safe_log_g)
    r = g / (a + 1.0)
    series = (digamma(a + 1.0) - log_g + r / (a + 1.0)) / (a * (1.0 - r))
    big_a = jnp.where(large, a, large_shape(dt) * 2)
    return jnp.where(small, series, jnp.where(large, _wilson_hilferty_grad(big_a, log_g), exact))


@jax.custom_jvp
def _implicit_log_gamma(a: Array, log_g: Array) -> Array:
    """The identity on ``log_g`` (a draw of log Gamma(a, 1) independent of ``a``), d/da the implicit derivative."""
    return log_g


@_implicit_log_gamma.defjvp
def _implicit_log_gamma_jvp(primals, tangents):
    a, log_g = primals
    da, _ = tangents  # log_g is a draw: its own tangent is ignored (it is stop_gradient-ed)
    return log_g, log_gamma_quantile_grad(a, log_g) * da


MAX_GAMMA_ROUNDS = 100  # rounds of sample_log_gamma's rejection loop before it gives up (NaN)
GAMMA_BUCKET_STEP = 4096  # sample_log_gamma pads its input to one of few lengths (_bucket)


@jax.jit
def sample_log_gamma(key: PRNGKey, a: Array) -> Array:
    """log g, g ~ Gamma(a, 1) elementwise, by Marsaglia and Tsang's (2000) rejection sampler (not differentiable).

    For alpha >= 1, with d = alpha - 1/3 and c = 1 / sqrt(9 d): propose v = (1 + c x)^3, x ~ N(0, 1), accept if v > 0
    and log U < x^2 / 2 + d - d v + d log v; then g = d v. For a < 1, alpha = a + 1 and log g = log g' + log U / a.
    """
    a = jnp.asarray(a)
    shape, n = a.shape, a.size
    a = jnp.pad(a.ravel(), (0, _bucket(n) - n), constant_values=1.0)  # one loop shape for many sizes
    dt = a.dtype
    boost = a < 1.0
    alpha = jnp.where(boost, a + 1.0, a)
    d = alpha - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)
    lowest = jnp.nextafter(jnp.asarray(-1.0, dt), jnp.asarray(0.0, dt))  # erfinv(-1) = -inf

    def cond(carry):
        return ~jnp.all(carry[1]) & (carry[0] < MAX_GAMMA_ROUNDS)

    def body(carry):
        i, done, log_v, log_u_boost = carry
        u = jax.random.uniform(jax.random.fold_in(key, i), (3, *a.shape), dt, minval=-1.0, maxval=1.0)
        x = np.sqrt(2.0).astype(dt) * lax.erf_inv(jnp.maximum(u[0], lowest))
        log_u = jnp.log1p(-0.5 * (u[1] + 1.0))  # log of a uniform on (0, 1]
        v = (1.0 + c * x) ** 3
        safe_v = jnp.where(v > 0, v, 1.0)
        ok = (v > 0) & (log_u < 0.5 * x**2 + d - d * safe_v + d * jnp.log(safe_v))
        log_u_boost = jnp.where(i == 0, jnp.log1p(-0.5 * (u[2] + 1.0)), log_u_boost)
        return i + 1, done | ok, jnp.where(ok & ~done, jnp.log(safe_v), log_v), log_u_boost

    zeros = jnp.zeros(a.shape, dt)
    _, done, log_v, log_u = lax.while_loop(
        cond, body, (jnp.zeros((), jnp.int32), jnp.zeros(a.shape, bool), zeros, zeros)
    )
    log_g = jnp.log(d) + log_v + jnp.where(boost, log_u / jnp.where(boost, a, 1.0), 0.0)
    return jnp.where(done, log_g, jnp.nan)[:n].reshape(shape)


def _bucket(n: int) -> int:
    """The padded length of ``n`` draws: the next power of two up to ``GAMMA_BUCKET_STEP``, then a multiple of it."""
    if n <= GAMMA_BUCKET_STEP:
        return 1 << max(n - 1, 0).bit_length()
    return -(-n // GAMMA_BUCKET_STEP) * GAMMA_BUCKET_STEP


def standard_log_gamma(key: PRNGKey, a: Array) -> Array:
    """log g with g ~ Gamma(a, 1) (shape of ``a``), differentiable in ``a`` at fixed u."""
    a = jnp.asarray(a)
    log_g = lax.stop_gradient(sample_log_gamma(key, lax.stop_gradient(a)))
    return _implicit_log_gamma(a, log_g)


def check_invertible(q: PyTree, name: str = "q") -> None:
    """Raises ValueError (naming the argument ``name``) unless every family in the pytree ``q`` implements
    ``reparam_sample_and_stats``."""
    fams = jax.tree_util.tree_leaves(q, is_leaf=is_family)
    if not fams:
        raise ArgumentError(name, f"{name} must be a pytree holding at least one exponential family")
    for f in fams:
        if not is_family(f):
            raise ArgumentError(name, f"{name} must be a pytree of exponential families, found a {type(f).__name__}")
        if not implements(f, "reparam_sample_and_stats"):
            raise ValueError(
                f"sampling by inversion needs a family that implements reparam_sample_and_stats "
                f"(Gamma, Beta, Dirichlet, Normal, MultivariateNormal); got {type(f).__name__}"
            )


def reparam_sample_and_stats(q: PyTree, key: PRNGKey, num: int | None = None) -> tuple[PyTree, PyTree]:
    """One draw beta ~ q(beta) by inversion and its statistics t(beta), differentiable in q's natural parameters at
    fixed u; ``GammaBased`` families drawn by one ``standard_log_gamma``, ``NormalBased`` by one ``standard_normal``.

    Args:
      q: a family or a pytree of families, any batch shapes.
      key: PRNG key: as is for one family or Normal-based ones only; else split per family (a pool: its first's).
      num: None (one draw) or the number of draws, on a new leading axis.

    Returns:
      (beta, t(beta)): beta structured like q; t(beta) (in log space) structured like ``tree_mean_params(q)``.
    """
    check_invertible(q)
    fams, treedef = jax.tree_util.tree_flatten(q, is_leaf=is_family)
    one = len(fams) == 1 or all(implements(f, "from_normals") for f in fams)  # one draw serves them all
    keys = [key] * len(fams) if one else list(jax.random.split(key, len(fams)))
    lead = () if num is None else (int(num),)
    out = [None] * len(fams)
    pooled = [i for i, f in enumerate(fams) if implements(f, "from_log_gammas")]
    # the Gamma-based families' parameters broadcast to the draws (elementwise: no larger than them)
    wide = {i: jax.tree_util.tree_map(lambda p: jnp.broadcast_to(p, lead + jnp.shape(p)), fams[i]) for i in pooled}
    if pooled:  # one rejection loop and one implicit derivative for all of them
        shapes = [jnp.asarray(wide[i].log_gamma_shapes()) for i in pooled]
        dtype = jnp.result_type(*shapes)
        log_g = standard_log_gamma(keys[pooled[0]], jnp.concatenate([a.astype(dtype).ravel() for a in shapes]))
        ends = np.cumsum([a.size for a in shapes])
        for i, a, part in zip(pooled, shapes, jnp.split(log_g, ends[:-1])):
            out[i] = wide[i].from_log_gammas(part.reshape(a.shape).astype(a.dtype))
    normal = [i for i, f in enumerate(fams) if implements(f, "from_normals")]
    if normal:  # one flat draw of standard normals for all of them
        shapes = [lead + tuple(fams[i].normal_shape()) for i in normal]
        dtype = jnp.result_type(*[fams[i].dtype for i in normal])
        eps = standard_normal(keys[normal[0]], (sum(math.prod(s) for s in shapes),), dtype)
        ends = np.cumsum([math.prod(s) for s in shapes])
        for i, s, part in zip(normal, shapes, jnp.split(eps, ends[:-1])):
            out[i] = fams[i].from_normals(part.reshape(s).astype(fams[i].dtype))
    for i, (f, k) in enumerate(zip(fams, keys)):
        if out[i] is None:  # the others (NormalGamma, NormalWishart) under vmap on splits of the key
            draw = f.reparam_sample_and_stats
            out[i] = draw(k) if num is None else jax.vmap(draw)(jax.random.split(k, num))
    return tuple(jax.tree_util.tree_unflatten(treedef, [o[j] for o in out]) for j in (0, 1))


def reparam_sample(q: PyTree, key: PRNGKey, num: int | None = None) -> PyTree:
    """A draw beta ~ q(beta) by inversion, differentiable at fixed u (``num``: see :func:`reparam_sample_and_stats`).

    Examples:
        >>> import jax
        >>> from vijax.expfam import Dirichlet
        >>> q = Dirichlet.from_concentration([[1.0, 2.0, 3.0]])
        >>> reparam_sample(q, jax.random.PRNGKey(0)).shape, reparam_sample(q, jax.random.PRNGKey(0), 4).shape
        ((1, 3), (4, 1, 3))
    """
    return reparam_sample_and_stats(q, key, num)[0]


def reparam_stats(q: PyTree, key: PRNGKey) -> PyTree:
    """t(beta) for a draw beta = R(u; lambda) (see :func:`reparam_sample_and_stats`)."""
    return reparam_sample_and_stats(q, key)[1]


def tree_inv_fisher_vp(q: PyTree, v: PyTree) -> PyTree:
    """F^-1 v family by family; ``v`` structured like ``tree_natural_params(q)``."""
    return jax.tree_util.tree_map(lambda f, x: f.inv_fisher_vp(tuple(x)), q, v, is_leaf=is_family)


def stats_and_v_product(q: PyTree, key: PRNGKey) -> tuple[PyTree, Callable[[PyTree], PyTree]]:
    """t(beta) of one draw by inversion and the linear map s -> V(beta, lambda) s (Hoffman & Blei 2015, eq. 8, 22).

    V = F^-1 (grad_lambda R) (grad_beta t)^T = F^-1 J^T, J = d t(R(u; lambda)) / d lambda at the draw's u and
    F = hess A(lambda): V s = ``inv_fisher_vp(vjp(s))`` (the paper's gradients are columns), never forming V.

    Returns:
      (t(beta), v_product): t(beta) like ``tree_mean_params(q)``; ``v_product``: s -> V s, both like natural params.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from vijax.expfam import Gamma
        >>> q = Gamma.from_shape_rate(jnp.array([2.0, 5.0]), jnp.array([1.0, 3.0]))
        >>> t, v = stats_and_v_product(q, jax.random.PRNGKey(0))
        >>> [x.shape for x in v((jnp.ones(2), jnp.zeros(2)))]
        [(2,), (2,)]
    """
    check_invertible(q)
    nat = tree_natural_params(q)
    stats, vjp = jax.vjp(lambda n: reparam_stats(tree_from_natural(q, n), key), nat)

    def v_product(s: PyTree) -> PyTree:
        s = jax.tree_util.tree_map(lambda a, b: jnp.asarray(a, b.dtype), s, stats)
        (g,) = vjp(s)
        return tree_inv_fisher_vp(q, g)

    return stats, v_product
