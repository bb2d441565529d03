"""The grid combinators: ``hyperparameter_grid`` (a model's hyperparameters in the state) and
``factory_grid`` (a factory's constants, e.g. a step size, in the state). A vmapped grid equals the
runs one by one, compiles once for the whole grid, composes with ``restarts`` (outside), and
refuses bad values naming the argument.

Tolerances: float64 throughout; the batched program rounds differently from the unbatched one, by
about 1e-12 relatively here (LDA's E-step iterates to a tolerance), so the states are compared
with rtol 1e-8."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax import expfam
from vijax.data import sample_lda_corpus
from vijax.inference import (
    GridState,
    bbvi,
    factory_grid,
    hyperparameter_grid,
    jit_step,
    make_algorithm,
    prox_svi,
    restarts,
    svi,
)
from vijax.models import GLM, LDA

K, V, D = 3, 20, 24
ALPHAS = [0.1, 1.0]
ETAS = [0.05, 0.3]
RTOL = 1e-8  # float64, batched against unbatched rounding


def _batches():
    corpus = sample_lda_corpus(0, num_docs=D, num_topics=K, vocab_size=V, alpha=0.2).corpus
    return [
        jax.tree_util.tree_map(
            lambda a: jnp.asarray(a, jnp.float64) if a.dtype.kind == "f" else a, corpus.batch(range(i, i + 8))
        )
        for i in range(0, D, 8)
    ]


def _lda(alpha=0.1, eta=0.01):
    # without SQUAREM: a smaller program, quicker to compile
    return LDA(K, V, alpha=alpha, eta=eta, max_iters=30, accelerate=False, dtype=jnp.float64)


def _assert_q_close(got, want):
    for u, v in zip(expfam.tree_natural_params(got), expfam.tree_natural_params(want)):
        np.testing.assert_allclose(u, v, rtol=RTOL, atol=1e-12)


@pytest.mark.slow
def test_hyperparameter_grid_equals_runs_one_by_one_and_compiles_once():
    batches, key = _batches(), jax.random.PRNGKey(0)
    model = _lda()
    grid = hyperparameter_grid(svi(model, num_data=D, schedule=0.7), model, alpha=ALPHAS, eta=ETAS)
    traces = []

    def step(k, state, batch):
        traces.append(1)  # a Python side effect: once per trace
        return grid.step(k, state, batch)

    states = grid.init(key)
    assert states.q_global.concentration.shape == (2, K, V)
    np.testing.assert_array_equal(states.hyper["alpha"], ALPHAS)
    jitted = jax.jit(step)
    for i, b in enumerate(batches):
        states, infos = jitted(jax.random.fold_in(key, i), states, b)
    assert len(traces) == 1 and infos.elbo.shape == (2,)
    for g, (a, e) in enumerate(zip(ALPHAS, ETAS)):
        one = svi(_lda(a, e), num_data=D, schedule=0.7)
        s = one.init(key)
        for i, b in enumerate(batches):
            s, info = jax.jit(one.step)(jax.random.fold_in(key, i), s, b)
        _assert_q_close(jax.tree_util.tree_map(lambda u: u[g], states.q_global), s.q_global)
        np.testing.assert_allclose(infos.elbo[g], info.elbo, rtol=RTOL)
    assert not np.allclose(infos.elbo[0], infos.elbo[1])  # the settings do differ


@pytest.mark.slow
def test_restarts_of_a_hyperparameter_grid_equal_restarts_of_each_setting():
    """restarts outside: restart r of point g is restart r of that setting's own restarts (SSVI,
    whose step draws from its key, so that the keys' sharing is checked too)."""
    batches, key = _batches(), jax.random.PRNGKey(1)
    model = _lda()
    alg = restarts(
        hyperparameter_grid(make_algorithm("ssvi", model, num_data=D, schedule=0.7), model, alpha=ALPHAS[:2]), 2
    )
    states = alg.init(key)
    step = jax.jit(alg.step)
    for i, b in enumerate(batches):
        states, infos = step(jax.random.fold_in(key, i), states, b)
    assert infos.elbo.shape == (2, 2)
    for g, a in [(1, ALPHAS[1])]:  # one point (each own program costs a compilation); the other as the first test
        one = restarts(make_algorithm("ssvi", _lda(alpha=a), num_data=D, schedule=0.7), 2)
        s = one.init(key)
        for i, b in enumerate(batches):
            s, info = jax.jit(one.step)(jax.random.fold_in(key, i), s, b)
        _assert_q_close(jax.tree_util.tree_map(lambda u: u[:, g], states.q_global), s.q_global)
        np.testing.assert_allclose(infos.elbo[:, g], info.elbo, rtol=RTOL)


def _glm_data():
    x = jax.random.normal(jax.random.PRNGKey(0), (30, 3), jnp.float64)
    return x, (x[:, 0] > 0).astype(jnp.float64)


