"""Models are registered pytrees: arrays are leaves, settings are static metadata compared by value
(``vijax.models.PytreeModel``), so ``jit`` takes a model as an argument and the runner passes a
bound step's arrays to its chunk."""

import inspect
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import vijax.models as M
from vijax._validate import ArgumentError
from vijax.inference import bind_settings, prox_svi

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _models():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 2))
    y = (x[:, 0] > 0).astype(int)
    enc = M.mlp(jax.random.PRNGKey(0), (4, 6, 4))
    dec = M.mlp(jax.random.PRNGKey(1), (2, 6, 4))
    return {
        "LDA": M.LDA(3, 10),
        "PLSA": M.PLSA(3, 10),
        "DiagonalGMM": M.DiagonalGMM(3, 2),
        "FullGMM": M.FullGMM(3, 2),
        "BernoulliMixture": M.BernoulliMixture(3, 4),
        "DPMixture": M.DPMixture.bernoulli(4, 3),
        "Mixture(GammaPoisson)": M.Mixture(M.GammaPoisson(dim=2), M.DirichletWeights(3)),
        "CategoricalHMM": M.CategoricalHMM(3, 5),
        "GaussianHMM": M.GaussianHMM(3, 2),
        "SMM": M.SMM(3, 4),
        "GaussianMixtureEM": M.GaussianMixtureEM(2, 2),
        "StudentTMixture": M.StudentTMixture(2, 2),
        "GaPNMF": M.GaPNMF(3, 4),
        "CTM": M.CTM(3, 10),
        "GLM": M.GLM(3, "logistic"),
        "GPClassification": M.GPClassification(x, y, 0.0, 0.0),
        "VAE": M.VAE(enc, dec, latent_dim=2, data_dim=4),
    }


MODELS = _models()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_model_is_a_pytree_of_its_arrays_with_its_settings_static(name):
    model = MODELS[name]
    assert isinstance(model, M.PytreeModel)
    leaves, treedef = jax.tree_util.tree_flatten(model)
    assert all(isinstance(leaf, (jax.Array, np.ndarray)) for leaf in leaves), name
    again = jax.tree_util.tree_unflatten(treedef, leaves)
    assert type(again) is type(model) and again == model and hash(again) == hash(model)
    assert vars(again).keys() == vars(model).keys()
    # a tree_map reaches every array and keeps the rest: doubled arrays, the same settings
    doubled = jax.tree_util.tree_map(lambda a: 2 * a, model)
    for key, value in vars(model).items():
        if isinstance(value, jax.Array):
            np.testing.assert_array_equal(getattr(doubled, key), 2 * value)
        elif not jax.tree_util.tree_leaves(value):
            assert getattr(doubled, key) == value, key


def test_arrays_are_leaves_with_their_names_and_a_networks_function_is_kept():
    gpc, vae = MODELS["GPClassification"], MODELS["VAE"]
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(gpc)[0]]
    assert paths == [".K", ".chol_K", ".x", ".y"]
    assert len(jax.tree_util.tree_leaves(vae)) == 8  # two 2-layer MLPs: w and b per layer
    rebuilt = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(vae), jax.tree_util.tree_leaves(vae))
    assert rebuilt.encoder.apply is vae.encoder.apply and rebuilt.decoder.apply is vae.decoder.apply


def test_jit_takes_a_model_as_an_argument_and_compiles_once_per_setting():
    traces = []

    @jax.jit
    def prior_mean(model):
        traces.append(model.alpha)
        return jnp.sum(model.prior().concentration) * model.alpha

    a, b = M.LDA(3, 10, alpha=0.5), M.LDA(3, 10, alpha=0.5)
    assert a == b and a is not b and hash(a) == hash(b)
    np.testing.assert_allclose(prior_mean(a), prior_mean(b))
    assert traces == [0.5]  # equal settings: one program
    prior_mean(M.LDA(3, 10, alpha=0.25))
    assert traces == [0.5, 0.25]  # a static setting: a program per value, as for any static argument

    gpc = MODELS["GPClassification"]
    lowered = jax.jit(lambda m: jnp.sum(m.chol_K)).lower(gpc)
    text = lowered.as_text()
    signature = text.split("@main(", 1)[1].split("->", 1)[0]
    assert "tensor<12x12x" in signature  # the factor is an argument (the unused ones are pruned) ...
    assert not any("constant" in line and "12x12" in line for line in text.splitlines())  # ... not a constant


def test_static_floats_are_python_floats_and_anything_else_is_named():
    model = M.LDA(3, 10, alpha=np.float32(0.5), eta=jnp.asarray(0.25))
    assert type(model.alpha) is float and type(model.eta) is float and model.eta == 0.25
    assert jax.tree_util.tree_leaves(model) == []
    with pytest.raises(ArgumentError, match="alpha must be a real scalar") as e:
        M.LDA(3, 10, alpha="a")
    assert e.value.argument == "alpha"
    with pytest.raises(ArgumentError, match="dof_bounds must be a pair") as e:
        M.StudentTMixture(2, 2, dof_bounds=3.0)
    assert e.value.argument == "dof_bounds"
    assert M.StudentTMixture(2, 2, dof_bounds=[1, 5]).dof_bounds == (1.0, 5.0)
    assert type(M.GaussianMixtureEM(2, 2, reg_covar=np.float64(1e-3)).reg_covar) is float
    # the converting metaclass keeps the constructor's signature (the registry and the docs read it)
    assert list(inspect.signature(M.LDA).parameters)[:3] == ["num_topics", "vocab_size", "alpha"]


def test_a_bound_step_is_a_pytree_of_its_settings():
    gpc = MODELS["GPClassification"]
    alg = prox_svi(gpc, num_data=12, schedule=1.0, num_samples=2)
    arrays = [leaf for leaf in jax.tree_util.tree_leaves(alg.step) if isinstance(leaf, jax.Array)]
    assert any(a is gpc.chol_K for a in arrays) and any(a is gpc.K for a in arrays)
    step = bind_settings(lambda x, *, scale: x * scale, scale=jnp.arange(3.0))
    moved = jax.tree_util.tree_map(lambda a: a + 1, step)
    np.testing.assert_array_equal(moved(2.0), [2.0, 4.0, 6.0])
    assert moved.func is step.func and step.keywords["scale"][0] == 0.0


def test_nothing_in_the_models_writes_to_a_frozen_model():
    """The only write to a model object is unflattening's, in the pytree base."""
    for path in sorted((ROOT / "vijax" / "models").glob("*.py")):
        if path.name != "_pytree.py":
            assert "object.__setattr__" not in path.read_text(), path.name
            assert "static_argnums=0" not in path.read_text(), path.name


def test_filter_jit_traces_the_arrays_and_keeps_a_users_object_static():
    class Plain:  # a user's model that is not a pytree: static as a whole (hashed by identity)
        scale = 3.0

    traces = []

    @M.filter_jit
    def f(model, x, *, power):
        traces.append(power)
        return model.scale * x**power

    plain, x = Plain(), jnp.arange(3.0)
    np.testing.assert_allclose(f(plain, x, power=2), [0.0, 3.0, 12.0])
    np.testing.assert_allclose(f(plain, x + 1, power=2), [3.0, 12.0, 27.0])
    assert traces == [2]  # new array values: the same program
    f(plain, x, power=3)
    assert traces == [2, 3]  # a new static value: a new one
    arrays, rebuild = M.split_arrays({"model": MODELS["GPClassification"], "n": 4})
    assert len(arrays) == 4 and rebuild(arrays)["n"] == 4 and rebuild(arrays)["model"] == MODELS["GPClassification"]
