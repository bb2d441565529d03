"""What a config's ``experiment:`` name resolves to, and the registry of experiment builders."""
from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Callable, NamedTuple, Optional

from vijax.inference.base import VIAlgorithm
from vijax.types import Array, PRNGKey, PyTree


def check_methods(methods, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """``algorithm.methods`` as a tuple, after checking that it is a non-empty list of distinct
    names from ``allowed`` (ValueError naming the key otherwise)."""
    methods = tuple(methods)
    bad = [m for m in methods if m not in allowed]
    if bad or not methods or len(set(methods)) != len(methods):
        raise ValueError(f"algorithm.methods must be distinct names from {allowed}, got {list(methods)}")
    return methods


class Experiment(NamedTuple):
    """Everything the runner needs for one configured run.

    Attributes:
      algorithm: the ``VIAlgorithm`` (``init``, ``step``) to drive.
      init_state: ``key -> state``; called once with the runner's init key (not on resume).
      batch_fn: ``(key, step) -> batch``; pure and jit-able (full data for batch algorithms); or
        None when ``host_batches`` is given.
        ``step`` is the int32 index of the update, starting at 0.
      eval_fn: ``state -> dict[str, float]`` held-out evaluation on the host, or None.
      report: ``(RunResult, out_dir) -> dict`` writes plots into ``out_dir`` and returns a
        JSON-able summary printed by the CLI and stored in ``metrics.json``; None reports nothing
        beyond the generic metrics.
      host_batches: ``(t0, n) -> stacked batches of updates t0..t0+n-1`` for data kept on the
        host (see ``vijax.run.run``), instead of ``batch_fn``.
    """

    algorithm: VIAlgorithm
    init_state: Callable[[PRNGKey], PyTree]
    batch_fn: Callable[[PRNGKey, Array], PyTree]
    eval_fn: Optional[Callable[[PyTree], dict]] = None
    report: Optional[Callable[[Any, str], dict]] = None
    host_batches: Optional[Callable[[int, int], PyTree]] = None


class ExperimentSpec(NamedTuple):
    """A registered builder with the defaults of its config sections.

    ``defaults`` is the schema of the config: ``{"model": {...}, "data": {...},
    "algorithm": {...}}``; a key not listed there is an error naming the key, and a value must
    have its default's type (an int is accepted where the default is a float; a default of None
    accepts any value). ``defaults`` may also hold a ``"run"`` dict overriding the generic run
    defaults (``num_steps``, ``chunk_size``, ...) for this experiment.
    """

    build: Callable[[dict, int], Experiment]  # (sections: {"model","data","algorithm"}, seed)
    defaults: dict
    description: str = ""


EXPERIMENTS: dict[str, ExperimentSpec] = {}

BUILTIN_EXPERIMENTS_MODULE = "vijax.run.experiments"


def import_builtin_experiments() -> None:
    """Imports ``vijax.run.experiments`` (whose modules register the built-in experiments), if
    the package ships it. Called by ``load_config`` and the CLI; importing twice is a no-op."""
    if importlib.util.find_spec(BUILTIN_EXPERIMENTS_MODULE) is not None:
        importlib.import_module(BUILTIN_EXPERIMENTS_MODULE)


def register_experiment(name: str, defaults: dict, description: str = ""):
    """Decorator registering ``build(sections, seed) -> Experiment`` under ``name``.

    Args:
      name: the name a config's ``experiment:`` key refers to. Registering a name again replaces
        the earlier builder (so reloading a module is harmless).
      defaults: the config schema with default values; see ``ExperimentSpec``.
      description: one line shown by ``vijax list``.

    Returns:
      A decorator that registers ``build`` and returns it unchanged.
    """

    def deco(build):
        EXPERIMENTS[name] = ExperimentSpec(build, defaults, description)
        return build

    return deco


__all__ = ["EXPERIMENTS", "Experiment", "ExperimentSpec", "import_builtin_experiments",
           "register_experiment"]
