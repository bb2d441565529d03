"""The registry of experiment builders that a config's ``experiment:`` names, and the helpers
builders share (``configured_algorithm``, ``eval_steps``, ``data_file``, ...)."""

from __future__ import annotations

import pathlib
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

from vijax._validate import ArgumentError
from vijax.inference import ALGORITHMS, VIAlgorithm, make_algorithm
from vijax.types import Array, PRNGKey, PyTree
from ._bounds import Need, check_bound_table
from ._runner import RunConfig, crossed


def check_methods(methods, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """``algorithm.methods`` as a tuple, checked to be distinct names from ``allowed`` (ValueError naming it)."""
    methods = tuple(methods)
    bad = [m for m in methods if m not in allowed]
    if bad or not methods or len(set(methods)) != len(methods):
        raise ValueError(f"algorithm.methods must be distinct names from {allowed}, got {list(methods)}")
    return methods


class Baseline(NamedTuple):
    """Another run of a comparison experiment, run by ``vijax run`` after the experiment's own with its own
    checkpoints (``<out>/checkpoints/<name>``) and handed to ``report``. The fields are those of ``Experiment``,
    and: ``name`` (unique; names the checkpoint folder), ``settings`` (``RunConfig`` fields that differ from the
    experiment's run) and ``seed`` (None: the experiment's)."""

    name: str
    algorithm: VIAlgorithm
    init_state: Optional[Callable[[PRNGKey], PyTree]] = None
    batch_fn: Optional[Callable[[PRNGKey, Array], PyTree]] = None
    eval_fn: Optional[Callable[[PyTree], dict]] = None
    host_batches: Optional[Callable[[int, int], PyTree]] = None
    settings: dict = {}
    seed: Optional[int] = None


class Experiment(NamedTuple):
    """Everything the runner needs for one configured run (the arguments of ``vijax.run.run``).

    Attributes:
      algorithm: the ``VIAlgorithm`` to drive.
      init_state: ``key -> state``; called once with the runner's init key (not on resume).
      batch_fn: ``(key, step) -> batch``, pure and jit-able; or None with ``host_batches``.
      eval_fn: ``state -> dict[str, float]`` held-out evaluation on the host, or None.
      report: ``(RunResult, out_dir, baselines) -> dict``: writes plots into ``out_dir``, returns a JSON-able
        summary (stored in ``metrics.json``); ``baselines``: name -> ``RunResult``.
      host_batches: ``(t0, n) -> stacked batches of updates t0..t0+n-1``, instead of ``batch_fn``.
      baselines: the comparison's other runs (``Baseline``), run after this one, in order.
    """

    algorithm: VIAlgorithm
    init_state: Callable[[PRNGKey], PyTree]
    batch_fn: Callable[[PRNGKey, Array], PyTree]
    eval_fn: Optional[Callable[[PyTree], dict]] = None
    report: Optional[Callable[[Any, str, dict], dict]] = None
    host_batches: Optional[Callable[[int, int], PyTree]] = None
    baselines: tuple = ()


class ExperimentSpec(NamedTuple):
    """A registered ``build(sections, seed)`` with its config schema: ``defaults`` per section (``"run"``
    optional), ``bounds`` (dotted key -> allowed values) and ``memory(config) -> [Need]``."""

    build: Callable[[dict, int], Experiment]  # (sections: {"model","data","algorithm","run"}, seed)
    defaults: dict
    description: str = ""
    bounds: Mapping[str, str] = {}
    memory: Optional[Callable[[Mapping], Sequence[Need]]] = None


EXPERIMENTS: dict[str, ExperimentSpec] = {}


def register_experiment(
    name: str,
    defaults: dict,
    description: str = "",
    bounds: Optional[Mapping[str, str]] = None,
    memory: Optional[Callable[[Mapping], Sequence[Need]]] = None,
):
    """Decorator registering ``build(sections, seed) -> Experiment`` under ``name`` (replacing an earlier one).

    Args:
      name: the name a config's ``experiment:`` key refers to.
      defaults: the config schema with default values; see ``ExperimentSpec``.
      description: one line shown by ``vijax list``; default: the first paragraph of ``build``'s docstring.
      bounds: the allowed values of numeric keys, ``{"data.num_test": ">= 1", ...}``.
      memory: ``config -> [Need(what, keys, bytes), ...]``, checked against this machine's memory.

    Raises:
      ValueError: a bound of a key the defaults lack, one that does not parse, or a default outside it.
    """
    check_bound_table(name, bounds or {}, defaults)

    def deco(build):
        text = description or " ".join((build.__doc__ or "").strip().split("\n\n")[0].split())
        EXPERIMENTS[name] = ExperimentSpec(build, defaults, text, dict(bounds or {}), memory)
        return build

    return deco


def configured_algorithm(
    section: Mapping,
    defaults: Mapping,
    model,
    *,
    num_data: Optional[int] = None,
    schedule=None,
    schedule_keys: Sequence[str] = (),
    resolved: Optional[Mapping] = None,
) -> VIAlgorithm:
    """The registered algorithm that a config's ``algorithm`` section names, for ``model``, with the section's
    keys it takes as settings. A key another algorithm takes, or one of ``schedule_keys`` of an algorithm
    without a step size, is left out while it holds the experiment's default, and refused otherwise.

    Args:
      section: the resolved ``algorithm`` section (with a ``name`` key).
      defaults: the experiment's defaults of that section (what counts as "not set").
      model: the model (or a wrapper such as ``vijax.inference.data_parallel(model)``).
      num_data: N, the number of data points minibatches are drawn from.
      schedule: the step size (a number or ``count -> step``), or None for the default.
      schedule_keys: the section's keys that ``schedule`` is made of (e.g. ``("tau", "kappa")``).
      resolved: values replacing the section's for some keys (e.g. a None default looked up).

    Raises:
      ConfigError: naming ``algorithm.name`` for an unknown algorithm or one the factory refuses,
        ``algorithm.<key>`` for a setting the factory refuses or a key it does not take.
    """
    from ._config import ConfigError  # deferred: _config imports this module

    name = section["name"]
    if name not in ALGORITHMS:
        raise ConfigError(f"algorithm.name: unknown algorithm {name!r}; registered: {sorted(ALGORITHMS)}")
    spec = ALGORITHMS[name]
    registered = {k for other in ALGORITHMS.values() for k in other.settings}
    unused = (registered - set(spec.settings)) | (set() if spec.takes_schedule else set(schedule_keys))
    for key in section:
        if key in unused and section[key] != defaults.get(key):
            taken = list(spec.settings) + (["a step size"] if spec.takes_schedule else [])
            raise ConfigError(
                f"algorithm.{key}: algorithm {name!r} does not take it (it takes {taken}); "
                f"leave it at the default {defaults.get(key)!r} or choose another algorithm.name"
            )
    settings = {k: (resolved or {}).get(k, section[k]) for k in spec.settings if k in section}
    try:
        return make_algorithm(
            name, model, num_data=num_data, schedule=schedule if spec.takes_schedule else None, **settings
        )
    except (TypeError, ValueError) as e:
        if isinstance(e, ArgumentError) and e.argument in settings:  # a setting's value out of range: name its key
            raise ConfigError(f"algorithm.{e.argument}: {e}") from None
        raise ConfigError(f"algorithm.name: {name!r} cannot run here: {e}") from None


def check_split(key: str, fraction: float, num_docs: int, num_train: int, num_test: int) -> None:
    """ValueError naming ``key`` when the split it made leaves no training or no test document."""
    if num_train < 1 or num_test < 1:
        raise ArgumentError(
            key,
            f"{key}: {fraction!r} of {num_docs} documents leaves {num_train} for training and {num_test} "
            "for testing; each needs at least one",
        )


def data_file(key: str, value: str, required: bool = True) -> Optional[pathlib.Path]:
    """The data file that the config key ``key`` names with ``value`` (a path, or a name under the shared data
    folder: ``vijax.data.resolve_data_path``); None for an empty or (unless ``required``) missing one.

    Raises:
      ValueError: naming ``key``: a required file empty or not found, a folder, not a regular file.
    """
    from vijax.data import resolve_data_path  # deferred: vijax.data is not needed to register experiments

    if not value:
        if required:
            raise ArgumentError(key, f"{key}: empty; give the path of a data file")
        return None
    path = resolve_data_path(value)
    if path is None:
        if not required:
            return None
        raise ArgumentError(
            key, f"{key}: {value!r} not found (directly, or under $VIJAX_SHARED_DATA or ../shared/data)"
        )
    if path.is_dir():
        raise ArgumentError(key, f"{key}: {value!r} is a folder, not a data file")
    if not path.is_file():
        raise ArgumentError(key, f"{key}: {value!r} is not a regular file (a device or a pipe), not a data file")
    return path


def eval_steps(run: Mapping) -> list[int]:
    """The steps at which ``vijax.run.run`` evaluates a run with the resolved ``run`` section (0 for no steps).

    Examples:
      >>> eval_steps({"num_steps": 100, "chunk_size": 20, "eval_every": 30})
      [40, 60, 100]
    """
    rc = RunConfig(**run)
    steps, t = [], 0
    while t < rc.num_steps:
        t_end = min((t // rc.chunk_size + 1) * rc.chunk_size, rc.num_steps)
        if crossed(t, t_end, rc.eval_every) or t_end == rc.num_steps:
            steps.append(t_end)
        t = t_end
    return steps or [0]
