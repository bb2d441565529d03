"""Every family against autodiff of its own log-normalizer, TFP, and Monte Carlo.

``FAMILIES_UNDER_TEST`` maps a name to a factory ``(dtype) -> (family, other)`` with batch shape
(3,) (``other`` is a second member of the same family, for KL). Tolerances: exact identities
rtol 1e-6 (float64) / 1e-5 (float32); Monte Carlo checks at 5 standard errors.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import tensorflow_probability.substrates.jax as tfp

from vijax import expfam
from vijax.expfam._base import dense_fisher
from vijax.testing import assert_trees_close
from tests.conftest import tol


def _arr(x, dtype):
    return jnp.asarray(np.asarray(x), dtype=dtype)


def _mvn(dtype, seed):
    """A batch of three 3-dimensional Gaussians with well-conditioned covariances."""
    rng = np.random.default_rng(seed)
    r = rng.normal(size=(3, 3, 3))
    cov = r @ np.swapaxes(r, -1, -2) / 3 + 0.5 * np.eye(3)
    return expfam.MultivariateNormal.from_mean_covariance(_arr(rng.normal(size=(3, 3)), dtype), _arr(cov, dtype))


FAMILIES_UNDER_TEST = {
    "gamma": lambda dt: (
        expfam.Gamma.from_shape_rate(_arr([0.7, 2.0, 15.0], dt), _arr([1.5, 0.3, 4.0], dt)),
        expfam.Gamma.from_shape_rate(_arr([1.0, 3.0, 9.0], dt), _arr([1.0, 0.5, 2.0], dt)),
    ),
    "normal": lambda dt: (
        expfam.Normal.from_mean_variance(_arr([-2.0, 0.0, 3.5], dt), _arr([0.3, 1.0, 4.0], dt)),
        expfam.Normal.from_mean_variance(_arr([0.0, 1.0, -1.0], dt), _arr([1.0, 2.0, 0.5], dt)),
    ),
    "dirichlet": lambda dt: (
        expfam.Dirichlet.from_concentration(
            _arr([[0.5, 1.0, 2.0, 3.0], [5.0, 5.0, 5.0, 5.0], [0.9, 0.2, 7.0, 1.1]], dt)
        ),
        expfam.Dirichlet.from_concentration(
            _arr([[1.0, 1.0, 1.0, 1.0], [2.0, 3.0, 4.0, 5.0], [0.5, 0.5, 0.5, 0.5]], dt)
        ),
    ),
    "mvn": lambda dt: (_mvn(dt, seed=0), _mvn(dt, seed=1)),
    "beta": lambda dt: (
        expfam.Beta.from_concentrations(_arr([0.7, 2.0, 15.0], dt), _arr([1.5, 0.8, 4.0], dt)),
        expfam.Beta.from_concentrations(_arr([1.0, 3.0, 9.0], dt), _arr([1.0, 0.5, 2.0], dt)),
    ),
    "categorical": lambda dt: (
        expfam.Categorical.from_probs(
            _arr([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.15, 0.05]], dt)
        ),
        expfam.Categorical.from_logits(_arr([[0.0, 0.0, 0.0, 0.0], [1.0, -1.0, 2.0, 0.5], [-3.0, 0.0, 1.0, 3.0]], dt)),
    ),
    "bernoulli": lambda dt: (
        expfam.Bernoulli.from_probs(_arr([0.1, 0.5, 0.85], dt)),
        expfam.Bernoulli.from_logits(_arr([0.0, -1.0, 2.0], dt)),
    ),
    "poisson": lambda dt: (
        expfam.Poisson.from_rate(_arr([0.5, 3.0, 40.0], dt)),
        expfam.Poisson.from_rate(_arr([1.0, 2.0, 50.0], dt)),
    ),
}
NAMES = sorted(FAMILIES_UNDER_TEST)


# Per-family hooks, keyed by class; families absent from a dict get the default.
# Families whose Fisher is singular: an orthonormal basis (d, m) of its null space, in the flattened
# natural coordinates of one batch element. MVN: A depends only on sym(eta2), so antisymmetric eta2
# directions; Categorical: logits are defined up to a constant, so the constant direction.
def _mvn_null_space(fam):
    d = fam.eta1.shape[-1]
    cols = []
    for i in range(d):
        for j in range(i + 1, d):
            e = np.zeros(d + d * d)
            e[d + i * d + j], e[d + j * d + i] = 2**-0.5, -(2**-0.5)
            cols.append(e)
    return np.stack(cols, -1) if cols else np.zeros((d + d * d, 0))


FISHER_NULL_SPACES = {
    expfam.MultivariateNormal: _mvn_null_space,
    expfam.Categorical: lambda fam: np.ones((fam.num_categories, 1)) / np.sqrt(fam.num_categories),
}
# Projections onto the range of the Fisher (the orthogonal complement of the null space above),
# where inv_fisher_vp is a true inverse.
DIRECTION_PROJECTIONS = {
    expfam.MultivariateNormal: lambda v: (v[0], 0.5 * (v[1] + jnp.swapaxes(v[1], -1, -2))),
    expfam.Categorical: lambda v: (v[0] - jnp.mean(v[0], -1, keepdims=True),),
}
# Draws not in the natural parameters' float dtype.
SAMPLE_DTYPES = {expfam.Categorical: "int32"}
# Families without a TFP entropy/KL: a finite support for a brute-force oracle (it must hold all but
# a negligible mass of every test member; the Poisson rates of FAMILIES_UNDER_TEST are <= 50).
ENUMERATION_SUPPORTS = {expfam.Poisson: np.arange(400)}


def _random_direction(fam, seed=0, project=True):
    """A random tangent direction; with ``project``, inside the range of the Fisher."""
    keys = jax.random.split(jax.random.PRNGKey(seed), len(fam.natural_params))
    v = tuple(jax.random.normal(k, p.shape, p.dtype) for k, p in zip(keys, fam.natural_params))
    projection = DIRECTION_PROJECTIONS.get(type(fam))
    return projection(v) if project and projection is not None else v


def _flat(params, batch):
    return np.concatenate([np.reshape(np.asarray(p), batch + (-1,)) for p in params], -1)


def _reference_entropy_kl(fam, other):
    """TFP's entropy and KL, or brute-force enumeration (float64, TFP log-probs) over a support."""
    support = ENUMERATION_SUPPORTS.get(type(fam))
    if support is None:
        return fam.to_tfp().entropy(), tfp.distributions.kl_divergence(fam.to_tfp(), other.to_tfp())
    fam64, other64 = (jax.tree_util.tree_map(lambda a: a.astype(jnp.float64), f) for f in (fam, other))
    k = np.asarray(support)
    x = jnp.broadcast_to(jnp.asarray(k, jnp.float64)[:, None], k.shape + fam.batch_shape)
    lp, lq = fam64.to_tfp().log_prob(x), other64.to_tfp().log_prob(x)
    p = jnp.exp(lp)
    return -jnp.sum(p * lp, 0), jnp.sum(p * (lp - lq), 0)


