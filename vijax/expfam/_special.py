"""Special functions the families and models evaluate in their inner loops.

Each is a jitted function: called on concrete arrays (a family's ``mean_params`` outside ``jit``)
it runs as one compiled program per shape, not its ~65 operations one by one (a first eager
``digamma`` about 0.1 s instead of 0.6 s, a Dirichlet's first ``mean_params`` 0.2 s instead of 1.0 s:
``benchmarks/eager_calls.py``);
inside a user's ``jit`` each distinct call is traced and lowered once and XLA inlines it, so the
compiled step and its values are unchanged (LDA's SVI step: the same states bit for bit, its
lowered text 36% shorter)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from vijax._compile import reduce_in_one_kernel
from vijax.types import Array


@jax.jit
def digamma(x: Array) -> Array:
    """psi(x) for x > 0 in a few elementwise operations. LDA's E-step evaluates it every
    iteration and the Dirichlet, Beta and Gamma mean parameters use it; on CPU
    ``jax.scipy.special.digamma`` costs about 5x more.

    For x < 10 the recurrence psi(x) = psi(x + 10) - sum_{i=0}^{9} 1 / (x + i), the sum as one
    fraction accumulated without divisions; then the asymptotic series (Abramowitz and Stegun 6.3.18)
    psi(y) = log y - 1/(2y) - sum_j B_2j / (2j y^2j) to y^-12 at y >= 10, whose truncation error is
    below 1e-14. Matches scipy.special.digamma to 1e-14 in float64 and 2e-6 in float32 (absolute,
    or relative where |psi| > 1); tested in tests/expfam/test_special.py.
    """
    small, num, den, y, log_y, _, r2 = _shifted(x)  # left to XLA to fuse with its users
    return _psi(small, num, den, y, log_y, r2)


@jax.jit
def digamma_and_gammaln(x: Array) -> tuple[Array, Array]:
    """(psi(x), log Gamma(x)) for x > 0, sharing the recurrence and log of :func:`digamma`, both
    computed in one kernel (for psi alone, :func:`digamma`). LDA's SQUAREM safeguard evaluates the per-document ELBO, whose
    KL term needs log Gamma, every cycle; ``jax.scipy.special.gammaln`` there cost about a third of
    the E-step.

    log Gamma(x) = log Gamma(x + 10) - log prod_{i=0}^{9} (x + i) for x < 10 (the product is the
    denominator digamma accumulates), then Stirling's series (Abramowitz and Stegun 6.1.41)
    log Gamma(y) = (y - 1/2) log y - y + log(2 pi) / 2 + sum_j B_2j / (2j (2j - 1) y^(2j-1)) to
    y^-9 at y >= 10 (truncation error below 3e-14). Matches scipy.special.gammaln to 1e-13 in
    float64 and 1e-5 in float32 (absolute, or relative where |log Gamma| > 1).
    """
    small, num, den, y, log_y, r, r2 = _shifted(x)
    psi = _psi(small, num, den, y, log_y, r2)
    c = _constant(y)
    series = lax.mul(r2, lax.sub(c(1 / 1680), lax.mul(r2, c(1 / 1188))))
    series = lax.mul(r, lax.sub(c(1 / 12), lax.mul(r2, lax.sub(c(1 / 360), lax.mul(r2, lax.sub(c(1 / 1260), series))))))
    lgam = lax.add(lax.add(lax.sub(lax.mul(lax.sub(y, c(0.5)), log_y), y), c(0.91893853320467274178)), series)
    # one array held back from fusion with its users (an optimization barrier, which changes no
    # value): XLA's CPU compiler then emits the whole series as one kernel, where it splits it into
    # about ten (the log, each division and their users apart) so that no user recomputes them:
    # fewer kernels to generate, and fewer to launch in each of LDA's SQUAREM cycles
    both = lax.optimization_barrier(
        jnp.stack([psi, lax.sub(lgam, lax.select(small, lax.log(den), lax.full_like(den, 0.0)))])
    )
    return both[0], both[1]


def digamma_and_gammaln_with_total(a: Array) -> tuple[Array, Array]:
    """:func:`digamma_and_gammaln` of [a, sum_k a_k] (the last axis with its sum appended): psi
    and log Gamma of a Dirichlet's concentrations and of their total from one series, each
    (..., K + 1). Called on ``a`` and its sum apart, XLA's CPU compiler emits the series twice,
    and for the sums (..., 1), a shape small enough that LLVM unrolls every loop over it in full
    (in LDA's SVI step, 9 kernels and 430 kB of the program's 2,250 kB of optimized code, for one
    column). ``Dirichlet.mean_params`` and ``kl`` and LDA's E-step all call it, so a step that
    takes several computes the series once."""
    return digamma_and_gammaln(jnp.concatenate([a, reduce_in_one_kernel(jnp.sum, a, keepdims=True)], -1))


@jax.jit
def trigamma(x: Array) -> Array:
    """psi'(x), the derivative of digamma, for x > 0 in a few elementwise operations: the Fisher
    information of the Gamma, Beta and Dirichlet families (their ``fisher_vp`` and
    ``inv_fisher_vp``). ``jax.scipy.special.polygamma(1, x)`` evaluates a Hurwitz zeta series
    that XLA's CPU compiler emits as about sixteen kernels per call, which every natural-gradient
    step of a Gamma site compiled (``benchmarks/numpyro_models.py``).

    For x < 10 the recurrence psi'(x) = psi'(x + 10) + sum_{i=0}^{9} 1 / (x + i)^2 (the sum as one fraction
    accumulated without divisions, as in :func:`digamma`); then the
    asymptotic series (Abramowitz and Stegun 6.4.12) psi'(y) = 1/y + 1/(2y^2) + sum_k B_2k / y^(2k+1)
    to y^-13 at y >= 10, whose truncation error is below 2e-14 relative. Matches
    scipy.special.polygamma(1, x) to 1e-13 in float64 and 2e-6 in float32 (relative); tested in
    tests/expfam/test_special.py.
    """
    x = _float(x)
    c = _constant(x)
    small = lax.lt(x, c(10.0))
    xc = lax.select(small, x, lax.full_like(x, 1.0))
    num, den = lax.full_like(x, 0.0), lax.full_like(x, 1.0)
    for i in range(10):  # num / den = sum_{i < 10} 1 / (xc + i)^2, one fraction without divisions
        t2 = lax.mul(lax.add(xc, c(i)), lax.add(xc, c(i)))
        num, den = lax.add(lax.mul(num, t2), den), lax.mul(den, t2)
    head = lax.div(num, den)
    y = lax.select(small, lax.add(x, c(10.0)), x)
    r = lax.div(c(1.0), y)
    r2 = lax.mul(r, r)
    series = lax.mul(r2, lax.sub(c(5 / 66), lax.mul(r2, c(691 / 2730))))
    series = lax.mul(r2, lax.add(c(-1 / 30), lax.mul(r2, lax.add(c(1 / 42), lax.mul(r2, lax.add(c(-1 / 30), series))))))
    tail = lax.add(lax.add(r, lax.mul(c(0.5), r2)), lax.mul(lax.mul(r, r2), lax.add(c(1 / 6), series)))
    # held back from fusion with its users (an optimization barrier, which changes no value), as in
    # digamma_and_gammaln: XLA then emits the function as one kernel instead of splitting it
    return lax.optimization_barrier(lax.add(tail, lax.select(small, head, lax.full_like(head, 0.0))))


def _float(x: Array) -> Array:
    """``x`` in the float dtype jnp's arithmetic gives it: a float array as it is, an integer one
    times 1.0 (the default float; weakly typed where ``x`` is, as a Python number). Not
    ``expfam.as_float``, which makes a Python number a strongly typed array, as a family's
    parameters must be."""
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x * 1.0


def _constant(x: Array):
    """A Python number as a scalar of ``x``'s dtype, weakly typed where ``x`` is (what jnp makes
    of the number), so that the series' results are typed as jnp's would be."""
    return lambda v: lax.full_like(x, v, shape=())


# The series are written with ``jax.lax``'s operations: the same arithmetic as ``jax.numpy``'s,
# bit for bit (tested), without jnp's dtype promotion at each of their ~65 operations, which a
# step pays at trace time once per distinct input shape (LDA's SVI step: five).
def _shifted(x: Array):
    """The recurrence shared by psi and log Gamma: x < 10 is shifted to y = x + 10, with
    num / den = sum_{i < 10} 1 / (x + i) and den = prod_{i < 10} (x + i)."""
    x = _float(x)
    c = _constant(x)
    small = lax.lt(x, c(10.0))
    xc = lax.select(small, x, lax.full_like(x, 1.0))
    num, den = lax.full_like(x, 0.0), lax.full_like(x, 1.0)
    for i in range(10):  # num / den = sum_{i < 10} 1 / (xc + i), den = prod_{i < 10} (xc + i)
        t = lax.add(xc, c(i))
        num, den = lax.add(lax.mul(num, t), den), lax.mul(den, t)
    y = lax.select(small, lax.add(x, c(10.0)), x)
    log_y, r, r2 = lax.log(y), lax.div(c(1.0), y), lax.div(c(1.0), lax.mul(y, y))
    return small, num, den, y, log_y, r, r2


def _psi(small, num, den, y, log_y, r2):
    c = _constant(y)
    series = lax.mul(r2, lax.sub(c(1 / 252), lax.mul(r2, lax.sub(c(1 / 240), lax.mul(r2, c(1 / 132))))))
    series = lax.mul(r2, lax.sub(c(1 / 12), lax.mul(r2, lax.sub(c(1 / 120), series))))
    psi = lax.sub(lax.sub(log_y, lax.div(c(0.5), y)), series)
    return lax.sub(psi, lax.select(small, lax.div(num, den), lax.full_like(num, 0.0)))


__all__ = ["digamma", "digamma_and_gammaln", "digamma_and_gammaln_with_total", "trigamma"]
