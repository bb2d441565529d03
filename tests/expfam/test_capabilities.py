"""The optional family capabilities algorithms ask for by name: ``mode``/``mode_stats`` (MAP-EM)
and ``reparam_sample_and_stats`` (SSVI), and ``implements`` which tells who has them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.expfam import Beta, Dirichlet, Gamma, Normal

KEY = jax.random.PRNGKey(3)
WITH_MODE = [
    Gamma.from_shape_rate(jnp.array([2.5, 7.0]), jnp.array([1.5, 0.5])),
    Beta.from_concentrations(jnp.array([2.0, 9.0]), jnp.array([3.0, 1.5])),
    Dirichlet.from_concentration(jnp.array([[2.0, 3.0, 6.0], [1.5, 1.5, 4.0]])),
    Normal.from_mean_variance(jnp.array([-1.0, 2.0]), jnp.array([0.5, 3.0])),
]


@pytest.mark.parametrize("q", WITH_MODE, ids=lambda q: type(q).__name__)
def test_interior_mode_equals_tfp_and_stats_are_t_of_it(q):
    np.testing.assert_allclose(q.mode(), q.to_tfp().mode(), rtol=1e-10)
    for a, b in zip(q.mode_stats(), q.sufficient_stats(q.mode())):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_boundary_modes_have_finite_statistics():
    """Below concentration 1 the density grows towards the boundary: the mode is the boundary
    point and its log-statistics are floored at log(tiny), not -inf."""
    floor = np.log(np.finfo(np.float64).tiny)
    g = Gamma.from_shape_rate(0.5, 2.0)
    assert float(g.mode()) == 0.0 and float(g.mode_stats()[0]) == floor
    d = Dirichlet.from_concentration(jnp.array([0.5, 3.0, 2.0]))
    np.testing.assert_allclose(d.mode(), [0.0, 2.0 / 3.0, 1.0 / 3.0], rtol=1e-12)
    assert np.all(np.isfinite(d.mode_stats()[0]))
    np.testing.assert_allclose(Dirichlet.from_concentration(jnp.full(4, 0.3)).mode(), 0.25)  # no mode: uniform
    b = Beta.from_concentrations(0.5, 0.5)
    assert float(b.mode()) == 0.5


def test_implements_names_the_capabilities():
    for cls in (Gamma, Beta, Dirichlet, Normal):
        assert expfam.implements(cls, "mode") and expfam.implements(cls, "mode_stats")
        assert expfam.implements(cls, "reparam_sample_and_stats")
    assert expfam.implements(expfam.MultivariateNormal, "reparam_sample_and_stats")
    assert expfam.implements(expfam.NormalGamma, "reparam_sample_and_stats")
    assert not expfam.implements(expfam.NormalGamma, "mode_stats")
    for cls in (Gamma, Beta, Dirichlet):  # drawn from Gamma variables: pooled in a pytree's draw
        assert expfam.implements(cls, "from_log_gammas") and expfam.implements(cls, "log_gamma_shapes")
    for cls in (Normal, expfam.MultivariateNormal, expfam.NormalGamma):
        assert not expfam.implements(cls, "from_log_gammas")
    for cls in (expfam.Categorical, expfam.Poisson):
        assert not expfam.implements(cls, "reparam_sample_and_stats")
        assert not expfam.implements(cls, "mode_stats")
    assert not expfam.implements(object(), "mode")
    assert not isinstance(expfam.Poisson.from_rate(2.0), expfam.HasMode)
    assert isinstance(Gamma.from_shape_rate(2.0, 1.0), expfam.HasMode)
    assert isinstance(Normal.from_mean_variance(0.0, 1.0), expfam.Reparameterizable)
    with pytest.raises(ValueError, match="Categorical"):
        expfam.check_invertible(expfam.Categorical.from_probs(jnp.array([0.5, 0.5])))


@pytest.mark.parametrize("q", WITH_MODE, ids=lambda q: type(q).__name__)
def test_the_tree_draw_is_the_family_method(q):
    x, t = q.reparam_sample_and_stats(KEY)
    x2, t2 = expfam.reparam_sample_and_stats(q, KEY)
    np.testing.assert_array_equal(x, x2)
    for a, b in zip(t, t2):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(t, q.sufficient_stats(x)):
        np.testing.assert_allclose(a, b, rtol=1e-10)