def _sum_a(cls):
    return lambda nat: jnp.sum(cls.from_natural(nat).log_normalizer())


@pytest.mark.parametrize("name", NAMES)
def test_mean_params_is_grad_of_log_normalizer(name, dtype):
    fam, _ = FAMILIES_UNDER_TEST[name](dtype)
    grad = jax.jit(jax.grad(_sum_a(type(fam))))(fam.natural_params)
    assert_trees_close(fam.mean_params(), tuple(grad), rtol=tol(dtype), atol=tol(dtype))


@pytest.mark.parametrize("name", NAMES)
def test_fisher_vp_is_hessian_of_log_normalizer(name, dtype):
    fam, _ = FAMILIES_UNDER_TEST[name](dtype)
    v = _random_direction(fam, project=False)  # also the null-space components
    hvp = jax.jit(lambda nat, v: jax.jvp(jax.grad(_sum_a(type(fam))), (nat,), (v,))[1])(fam.natural_params, v)
    assert_trees_close(fam.fisher_vp(v), tuple(hvp), rtol=10 * tol(dtype), atol=10 * tol(dtype))


@pytest.mark.parametrize("name", NAMES)
def test_inv_fisher_vp_inverts_fisher_vp(name):
    fam, _ = FAMILIES_UNDER_TEST[name]("float64")
    v = _random_direction(fam, seed=1)
    assert_trees_close(fam.inv_fisher_vp(fam.fisher_vp(v)), v, rtol=1e-6, atol=1e-8)
    assert_trees_close(fam.fisher_vp(fam.inv_fisher_vp(v)), v, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", NAMES)
def test_inv_fisher_vp_is_pseudo_inverse(name):
    """On unprojected directions inv_fisher_vp is pinv(dense Fisher) . v (the inverse if regular)."""
    fam, _ = FAMILIES_UNDER_TEST[name]("float64")
    v = _random_direction(fam, seed=2, project=False)
    pinv = np.linalg.pinv(np.asarray(dense_fisher(fam)), rtol=1e-10, hermitian=True)
    expected = np.einsum("...ij,...j->...i", pinv, _flat(v, fam.batch_shape))
    np.testing.assert_allclose(_flat(fam.inv_fisher_vp(v), fam.batch_shape), expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", NAMES)
def test_fisher_is_symmetric_positive_definite(name):
    """Symmetric, zero on the documented null space (if any), positive definite on its complement."""
    fam, _ = FAMILIES_UNDER_TEST[name]("float64")
    f = np.asarray(dense_fisher(fam))
    np.testing.assert_allclose(f, np.swapaxes(f, -1, -2), rtol=1e-10, atol=1e-12)
    null = FISHER_NULL_SPACES.get(type(fam), lambda fam: np.zeros((f.shape[-1], 0)))(fam)
    np.testing.assert_allclose(f @ null, 0.0, atol=1e-12)
    assert np.all(np.linalg.eigvalsh(f + null @ null.T) > 0)


@pytest.mark.parametrize("name", NAMES)
def test_log_prob_entropy_kl_match_tfp(name, dtype):
    fam, other = FAMILIES_UNDER_TEST[name](dtype)
    x = fam.sample(jax.random.PRNGKey(3), (5,))
    assert x.dtype == jnp.dtype(SAMPLE_DTYPES.get(type(fam), dtype))
    with jax.numpy_rank_promotion("allow"):  # TFP broadcasts sample against batch dims
        # One compiled program for all the reference values (faster than TFP op by op).
        ref_lp, ref_entropy, ref_kl = jax.jit(lambda f, o, x: (f.to_tfp().log_prob(x),) + _reference_entropy_kl(f, o))(
            fam, other, x
        )
    np.testing.assert_allclose(fam.log_prob(x), ref_lp, rtol=10 * tol(dtype), atol=10 * tol(dtype))
    np.testing.assert_allclose(fam.entropy(), ref_entropy, rtol=10 * tol(dtype), atol=10 * tol(dtype))
    np.testing.assert_allclose(fam.kl(other), ref_kl, rtol=10 * tol(dtype), atol=10 * tol(dtype))
    assert fam.log_normalizer().shape == fam.batch_shape


@pytest.mark.parametrize("name", NAMES)
def test_monte_carlo_mean_of_sufficient_stats(name):
    fam, _ = FAMILIES_UNDER_TEST[name]("float64")
    n = 20000
    t = fam.sufficient_stats(fam.sample(jax.random.PRNGKey(7), (n,)))
    for ti, mi in zip(t, fam.mean_params()):
        mean, se = jnp.mean(ti, 0), jnp.std(ti, 0) / np.sqrt(n)
        assert np.all(np.abs(mean - mi) <= 5 * se + 1e-12), (name, mean, mi, se)


@pytest.mark.parametrize("name", NAMES)
def test_pytree_contract(name):
    fam, other = FAMILIES_UNDER_TEST[name]("float64")
    leaves, treedef = jax.tree_util.tree_flatten(fam)
    assert all(isinstance(leaf, jax.Array) for leaf in leaves)
    assert type(jax.tree_util.tree_unflatten(treedef, leaves)) is type(fam)
    np.testing.assert_allclose(jax.jit(lambda f: f.entropy())(fam), fam.entropy(), rtol=1e-12)
    np.testing.assert_allclose(jax.vmap(lambda f, o: f.kl(o))(fam, other), fam.kl(other), rtol=1e-10)
    stacked = jax.tree_util.tree_map(lambda a, b: jnp.stack([a, b]), fam, other)
    ents = jax.lax.scan(lambda c, f: (c, f.entropy()), 0.0, stacked)[1]
    np.testing.assert_allclose(ents[1], other.entropy(), rtol=1e-12)
    assert bool(jnp.all(fam.is_valid()))


# ---------------------------------------------------------------- property tests, wide ranges
pos = st.floats(min_value=1e-2, max_value=1e3, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(a=pos, b=pos, c=pos, d=pos)
def test_gamma_properties(a, b, c, d):
    q = expfam.Gamma.from_shape_rate(jnp.float64(a), jnp.float64(b))
    p = expfam.Gamma.from_shape_rate(jnp.float64(c), jnp.float64(d))
    assert float(q.kl(p)) >= -1e-8
    np.testing.assert_allclose(q.kl(p), q.to_tfp().kl_divergence(p.to_tfp()), rtol=1e-6, atol=1e-8)
    v = (jnp.float64(0.3), jnp.float64(-1.1))
    assert_trees_close(q.inv_fisher_vp(q.fisher_vp(v)), v, rtol=1e-5, atol=1e-7)


@settings(max_examples=40, deadline=None)
@given(alpha=st.lists(pos, min_size=2, max_size=8))
@pytest.mark.slow
def test_dirichlet_properties(alpha):
    q = expfam.Dirichlet.from_concentration(jnp.asarray(alpha, jnp.float64))
    p = expfam.Dirichlet.from_concentration(jnp.ones(len(alpha), jnp.float64))
    np.testing.assert_allclose(q.entropy(), q.to_tfp().entropy(), rtol=1e-6, atol=1e-6)
    assert float(q.kl(p)) >= -1e-8
    v = (jnp.linspace(-1.0, 1.0, len(alpha), dtype=jnp.float64),)
    assert_trees_close(q.inv_fisher_vp(q.fisher_vp(v)), v, rtol=1e-5, atol=1e-6)


_F32_CASES = {
    "gamma": lambda a, b, dt: expfam.Gamma.from_shape_rate(jnp.asarray(a, dt), jnp.asarray(b, dt)),
    "normal": lambda a, b, dt: expfam.Normal.from_mean_variance(jnp.asarray(a - b, dt), jnp.asarray(b, dt)),
    "dirichlet": lambda a, b, dt: expfam.Dirichlet.from_concentration(jnp.asarray([a, b, 1.0], dt)),
    "beta": lambda a, b, dt: expfam.Beta.from_concentrations(jnp.asarray(a, dt), jnp.asarray(b, dt)),
}


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(sorted(_F32_CASES)), a=pos, b=pos)
def test_float32_matches_float64_over_wide_ranges(name, a, b):
    """In float32 the closed forms stay finite, keep their dtype, and agree with float64 to
    float32 accuracy: mean parameters and Fisher products to rtol 1e-4 of their size. (Entropy and
    KL are differences of terms as large as lgamma(alpha), so in float32 their absolute error is
    about 1e-7 lgamma(alpha), e.g. 1.5e-4 at alpha = 210; TFP's float32 formulas share this.)"""
    q32, q64 = _F32_CASES[name](a, b, jnp.float32), _F32_CASES[name](a, b, jnp.float64)
    v32 = tuple(jnp.ones_like(p) for p in q32.natural_params)
    v64 = tuple(jnp.ones_like(p) for p in q64.natural_params)
    for x32, x64 in zip(q32.mean_params() + q32.fisher_vp(v32), q64.mean_params() + q64.fisher_vp(v64)):
        assert x32.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(x32)))
        np.testing.assert_allclose(x32, x64, rtol=1e-4, atol=1e-4 * (1.0 + float(jnp.max(jnp.abs(x64)))))
    assert q32.entropy().dtype == jnp.float32 and bool(jnp.isfinite(q32.entropy()))


