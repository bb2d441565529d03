"""The allowed values of a config's numeric keys and the memory its arrays need
(``register_experiment(..., bounds=..., memory=...)``), both checked when the config is loaded.

A bound is a short text, shown as is by ``vijax list EXPERIMENT``::

    ">= 1"                      an integer (the default is an int) or a number (a float) >= 1
    "> 0", "<= 1", "< 1"        likewise
    "in [0, 1)"                 an interval; "[" and "]" closed, "(" and ")" open
    "in [1, data.num_train]"    an end may be another key of the config (its resolved value)
    "finite"                    any finite number
    "null or int >= 1"          null, or ...; "int" or "number" says the kind where the default is null
    "each > 0"                  every element of a list
    "non-empty, each > 0"       likewise, and at least one element

A memory need ``Need(what, keys, bytes)`` names arrays, the keys their size is made of and their size; the
needs must fit in this machine's memory, else the largest need's key furthest above its default is blamed.
"""

from __future__ import annotations

import functools
import math
import numbers
import operator
import os
import re
from typing import Any, Iterable, Mapping, NamedTuple, Optional

import numpy as np
from vijax._validate import ArgumentError

SEED = "in [0, 4294967295]"  # a seed: jax.random.PRNGKey reads 32 bits of it without x64 (2**32 is 0)
MAX_SEED = 2**32 - 1

_END = r"-?[0-9][0-9.e+-]*|(?:model|data|algorithm|run)\.[A-Za-z_][\w.]*"
_BOUND = re.compile(
    r"^(?P<null>null or )?(?P<nonempty>non-empty, )?(?P<each>each )?(?P<kind>int |number )?"
    rf"(?:(?P<op>>=|>|<=|<) (?P<x>{_END})|in (?P<lo_br>[\[(])(?P<lo>{_END}), (?P<hi>{_END})(?P<hi_br>[\])])|finite)$"
)


class Bound(NamedTuple):
    """A parsed bound (see the module docstring); ``low``/``high`` are numbers, dotted keys or None."""

    text: str
    nullable: bool
    each: bool
    nonempty: bool
    kind: Optional[str]  # "int", "number", or None: the default's
    low: Any
    high: Any
    include_low: bool
    include_high: bool


def parse_bound(text: str) -> Bound:
    """The ``Bound`` of ``text``; ValueError for a text that is not one (see the module docstring).

    Examples:
        >>> parse_bound("in (0, 1]").high
        1.0
    """
    m = _BOUND.match(text)
    if m is None:
        raise ValueError(f"bound {text!r} is not one of '>= X', '> X', '<= X', '< X', 'in [X, Y)', 'finite'")

    def value(s: str):
        return s if s[0].isalpha() else float(s)

    low = high = None
    include_low = include_high = True
    op = m.group("op")
    if op in (">=", ">"):
        low, include_low = value(m.group("x")), op == ">="
    elif op in ("<=", "<"):
        high, include_high = value(m.group("x")), op == "<="
    elif m.group("lo_br"):
        low, high = value(m.group("lo")), value(m.group("hi"))
        include_low, include_high = m.group("lo_br") == "[", m.group("hi_br") == "]"
    kind = m.group("kind").strip() if m.group("kind") else None
    nullable, each, nonempty = bool(m.group("null")), bool(m.group("each")), bool(m.group("nonempty"))
    if nonempty and not each:
        raise ValueError(f"bound {text!r}: 'non-empty, ' goes with 'each'")
    return Bound(text, nullable, each, nonempty, kind, low, high, include_low, include_high)


def _lookup(config: Mapping, dotted: str) -> Any:
    return functools.reduce(operator.getitem, dotted.split("."), config)


def _interval(bound: Bound, config: Mapping) -> tuple[Optional[float], Optional[float], str]:
    """(low, high, the interval's text), a key's end resolved and shown as ``data.length = 60``."""

    def end(x):
        if isinstance(x, str):
            v = _lookup(config, x)
            return v, f"{x} = {v!r}"
        if x is None:
            return None, ""
        return x, f"{x:g}" if not float(x).is_integer() or abs(x) >= 1e16 else f"{int(x)}"

    (low, low_s), (high, high_s) = end(bound.low), end(bound.high)
    if low_s and high_s:
        return low, high, f"in {'[' if bound.include_low else '('}{low_s}, {high_s}{']' if bound.include_high else ')'}"
    if low_s:
        return low, None, f"{'>=' if bound.include_low else '>'} {low_s}"
    if high_s:
        return None, high, f"{'<=' if bound.include_high else '<'} {high_s}"
    return None, None, ""


def kind_of(default: Any, bound: Bound) -> str:
    """``"int"`` or ``"number"``: the bound's kind, else the default's (of its first element with ``each``)."""
    if bound.kind is not None:
        return bound.kind
    sample = default[0] if bound.each and isinstance(default, (list, tuple)) and default else default
    if isinstance(sample, bool) or not isinstance(sample, (int, float)):
        raise ArgumentError("bound", f"bound {bound.text!r}: say 'int' or 'number' where the default is {default!r}")
    return "int" if isinstance(sample, int) else "number"


