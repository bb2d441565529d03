"""The runner's compiled chunk: a ``lax.scan`` of ``chunk_size`` steps, its captured arrays as
arguments, its steps' value checks as outputs (``vijax.run.run``'s module docstring)."""

from __future__ import annotations

from typing import Callable, Optional

import jax
import jax.numpy as jnp
from jax.extend.core import ClosedJaxpr, jaxpr_as_fun
import numpy as np

from vijax._validate import NestedValueCheck, collecting_checks, is_tracer, raise_collected
from vijax.inference import jit_step


class _Rehoist(Exception):
    """Raised while a chunk is traced when its step captures large arrays not yet its arguments."""

    def __init__(self, arrays):
        super().__init__("the step captures large arrays; tracing again with them as arguments")
        self.arrays = arrays


STEP_CONSTANT_MIN_SIZE = 100  # a step's captured arrays with at least this many elements become chunk arguments


class _Chunk:
    """The compiled chunk with the batch function's and the step's captured arrays bound as its
    first arguments: ``chunk(state, step_base, t0, t_end, host)`` and ``chunk.lower(...)``.

    The step's large captured arrays (``STEP_CONSTANT_MIN_SIZE`` elements or more: a model's data,
    GP classification's N x N kernel matrix and its Cholesky factor) are found when the chunk is
    first traced: the step is traced to a jaxpr, and if it captures such arrays that are not yet
    arguments, the tracing stops (``_Rehoist``) and starts again with them as arguments, once.
    Without this they would be constants in the program, which then grows with the data (19 MB of
    program text for GP classification on usps) and is copied into every program.

    With value checks, each step's checks are collected as outputs of the scan
    (``vijax._validate.collected_value_checks``, one row per step: per check, its bad entries, or for a
    large batch a flag per row; no reduction across rows, so none across the devices of a sharded
    batch); on a
    failure the chunk runs again from the same arguments in a program that also returns the first
    failure's position, value and step, and raises its error (compiled only then). Where
    a step's checks sit below its own level (under the ``vmap`` of restarts) the tracing stops
    (``NestedValueCheck``) and the chunk is compiled by ``jit_step`` instead (checkify checks, or
    host callbacks where checkify cannot transform it)."""

    def __init__(self, make_jit: Callable, consts: tuple, collect: bool):
        self.make_jit, self.consts, self.step_consts, self.collect = make_jit, consts, (), collect
        self.fn = make_jit(self.step_consts, collect)
        self.located = None  # the chunk returning located checks, compiled at a first failure

    def _apply(self, lower: bool, args):
        for _ in range(3):  # at most one re-hoist and one change of the checks' way
            try:
                out = (self.fn.lower if lower else self.fn)(self.consts, self.step_consts, *args)
                break
            except _Rehoist as e:  # at most once: the new chunk embeds what it cannot match
                self.step_consts = tuple(e.arrays)
            except NestedValueCheck:
                self.collect = False
            self.fn = self.make_jit(self.step_consts, self.collect)
        if lower:
            return out
        state, (infos, checks) = out
        if checks is not None:
            raise_collected(checks, lambda: self._located()(self.consts, self.step_consts, *args)[1][1])
        return state, infos

    def _located(self):
        """The chunk returning located checks, compiled at a first failure only."""
        if self.located is None:
            self.located = self.make_jit(self.step_consts, self.collect, locate=True)
        return self.located

    def __call__(self, *args):
        return self._apply(False, args)

    def lower(self, *args):
        return self._apply(True, args)


