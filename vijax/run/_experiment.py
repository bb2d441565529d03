"""What a config's ``experiment:`` name resolves to, and the registry of experiment builders."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

from vijax.inference import VIAlgorithm
from vijax.types import Array, PRNGKey, PyTree


def check_methods(methods, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """``algorithm.methods`` as a tuple, after checking that it is a non-empty list of distinct
    names from ``allowed`` (ValueError naming the key otherwise)."""
    methods = tuple(methods)
    bad = [m for m in methods if m not in allowed]
    if bad or not methods or len(set(methods)) != len(methods):
        raise ValueError(f"algorithm.methods must be distinct names from {allowed}, got {list(methods)}")
    return methods


class Baseline(NamedTuple):
    """Another run of a comparison experiment (a baseline method, another setting of a grid), run
    by ``vijax run`` after the experiment's own run, with its own checkpoints
    (``<out>/checkpoints/<name>``) so that ``--resume`` continues it, and handed to ``report``.

    Attributes:
      name: unique among the experiment's baselines; names its checkpoint folder.
      algorithm: the ``VIAlgorithm``.
      init_state: ``key -> state`` (None: ``algorithm.init(key)``).
      batch_fn: ``(key, step) -> batch``, or None with ``host_batches``.
      eval_fn: ``state -> dict`` of held-out metrics, or None.
      host_batches: ``(t0, n) -> stacked batches`` for host data, instead of ``batch_fn``.
      settings: ``vijax.run.RunConfig`` fields that differ from the experiment's run (e.g. its own
        ``num_steps`` or ``chunk_size``).
      seed: the run key's seed; None: the experiment's seed (the same keys as its own run).
    """

    name: str
    algorithm: VIAlgorithm
    init_state: Optional[Callable[[PRNGKey], PyTree]] = None
    batch_fn: Optional[Callable[[PRNGKey, Array], PyTree]] = None
    eval_fn: Optional[Callable[[PyTree], dict]] = None
    host_batches: Optional[Callable[[int, int], PyTree]] = None
    settings: dict = {}
    seed: Optional[int] = None


class Experiment(NamedTuple):
    """Everything the runner needs for one configured run.

    Attributes:
      algorithm: the ``VIAlgorithm`` (``init``, ``step``) to drive.
      init_state: ``key -> state``; called once with the runner's init key (not on resume).
      batch_fn: ``(key, step) -> batch``; pure and jit-able (full data for batch algorithms); or
        None when ``host_batches`` is given.
        ``step`` is the int32 index of the update, starting at 0.
      eval_fn: ``state -> dict[str, float]`` held-out evaluation on the host, or None.
      report: ``(RunResult, out_dir, baselines) -> dict`` writes plots into ``out_dir`` and
        returns a JSON-able summary printed by the CLI and stored in ``metrics.json``;
        ``baselines`` is a dict name -> ``RunResult`` of the ``baselines`` (empty without). None
        reports nothing beyond the generic metrics.
      host_batches: ``(t0, n) -> stacked batches of updates t0..t0+n-1`` for data kept on the
        host (see ``vijax.run.run``), instead of ``batch_fn``.
      baselines: the comparison's other runs (``Baseline``), run after this one, in order, each
        checkpointed and resumable; ``report`` sees their results.
    """

    algorithm: VIAlgorithm
    init_state: Callable[[PRNGKey], PyTree]
    batch_fn: Callable[[PRNGKey, Array], PyTree]
    eval_fn: Optional[Callable[[PyTree], dict]] = None
    report: Optional[Callable[[Any, str, dict], dict]] = None
    host_batches: Optional[Callable[[int, int], PyTree]] = None
    baselines: tuple = ()


class ExperimentSpec(NamedTuple):
    """A registered builder with the defaults of its config sections. ``build(sections, seed)``
    gets the resolved ``model``, ``data``, ``algorithm`` and ``run`` sections (dicts).

    ``defaults`` is the schema of the config: ``{"model": {...}, "data": {...},
    "algorithm": {...}}``; a key not listed there is an error naming the key, and a value must
    have its default's type (an int is accepted where the default is a float; a default of None
    accepts any value). ``defaults`` may also hold a ``"run"`` dict overriding the generic run
    defaults (``num_steps``, ``chunk_size``, ...) for this experiment.
    """

    build: Callable[[dict, int], Experiment]  # (sections: {"model","data","algorithm","run"}, seed)
    defaults: dict
    description: str = ""


EXPERIMENTS: dict[str, ExperimentSpec] = {}

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


__all__ = ["EXPERIMENTS", "Baseline", "Experiment", "ExperimentSpec", "check_methods", "register_experiment"]