def check_bound(path: str, value: Any, bound: Bound, kind: str, config: Mapping) -> None:
    """ValueError ``"<path> must be an integer >= 1, got 0"`` when ``value`` is outside ``bound``."""
    if value is None and bound.nullable:
        return
    if bound.each:
        if bound.nonempty and not len(value):
            raise ArgumentError(path, f"{path} must be a non-empty list, got {value!r}")
        for i, item in enumerate(value):
            check_bound(f"{path}[{i}]", item, bound._replace(each=False, nullable=False), kind, config)
        return
    low, high, interval = _interval(bound, config)
    if kind == "int":
        ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
        what = "an integer"
    else:
        ok = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and math.isfinite(value)
        what = "a finite number"
    if ok and low is not None:
        ok = value >= low if bound.include_low else value > low
    if ok and high is not None:
        ok = value <= high if bound.include_high else value < high
    if not ok:
        null = "null or " if bound.nullable else ""
        raise ArgumentError(path, f"{path} must be {null}{what}{' ' + interval if interval else ''}, got {value!r}")


def check_bounds(config: Mapping, bounds: Mapping[str, str], defaults: Mapping) -> None:
    """Checks every key of ``bounds`` in ``config`` (ValueError naming the first bad one), bounds that refer to
    other keys last (so that a key out of its own bound is the one named)."""
    parsed = {path: parse_bound(text) for path, text in bounds.items()}
    refers = {path: isinstance(b.low, str) or isinstance(b.high, str) for path, b in parsed.items()}
    for path in sorted(parsed, key=lambda p: refers[p]):
        bound = parsed[path]
        check_bound(path, _lookup(config, path), bound, kind_of(_lookup(defaults, path), bound), config)


def check_bound_table(name: str, bounds: Mapping[str, str], defaults: Mapping) -> None:
    """Checks an experiment's bounds when it registers: keys, texts, kinds, referred keys and defaults."""
    sections = {s: defaults.get(s, {}) for s in ("model", "data", "algorithm")}
    for path, text in bounds.items():
        bound = parse_bound(text)
        try:
            default = _lookup(sections, path)
        except (KeyError, TypeError):
            raise ValueError(f"experiment {name!r}: bound of {path!r}, a key its defaults do not have") from None
        if default is None and not bound.nullable:
            raise ValueError(f"experiment {name!r}: {path!r} defaults to null; its bound must start 'null or'")
        kind_of(default, bound)
        for end in (bound.low, bound.high):
            if isinstance(end, str):
                try:
                    _lookup(sections, end)
                except (KeyError, TypeError):
                    raise ValueError(f"experiment {name!r}: bound of {path!r} refers to {end!r}, not a key") from None
    check_bounds(sections, bounds, sections)


# ---- memory ------------------------------------------------------------------------------------


class Need(NamedTuple):
    """Arrays a config makes: ``what`` they are, the ``keys`` their size is made of, their ``bytes``."""

    what: str
    keys: tuple
    bytes: float


def machine_memory() -> int:
    """This machine's physical memory in bytes."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units: ``"1.5 GiB"``."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def _size(value: Any) -> float:
    """A key's size for blame: the value, the largest element of a list, 1 for others."""
    if isinstance(value, (list, tuple)):
        return max((_size(v) for v in value), default=1.0)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return max(abs(float(value)), 1.0)
    return 1.0


def check_memory(
    needs: Iterable[Need], config: Mapping, defaults: Optional[Mapping] = None, limit: Optional[int] = None
) -> None:
    """ValueError naming a key when the ``needs`` exceed ``limit`` bytes (this machine's memory): of the largest
    need's keys, the one furthest above its default."""
    needs = [n for n in needs if n.bytes > 0]
    limit = machine_memory() if limit is None else limit
    total = float(sum(n.bytes for n in needs))
    if total <= limit:
        return
    worst = max(needs, key=lambda n: n.bytes)

    def ratio(key):
        try:
            value = _lookup(config, key)
        except (KeyError, TypeError):
            return -1.0
        try:
            default = _lookup(defaults, key) if defaults is not None else None
        except (KeyError, TypeError):
            default = None
        return _size(value) / _size(default)

    key = max(worst.keys, key=ratio)
    raise ValueError(
        f"{key} = {_lookup(config, key)!r} is too large: {worst.what} would need {format_bytes(worst.bytes)} "
        f"(the run's arrays {format_bytes(total)} in all), more than this machine's memory ({format_bytes(limit)})"
    )


def float_bytes(config: Mapping) -> int:
    """Bytes per float of a run with this config (``run.x64``)."""
    return 8 if (config.get("run") or {}).get("x64") else 4
