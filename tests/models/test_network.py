"""Networks as (apply, params): the plain-JAX MLP, the Equinox adapter and the shape check."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.models import Network, check_network, from_equinox, mlp


def test_mlp_is_the_composition_of_its_layers_and_differentiable():
    net = mlp(jax.random.key(0), (3, 5, 2), activation="tanh")
    x = jnp.array([0.1, -0.2, 0.3])
    (l1, l2) = net.params
    expected = jnp.tanh(x @ l1["w"] + l1["b"]) @ l2["w"] + l2["b"]
    np.testing.assert_allclose(net.apply(net.params, x), expected, rtol=1e-6)
    # batched by vmap, and the gradient reaches every layer
    assert jax.vmap(net.apply, (None, 0))(net.params, jnp.ones((4, 3))).shape == (4, 2)
    g = jax.grad(lambda p: net.apply(p, x).sum())(net.params)
    assert all(float(jnp.abs(layer["w"]).sum()) > 0 for layer in g)


def test_equinox_module_becomes_a_network_with_array_leaves_as_params():
    import equinox as eqx

    module = eqx.nn.MLP(3, 2, 4, 1, key=jax.random.key(1))
    net = from_equinox(module)
    x = jnp.ones(3)
    np.testing.assert_allclose(jax.jit(net.apply)(net.params, x), module(x), rtol=1e-6)
    g = jax.grad(lambda p: net.apply(p, x).sum())(net.params)
    assert g.layers[0].weight.shape == (4, 3)


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(expected=(3,)), "encoder must map one datum of shape \\(3,\\) to shape \\(3,\\), got \\(2,\\)"),
        (dict(example=jnp.ones(5)), "encoder: applying it"),
    ],
)
def test_check_network_names_the_network(bad, match):
    net = mlp(jax.random.key(0), (3, 2))
    example, expected = bad.get("example", jnp.ones(3)), bad.get("expected", (2,))
    with pytest.raises(ValueError, match=match):
        check_network(net, example, expected, "encoder")
    with pytest.raises(ValueError, match="decoder must be a vijax.models.Network"):
        check_network(lambda p, x: x, jnp.ones(3), (3,), "decoder")


def test_mlp_rejects_bad_settings():
    with pytest.raises(ValueError, match="activation"):
        mlp(jax.random.key(0), (2, 2), activation="swish?")
    with pytest.raises(ValueError, match="sizes\\[1\\]"):
        mlp(jax.random.key(0), (2, 0))
    assert isinstance(mlp(jax.random.key(0), (2, 2)), Network)


def test_from_equinox_names_a_value_that_is_not_a_module():
    """from_equinox(3) gave a Network whose params were None, failing only when applied."""
    with pytest.raises(ValueError, match=r"^module must be an Equinox module \(eqx.Module\), got int"):
        from_equinox(3)
