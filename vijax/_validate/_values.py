"""Checks of the values of a step's batch, eager or traced (see the package docstring and
docs/design.md, "Checked steps")."""

from __future__ import annotations

import contextlib
import zlib
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import get_opaque_trace_state

from ._args import check_bool, is_tracer


_VALUE_CHECKS = [True]
_FUNCTIONAL = [False]


def value_checks_enabled() -> bool:
    """Whether the value checks traced now are on (``value_checks``' innermost block; on outside any)."""
    return _VALUE_CHECKS[0]


def value_checks(enabled: bool):
    """Context manager: the value checks traced within the block on or off (``jit_step(check_values=)``).

    Examples:
        >>> with value_checks(False):
        ...     value_checks_enabled()
        False
    """
    return _setting(_VALUE_CHECKS, check_bool("enabled", enabled))


def functional_value_checks():
    """Context manager for code traced under ``checkify``: a traced value check in the block is a
    ``checkify.check``, not a host callback (which JAX's persistent compilation cache refuses to store)."""
    return _setting(_FUNCTIONAL, True)


@contextlib.contextmanager
def _setting(flag: list, value: bool):
    before, flag[0] = flag[0], value
    try:
        yield
    finally:
        flag[0] = before


def raise_check_error(error) -> None:
    """Raises the first failed check of a ``checkify`` error as the ValueError a concrete batch gets."""
    from jax.experimental import checkify

    try:
        error.throw()
    except checkify.JaxRuntimeError as e:
        raise ValueError(str(e).split(" (`check` failed)")[0].strip()) from None


class NestedValueCheck(Exception):
    """Raised by a traced value check below a ``collected_value_checks`` block's own trace (a loop, ``vmap``)."""


_RAW_FLAGS_MAX = 1 << 16  # an unlocated check's bad entries returned as they are up to this many
_COLLECTORS: list = []  # the active collected_value_checks blocks, innermost last
_REPORTS: dict = {}  # a collected program's report key -> its checks' (names, requirements, shapes, counted)


class _Collector:
    """The traced value checks of one ``collected_value_checks`` block."""

    def __init__(self, locate: bool = True, gate: Any = None):
        self.trace = get_opaque_trace_state(convention="vijax")  # equal states: the same trace level
        self.locate = locate
        self.gate = gate  # unlocated checks: a traced bool, whether to compute them at all (see add_rows)
        self.groups = []  # per enforce_value_checks call: (meta, flags, firsts, values, count)
        self.rows = []  # unlocated: per check, its bad entries (a large check's: per row)

    def _at_own_level(self) -> None:
        if get_opaque_trace_state(convention="vijax") != self.trace:
            raise NestedValueCheck("a traced value check below the collected_value_checks block's own trace")

    def add_rows(self, bads_of: Callable[[], list]) -> None:
        """Unlocated checks' bad entries (``bads_of()``), per row above ``_RAW_FLAGS_MAX`` (never reduced across
        rows: no collective for a sharded batch), under a ``lax.cond`` on ``gate`` where one is given."""
        self._at_own_level()

        def rows():
            return [
                b if b.ndim < 2 or b.size <= _RAW_FLAGS_MAX else jnp.any(b.reshape(b.shape[0], -1), axis=1)
                for b in (jnp.asarray(b) for b in bads_of())
                if b.size
            ]

        if self.gate is None:
            self.rows.extend(rows())
            return
        shapes = jax.eval_shape(rows)
        self.rows.extend(jax.lax.cond(self.gate, rows, lambda: [jnp.zeros(r.shape, r.dtype) for r in shapes]))

    def add(self, names, shapes, flags, firsts, values, count) -> None:
        self._at_own_level()
        meta = (tuple(names), tuple(shapes), count is not None)
        count = jnp.zeros((), jnp.int32) if count is None else jnp.asarray(count)
        self.groups.append((meta, flags, firsts, values, count))

    def results(self) -> dict:
        if not self.locate:
            return {"rows": self.rows + [f for g in self.groups for f in g[1]]}
        metas = tuple(g[0] for g in self.groups)
        key = zlib.crc32(repr(metas).encode()) & 0x7FFFFFFF  # stable across processes: the same program text
        if _REPORTS.setdefault(key, metas) != metas:  # never seen; wrong words would be worse than stopping
            raise RuntimeError(f"two sets of value checks share the report key {key}: {metas} and {_REPORTS[key]}")
        flags = [f for g in self.groups for f in g[1]]
        return {
            "failed": jnp.any(jnp.stack(flags)) if flags else jnp.zeros((), bool),
            "key": jnp.asarray(key, jnp.int32),
            "groups": [g[1:] for g in self.groups],
        }


