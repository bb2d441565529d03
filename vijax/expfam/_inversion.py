"""Reparameterized samples by inversion, and products with the SSVI matrix V (Hoffman & Blei 2015, eq. 8, 22;
appendices A-C).

Sampling by inversion draws u ~ Uniform and sets beta = R(u; lambda), R the quantile function of
q(beta) with natural parameters lambda. SSVI needs the derivative of R at *fixed u*, which is the
implicit one (Hoffman & Blei 2015, eq. 23, appendix B)::

    dR/dlambda |_u = -(dQ/dlambda)(beta; lambda) / q(beta; lambda),      Q the CDF of q.

Nothing here evaluates a quantile function. A draw is made by an exact rejection sampler
(:func:`sample_log_gamma`); it *is* R(u; lambda) for u = Q(beta; lambda), and the custom JVP below
attaches the implicit derivative at that u. So ``jax.jvp``/``jax.vjp`` of a draw with respect to
lambda give exactly dR/dlambda at fixed u (the tests compare them with finite differences of TFP's
``igammainv``, and with -(dQ/dlambda)/q from autodiff of the CDF).

Per family (lambda = the family's natural parameters, ``q.natural_params``):

* ``Gamma(a, rate b)``: beta = g / b with g ~ Gamma(a, 1). g is drawn in log space
  (:func:`sample_log_gamma`, Marsaglia-Tsang vectorised: no underflow for small a) and its
  derivative is
  d log g / da = -(dP/da)(a, g) / (g p(g; a)), P the regularized lower incomplete gamma
  function, computed by the series of P or the continued fraction of 1 - P differentiated in a
  along their recurrences, where the factor g^a e^-g / Gamma(a) common to dP/da and g p(g; a)
  cancels (:func:`log_gamma_quantile_grad`). Where g underflows (g < sqrt(eps)) the small-g
  expansion P(a, g) = g^a / Gamma(a + 1) (1 - a g / (a + 1) + O(g^2)) gives
  d log g / da = (psi(a + 1) - log g + g / (a + 1)^2) / (a (1 - g / (a + 1))), exact to O(g^2).
  (``jax.random.loggamma``'s own gradient replaces an underflowed g by the smallest float, which
  gives a wrong derivative.)
  The rate enters explicitly: d beta / d b = -beta / b.
* ``Dirichlet(alpha)``: eq. 27-28, beta_k = g_k / sum_j g_j with independent g_k ~ Gamma(alpha_k, 1)
  (the "T(R-hat(u))" construction of eq. 13 / 24). t(beta) = log beta = log g - logsumexp(log g)
  is computed in log space, so it is finite even where beta_k underflows.
* ``Beta(a, b)``: the two-component Dirichlet, x = g_a / (g_a + g_b) (eq. 27 with K = 2), with
  t = (log x, log(1 - x)) in log space. Its u is the pair (u_a, u_b); this is the paper's
  construction for the Dirichlet applied to the Beta, not the univariate Beta quantile (whose
  derivative differs draw by draw; both give E[V] = I and unbiased SSVI gradients).
* ``Normal(mu, sigma^2)``: beta = mu + sigma Phi^-1(u) = mu + sigma eps; the derivative is explicit
  and equals -(dQ/dlambda)/q (tested).

The SSVI product. With
J = d t(R(u; lambda)) / d lambda at fixed u (shape dim t x dim lambda) and F = hess A(lambda)::

    V(beta, lambda) = F^-1 (grad_lambda R) (grad_beta t)^T = F^-1 J^T        (Hoffman & Blei 2015, eq. 8, 22)
    V s = inv_fisher_vp( vjp(lambda -> t(R(u, lambda)))(s) ).

The paper writes gradients as columns, grad_lambda R of shape (dim lambda x dim beta), so
(grad_lambda R)(grad_beta t)^T = J^T: the update (eq. 7, 20-21) multiplies eta-hat by F^-1 J^T,
i.e. a VJP, never J F^-1. V is never formed; the cost is one reverse pass through the sampler
plus the family's ``inv_fisher_vp`` (O(V) per Dirichlet of dimension V).

References:
  Hoffman and Blei (2015), Structured stochastic variational inference, eq. 7-8, 13,
  20-24, 27-28.
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


# --------------------------------------------------------------------------- standard log-gamma
# log_gamma_quantile_grad of more elements than this runs in blocks of this many, sorted by a
QUANTILE_GRAD_BLOCK = 1024


def log_gamma_quantile_grad(a: Array, log_g: Array) -> Array:
    """d log g / d a at fixed u for g = R(u; a), the Gamma(a, 1) quantile (Hoffman & Blei 2015, eq. 23).

    -(dP/da)(a, g) / (g p(g; a)) with P the regularized lower incomplete gamma function; the
    small-g expansion where g < sqrt(eps) (see the module docstring). Elementwise.

    The series or continued-fraction loop (``_quantile_grad_terms``) runs on a whole array until
    the array's slowest element has converged (about sqrt(a) iterations for a draw near its
    mean). Above ``QUANTILE_GRAD_BLOCK`` elements, the elements are sorted by a and evaluated in
    blocks of that many (``lax.map``), so that each block iterates as long as its own largest a
    needs: the same values.
    """
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


LARGE_SHAPE = 1e6  # above it, d log g / d a by the Wilson-Hilferty approximation (see below)


def _wilson_hilferty_grad(a: Array, log_g: Array) -> Array:
    """d log g / d a at fixed u by Wilson and Hilferty's (1931) approximation of the Gamma(a, 1)
    quantile, g = a (1 - 1/(9a) + z / (3 sqrt(a)))^3 with z the normal quantile of u: z from g,
    then the derivative of log g at fixed z. Its relative error is below 1e-8 from a = 1e5 (and
    a^(-3/2) order), where the series and the continued fraction need about sqrt(a) iterations
    per element (a concentration of 1e20 would never finish)."""
    s = jnp.sqrt(a)
    z = 3.0 * s * (jnp.exp((log_g - jnp.log(a)) / 3.0) - 1.0 + 1.0 / (9.0 * a))
    inner = 1.0 - 1.0 / (9.0 * a) + z / (3.0 * s)
    return 1.0 / a + 3.0 * (1.0 / (9.0 * a**2) - z / (6.0 * a * s)) / inner


QUANTILE_GRAD_MAX_ITERS = 10_000  # iterations of _quantile_grad_terms' loop before it stops


def _quantile_grad_terms(a: Array, x: Array, log_x: Array) -> Array:
    """-(dP/da)(a, x) / (x p(x; a)) for x > 0 and a > 0, elementwise, P the regularized lower
    incomplete gamma function: d log g / d a at fixed u where g = x.

    The factor x^a e^-x / Gamma(a) that P, Q = 1 - P and x p(x; a) share cancels, so nothing
    underflows. Where x <= max(1, a), the series P = x^a e^-x / Gamma(a) sum_n t_n,
    t_n = x^n / (a (a+1) ... (a+n)), with dt_n/da = -t_n sum_{k<=n} 1/(a+k), gives
    -[(log x - psi(a + 1)) / a + sum_{n>=1} t_n (log x - psi(a + 1) - sum_{k=1..n} 1/(a+k))]
    (its n = 0 terms taken together: no 1/a^2 cancels where a is small). Elsewhere Legendre's
    continued fraction Q = x^a e^-x / Gamma(a) C(a, x), C evaluated by the modified Lentz
    recurrence carrying its a-derivative C', gives (log x - psi(a)) C + C' (DLMF 8.7.1 and 8.9.2).
    One ``lax.while_loop`` runs both recurrences until every element has converged in its own
    (at most ``QUANTILE_GRAD_MAX_ITERS`` iterations; a non-finite input is NaN at once). On float32
    draws its relative error is below 1.4e-5 at a = 300 and 3.6e-4 at a = 1e5, where XLA's
    ``igamma_grad_a`` reaches 1.4e-4 and 0.14."""
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
    large = a > LARGE_SHAPE
    # Elements on the series or the large-shape branch get the cheap input (a, g) = (1, 1): the loop
    # runs until its slowest element converges.
    cheap = small | large
    safe_a = jnp.where(cheap, 1.0, a)
    safe_g = jnp.where(cheap, 1.0, g)
    safe_log_g = jnp.where(cheap, 0.0, log_g)
    exact = _quantile_grad_terms(safe_a, safe_g, safe_log_g)
    r = g / (a + 1.0)
    series = (digamma(a + 1.0) - log_g + r / (a + 1.0)) / (a * (1.0 - r))
    big_a = jnp.where(large, a, LARGE_SHAPE * 2)
    return jnp.where(small, series, jnp.where(large, _wilson_hilferty_grad(big_a, log_g), exact))


@jax.custom_jvp
def _implicit_log_gamma(a: Array, log_g: Array) -> Array:
    """The identity on ``log_g`` (a draw of log Gamma(a, 1)), with d/da the implicit derivative at
    fixed u. ``log_g`` must not depend on ``a`` except through this function."""
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
    """log g, g ~ Gamma(a, 1) elementwise, by Marsaglia and Tsang's (2000) rejection sampler run
    on the whole array at once (not differentiable; see :func:`standard_log_gamma`).

    For shape alpha >= 1, with d = alpha - 1/3 and c = 1 / sqrt(9 d): propose v = (1 + c x)^3,
    x ~ N(0, 1), and accept if v > 0 and log U < x^2 / 2 + d - d v + d log v; then g = d v. For
    a < 1, alpha = a + 1 and g = g' U^(1/a) (log g = log g' + log U / a, in log space so that g
    may underflow). Every round draws a proposal for every element and keeps the first accepted
    one; the loop runs until all elements have accepted (at least 95% accept per round, so a few
    rounds; an element not accepted after ``MAX_GAMMA_ROUNDS`` rounds, which at that rate has
    probability below 0.05^100 for a finite shape, is returned as NaN, so that a NaN or absurd
    shape ends the loop and the step's non-finite guard rejects it instead of never returning).
    This is the algorithm of ``jax.random.gamma``, vectorised over the array.

    Round i draws ``jax.random.uniform(fold_in(key, i), (3,) + a.shape)`` on [-1, 1):
    x = sqrt(2) erfinv(u_0), U = (u_1 + 1) / 2, and in round 0 the boost's uniform (u_2 + 1) / 2.
    The loop runs on ``a`` flattened and padded (with shape 1) to the next power of two up to
    ``GAMMA_BUCKET_STEP`` elements, then to a multiple of it (``_bucket``), so that draws of
    nearby sizes share one loop shape.
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
    """The length a draw of ``n`` Gamma variables is padded to: the next power of two up to
    ``GAMMA_BUCKET_STEP``, then the next multiple of it (at most 1/256 more beyond)."""
    if n <= GAMMA_BUCKET_STEP:
        return 1 << max(n - 1, 0).bit_length()
    return -(-n // GAMMA_BUCKET_STEP) * GAMMA_BUCKET_STEP


def standard_log_gamma(key: PRNGKey, a: Array) -> Array:
    """log g with g ~ Gamma(a, 1) (shape of ``a``), differentiable in ``a`` at fixed u."""
    a = jnp.asarray(a)
    log_g = lax.stop_gradient(sample_log_gamma(key, lax.stop_gradient(a)))
    return _implicit_log_gamma(a, log_g)


# --------------------------------------------------------------------------- pytrees of families
def check_invertible(q: PyTree) -> None:
    """Raises ValueError unless every family in the pytree ``q`` implements
    ``reparam_sample_and_stats`` (Gamma, Beta, Dirichlet, Normal and MultivariateNormal do)."""
    fams = jax.tree_util.tree_leaves(q, is_leaf=is_family)
    if not fams:
        raise ArgumentError("q", "q must be a pytree holding at least one exponential family")
    for f in fams:
        if not is_family(f):
            raise ArgumentError("q", f"q must be a pytree of exponential families, found a {type(f).__name__}")
        if not implements(f, "reparam_sample_and_stats"):
            raise ValueError(
                f"sampling by inversion needs a family that implements reparam_sample_and_stats "
                f"(Gamma, Beta, Dirichlet, Normal, MultivariateNormal); got {type(f).__name__}"
            )


def _family_keys(q: PyTree, key: PRNGKey):
    """(q's families, its treedef, a key per family): ``key`` itself for every family where one
    draw serves them all (one family, or Normal-based families only, whose pooled normals read one
    key), else a split per family."""
    fams, treedef = jax.tree_util.tree_flatten(q, is_leaf=is_family)
    one = len(fams) == 1 or all(implements(f, "from_normals") for f in fams)
    return fams, treedef, ([key] * len(fams) if one else list(jax.random.split(key, len(fams))))


def reparam_sample_and_stats(q: PyTree, key: PRNGKey, num: int | None = None) -> tuple[PyTree, PyTree]:
    """One draw beta ~ q(beta) by inversion and its sufficient statistics t(beta); with ``num``,
    ``num`` independent draws stacked on a leading axis.

    Both are differentiable in q's natural parameters at fixed u (the implicit derivative).
    Families made of Gamma variables (``GammaBased``: Gamma, Beta, Dirichlet) are drawn together,
    by one ``standard_log_gamma`` over all their shapes (and all ``num`` draws): one rejection
    loop and one implicit derivative however many such families and draws q has. Likewise the
    families that are affine maps of standard normals (``NormalBased``: Normal,
    MultivariateNormal) take theirs from one flat ``standard_normal`` call. ``num`` draws of the
    others are made under ``vmap`` on splits of their key.
    t(beta) is computed in log space (finite even where beta underflows), structured like
    ``expfam.tree_mean_params(q)`` so that it can replace E_q[t(beta)] as a model's globals view.

    Args:
      q: a family or a pytree of families (Gamma, Beta, Dirichlet, Normal), any batch shapes.
      key: PRNG key; a single family, or Normal-based families only, use it as is; each family of
        another pytree its own split (the pooled Gamma draw the split of the first family in it,
        the pooled normals likewise).
      num: None (one draw) or the number of draws, on a new leading axis.

    Returns:
      (beta, t(beta)): beta structured like q with each family replaced by its draw
      (batch_shape + event_shape, after ``num`` where given), t(beta) structured like
      ``tree_mean_params(q)``.
    """
    check_invertible(q)
    fams, treedef, keys = _family_keys(q, key)
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
            out[i] = (
                f.reparam_sample_and_stats(k)
                if num is None
                else jax.vmap(f.reparam_sample_and_stats)(jax.random.split(k, num))
            )
    return (
        jax.tree_util.tree_unflatten(treedef, [o[0] for o in out]),
        jax.tree_util.tree_unflatten(treedef, [o[1] for o in out]),
    )


def reparam_sample(q: PyTree, key: PRNGKey, num: int | None = None) -> PyTree:
    """A draw beta ~ q(beta) by inversion, differentiable in q's natural parameters at fixed u;
    with ``num``, ``num`` draws on a leading axis (see :func:`reparam_sample_and_stats`).

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
    """t(beta) of one draw by inversion and the linear map s -> V(beta, lambda) s (Hoffman & Blei 2015, eq. 8).

    V s = F^-1 J^T s with J = d t(R(u; lambda)) / d lambda at the draw's u (see the module
    docstring for the convention); computed as ``inv_fisher_vp(vjp(s))``, never forming V.

    Args:
      q: a pytree of families (Gamma, Beta, Dirichlet, Normal).
      key: PRNG key of the draw.

    Returns:
      (t(beta), v_product): t(beta) structured like ``tree_mean_params(q)``; ``v_product`` maps a
      pytree s structured like the natural parameters (a model's sufficient statistics) to V s,
      structured the same way.

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


__all__ = [
    "check_invertible",
    "log_gamma_quantile_grad",
    "reparam_sample",
    "reparam_sample_and_stats",
    "reparam_stats",
    "sample_log_gamma",
    "standard_log_gamma",
    "stats_and_v_product",
    "tree_inv_fisher_vp",
]
