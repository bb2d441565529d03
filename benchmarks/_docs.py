"""Benchmark tables in the docs: a page's span between ``<!-- NAME.table -->`` and ``<!-- /NAME -->`` rewritten from
the JSON a benchmark wrote."""

from __future__ import annotations


def replace_span(page: str, name: str, text: str) -> None:
    """Rewrites the span of ``page`` between ``<!-- {name}.table -->`` and ``<!-- /{name} -->`` with ``text``."""
    a, b = f"<!-- {name}.table -->", f"<!-- /{name} -->"
    with open(page) as f:
        head, rest = f.read().split(a, 1)
    tail = rest.split(b, 1)[1]
    with open(page, "w") as f:
        f.write(f"{head}{a}\n\n{text}\n\n{b}{tail}")