@contextlib.contextmanager
def collected_value_checks(locate: bool = True, gate: Any = None):
    """Context manager inside a traced function: a traced value check in the block is collected as arrays that
    ``sink.results()`` returns as outputs, raised after the call by ``raise_collected``. ``locate=False``
    collects only the bad entries (``collected_failed``; several processes always locate); ``gate``: a traced
    bool, whether the unlocated checks are computed."""
    sink = _Collector(locate or jax.process_count() > 1, gate)
    _COLLECTORS.append(sink)
    try:
        yield sink
    finally:
        _COLLECTORS.pop()


def collecting_checks(fn: Callable, locate: bool = True, gated: bool = False) -> Callable:
    """``fn`` returning ``(outputs, value checks' results)`` of a ``collected_value_checks`` block (``gated``: the
    block's ``gate`` is its last argument)."""

    def run(*args, **kwargs):
        gate = args[-1] if gated else None
        with collected_value_checks(locate, gate) as sink:
            out = fn(*(args[:-1] if gated else args), **kwargs)
        return out, sink.results()

    return run


def collected_failed(results: dict) -> bool:
    """Whether any check of ``collected_value_checks(locate=False)``' results failed."""
    return any(bool(np.asarray(r).any()) for r in results["rows"])


def raise_collected(results: dict, locate_again: Callable[[], dict] | None = None) -> None:
    """Raises the first failed check of ``collected_value_checks``' results (stacked: the first failing row's);
    unlocated ones that failed raise those of ``locate_again()``."""
    if "rows" in results:
        if collected_failed(results):
            if locate_again is None:
                raise RuntimeError("a value check failed, and no located program was given to say where")
            raise_collected(locate_again())
            raise RuntimeError("a value check failed but not when the program was run again, located")
        return
    failed = np.asarray(results["failed"])
    if not failed.any():
        return
    if failed.ndim:
        row = np.unravel_index(int(np.flatnonzero(failed)[0]), failed.shape)
        results = jax.tree.map(lambda a: np.asarray(a)[row], results)
    for (names, shapes, counted), (flags, firsts, values, count) in zip(
        _REPORTS[int(np.asarray(results["key"]))], results["groups"]
    ):
        _report(names, shapes, flags, firsts, values, count if counted else None)


def _report(names, shapes, flags, firsts, values, count) -> None:
    """Raises the ValueError of the first failing check; ``names``: (name, requirement) pairs."""
    flags = [np.asarray(f) for f in flags]
    for i, (name, requirement) in enumerate(names):
        if flags[i].any():
            j = int(np.flatnonzero(flags[i].ravel())[0])
            first, value = np.asarray(firsts[i]).ravel()[j], np.asarray(values[i]).ravel()[j]
            text = _failure_text(name, requirement, shapes[i], first, value)
            if count is not None:
                text += f" (in step {int(np.asarray(count).ravel()[0]) + 1})"
            raise ValueError(text)


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _functional_checks(names, shapes, flags, firsts, values, count) -> None:
    """``checkify.check`` of each check, in the words of ``_failure_text``."""
    from jax.experimental import checkify

    for (name, requirement), shape, flag, first, value in zip(names, shapes, flags, firsts, values):
        pos = [jnp.asarray(p) for p in jnp.unravel_index(first, shape)] if shape else []
        text = f"{_escape(name)} {{}} at [{', '.join(['{}'] * len(pos))}] {_escape(requirement)}"
        args = [value, *pos]
        if count is not None:
            text += " (in step {})"
            args.append(jnp.asarray(count) + 1)
        checkify.check(jnp.logical_not(flag), text, *args)


class ValueCheck(NamedTuple):
    """Where ``values`` break a rule: ``bad`` (bool, ``values``' shape) is True there; the error reads
    ``f"{name} {value} at {position} {requirement}"``. ``covered_by``: another check of the list that every batch
    failing this one fails too (a traced step then computes this one only to locate a failure)."""

    name: str
    values: Any
    bad: Any
    requirement: str
    covered_by: Any = None


def ids_in_range(name: str, ids: Any, high: int, low: int = 0) -> ValueCheck:
    """Integer ids must lie in ``[low, high)`` (word ids, symbols, indices)."""
    ids = jnp.asarray(ids)
    return ValueCheck(name, ids, (ids < low) | (ids >= high), f"is out of range [{low}, {high})")


def finite_nonnegative(name: str, x: Any) -> ValueCheck:
    """Values must be finite and >= 0 (counts, magnitudes)."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        return ValueCheck(name, x, x < 0, "is not >= 0")
    return ValueCheck(name, x, ~(jnp.isfinite(x) & (x >= 0)), "is not a finite number >= 0")


def finite_values(name: str, x: Any) -> ValueCheck:
    """Values must be finite (features, observations)."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        return ValueCheck(name, x, jnp.zeros(x.shape, bool), "is not finite")
    return ValueCheck(name, x, ~jnp.isfinite(x), "is not finite")