def test_constructors_reject_bad_parameters():
    with pytest.raises(ValueError, match="rate"):
        expfam.Gamma.from_shape_rate(1.0, -2.0)
    with pytest.raises(ValueError, match="shape"):
        expfam.Gamma.from_shape_rate(float("nan"), 2.0)
    with pytest.raises(ValueError, match="concentration"):
        expfam.Dirichlet.from_concentration([1.0, 0.0])


@settings(max_examples=20, deadline=None)
@given(d=st.sampled_from([1, 3]), seed=st.integers(0, 2**32 - 1), decades=st.floats(0.0, 3.0))
def test_mvn_properties(d, seed, decades):
    """Random rotations, covariance eigenvalues spread over ``decades`` orders of magnitude."""
    rng = np.random.default_rng(seed)

    def draw():
        rot, _ = np.linalg.qr(rng.normal(size=(d, d)))
        cov = (rot * 10.0 ** rng.uniform(-decades / 2, decades / 2, size=d)) @ rot.T
        mean = 3.0 * rng.normal(size=d)
        return expfam.MultivariateNormal.from_mean_covariance(jnp.asarray(mean), jnp.asarray(cov)), mean, cov

    (q, mean, cov), (p, _, _) = draw(), draw()
    np.testing.assert_allclose(q.mean, mean, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(q.covariance, cov, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(q.entropy(), q.to_tfp().entropy(), rtol=1e-6, atol=1e-6)
    assert float(q.kl(p)) >= -1e-8
    np.testing.assert_allclose(q.kl(p), q.to_tfp().kl_divergence(p.to_tfp()), rtol=1e-6, atol=1e-6)
    v = _random_direction(q, seed=seed % 1000)
    assert_trees_close(q.fisher_vp(v), expfam.autodiff_fisher_vp(q, v), rtol=1e-6, atol=1e-8)
    assert_trees_close(q.inv_fisher_vp(q.fisher_vp(v)), v, rtol=1e-5, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(a=pos, b=pos, c=pos, d=pos)
def test_beta_properties(a, b, c, d):
    q = expfam.Beta.from_concentrations(jnp.float64(a), jnp.float64(b))
    p = expfam.Beta.from_concentrations(jnp.float64(c), jnp.float64(d))
    np.testing.assert_allclose(q.entropy(), q.to_tfp().entropy(), rtol=1e-6, atol=1e-6)
    assert float(q.kl(p)) >= -1e-8
    np.testing.assert_allclose(q.kl(p), q.to_tfp().kl_divergence(p.to_tfp()), rtol=1e-6, atol=1e-8)
    v = (jnp.float64(0.3), jnp.float64(-1.1))
    assert_trees_close(q.inv_fisher_vp(q.fisher_vp(v)), v, rtol=1e-5, atol=1e-7)


logit = st.floats(min_value=-30.0, max_value=30.0, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(a=logit, b=logit)
def test_bernoulli_properties(a, b):
    q, p = expfam.Bernoulli.from_logits(jnp.float64(a)), expfam.Bernoulli.from_logits(jnp.float64(b))
    np.testing.assert_allclose(q.entropy(), q.to_tfp().entropy(), rtol=1e-6, atol=1e-10)
    assert float(q.kl(p)) >= -1e-10
    np.testing.assert_allclose(q.kl(p), q.to_tfp().kl_divergence(p.to_tfp()), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(expfam.Bernoulli.from_probs(q.probs).probs, q.probs, rtol=1e-12)
    v = (jnp.float64(-0.7),)
    assert_trees_close(q.inv_fisher_vp(q.fisher_vp(v)), v, rtol=1e-10)


@settings(max_examples=40, deadline=None)
@given(logits=st.lists(st.floats(-10.0, 10.0), min_size=2, max_size=5), shift=st.floats(-50.0, 50.0))
def test_categorical_properties(logits, shift):
    """Logits up to 20 apart (probabilities down to ~1e-10, Fisher condition number ~1e10)."""
    eta = jnp.asarray(logits, jnp.float64)
    q, p = expfam.Categorical.from_logits(eta), expfam.Categorical.from_logits(eta[::-1])
    shifted = expfam.Categorical.from_logits(eta + shift)  # the same distribution
    np.testing.assert_allclose(shifted.mean_params()[0], q.probs, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(shifted.entropy(), q.entropy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(q.entropy(), q.to_tfp().entropy(), rtol=1e-6, atol=1e-8)
    assert float(q.kl(p)) >= -1e-10
    np.testing.assert_allclose(q.kl(p), q.to_tfp().kl_divergence(p.to_tfp()), rtol=1e-6, atol=1e-8)
    v = (jnp.linspace(-1.0, 1.0, len(logits), dtype=jnp.float64),)  # sums to zero
    assert_trees_close(q.inv_fisher_vp(q.fisher_vp(v)), v, rtol=1e-5, atol=1e-6)
    assert_trees_close(q.fisher_vp(q.inv_fisher_vp(v)), v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(q.inv_fisher_vp((jnp.ones_like(eta),))[0], 0.0, atol=1e-12)


def _poisson_by_enumeration(rate):
    """(entropy, E[log x!]) of Poisson(rate) by summing over rate +- 40 sd + 40 in float64."""
    from scipy.special import gammaln

    sd = np.sqrt(rate)
    k = np.arange(max(0.0, np.floor(rate - 40 * sd - 40)), np.ceil(rate + 40 * sd + 40))
    log_fact = gammaln(k + 1)
    log_p = k * np.log(rate) - rate - log_fact
    return -np.sum(np.exp(log_p) * log_p), np.sum(np.exp(log_p) * log_fact)


@settings(max_examples=40, deadline=None)
@given(a=st.floats(-7.0, 12.0), b=st.floats(-7.0, 12.0))
def test_poisson_properties(a, b):
    """Rates from 1e-3 to 1.6e5 (both sides of the series/asymptotic switch of E[log x!])."""
    q, p = expfam.Poisson.from_log_rate(jnp.float64(a)), expfam.Poisson.from_log_rate(jnp.float64(b))
    lam, mu = np.exp(a), np.exp(b)
    np.testing.assert_allclose(q.entropy(), _poisson_by_enumeration(lam)[0], rtol=1e-8, atol=1e-12)
    assert float(q.kl(p)) >= -1e-8
    np.testing.assert_allclose(q.kl(p), lam * np.log(lam / mu) - lam + mu, rtol=1e-6, atol=1e-8)
    v = (jnp.float64(2.5),)
    assert_trees_close(q.inv_fisher_vp(q.fisher_vp(v)), v, rtol=1e-10)


def test_poisson_expected_log_base_measure_across_the_switch():
    rates = np.array([1e-6, 0.3, 7.0, 150.0, 199.999, 200.0, 200.001, 1e3, 1e5])
    q = expfam.Poisson.from_rate(jnp.asarray(rates))
    expected = -np.array([_poisson_by_enumeration(r)[1] for r in rates])
    np.testing.assert_allclose(q.expected_log_base_measure(), expected, rtol=1e-10)


def test_new_constructors_reject_bad_parameters():
    mvn, eye = expfam.MultivariateNormal, jnp.eye(2)
    with pytest.raises(ValueError, match="cov"):
        mvn.from_mean_covariance(jnp.zeros(2), jnp.array([[1.0, 2.0], [2.0, 1.0]]))  # indefinite
    with pytest.raises(ValueError, match="precision"):
        mvn.from_mean_precision(jnp.zeros(2), jnp.array([[1.0, 0.5], [0.0, 1.0]]))  # not symmetric
    with pytest.raises(ValueError, match="mean"):
        mvn.from_mean_covariance(jnp.array([float("nan"), 0.0]), eye)
    with pytest.raises(ValueError, match="cov"):
        mvn.from_mean_covariance(jnp.zeros(3), eye)  # shape mismatch
    with pytest.raises(ValueError, match="concentration0"):
        expfam.Beta.from_concentrations(1.0, 0.0)
    with pytest.raises(ValueError, match="concentration1"):
        expfam.Beta.from_concentrations(float("inf"), 1.0)
    with pytest.raises(ValueError, match="probs"):
        expfam.Categorical.from_probs([0.5, 0.6])
    with pytest.raises(ValueError, match="probs"):
        expfam.Categorical.from_probs([1.0, 0.0])
    with pytest.raises(ValueError, match="logits"):
        expfam.Categorical.from_logits([0.0, float("inf")])
    for bad in (0.0, 1.0, float("nan")):
        with pytest.raises(ValueError, match="probs"):
            expfam.Bernoulli.from_probs(bad)
    with pytest.raises(ValueError, match="logits"):
        expfam.Bernoulli.from_logits(float("nan"))
    with pytest.raises(ValueError, match="rate"):
        expfam.Poisson.from_rate(0.0)
    with pytest.raises(ValueError, match="log_rate"):
        expfam.Poisson.from_log_rate(float("inf"))


def test_new_families_is_valid_outside_the_domain():
    assert not bool(expfam.MultivariateNormal(jnp.zeros(2), jnp.eye(2)).is_valid())  # precision -2 I
    assert not bool(expfam.Beta(jnp.array(-1.5), jnp.array(0.0)).is_valid())
    assert not bool(expfam.Categorical(jnp.array([0.0, jnp.inf])).is_valid())
    assert not bool(expfam.Bernoulli(jnp.array(jnp.nan)).is_valid())
    assert not bool(expfam.Poisson(jnp.array(jnp.inf)).is_valid())


def test_normal_wishart_constructor_names_bad_parameters():
    nw = expfam.NormalWishart
    with pytest.raises(ValueError, match=r"^dof must be > D - 1 = 2"):
        nw.from_params(jnp.zeros(3), 1.0, jnp.eye(3), 1.0)
    with pytest.raises(ValueError, match=r"^scale must be positive definite"):
        nw.from_params(jnp.zeros(2), 1.0, -jnp.eye(2), 5.0)
    with pytest.raises(ValueError, match=r"^scale must have shape batch \+ \(3, 3\) for loc's D = 3, got \(2, 2\)"):
        nw.from_params(jnp.zeros(3), 1.0, jnp.eye(2), 5.0)  # was broadcasting's error, naming no argument
    with pytest.raises(ValueError, match=r"^kappa"):
        nw.from_params(jnp.zeros(2), -1.0, jnp.eye(2), 5.0)


def test_tree_interpolate_refuses_a_step_size_outside_the_unit_interval():
    """rho = 2 extrapolated past the target, and a NaN rho came back as the old q with one damped
    element, without a word; a traced rho is left to the domain guard."""
    q = expfam.Gamma.from_shape_rate(1.0, 1.0)
    target = expfam.tree_natural_params(expfam.Gamma.from_shape_rate(2.0, 1.0))
    for bad in (2.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match=r"^rho must be a finite number in \[0, 1\]"):
            expfam.tree_interpolate(q, target, bad)
    half, damped = expfam.tree_interpolate(q, target, 0.5)
    assert float(half.eta1) == pytest.approx(0.5) and int(damped) == 0
    jitted = jax.jit(lambda r: expfam.tree_interpolate(q, target, r)[0].eta1)
    assert float(jitted(0.25)) == pytest.approx(0.25)
