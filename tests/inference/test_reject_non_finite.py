"""``reject_non_finite``: a non-finite step keeps the old state, is counted and still advances
``count``; every factory applies it, so a NaN batch met by an unchecked step is rejected."""

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vijax.inference import GuardedInfo, GuardedState, VIAlgorithm, make_algorithm, reject_non_finite, with_value_checks
from vijax.models import GLM, CategoricalHMM, UnivariateGMM

KEY = jax.random.PRNGKey(0)


class ToyState(NamedTuple):
    x: jax.Array
    count: jax.Array


class ToyInfo(NamedTuple):
    elbo: jax.Array
    step_size: jax.Array


def _toy(is_valid=None):
    """x <- log(x - batch): finite for batch < x; an infinite elbo for batch = inf."""

    def init(key, batch=None):
        return ToyState(jnp.full(3, 2.0), jnp.zeros((), jnp.int32))

    def step(key, state, batch):
        new = jnp.log(state.x - batch)
        return ToyState(new, state.count + 1), ToyInfo(-jnp.sum(new), jnp.asarray(0.5))

    return reject_non_finite(VIAlgorithm(init, step), is_valid=is_valid)


def test_a_non_finite_step_keeps_the_old_state_and_is_counted():
    alg = _toy()
    state = alg.init(KEY)
    assert isinstance(state, GuardedState) and int(state.num_rejected) == 0
    good, info = jax.jit(alg.step)(KEY, state, 1.0)
    assert isinstance(info, GuardedInfo) and bool(info.accepted)
    np.testing.assert_allclose(good.x, np.zeros(3))
    bad, info = jax.jit(alg.step)(KEY, good, jnp.asarray([0.0, 1.0, 0.0]))  # log(0) = -inf in one entry
    assert not bool(info.accepted) and int(bad.num_rejected) == 1 and int(bad.count) == 2
    np.testing.assert_array_equal(bad.x, good.x)  # every leaf kept, the -inf never leaks in
    assert bad._fields == ("x", "count", "num_rejected") and info._fields == ("elbo", "step_size", "accepted")
    assert bad._replace(x=jnp.ones(3)).inner.x.tolist() == [1.0] * 3  # an inner field: replaced in the inner
    with pytest.raises(AttributeError):
        getattr(bad, "no_such_field")  # noqa: B009


def test_count_saturates_and_a_bare_inner_state_comes_back_bare():
    alg = _toy()
    top = ToyState(jnp.full(3, 2.0), jnp.asarray(jnp.iinfo(jnp.int32).max, jnp.int32))
    state, info = alg.step(KEY, top, 1.0)  # a state made by hand: stepped, returned as it came
    assert type(state) is ToyState and int(state.count) == jnp.iinfo(jnp.int32).max and bool(info.accepted)
    scanned, _ = jax.lax.scan(lambda s, k: (alg.step(k, s, 1.0)[0], None), top, jax.random.split(KEY, 3))
    assert type(scanned) is ToyState  # the carry keeps its structure
    state, info = alg.step(KEY, alg.init(KEY), 1.0)
    assert int(state.num_rejected) == 0
    with pytest.raises(ValueError, match="the \\(state, info\\) pair"):
        alg.step(KEY, (state, info), 1.0)


def test_is_valid_is_one_more_condition():
    alg = _toy(is_valid=lambda old, new, info: jnp.all(new.x < 0.5))
    state, info = alg.step(KEY, alg.init(KEY), 0.0)  # log 2 > 0.5: refused
    assert not bool(info.accepted) and int(state.num_rejected) == 1
    np.testing.assert_array_equal(state.x, np.full(3, 2.0))


def test_pytree_keys_are_the_inner_fields_and_the_trace_columns_unchanged():
    import vijax.run

    alg = _toy()
    paths = lambda t: [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(t)[0]]  # noqa: E731
    state, info = alg.step(KEY, alg.init(KEY), 1.0)
    assert paths(state) == [".x", ".count", ".num_rejected"]
    assert paths(info) == [".elbo", ".step_size", ".accepted"]
    with pytest.warns(RuntimeWarning, match="rejected"):  # x: 2, log 2, log log 2 < 0, then a NaN
        res = vijax.run.run(alg, KEY, batch_fn=lambda k, t: jnp.zeros(()), config=vijax.run.RunConfig(num_steps=3))
    assert sorted(res.trace) == ["accepted", "elbo", "step", "step_size"]
    assert res.trace["accepted"].tolist() == [True, True, False]
    assert int(res.state.count) == 3 and int(res.state.num_rejected) == 1


X = jnp.concatenate([jnp.full(20, -4.0), jnp.full(20, 4.0)])
CASES = {  # an algorithm, a model it takes, a batch with one NaN
    "cavi": (UnivariateGMM(num_components=2), X),
    "svi": (UnivariateGMM(num_components=2), X),
    "ssvi": (UnivariateGMM(num_components=2), X),
    "ssvi_a": (UnivariateGMM(num_components=2), X),
    "map": (UnivariateGMM(num_components=2), X),
    "prox_svi": (GLM(2), (jnp.ones((40, 2)), jnp.ones(40))),
    "em": (CategoricalHMM(2, 3), None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_algorithm_rejects_a_nan_batch_its_unchecked_step_meets(name):
    model, batch = CASES[name]
    if name == "em":
        alg = with_value_checks(make_algorithm("em", model, num_data=4), False)
        state = alg.init(KEY, jnp.arange(20).reshape(4, 5) % 3)
        # the HMM's emission parameters made NaN by hand: the E-step gives NaN everywhere
        state = state._replace(q_global=jax.tree.map(lambda a: jnp.full_like(a, jnp.nan), state.q_global))
        new, info = alg.step(KEY, state, jnp.arange(20).reshape(4, 5) % 3)
    else:
        schedule = None if name == "cavi" else 0.5
        alg = with_value_checks(make_algorithm(name, model, num_data=40, schedule=schedule), False)
        state = alg.init(KEY, batch)
        bad = jax.tree.map(lambda a: a.at[(3,) + (0,) * (a.ndim - 1)].set(jnp.nan), batch)
        new, info = jax.jit(alg.step)(KEY, state, bad)
    assert not bool(info.accepted) and int(new.num_rejected) == 1 and int(new.count) == 1
    chex.assert_trees_all_equal(new.q_global, state.q_global)
