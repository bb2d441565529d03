"""What a config's ``experiment:`` name resolves to, and the registry of experiment builders."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

from vijax.inference.base import VIAlgorithm
from vijax.types import Array, PRNGKey, PyTree


class Experiment(NamedTuple):
    """Everything the runner needs for one configured run.

    Attributes:
      algorithm: the ``VIAlgorithm`` (``init``, ``step``) to drive.
      init_state: ``key -> state``; called once (not on resume).
      batch_fn: ``(key, step) -> batch``; pure and jit-able (full data for batch algorithms).
      eval_fn: ``state -> dict[str, float]`` held-out evaluation on the host, or None.
      report: ``(RunResult, out_dir) -> dict`` writes plots into ``out_dir`` and returns a
        JSON-able summary printed by the CLI and stored in ``metrics.json``.
    """

    algorithm: VIAlgorithm
    init_state: Callable[[PRNGKey], PyTree]
    batch_fn: Callable[[PRNGKey, Array], PyTree]
    eval_fn: Optional[Callable[[PyTree], dict]]
    report: Callable[[Any, str], dict]


class ExperimentSpec(NamedTuple):
    """A registered builder with the defaults of its config sections (the schema: any key not
    listed here is an error naming the key)."""

    build: Callable[[dict, int], Experiment]  # (sections: {"model","data","algorithm"}, seed)
    defaults: dict  # {"model": {...}, "data": {...}, "algorithm": {...}}
    description: str


EXPERIMENTS: dict[str, ExperimentSpec] = {}


def register_experiment(name: str, defaults: dict, description: str = ""):
    """Decorator registering ``build(sections, seed) -> Experiment`` under ``name``."""

    def deco(build):
        EXPERIMENTS[name] = ExperimentSpec(build, defaults, description)
        return build

    return deco
