"""What the experiments on data sampled into a training and a test set share: the bounds of their
``data`` section (``data.num_train``, ``data.num_test``, their own keys, ``data.seed``) and the memory
their data takes ((data.num_train + data.num_test) x data.dim floats); and Markdown tables for the
reports (``cell``, ``md_table``).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from vijax.run import float_bytes, MemoryNeed, SEED_BOUND


def train_test_bounds(**data: str) -> dict[str, str]:
    """The bounds of a ``data`` section sampled from ``data.seed``: ``data.num_train`` and
    ``data.num_test`` at least 1, then ``data.<key>: bound`` for each keyword (in its order), then
    ``data.seed``.

    Examples:
      >>> list(train_test_bounds(dim=">= 1"))
      ['data.num_train', 'data.num_test', 'data.dim', 'data.seed']
    """
    return {
        "data.num_train": ">= 1",
        "data.num_test": ">= 1",
        **{f"data.{key}": bound for key, bound in data.items()},
        "data.seed": SEED_BOUND,
    }


def train_test_need(config: Mapping, copies: int = 1) -> MemoryNeed:
    """The memory of ``copies`` arrays of the data, each (data.num_train + data.num_test) x data.dim
    floats of the run's precision (``run.x64``)."""
    d = config["data"]
    return MemoryNeed(
        "the data ((data.num_train + data.num_test) x data.dim)",
        ("data.num_train", "data.num_test", "data.dim"),
        copies * (d["num_train"] + d["num_test"]) * d["dim"] * float_bytes(config),
    )


def cell(v, fmt=None) -> str:
    """A table cell: "—" for None or NaN, ``fmt(v)`` for a float (by default 4 significant digits),
    ``str(v)`` for anything else."""
    if v is None or (isinstance(v, float) and v != v):
        return "—"
    return (fmt or (lambda x: f"{x:.4g}"))(v) if isinstance(v, (float, np.floating)) else str(v)


def md_table(rows: list[dict], cols: list[str], fmt=None) -> str:
    """A Markdown table of ``rows`` (dicts) with the columns ``cols``, each value a ``cell``.

    Examples:
      >>> print(md_table([{"a": 1, "b": 0.123456}], ["a", "b"]), end="")
      | a | b |
      |---|---|
      | 1 | 0.1235 |
    """
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    return head + "".join("| " + " | ".join(cell(r.get(c), fmt) for c in cols) + " |\n" for r in rows)
