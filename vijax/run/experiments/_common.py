"""What the experiments on data sampled into a training and a test set share: the bounds of their
``data`` section (``data.num_train``, ``data.num_test``, their own keys, ``data.seed``) and the memory
their data takes ((data.num_train + data.num_test) x data.dim floats); and, for any experiment, a
config section's keys passed on as the keywords of the same names (``section_keywords``).
"""

from __future__ import annotations

from typing import Mapping

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


def section_keywords(section: Mapping, *keys: str) -> dict:
    """``{key: section[key]}`` for each of ``keys`` (in its order): the values of a config section
    passed on as the keyword arguments of the same names.

    Examples:
      >>> section_keywords({"a": 1.0, "b": 2.0, "tol": 1e-6}, "a", "tol")
      {'a': 1.0, 'tol': 1e-06}
    """
    return {key: section[key] for key in keys}