def _step_with_arguments(
    step_fn: Callable, hoisted: tuple, step_consts: tuple, collect: bool, locate: bool = False
) -> Callable:
    """``step_fn`` traced to a jaxpr whose captured arrays that are in ``hoisted`` (by identity) are
    replaced by ``step_consts`` (the chunk's arguments for them). With nothing hoisted yet, a large
    captured array raises ``_Rehoist``; once some are, any other stays a constant. Returns
    ``(step_fn's outputs, checks)``: with ``collect``, its value checks' results
    (``collected_value_checks(locate)``), else None."""

    def traced(*args):
        if not collect:
            return step_fn(*args), None
        return collecting_checks(step_fn, locate)(*args)

    def step(state, batch, key):
        # a function of its own at every trace: make_jaxpr caches traces by function, and the value
        # checks trace differently under checkify and in jit_step's fallback
        closed, out = jax.make_jaxpr(lambda *a: traced(*a), return_shape=True)(state, batch, key)
        consts = list(closed.consts)
        large = [c for c in consts if not is_tracer(c) and np.size(c) >= STEP_CONSTANT_MIN_SIZE]
        if large and not hoisted:
            raise _Rehoist(large)
        for i, c in enumerate(consts):
            for h, arg in zip(hoisted, step_consts):
                if c is h:
                    consts[i] = arg
        flat = jaxpr_as_fun(ClosedJaxpr(closed.jaxpr, consts))(*jax.tree.leaves((state, batch, key)))
        return jax.tree.unflatten(jax.tree.structure(out), flat)

    return step


def _hoist_constants(batch_fn: Callable, step_base) -> tuple[Callable, tuple]:
    """``(batch_of(consts, key, t), consts)``: ``batch_fn`` with the arrays it captures (e.g. the
    full data set of a batch algorithm, ``lambda key, t: y``) made arguments. Captured arrays
    would otherwise be embedded in the compiled chunk as constants, and XLA folds what depends on
    them at compile time: the default experiment's chunk took 12.6 s to compile with its 1000 x 100
    data as a constant (2.1 MB of program text), 7.8 s with it as an argument (0.5 MB)."""
    key = jax.eval_shape(lambda b: jax.random.split(jax.random.fold_in(b, 0))[0], step_base)
    closed, out = jax.make_jaxpr(batch_fn, return_shape=True)(key, jax.ShapeDtypeStruct((), jnp.int32))
    tree = jax.tree.structure(out)

    def batch_of(consts, batch_key, t):
        return jax.tree.unflatten(tree, jaxpr_as_fun(ClosedJaxpr(closed.jaxpr, list(consts)))(batch_key, t))

    return batch_of, tuple(closed.consts)


def _make_chunk_fn(
    step_fn: Callable, batch_fn: Optional[Callable], chunk_size: int, step_base, checked: bool = False
) -> "_Chunk":
    """The jitted ``(state, step_base, t0, t_end, host) -> (state, stacked infos)`` of one chunk.

    ``host`` is None with a ``batch_fn``, or the chunk's stacked host batches (leading axis
    ``chunk_size``) that the scan walks through. The arrays ``batch_fn`` captures are arguments of
    the compiled chunk, not constants in it (``_hoist_constants``), and so are the step's large
    captured arrays (``_Chunk``). With ``checked`` (the run's ``check_values``), each step's value
    checks are collected as outputs of the scan and raised after the call (``_Chunk``; checkify
    checks where a step's checks sit deeper), so that the compiled program has no host callback:
    JAX's persistent compilation cache stores no program with one, and a second run would compile
    again."""
    batch_of, consts = (None, ()) if batch_fn is None else _hoist_constants(batch_fn, step_base)

    def make_jit(hoisted: tuple, collect: bool, locate: bool = False):
        def chunk(consts, step_consts, state, step_base, t0, t_end, host):
            ts = t0 + jnp.arange(chunk_size, dtype=jnp.int32)
            step = _step_with_arguments(step_fn, hoisted, step_consts, collect, locate)

            def body(state, xs):
                t, host_batch = xs
                batch_key, step_key = jax.random.split(jax.random.fold_in(step_base, t))
                batch = batch_of(consts, batch_key, t) if host_batch is None else host_batch
                (new_state, info), checks = step(state, batch, step_key)
                active = t < t_end
                state = jax.tree.map(lambda new, old: jnp.where(active, new, old), new_state, state)
                # a step past t_end is not applied: nor are its checks (located ones, as in a run of
                # several processes, have a "failed" flag; unlocated ones their bad entries)
                if checks is not None and "failed" in checks:
                    checks = {**checks, "failed": checks["failed"] & active}
                elif checks is not None:
                    checks = {"rows": [r & active for r in checks["rows"]]}
                return state, (info, checks)

            return jax.lax.scan(body, state, (ts, host))

        return jax.jit(chunk) if collect or not checked else jit_step(chunk)

    return _Chunk(make_jit, consts, checked)
