"""What a traced step's batch checks cost, and that the cheaper form still names every bad value.

A good batch costs one fused reduction per check: the checks' arrays are built again inside the
``lax.cond`` that locates a failure, never passed into it, and a check covered by another
(``ValueCheck.covered_by``: the finiteness of [x, x**2] features, covered by their match) is
computed only there. The timings are in ``benchmarks/check_overhead.py``; here: the program's
structure, and the errors (value, position, step) for features under ``jax.jit`` and ``jit_step``.
"""

from __future__ import annotations

import re

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest

from vijax._validate import enforce_value_checks, finite_values, ids_in_range, values_match
from vijax.inference import cavi, jit_step
from vijax.models import DiagonalGMM

X = np.random.default_rng(0).normal(size=(40, 3))


def _started(dim=3):
    model = DiagonalGMM(2, dim)
    feats = model.features(jnp.asarray(X[:, :dim]))
    alg = cavi(model)
    return model, alg, alg.init(jax.random.PRNGKey(0), feats), feats


def _cond_operands(jaxpr):
    """The shapes and dtypes of every operand of every ``cond`` in ``jaxpr`` (nested ones too)."""
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "cond":
            out += [(tuple(v.aval.shape), v.aval.dtype) for v in eqn.invars[1:]]
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            out += _cond_operands(sub)
    return out


def test_located_branch_rebuilds_the_checks_instead_of_taking_their_arrays():
    """Traced with a function that builds the checks, the locating ``lax.cond`` takes the batch,
    not a bool array of its shape (nor a slice of it); given a list, it takes the checks' arrays."""
    x = jnp.asarray(X)

    def checks(b):
        return [finite_values("x", b), values_match("x half", b[:, 1:], b[:, :2] ** 2, "the square")]

    def built(b):
        enforce_value_checks(lambda: checks(b))
        return b

    def listed(b):
        enforce_value_checks(checks(b))
        return b

    def large(f):  # the conds' operands with a row per datum
        return [(s, dt) for s, dt in _cond_operands(jax.make_jaxpr(f)(x).jaxpr) if s and s[0] == x.shape[0]]

    assert large(built) == [(x.shape, x.dtype)]  # the batch itself, nothing computed from it
    assert (x.shape, jnp.dtype(bool)) in large(listed)  # a list's arrays: computed at every step


def test_covered_check_is_not_reduced_at_a_good_step():
    """The step's program reduces the features' match only: of the two checks, one reduction of a
    bool array the batch's size outside the locating cond (the finiteness is computed there only)."""
    model, alg, state, feats = _started()
    checks = model.batch_checks(feats)
    assert [c.covered_by for c in checks] == ["batch feature x**2", None]
    jaxpr = jax.make_jaxpr(lambda k, s, b: alg.step(k, s, b))(jax.random.PRNGKey(1), state, feats).jaxpr
    reduced = [
        tuple(e.invars[0].aval.shape)
        for e in jaxpr.eqns
        if e.primitive.name == "reduce_or" and e.invars[0].aval.size >= feats.shape[0]
    ]
    assert reduced == [(feats.shape[0], 3)], reduced


@pytest.mark.parametrize(
    "where, value, words",
    [
        ((5, 1), np.nan, "batch x nan at [5, 1] is not finite (in step 1)"),
        ((7, 0), np.inf, "batch x inf at [7, 0] is not finite (in step 1)"),  # x inf, its square finite
        ((3, 4), -np.inf, "batch x -inf at [3, 4] is not finite (in step 1)"),
        ((9, 5), 7.0, "batch feature x**2 7.0 at [9, 2] is not the square of its data column"),
    ],
)
@pytest.mark.parametrize("how", ["jit", "jit_step"])
def test_bad_features_are_named_with_position_and_step(where, value, words, how):
    """Either half of [x, x**2] non-finite (the finiteness check, covered by the match, is still the
    error), or a square that is not one: named with the value, the position and the step."""
    _, alg, state, feats = _started()
    bad = feats.at[where].set(value)
    step = jax.jit(alg.step) if how == "jit" else jit_step(alg.step)
    error = jax.errors.JaxRuntimeError if how == "jit" else ValueError
    with pytest.raises(error, match=re.escape(words)):
        jax.block_until_ready(step(jax.random.PRNGKey(1), state, bad))
    out = step(jax.random.PRNGKey(1), state, feats)  # the same program takes a good batch
    assert bool(out[1].accepted)
    if how == "jit_step":
        assert step.check_mode() == "collected"


def test_values_match_fails_where_either_side_is_not_finite():
    """No finite value matches an infinite one (the tolerance is capped), and NaN matches nothing."""
    x = jnp.array([1.0, 1.0, np.inf, np.nan, np.inf, 4.0])
    e = jnp.array([np.inf, np.nan, 1.0, 1.0, np.inf, 4.0])
    np.testing.assert_array_equal(np.asarray(values_match("x", x, e, "e").bad), [True] * 5 + [False])


