"""The runner's compiled chunk: a ``lax.scan`` of ``chunk_size`` steps, its batch function's
captured arrays and its step's settings' arrays as arguments, its steps' value checks as outputs (``vijax.run.run``'s module docstring)."""

from __future__ import annotations

from typing import Callable, Optional

import jax
import jax.numpy as jnp
from jax.extend.core import ClosedJaxpr, jaxpr_as_fun

from vijax._validate import NestedValueCheck, collecting_checks, raise_collected
from vijax.inference import jit_step
from vijax.models import split_arrays


class _Chunk:
    """The compiled chunk with the batch function's captured arrays and the step's arrays bound as
    its first arguments: ``chunk(state, step_base, t0, t_end, host)`` and ``chunk.lower(...)``.

    A step built by a factory is a pytree (``vijax.inference.bind_settings``) holding its model;
    the model's arrays (a GP classifier's N x N kernel matrix and its Cholesky factor, a network's
    weights) are the chunk's arguments (``vijax.models.split_arrays``), not constants in it: the program does
    not grow with the data (it was 19 MB of text for GP classification on usps with them as
    constants) and is not copied with them into every program.

    With value checks, each step's checks are collected as outputs of the scan
    (``vijax._validate.collected_value_checks``, one row per step: per check, its bad entries, or for a
    large batch a flag per row; no reduction across rows, so none across the devices of a sharded
    batch); on a failure the chunk runs again from the same arguments in a program that also
    returns the first failure's position, value and step, and raises its error (compiled only
    then). Where a step's checks sit below its own level (under the ``vmap`` of restarts) the
    tracing stops (``NestedValueCheck``) and the chunk is compiled by ``jit_step`` instead
    (checkify checks, or host callbacks where checkify cannot transform it)."""

    def __init__(self, make_jit: Callable, consts: tuple, step_arrays: list, collect: bool):
        self.make_jit, self.consts, self.step_arrays, self.collect = make_jit, consts, step_arrays, collect
        self.fn = make_jit(collect)
        self.located = None  # the chunk returning located checks, compiled at a first failure

    def _apply(self, lower: bool, args):
        try:
            out = (self.fn.lower if lower else self.fn)(self.consts, self.step_arrays, *args)
        except NestedValueCheck:  # at most once: the checks' other way
            self.collect = False
            self.fn = self.make_jit(self.collect)
            out = (self.fn.lower if lower else self.fn)(self.consts, self.step_arrays, *args)
        if lower:
            return out
        state, (infos, checks) = out
        if checks is not None:
            raise_collected(checks, lambda: self._located()(self.consts, self.step_arrays, *args)[1][1])
        return state, infos

    def _located(self):
        """The chunk returning located checks, compiled at a first failure only."""
        if self.located is None:
            self.located = self.make_jit(self.collect, locate=True)
        return self.located

    def __call__(self, *args):
        return self._apply(False, args)

    def lower(self, *args):
        return self._apply(True, args)


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
    the compiled chunk, not constants in it (``_hoist_constants``), and so are the arrays of a
    bound step's settings (``_Chunk``). With ``checked`` (the run's ``check_values``), each step's value
    checks are collected as outputs of the scan and raised after the call (``_Chunk``; checkify
    checks where a step's checks sit deeper), so that the compiled program has no host callback:
    JAX's persistent compilation cache stores no program with one, and a second run would compile
    again."""
    batch_of, consts = (None, ()) if batch_fn is None else _hoist_constants(batch_fn, step_base)
    step_arrays, rebuild_step = split_arrays(step_fn)

    def make_jit(collect: bool, locate: bool = False):
        def chunk(consts, step_arrays, state, step_base, t0, t_end, host):
            ts = t0 + jnp.arange(chunk_size, dtype=jnp.int32)
            bound = rebuild_step(step_arrays)

            def step(key, state, batch):
                if not collect:
                    return bound(key, state, batch), None
                return collecting_checks(bound, locate)(key, state, batch)

            def body(state, xs):
                t, host_batch = xs
                batch_key, step_key = jax.random.split(jax.random.fold_in(step_base, t))
                batch = batch_of(consts, batch_key, t) if host_batch is None else host_batch
                (new_state, info), checks = step(step_key, state, batch)
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

        # XLA's settings: the process's (RunConfig.fast_cpu_compile), as for the jax.jit chunks
        return jax.jit(chunk) if collect or not checked else jit_step(chunk, cpu_compile="xla")

    return _Chunk(make_jit, consts, step_arrays, checked)
