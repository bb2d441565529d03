"""The algorithm registry and the one algorithm convention: every registered algorithm is reachable
by name, takes keyword-only num_data and schedule, refuses None keys, and names bad settings."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.inference import (
    ALGORITHMS,
    BoundFunction,
    M_STEPS,
    VIAlgorithm,
    make_algorithm,
    register_algorithm,
    schedules,
    svi,
)
from vijax.expfam import Normal
from vijax.models import GLM, VAE, CategoricalHMM, GPClassification, UnivariateGMM, mlp

X = jnp.concatenate([jnp.full(20, -4.0), jnp.full(20, 4.0)])
KEY = jax.random.PRNGKey(0)


def _model_and_batch(name):
    """A small model each algorithm qualifies for, and a batch of it."""
    if name == "prox_svi":
        x = jax.random.normal(KEY, (30, 2))
        return GLM(2), (x, (x[:, 0] > 0).astype(x.dtype)), 30
    if name == "optax":
        x = np.linspace(-2, 2, 6)[:, None]
        return GPClassification(x, (x[:, 0] > 0).astype(int), 0.0, 0.0, jitter=1e-6), jnp.arange(6), 6
    if name in ("bbvi", "ngvi"):  # a log-density: x_i ~ N(mu, 1), its sum over the batch
        return (lambda mu, batch: -0.5 * jnp.sum((batch - (mu["mu"] if name == "bbvi" else mu)) ** 2)), X, 40
    if name == "em":  # an HMM: 4 sequences of 5 symbols
        return CategoricalHMM(2, 3), jnp.arange(20).reshape(4, 5) % 3, 4
    if name == "aevb":  # a VAE on binary vectors
        enc, dec = mlp(jax.random.PRNGKey(1), (4, 4)), mlp(jax.random.PRNGKey(2), (2, 4))
        return (
            VAE(enc, dec, latent_dim=2, data_dim=4),
            (jnp.arange(40)[:, None] % jnp.arange(1, 5)[None, :] == 0) * 1.0,
            40,
        )
    return UnivariateGMM(num_components=2), X, 40


SETTINGS = {
    "optax": {"optimizer": "adam"},
    "prox_svi": {"num_samples": 2},
    "bbvi": {"init_params": {"mu": jnp.zeros(())}, "log_prior": lambda p: -0.5 * p["mu"] ** 2},
    "ngvi": {"family": Normal.from_mean_variance(0.0, 1.0)},
}


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_registered_algorithm_takes_a_step_by_name(name):
    model, batch, n = _model_and_batch(name)
    schedule = None if not ALGORITHMS[name].takes_schedule else {"optax": 0.05, "aevb": 1e-3}.get(name, 0.5)
    alg = make_algorithm(name, model, num_data=n, schedule=schedule, **SETTINGS.get(name, {}))
    assert type(alg) is VIAlgorithm and alg._fields == ("init", "step", "extras")  # one algorithm type
    # its step is bound to the factory's settings (a pytree holding the model: the runner passes its arrays)
    assert isinstance(alg.step, BoundFunction) and alg.step.keywords.get("model", model) is model
    state = alg.init(KEY, batch)  # its step, jitted and not: tests/inference/test_steps_chex.py
    with pytest.raises(ValueError, match="key"):
        alg.init(None, batch)
    with pytest.raises(ValueError, match="key"):
        alg.step(None, state, batch)


def test_factories_take_num_data_and_schedule_by_keyword_only():
    with pytest.raises(TypeError):
        svi(UnivariateGMM(num_components=2), 40)
    for name in ALGORITHMS:
        assert ALGORITHMS[name].description


def test_settings_and_schedules_are_checked_by_name():
    model = UnivariateGMM(num_components=2)
    with pytest.raises(ValueError, match="unknown algorithm 'laplace'"):
        make_algorithm("laplace", model, num_data=40)
    with pytest.raises(ValueError, match="unknown \\['divergence'\\]"):
        make_algorithm("svi", model, num_data=40, divergence="kl")
    with pytest.raises(ValueError, match="has no step size"):
        make_algorithm("cavi", model, num_data=40, schedule=0.5)
    with pytest.raises(ValueError, match="schedule"):
        make_algorithm("svi", model, num_data=40, schedule=1.5)
    with pytest.raises(ValueError, match="schedule"):
        make_algorithm("svi", model, num_data=40, schedule=lambda c: 2.0 + 0.0 * c)
    with pytest.raises(ValueError, match="num_data"):
        make_algorithm("svi", model)
    with pytest.raises(ValueError, match="ConditionallyConjugateModel"):
        make_algorithm("svi", GLM(2), num_data=10)
    with pytest.raises(ValueError, match="ProxModel"):
        make_algorithm("prox_svi", model, num_data=10, schedule=1.0)
    with pytest.raises(ValueError, match="init_params"):
        make_algorithm("optax", model, optimizer="adam")
    # CAVI checks that its batch is the whole data set
    alg = make_algorithm("cavi", model, num_data=40)
    with pytest.raises(ValueError, match="whole data set"):
        alg.step(KEY, alg.init(KEY, X), X[:10])


def test_a_number_is_a_constant_schedule_and_the_m_step_names_resolve():
    model = UnivariateGMM(num_components=2)
    a = make_algorithm("svi", model, num_data=40, schedule=0.25)
    b = svi(model, num_data=40, schedule=schedules.constant(0.25))
    sa, ia = a.step(KEY, a.init(KEY, X), X)
    sb, ib = b.step(KEY, b.init(KEY, X), X)
    np.testing.assert_array_equal(sa.q_global.mean, sb.q_global.mean)
    assert float(ia.step_size) == float(ib.step_size) == 0.25
    assert set(M_STEPS.values()) <= set(ALGORITHMS)


def test_register_algorithm_makes_a_new_algorithm_reachable():
    register_algorithm(
        "svi_half",
        lambda model, *, num_data, schedule=None, local="meanfield": svi(
            model, num_data=num_data, schedule=0.5, local=local
        ),
        settings=("local",),
        description="SVI with rho = 1/2",
    )
    try:
        alg = make_algorithm("svi_half", UnivariateGMM(num_components=2), num_data=40, local="meanfield")
        _, info = alg.step(KEY, alg.init(KEY, X), X)
        assert float(info.step_size) == 0.5
    finally:
        del ALGORITHMS["svi_half"]


# settings of the same name that keep different defaults, and why (a new difference fails the test below)
DIFFERENT_DEFAULTS = {
    # q(theta) over a decoder's weights starts narrow, so the first steps see the decoder's own network
    ("init_scale", "aevb"),
    # optax_vi's model has an exact expectation (None); the Monte Carlo algorithms draw one sample
    ("num_samples", "optax"),
    # a network's last layer has few weights, whose correlations a full-rank q keeps at little cost
    ("family", "last_layer"),
    # ngvi's family is the initial q itself (None: chosen by the support of a target's sites)
    ("family", "ngvi"),
}


def test_settings_of_the_same_name_have_the_same_default():
    """One default for one setting across the registered algorithms (and the Bayesian last layer),
    except the documented differences above."""
    import inspect

    from vijax.inference import bayesian_last_layer

    factories = {name: spec.factory for name, spec in ALGORITHMS.items()} | {"last_layer": bayesian_last_layer}
    defaults = {}
    for name, factory in factories.items():
        for p in inspect.signature(factory).parameters.values():
            if p.default is not inspect.Parameter.empty:
                defaults.setdefault(p.name, {})[name] = p.default
    for setting, by_algorithm in defaults.items():
        values = {repr(v) for a, v in by_algorithm.items() if (setting, a) not in DIFFERENT_DEFAULTS}
        assert len(values) <= 1, (setting, by_algorithm)