@pytest.mark.slow
def test_factory_grid_equals_runs_one_by_one_and_compiles_once():
    x, y = _glm_data()
    model, betas, key = GLM(3, "logistic"), [0.1, 2.0], jax.random.PRNGKey(2)
    make = lambda beta: prox_svi(model, num_data=30, schedule=beta, num_samples=4)
    grid = factory_grid(make, beta=betas)
    traces = []

    def step(k, state, batch):
        traces.append(1)
        return grid.step(k, state, batch)

    jitted = jax.jit(step)
    state = grid.init(key)
    assert isinstance(state, GridState) and state.values["beta"].shape == (2,)
    for i in range(3):
        state, infos = jitted(jax.random.fold_in(key, i), state, (x[10 * i : 10 * i + 10], y[10 * i : 10 * i + 10]))
    assert len(traces) == 1 and infos.elbo.shape == (2,)
    for g, beta in enumerate(betas):
        one = make(beta)
        s = one.init(key)
        for i in range(3):
            s, info = jax.jit(one.step)(
                jax.random.fold_in(key, i), s, (x[10 * i : 10 * i + 10], y[10 * i : 10 * i + 10])
            )
        for u, v in zip(jax.tree_util.tree_leaves(state.state.q_global), jax.tree_util.tree_leaves(s.q_global)):
            np.testing.assert_allclose(u[g], v, rtol=RTOL, atol=1e-12)
        np.testing.assert_allclose(infos.elbo[g], info.elbo, rtol=RTOL)


@pytest.mark.slow  # over CI's per-test budget: factory_grid against one-by-one runs is checked in CI
def test_factory_grid_under_restarts_and_its_batch_checks_under_jit_step():
    """restarts outside: a (restarts, points) grid; a bad batch raises the step's ValueError
    through jit_step (the checks collected inside the vmap, enforced outside it)."""
    x, y = _glm_data()
    grid = factory_grid(lambda beta: prox_svi(GLM(3, "logistic"), num_data=30, schedule=beta), beta=[0.1, 2.0])
    both = restarts(grid, 3)
    step, key = jit_step(both.step), jax.random.PRNGKey(0)
    state, info = step(key, both.init(key), (x[:10], y[:10]))
    assert info.elbo.shape == (3, 2) and state.values["beta"].shape == (3, 2) and np.all(np.isfinite(info.elbo))
    with pytest.raises(ValueError, match="batch label y"):
        step(key, state, (x[:10], y[:10].at[4].set(3.0)))


@pytest.mark.parametrize(
    "values, match",
    [
        ({"alpha": [0.1, 0.2], "eta": [0.1]}, "^eta has 1 values but alpha has 2"),
        ({"gamma": [1.0]}, "^gamma is not a hyperparameter of LDA"),
        ({}, "^values: name at least one hyperparameter"),
        ({"alpha": []}, "^alpha must be a non-empty 1-D sequence"),
        ({"alpha": [[0.1]]}, "^alpha must be a non-empty 1-D sequence"),
        ({"alpha": [0.1, float("nan")]}, "^alpha must be finite"),
        ({"alpha": ["a"]}, "^alpha must be a 1-D sequence"),
        # the model's own checks of its hyperparameters (it ran with every step rejected)
        ({"alpha": [0.1, -1.0]}, "^alpha must be"),
        ({"alpha": [0.0, 0.1]}, "^alpha must be"),
        ({"eta": [0.1, 1e30]}, "^eta must be a finite number in"),  # its ELBO came out +1e27
    ],
)
def test_hyperparameter_grid_errors_name_the_argument(values, match):
    model = _lda()
    with pytest.raises(ValueError, match=match):
        hyperparameter_grid(svi(model, num_data=D), model, **values)


def test_grid_errors_name_alg_model_factory_and_its_arguments():
    model = _lda()
    with pytest.raises(ValueError, match="^alg must be an algorithm"):
        hyperparameter_grid(model, model, alpha=[0.1])
    with pytest.raises(ValueError, match="^model must offer hyperparameters"):
        hyperparameter_grid(svi(model, num_data=D), GLM(3, "logistic"), alpha=[0.1])
    make = lambda beta: prox_svi(GLM(3, "logistic"), num_data=30, schedule=beta)
    with pytest.raises(ValueError, match="^rho is not an argument of factory"):
        factory_grid(make, rho=[0.1])
    with pytest.raises(ValueError, match="^values: name at least one argument"):
        factory_grid(make)
    with pytest.raises(ValueError, match="^schedule must"):  # the factory's own check, on a concrete value
        factory_grid(make, beta=[0.1, -1.0])
    with pytest.raises(ValueError, match="^factory must be a callable"):
        factory_grid(None, beta=[0.1])
    with pytest.raises(ValueError, match=r"^factory\(\.\.\.\) must be an algorithm"):
        factory_grid(lambda beta: beta, beta=[0.1])


def test_factory_grid_keeps_integers_and_names_an_argument_it_cannot_grid():
    """Integers reach the factory as integers (they were turned into floats, so a factory that
    checks for an integer refused a value the user never gave); an argument the factory needs
    concrete (a number of samples sets a shape) is refused at construction, naming it."""
    seen = []

    def make(n):
        seen.append(n)
        return prox_svi(GLM(3, "logistic"), num_data=30, schedule=0.1 * n)

    grid = factory_grid(make, n=[1, 3])
    assert seen[:2] == [1, 3] and all(type(v) is int for v in seen[:2])
    state = grid.init(jax.random.PRNGKey(0))
    assert jnp.issubdtype(state.values["n"].dtype, jnp.integer)
    np.testing.assert_array_equal(state.values["n"], [1, 3])

    def log_density(params, batch):
        return -0.5 * jnp.sum(params["z"] ** 2)

    with pytest.raises(ValueError, match=r"^n cannot be gridded: .*num_samples must be an integer .*lock_step"):
        factory_grid(lambda n: bbvi(log_density, init_params={"z": jnp.zeros(2)}, num_samples=n), n=[1, 2])
