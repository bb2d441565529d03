"""``from_numpyro``'s start: NumPyro's init-to-median trace, the unconstrained start, the
supports, and the target's log-density traced once."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import vijax

from tests.interop._models import SIGMA, Y, eight_schools


_GROUP = jnp.array([0, 1, 2, 0, 1, 2, 3, 3])


def test_a_support_the_model_computes_is_read_from_the_trace():
    target = vijax.from_numpyro(_bounded, jnp.array([0.2, 0.4, 0.5]))
    assert target.sites["p"].support == "unit_interval" and target.sites["s"].support == "positive"
    assert all(np.all(np.isfinite(np.asarray(v))) for v in target.init_params.values())


def _bounded(x):
    """A Uniform whose bounds the model computes from its data (traced in the program: the support
    comes out of it) and a LogNormal."""
    p = numpyro.sample("p", dist.Uniform(jnp.min(x) * 0.0, jnp.max(x) * 0.0 + 1.0))
    s = numpyro.sample("s", dist.LogNormal(0.0, 1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("x", dist.Normal(p, s), obs=x)


def test_a_model_that_needs_concrete_values_runs_op_by_op():
    """A plate size read from the data (``int`` of a computed array)."""

    def model(group, y):
        rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0).expand([int(jnp.max(group)) + 1]).to_event(1))
        with numpyro.plate("data", group.shape[0]):
            numpyro.sample("y", dist.Poisson(rate[group]), obs=y)

    target = vijax.from_numpyro(model, _GROUP, jnp.ones(8))
    assert target.sites["rate"].shape == (4,)
    assert np.all(np.isfinite(np.asarray(target.init_params["rate"])))


def test_numpyro_still_refuses_an_invalid_traced_parameter():
    """NumPyro checks a distribution's arguments at construction: the start raises its error."""

    def model():
        s = numpyro.sample("s", dist.Normal(0.0, 0.1))
        numpyro.sample("x", dist.Normal(0.0, s - 10.0), obs=1.0)

    try:  # NumPyro's own check of a concrete value (NumPyro 0.21 has none at construction)
        dist.Normal(0.0, jnp.array(-9.9))
    except ValueError:
        with pytest.raises(ValueError, match="Normal distribution got invalid scale parameter"):
            vijax.from_numpyro(model)
    else:  # nothing to refuse: the start is NumPyro's, invalid scale and all
        assert set(vijax.from_numpyro(model).init_params) == {"s"}


def test_a_second_target_takes_the_new_data():
    """The same model closing over other values gives the start at those values."""
    box = {"loc": jnp.array(0.0)}

    def model():
        numpyro.sample("m", dist.Normal(box["loc"], 1e-3))

    first = vijax.from_numpyro(model)
    box["loc"] = jnp.array(5.0)
    second = vijax.from_numpyro(model)
    assert abs(float(first.init_params["m"])) < 0.01 and abs(float(second.init_params["m"]) - 5.0) < 0.01


def test_gaussian_guide_start_is_the_jnp_start():
    """bbvi's Gaussian guide builds its start with numpy (nothing to compile): the flat centre is
    ``ravel_pytree``'s and the inverse softplus of the scale is ``jnp``'s to float rounding."""
    from jax.flatten_util import ravel_pytree

    from vijax.inference._guides import GaussianGuide, _softplus_inv

    template = {"a": jnp.arange(3.0), "b": jnp.array(2.5), "c": jnp.ones((2, 2))}
    for scale in (0.1, 0.3, 1e-3, 2.0):
        g = GaussianGuide(template, "lowrank", init_scale=scale, rank=2)
        v = g.init()
        np.testing.assert_array_equal(v["loc"], ravel_pytree(template)[0])
        np.testing.assert_allclose(v["scale"], _softplus_inv(jnp.full((8,), scale)), rtol=1e-6)
        assert v["factor"].shape == (8, 2) and not np.any(np.asarray(v["factor"]))
        jax.tree_util.tree_map(np.testing.assert_array_equal, g._unravel(v["loc"]), template)


def _twins():
    a = numpyro.sample("a", dist.Normal(jnp.zeros(3), 1.0).to_event(1))
    b = numpyro.sample("b", dist.Normal(jnp.zeros(3), 1.0).to_event(1))
    numpyro.sample("y", dist.Normal(a + b, 1.0), obs=jnp.zeros(3))


def test_the_start_keys_each_site_without_splitting_a_key():
    """The start's i-th site draws with ``jax.random.key(i)``, and two sites of the same prior start
    at different values (medians of draws of independent streams)."""
    target = vijax.from_numpyro(_twins)
    a, b = np.asarray(target.init_params["a"]), np.asarray(target.init_params["b"])
    assert not np.allclose(a, b)
    from vijax.interop._numpyro import prior_median

    np.testing.assert_array_equal(a, prior_median(dist.Normal(jnp.zeros(3), 1.0).to_event(1), jax.random.key(1)))


@pytest.mark.slow
def test_traced_log_density_runs_the_model_once_with_the_same_values():
    """Under a transformation (grad, vmap, the Hessian) the target's log-density replays one jaxpr
    of the model per parameter shapes: the model's Python runs once for every later trace, and the
    values and derivatives are NumPyro's own log_density's."""
    from numpyro.infer.util import log_density

    calls = []

    def counted(sigma, y=None):
        calls.append(1)
        eight_schools(sigma, y)

    target = vijax.from_numpyro(counted, SIGMA, y=Y)
    params = {"mu": jnp.array(1.5), "tau": jnp.array(2.0), "theta_tilde": jnp.linspace(-1.0, 1.0, 8)}
    batched = jax.tree.map(lambda x: jnp.stack([x, 0.5 * x]), params)
    calls.clear()
    ours = (
        jax.grad(target.log_prob)(params),
        jax.vmap(jax.hessian(target.log_prob))(batched),
        jax.jit(jax.vmap(target.log_prob))(batched),
    )
    assert len(calls) == 1  # once traced, three transformations replayed it

    def theirs(p):
        return log_density(eight_schools, (SIGMA,), {"y": Y}, p)[0]

    expected = (jax.grad(theirs)(params), jax.vmap(jax.hessian(theirs))(batched), jax.jit(jax.vmap(theirs))(batched))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6), ours, expected)
    # concrete values still run the model itself (NumPyro's checks see them), a batch too
    calls.clear()
    np.testing.assert_allclose(target.log_prob(params), theirs(params), rtol=1e-6)
    target.log_prob(params, {"y": Y + 1.0})
    assert len(calls) == 2


def test_a_target_built_under_jit_gives_the_same_gradient():
    """A target built inside the caller's jit (its data traced) differentiates as one built
    outside."""

    def fit(y):
        target = vijax.from_numpyro(eight_schools, SIGMA, y=y)
        params = {"mu": jnp.array(1.5), "tau": jnp.array(2.0), "theta_tilde": jnp.zeros(8)}
        return jax.grad(target.log_prob)(params)["mu"]

    np.testing.assert_allclose(jax.jit(fit)(Y), fit(Y), rtol=1e-6)