def values_in_set(name: str, x: Any, allowed: Sequence[float]) -> ValueCheck:
    """Values must be one of ``allowed`` (labels, binary data)."""
    x = jnp.asarray(x)
    ok = jnp.zeros(x.shape, bool)
    for v in allowed:
        ok = ok | (x == v)
    return ValueCheck(name, x, ~ok, "is not in {" + ", ".join(f"{v:g}" for v in allowed) + "}")


def values_in_interval(name: str, x: Any, low: float, high: float) -> ValueCheck:
    """Values must lie in the closed interval ``[low, high]`` (probabilities, pixel intensities)."""
    x = jnp.asarray(x)
    return ValueCheck(name, x, ~((x >= low) & (x <= high)), f"is not in [{low:g}, {high:g}]")


def values_match(name: str, x: Any, expected: Any, what: str, rtol: float = 1e-4) -> ValueCheck:
    """Values must equal ``expected`` to |x - e| <= rtol (1 + |e|) (``what`` names the rule); fails where not finite."""
    x, expected = jnp.asarray(x), jnp.asarray(expected)
    e = jnp.abs(expected)
    big = jnp.finfo(jnp.result_type(e, float)).max
    return ValueCheck(name, x, ~(jnp.abs(x - expected) <= rtol * (1.0 + jnp.minimum(e, big))), f"is not {what}")


def _failure_text(name: str, requirement: str, shape: tuple, flat_index: int, value: Any) -> str:
    pos = [int(i) for i in np.unravel_index(int(flat_index), shape)] if shape else []
    v = value.item() if hasattr(value, "item") else value
    return f"{name} {v!r} at {pos} {requirement}"


def enforce_value_checks(checks: Sequence[ValueCheck] | Callable[[], Sequence[ValueCheck]], count: Any = None) -> None:
    """Raises ValueError for the first failing check, naming the argument, the value and its position
    (``batch word id 5012 at [3, 17] is out of range [0, 5000)``); ``count`` (a step's count) adds
    ``in step <count + 1>``. Nothing is checked when ``value_checks_enabled()`` is False.

    Concrete arrays raise at once; traced ones through ``jax.debug.callback``, a ``collected_value_checks`` block
    or ``functional_value_checks``. ``checks`` may be a function returning them, built again inside the
    ``lax.cond`` that locates a failure, so that a good step costs one fused reduction per check.
    """
    if not value_checks_enabled():
        return
    build = checks if callable(checks) else (lambda: checks)
    checks = list(build())
    if not checks:
        return
    names = {c.name for c in checks}
    own = [c.covered_by is None or c.covered_by not in names for c in checks]  # computed at every step
    if _COLLECTORS and not _COLLECTORS[-1].locate and any(is_tracer(c.bad) for c in checks):
        built = [checks]  # the checks built above serve once (shapes, or the ungated rows); a gated
        # block's branch builds them again, so that their arrays are computed inside it
        _COLLECTORS[-1].add_rows(lambda: [c.bad for c, o in zip(built.pop() if built else build(), own) if o])
        return

    def located_traced():  # located, a large check searched a block of rows at a time (_first_bad_in_blocks)
        fresh = list(build())
        small = [jnp.size(c.bad) <= _LOCATE_BLOCK or jnp.ndim(c.bad) == 0 for c in fresh]
        of_small = iter(zip(*_located([c for c, s in zip(fresh, small) if s], True)))  # per check
        per_check = []
        for i, (c, s) in enumerate(zip(fresh, small)):
            if s:
                per_check.append(next(of_small))
            else:
                flag, first = _first_bad_in_blocks(lambda i=i: jnp.asarray(list(build())[i].bad), jnp.shape(c.bad))
                per_check.append((flag, first, jnp.ravel(jnp.asarray(c.values))[first]))
        return tuple(list(x) for x in zip(*per_check))

    maybe = [jnp.any(c.bad) for c, o in zip(checks, own) if o]
    any_bad = jnp.any(jnp.stack(maybe)) if maybe else jnp.zeros((), bool)
    if is_tracer(any_bad) or any(is_tracer(c.bad) for c in checks):
        # traced: located only when a check fails (a pass over the batch saved at every good step),
        # from checks built again in the branch (their arrays computed there, not passed in)
        dtypes = [jnp.asarray(c.values).dtype for c in checks]
        nothing = (
            [jnp.zeros((), bool) for _ in checks],
            [jnp.zeros((), jnp.int32) for _ in checks],
            [jnp.zeros((), d) for d in dtypes],
        )
        flags, firsts, values = jax.lax.cond(any_bad, located_traced, lambda: nothing)
    else:
        flags, firsts, values = _located(checks)
    _dispatch(
        [(c.name, c.requirement) for c in checks], [tuple(c.values.shape) for c in checks], flags, firsts, values, count
    )


