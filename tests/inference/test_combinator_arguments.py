"""The arguments of ``lock_step`` and ``replace_elbo`` are checked where they are given (at
construction, ``init`` or the step's trace), naming the argument, never inside the compiled step."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import pytest

from vijax.inference import VIAlgorithm, lock_step, replace_elbo, restarts


class Info(NamedTuple):
    elbo: jax.Array


def _toy():
    """x <- x / 2, reporting -|x|^2: a step with nothing to compile but its shapes."""
    return VIAlgorithm(lambda key, batch=None: jnp.ones(3), lambda k, x, b: (0.5 * x, Info(-jnp.sum(x**2))))


def _shapes(alg):
    key = jax.random.PRNGKey(0)
    return jax.eval_shape(alg.step, key, alg.init(key), None)


@pytest.mark.parametrize("names", [{1: 0, 2: 1}, {"a": 0, 2: 1}, {"elbo": 0}], ids=["ints", "mixed", "elbo"])
def test_lock_step_refuses_names_that_are_not_strings_or_elbo(names):
    """Integer names failed inside the jitted step, where JAX sorts the info dict's keys beside
    "elbo"; a name "elbo" was overwritten by the primary's ELBO."""
    with pytest.raises(ValueError, match=r"^algorithms: every name must be a string other than 'elbo'"):
        lock_step({name: _toy() for name in names})
    state, info = _shapes(lock_step({"a": _toy(), "b": _toy()}, info_fields="elbo"))
    assert sorted(info) == ["a", "b", "elbo"] and sorted(info["a"]) == ["elbo"]


@pytest.mark.parametrize("elbo_fn", [None, 3, "elbo"], ids=["none", "int", "str"])
def test_replace_elbo_refuses_an_elbo_fn_that_is_not_a_function(elbo_fn):
    with pytest.raises(ValueError, match=r"^elbo_fn must be a function state -> ELBO"):
        replace_elbo(_toy(), elbo_fn)


def test_replace_elbo_refuses_what_it_cannot_wrap_and_values_of_another_shape():
    with pytest.raises(ValueError, match=r"^alg must be an algorithm"):
        replace_elbo(None, jnp.sum)
    with pytest.raises(ValueError, match=r"^alg is a lock_step of several algorithms.*before lock_step"):
        replace_elbo(lock_step({"a": _toy(), "b": _toy()}), jnp.sum)
    with pytest.raises(ValueError, match=r"^elbo_fn must return one real array .*got tuple"):
        replace_elbo(_toy(), lambda x: (x, x)).init(jax.random.PRNGKey(0))
    vector = replace_elbo(_toy(), lambda x: -x)  # one value per coordinate: not the run's scalar ELBO
    with pytest.raises(ValueError, match=r"^elbo_fn must return an array shaped like the algorithm's info.elbo, \(\)"):
        _shapes(vector)
    untyped = VIAlgorithm(lambda key, batch=None: jnp.ones(3), lambda k, x, b: (x, {"elbo": jnp.sum(x)}))
    with pytest.raises(ValueError, match=r"^alg's step must report an info NamedTuple with an elbo field"):
        _shapes(replace_elbo(untyped, jnp.sum))
    # a scalar per state; (R,) outside restarts, which vmaps the step
    assert _shapes(replace_elbo(_toy(), lambda x: 1.0))[1].elbo.shape == ()
    assert _shapes(restarts(replace_elbo(_toy(), jnp.sum), 2))[1].elbo.shape == (2,)
    assert _shapes(replace_elbo(restarts(_toy(), 2), lambda x: jnp.sum(x, -1)))[1].elbo.shape == (2,)