def _primitives(jaxpr, inside_cond=False):
    """The names of the primitives of ``jaxpr`` (nested ones too), those inside a ``cond`` only."""
    out = []
    for eqn in jaxpr.eqns:
        if inside_cond:
            out.append(eqn.primitive.name)
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            out += _primitives(sub, inside_cond or eqn.primitive.name == "cond")
    return out


def test_check_of_closed_over_data_is_located_behind_a_barrier():
    """Data a ``jit`` closes over is a constant of its program: the locating branch's argmax over a
    check of it would be evaluated by XLA's constant folding, one element at a time (seconds for
    150,000 ids). The branch takes the checks' flags through an optimization barrier, and a bad id
    of such data is still named with its position."""
    ids = np.random.default_rng(0).integers(0, 100, size=(30, 50)).astype(np.int32)
    bad_ids = ids.copy()
    bad_ids[2, 5] = 100

    def scorer(data):
        def f(y):
            enforce_value_checks(lambda: [ids_in_range("ids", jnp.asarray(data), 100), finite_values("y", y)])
            return y + 1.0

        return f

    y = jnp.ones(3)
    assert "optimization_barrier" in _primitives(jax.make_jaxpr(scorer(ids))(y).jaxpr, inside_cond=True)
    np.testing.assert_array_equal(np.asarray(jax.jit(scorer(ids))(y)), 2.0)
    with pytest.raises(Exception, match=re.escape("ids") + ".*" + re.escape("[2, 5]")):
        jax.block_until_ready(jax.jit(scorer(bad_ids))(y))


@pytest.mark.parametrize(
    "where, value",
    [((0, 0), np.nan), ((0, 5), 7.0), ((17, 4), np.inf), ((38, 1), -np.inf), ((39, 5), 7.0), ((39, 2), np.nan)],
)
def test_large_check_is_located_a_block_of_rows_at_a_time(monkeypatch, where, value):
    """A check larger than ``_LOCATE_BLOCK`` entries is searched in blocks of rows inside the
    locating branch (a ``while_loop``, the last block shifted back to end at the last row); the
    error under ``jax.jit`` names the same value, position and step as the eager step's, for a bad
    entry in the first, a middle or the last block, and the first of two bad entries."""
    from vijax._validate import _values

    _, alg, state, feats = _started()
    bad = feats.at[where].set(value).at[39, 0].set(np.nan)  # a second, later failure
    key = jax.random.PRNGKey(1)
    with pytest.raises(ValueError) as eager:
        alg.step(key, state, bad)
    monkeypatch.setattr(_values, "_LOCATE_BLOCK", 14)  # 40 x 6 features: blocks of 2 rows (4 for the squares)
    assert "while" in _primitives(jax.make_jaxpr(alg.step)(key, state, feats).jaxpr, inside_cond=True)
    step = jax.jit(lambda k, s, b: alg.step(k, s, b))  # traced here, with the small block
    with pytest.raises(jax.errors.JaxRuntimeError, match=re.escape(str(eager.value))):
        jax.block_until_ready(step(key, state, bad))
    assert bool(step(key, state, feats)[1].accepted)


def test_locating_branch_memory_does_not_grow_with_a_large_check(monkeypatch):
    """The branch that locates a failure holds one block of a large check's flags, not the whole
    check: XLA allocates a program's temporaries, its branches' included, at every call. The plain
    ``jax.jit`` step's temporary memory stays within a few blocks of the unchecked step's (with
    the whole check's flags it was 480 kB more for these 20,000 x 16 features)."""
    from vijax._validate import _values
    from vijax.inference import with_value_checks

    monkeypatch.setattr(_values, "_LOCATE_BLOCK", 4096)
    model = DiagonalGMM(2, 8)
    feats = model.features(jnp.asarray(np.random.default_rng(1).normal(size=(20_000, 8))))
    alg = cavi(model)
    state, key = alg.init(jax.random.PRNGKey(0), feats), jax.random.PRNGKey(1)

    def temp_bytes(a):
        lowered = jax.jit(lambda k, s, b: a.step(k, s, b)).lower(key, state, feats)
        return lowered.compile().memory_analysis().temp_size_in_bytes

    checked, unchecked = temp_bytes(alg), temp_bytes(with_value_checks(alg, False))
    assert checked - unchecked < 4 * 4096, (checked, unchecked)


def test_large_check_is_located_in_blocks_under_vmap(monkeypatch):
    """Vmapped over batches, the locating branch runs as a select of both branches and its block
    search as a batched loop: the bad member is named as the eager step names it, and a stack of
    good batches is accepted."""
    from vijax._validate import _values

    _, alg, state, feats = _started()
    bad = feats.at[39, 5].set(7.0)
    key = jax.random.PRNGKey(1)
    with pytest.raises(ValueError) as eager:
        alg.step(key, state, bad)
    monkeypatch.setattr(_values, "_LOCATE_BLOCK", 14)
    step = jax.jit(jax.vmap(lambda b: alg.step(key, state, b)))
    with pytest.raises(jax.errors.JaxRuntimeError, match=re.escape(str(eager.value))):
        jax.block_until_ready(step(jnp.stack([feats, bad])))
    np.testing.assert_array_equal(np.asarray(step(jnp.stack([feats, feats]))[1].accepted), [True, True])