def _located(checks: Sequence[ValueCheck], barrier: bool = False) -> tuple[list, list, list]:
    """Per check: whether it failed, its first failure's flat position and value (``barrier``: keeps XLA
    from folding the argmax of a constant)."""
    bads, vals = [jnp.asarray(c.bad) for c in checks], [jnp.asarray(c.values) for c in checks]
    if barrier:
        bads = list(jax.lax.optimization_barrier(bads))
    firsts = [jnp.argmax(jnp.ravel(b)).astype(jnp.int32) if b.size else jnp.zeros((), jnp.int32) for b in bads]
    values = [jnp.ravel(v)[f] if v.size else jnp.zeros((), v.dtype) for v, f in zip(vals, firsts)]
    return [jnp.any(b) for b in bads], firsts, values


# the most entries of one check located at once; a larger one is searched in blocks of rows
_LOCATE_BLOCK = 1 << 20


def _first_bad_in_blocks(bad_of: Callable[[], jax.Array], shape: tuple) -> tuple:
    """(any entry of the bool ``bad_of()`` of ``shape`` True, the first's flat position), a block of rows at a time."""
    from jax.extend.core import jaxpr_as_fun

    closed = jax.make_jaxpr(bad_of)()
    rows, per_row = shape[0], int(np.prod(shape[1:], dtype=np.int64))
    block = max(1, min(rows, _LOCATE_BLOCK // max(per_row, 1)))
    num_blocks = -(-rows // block)

    def body(carry):
        j, _, pos = carry
        consts, j = jax.lax.optimization_barrier((list(closed.consts), j))
        start = jnp.minimum(j * block, rows - block)
        (bad,) = jaxpr_as_fun(closed.replace(consts=consts))()
        bad = jax.lax.optimization_barrier(jax.lax.dynamic_slice_in_dim(bad, start, block, 0))
        hit = jnp.any(bad)
        return j + 1, hit, jnp.where(hit, start * per_row + jnp.argmax(jnp.ravel(bad)).astype(jnp.int32), pos)

    zero = jnp.zeros((), jnp.int32)
    _, found, pos = jax.lax.while_loop(lambda c: ~c[1] & (c[0] < num_blocks), body, (zero, jnp.zeros((), bool), zero))
    return found, pos


def _dispatch(names, shapes, flags, firsts, values, count) -> None:
    """Enforces located checks: at once, by the innermost collecting block, by checkify, or by a host callback."""
    if not any(is_tracer(a) for a in flags + firsts + values + ([count] if count is not None else [])):
        _report(names, shapes, flags, firsts, values, count)
        return
    if _COLLECTORS:
        _COLLECTORS[-1].add(names, shapes, flags, firsts, values, count)
        return
    if _FUNCTIONAL[0]:
        _functional_checks(names, shapes, flags, firsts, values, count)
        return
    count_arg = jnp.zeros((), jnp.int32) if count is None else count
    jax.lax.cond(
        jnp.any(jnp.stack(flags)),
        lambda *a: jax.debug.callback(lambda *b: _report(names, shapes, *b), *a),
        lambda *a: None,
        flags,
        firsts,
        values,
        count_arg if count is not None else None,
    )


def vmap_with_checks(fn: Callable, in_axes=0) -> Callable:
    """``jax.vmap(fn, in_axes)`` whose value checks are enforced once outside it, for the first failing member."""

    def wrapped(*args):
        metas = []

        def inner(*a):
            with collected_value_checks() as sink:
                out = fn(*a)
            metas[:] = [g[0] for g in sink.groups]
            return out, [g[1:] for g in sink.groups]

        try:
            out, groups = jax.vmap(inner, in_axes=in_axes)(*args)
        except NestedValueCheck:
            return jax.vmap(fn, in_axes=in_axes)(*args)
        for (names, shapes, counted), (flags, firsts, values, count) in zip(metas, groups):
            # per check: any member failing, and the first failing member's position and value
            members = [jnp.argmax(jnp.ravel(f)) for f in flags]
            i = jnp.argmax(jnp.stack([jnp.any(f) for f in flags]))  # the first failing check's member's count
            _dispatch(
                names,
                shapes,
                [jnp.any(f) for f in flags],
                [jnp.ravel(p)[j] for p, j in zip(firsts, members)],
                [jnp.ravel(v)[j] for v, j in zip(values, members)],
                jnp.ravel(count)[jnp.stack(members)[i]] if counted else None,
            )
        return out

    return wrapped


def raise_batch_error(error: Exception) -> None:
    """Re-raises a ``JaxRuntimeError`` whose text holds a failed value check (a traced one, raised in its callback)
    as that ValueError."""
    lines = [ln for ln in str(error).splitlines() if ln.startswith("ValueError: ")]
    if lines:
        raise ValueError(lines[-1][len("ValueError: ") :]) from None
    raise error
