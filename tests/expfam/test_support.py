"""Each family's log_prob outside its support: -inf as scipy.stats gives it (not NaN, and not a
finite value at a point the family never draws), NaN kept NaN, derivatives finite."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st

from vijax import expfam
from vijax._validate import ArgumentError

# (family, scipy's frozen distribution, points: some outside the support, some inside)
SCALAR_CASES = {
    "Gamma": (
        lambda: expfam.Gamma.from_shape_rate(2.5, 1.5),
        st.gamma(2.5, scale=1 / 1.5),
        [-1.0, -1e-12, 1e-3, 0.7, 4.0, 30.0],
    ),
    "Beta": (
        lambda: expfam.Beta.from_concentrations(2.0, 3.0),
        st.beta(2.0, 3.0),
        [-0.5, -1e-12, 0.3, 0.999, 1.0 + 1e-9, 1.5],
    ),
    "Poisson": (lambda: expfam.Poisson.from_rate(2.5), st.poisson(2.5), [-1.0, 0.0, 1.5, 3.0, 2.000001, 40.0]),
    "Bernoulli": (lambda: expfam.Bernoulli.from_probs(0.3), st.bernoulli(0.3), [-1.0, 0.0, 0.5, 1.0, 2.0]),
}


@pytest.mark.parametrize("name", sorted(SCALAR_CASES))
def test_scalar_families_match_scipy_inside_and_outside_the_support(name):
    make, ref, points = SCALAR_CASES[name]
    x = np.asarray(points)
    expected = ref.logpmf(x) if hasattr(ref, "logpmf") else ref.logpdf(x)
    got = np.asarray(make().log_prob(jnp.asarray(x)))
    assert np.any(np.isneginf(expected)) and np.any(np.isfinite(expected))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-10)


def test_categorical_index_outside_its_range_has_probability_zero():
    q = expfam.Categorical.from_probs(jnp.array([0.2, 0.3, 0.5]))
    got = np.asarray(q.log_prob(jnp.array([-1, 0, 1, 2, 3])))
    np.testing.assert_allclose(got[1:4], np.log([0.2, 0.3, 0.5]), rtol=1e-12)
    assert np.isneginf(got[0]) and np.isneginf(got[4])  # one-hot of 3 is a row of zeros: log p was -A
    assert np.isneginf(q.log_prob(jnp.array(1.5)))  # a float index between categories
    assert q.log_prob(jnp.array(2.0)) == pytest.approx(np.log(0.5), rel=1e-12) and np.isnan(q.log_prob(jnp.nan))
    assert np.all(np.exp(q.log_prob(jnp.arange(3))).sum() == pytest.approx(1.0))


def test_dirichlet_point_off_the_simplex_is_outside():
    alpha = np.array([2.0, 3.0, 1.5])
    q = expfam.Dirichlet.from_concentration(jnp.asarray(alpha))
    x = np.array([[0.2, 0.3, 0.5], [0.5, 0.5, 0.5], [0.5, 0.7, -0.2], [0.0, 0.4, 0.6]])
    got = np.asarray(q.log_prob(jnp.asarray(x)))
    assert got[0] == pytest.approx(st.dirichlet(alpha).logpdf(x[0]), rel=1e-12)
    assert np.isneginf(got[1]) and np.isneginf(got[2])  # sums to 1.5; a negative coordinate
    assert np.isneginf(got[3])  # the closure's edge: (alpha_1 - 1) log 0 = -inf, the formula's value


def test_dirichlet_float32_draws_are_inside_despite_rounding():
    q = expfam.Dirichlet.from_concentration(jnp.linspace(0.3, 30.0, 500, dtype=jnp.float32))
    draws = expfam.reparam_sample(q, jax.random.PRNGKey(0), 64)
    assert draws.dtype == jnp.float32
    assert not np.any(np.asarray(q.outside_support(draws)))
    assert np.all(np.isfinite(np.asarray(q.log_prob(draws))))


def test_structured_families_outside_their_support():
    ng = expfam.NormalGamma.from_params(0.5, 2.0, 3.0, 1.5)
    lp = np.asarray(ng.log_prob(jnp.array([[0.1, 1.2], [0.1, -1.2]])))
    # tau ~ Gamma(3, rate 1.5), mu | tau ~ N(0.5, 1 / (2 tau))
    tau_mu = st.gamma(3.0, scale=1 / 1.5).logpdf(1.2) + st.norm(0.5, np.sqrt(1 / (2.0 * 1.2))).logpdf(0.1)
    assert lp[0] == pytest.approx(tau_mu, rel=1e-10) and np.isneginf(lp[1])

    nw = expfam.NormalWishart.from_params(jnp.zeros(2), 1.5, jnp.array([[1.0, 0.2], [0.2, 0.5]]), 4.0)
    mu = jnp.array([[0.3], [-0.1]])
    good = jnp.array([[2.0, 0.3], [0.3, 1.0]])
    points = [good, -good, jnp.array([[2.0, 0.9], [0.0, 1.0]]), jnp.array([[1.0, 2.0], [2.0, 1.0]])]
    lp = np.asarray(nw.log_prob(jnp.stack([jnp.concatenate([lam, mu], -1) for lam in points])))
    good64, m = np.asarray(good), np.asarray(mu[:, 0])
    wishart = st.wishart(df=4.0, scale=np.array([[1.0, 0.2], [0.2, 0.5]])).logpdf(good64)
    normal = st.multivariate_normal(np.zeros(2), np.linalg.inv(1.5 * good64)).logpdf(m)
    assert lp[0] == pytest.approx(wishart + normal, rel=1e-10)
    assert np.all(np.isneginf(lp[1:]))  # negative definite, not symmetric, indefinite


def test_nan_stays_nan_and_derivatives_outside_the_support_are_finite():
    for q, x in [
        (expfam.Gamma.from_shape_rate(2.0, 1.0), jnp.array([jnp.nan, -1.0, 1.0])),
        (expfam.Beta.from_concentrations(2.0, 2.0), jnp.array([jnp.nan, 1.5, 0.5])),
        (expfam.Poisson.from_rate(2.0), jnp.array([jnp.nan, -2.0, 2.0])),
    ]:
        lp = np.asarray(q.log_prob(x))
        assert np.isnan(lp[0]) and np.isneginf(lp[1]) and np.isfinite(lp[2])
        grads = jax.grad(lambda nat: jnp.sum(q.from_natural(nat).log_prob(x[1:])))(q.natural_params)
        inside = jax.grad(lambda nat: jnp.sum(q.from_natural(nat).log_prob(x[2:])))(q.natural_params)
        # the point outside adds a constant -inf: no gradient of its own, and no NaN
        for g, h in zip(grads, inside):
            np.testing.assert_allclose(np.asarray(g), np.asarray(h), rtol=1e-12)


def test_same_under_jit_and_vmap():
    q = expfam.Gamma.from_shape_rate(jnp.array([1.5, 3.0]), jnp.array([1.0, 2.0]))
    x = jnp.array([[-1.0, 2.0], [0.5, -3.0], [1.0, 1.0]])
    eager = np.asarray(q.log_prob(x))
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: q.log_prob(x))(x)), eager)
    np.testing.assert_array_equal(np.asarray(jax.vmap(q.log_prob)(x)), eager)
    assert np.isneginf(eager[0, 0]) and np.isneginf(eager[1, 1]) and np.isfinite(eager[2]).all()


def test_x_without_the_batch_shape_is_refused_naming_x():
    q = expfam.Gamma.from_shape_rate(jnp.ones(3), jnp.ones(3))
    with pytest.raises(ArgumentError, match=r"x must have shape sample_shape \+ \(3,\)") as err:
        q.log_prob(jnp.ones(2))
    assert err.value.argument == "x"
    assert q.log_prob(jnp.ones((4, 3))).shape == (4, 3)  # sample axes before the batch's
    assert expfam.Gamma.from_shape_rate(jnp.ones((1, 3)), 1.0).log_prob(jnp.ones((2, 3))).shape == (2, 3)


def test_kl_between_families_that_do_not_broadcast_names_other():
    q = expfam.Gamma.from_shape_rate(jnp.ones(2), jnp.ones(2))
    with pytest.raises(ArgumentError, match=r"^other: kl's other family has natural parameters of shape \(3,\)"):
        expfam.tree_kl(q, expfam.Gamma.from_shape_rate(jnp.ones(3), jnp.ones(3)))  # was the subtraction's TypeError
    shared = expfam.tree_kl(q, expfam.Gamma.from_shape_rate(1.0, 2.0))  # a prior shared by the batch broadcasts
    # tree_kl sums over the batch: 2 KL(Gamma(1, 1) || Gamma(1, 2)) = 2 (log(1/2) + 2 - 1)
    np.testing.assert_allclose(np.asarray(shared), 2 * (np.log(0.5) + 1.0), rtol=1e-6)
