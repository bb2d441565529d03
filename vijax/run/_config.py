"""Run configs: YAML files naming a registered experiment, validated against its defaults.

A config has the keys ``experiment`` (required), ``seed``, ``model``, ``data`` and ``algorithm`` (checked
against the experiment's defaults: an unknown key or a value not of its default's type is an error naming
its path; an int passes for a float, a list for a tuple, anything for a None default), ``run`` (the fields
of ``RunConfig``) and ``output: {dir}``. The experiment's bounds and memory needs are then checked.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import pathlib
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Union


from vijax.inference import ALGORITHMS

from ._bounds import MAX_SEED, SEED, check_bounds, check_memory, parse_bound
from ._experiment import EXPERIMENTS
from ._run_config import SETTINGS, RunConfig, type_name
from ._yaml import ConfigError, parse_yaml, read_config_text

RUN_SETTINGS = tuple(f.name for f in dataclasses.fields(RunConfig))

TOP_LEVEL_KEYS = ("experiment", "seed", "model", "data", "algorithm", "run", "output")
SECTIONS = ("model", "data", "algorithm")


def _check_type(path: str, value: Any, default: Any, nullable: frozenset = frozenset()) -> Any:
    """``value`` checked against (and converted to) the type of ``default``; None passes for ``nullable`` keys."""
    if default is None or (value is None and path in nullable):
        return value
    if isinstance(default, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected a mapping, got {type_name(value)} {value!r}")
        return _merge(path, value, default, nullable)
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif isinstance(default, (list, tuple)):
        ok = isinstance(value, (list, tuple))
        value = type(default)(value) if ok else value
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise ConfigError(
            f"{path}: expected {type_name(default)} (like the default {default!r}), got {type_name(value)} {value!r}"
        )
    return value


def _merge(prefix: str, given: Mapping, defaults: Mapping, nullable: frozenset = frozenset()) -> dict:
    """``defaults`` updated with ``given``, validating every key of ``given``."""
    out = copy.deepcopy(dict(defaults))
    for key, value in given.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in defaults:
            raise ConfigError(
                f"unknown config key {path!r}; allowed keys of {prefix or 'the config'}: {sorted(map(str, defaults))}"
            )
        out[key] = _check_type(path, value, defaults[key], nullable)
    return out


# run settings whose minimum in a config is above RunConfig's (a program may run no steps; `vijax run` may not)
_CONFIG_MINIMUM = {"num_steps": 1}


def _check_run(given: Mapping, experiment_defaults: Mapping) -> dict:
    """The ``run`` section: ``RunConfig``'s defaults, then the experiment's, then the config's."""
    for source, values in (("the experiment's run defaults", experiment_defaults), ("run", given)):
        for key in values:
            if key not in RUN_SETTINGS:
                where = repr(f"run.{key}") if source == "run" else f"{key!r} in {source}"
                raise ConfigError(f"unknown config key {where}; allowed keys of run: {sorted(RUN_SETTINGS)}")
    try:
        run = RunConfig.from_dict({**experiment_defaults, **given}).as_dict()
    except ValueError as e:
        raise ConfigError(str(e)) from None
    for key, minimum in _CONFIG_MINIMUM.items():
        if run[key] < minimum:
            raise ConfigError(f"run.{key} must be an integer >= {minimum} in a config, got {run[key]!r}")
    return run


def apply_overrides(raw: dict, overrides: Iterable[str]) -> dict:
    """A copy of the raw config ``raw`` with the ``"dotted.key=value"`` overrides set, each value read as YAML."""
    out = copy.deepcopy(raw)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key.path=value")
        dotted, text = item.split("=", 1)
        keys = dotted.strip().split(".")
        if not all(keys):
            raise ConfigError(f"override {item!r}: empty key in {dotted!r}")
        node = out
        for i, k in enumerate(keys[:-1]):
            if node.get(k) is None:
                node[k] = {}
            node = node[k]
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {'.'.join(keys[: i + 1])} is not a mapping")
        node[keys[-1]] = parse_yaml(text, f"--set {item}", ".".join(keys)) if text.strip() else None
    return out


def load_config(path_or_dict: Union[str, os.PathLike, Mapping], overrides: Iterable[str] = ()) -> dict:
    """Loads, overrides, validates and fills in a run config of a registered experiment.

    Args:
      path_or_dict: a YAML file's path, or the config as a dict.
      overrides: ``"dotted.key=value"`` strings applied before validation (``--set``).

    Returns:
      The resolved config: every top-level key, the sections merged over the experiment's defaults.

    Raises:
      ConfigError: (a ``ValueError``) naming the offending key (an unknown key, a wrong type, a value outside
        the bounds, a seed outside [0, 2**32 - 1], sizes beyond this machine's memory) or the unreadable file.

    Examples:
      >>> load_config({"experiment": "nope"})  # doctest: +IGNORE_EXCEPTION_DETAIL
      Traceback (most recent call last):
      ConfigError: experiment: unknown experiment 'nope'; registered: [...]
    """
    if isinstance(path_or_dict, Mapping):
        raw = copy.deepcopy(dict(path_or_dict))
    else:
        raw = parse_yaml(read_config_text(path_or_dict), os.fspath(path_or_dict))
        raw = {} if raw is None else raw
        if not isinstance(raw, dict):
            raise ConfigError(f"{path_or_dict}: a config must be a mapping, got {type_name(raw)}")
    raw = apply_overrides(raw, overrides)
    for key in raw:
        if key not in TOP_LEVEL_KEYS:
            raise ConfigError(f"unknown top-level config key {key!r}; allowed: {list(TOP_LEVEL_KEYS)}")
    name = raw.get("experiment")
    if not isinstance(name, str):
        raise ConfigError(
            f"experiment: expected the name of a registered experiment, got "
            f"{type_name(name)} {name!r}; registered: {sorted(EXPERIMENTS)}"
        )
    if name not in EXPERIMENTS:
        raise ConfigError(
            f"experiment: unknown experiment {name!r}; registered: {sorted(EXPERIMENTS)} (the "
            "built-in experiments register when vijax.run.experiments is imported)"
        )
    spec = EXPERIMENTS[name]
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed: expected int, got {type_name(seed)} {seed!r}")
    if not 0 <= seed <= MAX_SEED:
        raise ConfigError(
            f"seed must be an integer {SEED}, got {seed!r} (jax.random.PRNGKey reads 32 bits of a seed: "
            "outside this range two seeds would give the same run)"
        )
    config: dict[str, Any] = {"experiment": name, "seed": seed}
    nullable = frozenset(k for k, text in spec.bounds.items() if parse_bound(text).nullable)
    for section in (*SECTIONS, "run", "output"):
        given = raw.get(section) or {}
        if not isinstance(given, Mapping):
            raise ConfigError(f"{section}: expected a mapping, got {type_name(given)} {given!r}")
        if section == "run":
            config["run"] = _check_run(given, spec.defaults.get("run", {}))
        else:
            defaults = {"dir": f"results/{name}"} if section == "output" else spec.defaults.get(section, {})
            config[section] = _merge(section, given, defaults, nullable)
    try:
        check_bounds(config, spec.bounds, spec.defaults)
        if spec.memory is not None:
            check_memory(spec.memory(config), config, spec.defaults)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return config


class ConfigKey(NamedTuple):
    """One key of a config as the schema gives it (``vijax run --help``, ``vijax list NAME``)."""

    key: str  # the dotted path, e.g. "run.num_steps"
    type: str
    default: Any
    allowed: str


# the bounds check_run_setting enforces besides each setting's type and minimum (for `vijax run --help`)
_EXTRA_BOUNDS = {"num_steps": "< 2**31 - 1", "tol": "> 0", "max_rejected_share": "<= 1"}
_EXTRA_BOUNDS |= {"compile_cache": "true, false or a folder"}


def run_setting_schema(name: str) -> tuple[str, Any, str]:
    """The type, default and allowed range of the run setting ``name`` (``("int", 100, ">= 1")``)."""
    default, types, nullable, minimum = SETTINGS[name]
    minimum = _CONFIG_MINIMUM.get(name, minimum)
    kinds = " or ".join([t.__name__ for t in types] + (["null"] if nullable else []))
    bounds = [b for b in (minimum is not None and f">= {minimum}", _EXTRA_BOUNDS.get(name)) if b]
    return kinds, default, " and ".join(bounds) or "any"


def _schema_type(default: Any) -> str:
    """The values ``_check_type`` accepts where the default is ``default``."""
    kinds = ((type(None), "any"), (bool, "bool"), (float, "float (or int)"), ((list, tuple), "list"))
    return next((name for kind, name in kinds if isinstance(default, kind)), type(default).__name__)


def config_keys(experiment: Optional[str] = None) -> list[ConfigKey]:
    """Every key of a config: those every config has, and with ``experiment`` also its section keys and run
    defaults.

    Raises:
      ConfigError: naming ``experiment`` when it is not registered.
    """
    if experiment is not None and experiment not in EXPERIMENTS:
        raise ConfigError(f"experiment: unknown experiment {experiment!r}; registered: {sorted(EXPERIMENTS)}")
    defaults = EXPERIMENTS[experiment].defaults if experiment is not None else {}
    keys = [
        ConfigKey("experiment", "str", experiment, "required: a registered experiment (vijax list)"),
        ConfigKey("seed", "int", 0, f"{SEED}; the run's key is jax.random.PRNGKey(seed)"),
    ]
    bounds = EXPERIMENTS[experiment].bounds if experiment is not None else {}
    for section in SECTIONS:
        for path, default in flatten_config(defaults.get(section, {}), section).items():
            kind, allowed = _schema_type(default), bounds.get(path, "checked when the experiment is built")
            if path == "algorithm.name":
                allowed = "a registered algorithm the model qualifies for: " + ", ".join(sorted(ALGORITHMS))
            elif path in bounds:
                bound = parse_bound(bounds[path])
                kind = kind if default is not None else {"int": "int", "number": "float (or int)"}[bound.kind]
                kind += " or null" if bound.nullable else ""
            keys.append(ConfigKey(path, kind, default, allowed))
    run_defaults = defaults.get("run", {})
    for name in RUN_SETTINGS:
        kind, default, allowed = run_setting_schema(name)
        keys.append(ConfigKey(f"run.{name}", kind, run_defaults.get(name, default), allowed))
    keys.append(ConfigKey("output.dir", "str", f"results/{experiment or '<experiment>'}", "a writable folder"))
    return keys


# run settings that do not change what a run computes (its state and trace): a resume may change them
FINGERPRINT_IGNORED = ("output.dir", "run.progress", "run.eval_every", "run.checkpoint_every", "run.max_rejected_share")
FINGERPRINT_IGNORED += ("run.prefetch", "run.check_values")
_IDENTITY_BYTES = 1 << 20  # a data file is identified by its size and the SHA-256 of its content, read by MiB


def flatten_config(value: Mapping, prefix: str = "") -> dict:
    """``dotted.key -> value`` for every leaf of the nested mapping ``value``."""
    out = {}
    for k, v in value.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out.update(flatten_config(v, key) if isinstance(v, Mapping) else {key: v})
    return out


def file_identity(path: Union[str, os.PathLike]) -> str:
    """The identity of a data file by its content, ``"<size> bytes, sha256 <hex>"``."""
    size = os.path.getsize(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_IDENTITY_BYTES), b""):
            h.update(block)
    return f"{size} bytes, sha256 {h.hexdigest()[:16]}"


def config_fingerprint(config: Mapping) -> dict:
    """What a resolved config's run computes, for ``vijax.run.run(fingerprint=...)``: ``{"hash", "values"}``
    over every key but ``FINGERPRINT_IGNORED``, plus ``data_files.<key>``: the ``file_identity`` of a data file.

    Examples:
      >>> a = config_fingerprint({"experiment": "x", "run": {"num_steps": 10, "progress": True}})
      >>> b = config_fingerprint({"experiment": "x", "run": {"num_steps": 10, "progress": False}})
      >>> a == b, sorted(a["values"])
      (True, ['experiment', 'run.num_steps'])
    """
    from vijax.data import resolve_data_path

    values = {k: v for k, v in flatten_config(config).items() if k not in FINGERPRINT_IGNORED}
    for key, value in flatten_config(config.get("data") or {}).items():
        if isinstance(value, str) and value:
            path = resolve_data_path(value)
            if path is not None and os.path.isfile(path):
                values[f"data_files.{key}"] = file_identity(path)
    values = json.loads(json.dumps(values, sort_keys=True, default=str))
    digest = hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()
    return {"hash": digest, "values": values}


# ----------------------------------------------------------------------------- shipped configs
# the repository's configs/*.yaml, copied into the wheel as vijax/run/configs by setup.py


def shipped_config_dir() -> Optional[pathlib.Path]:
    """The folder of the shipped configs: ``vijax/run/configs`` in a wheel, ``configs/`` in a checkout, or None."""
    here = pathlib.Path(__file__).resolve().parent  # vijax/run
    for folder in (here / "configs", here.parents[1] / "configs"):
        if folder.is_dir() and any(folder.glob("*.yaml")):
            return folder
    return None


def shipped_configs() -> list[str]:
    """The names of the shipped configs (``vijax run NAME`` runs ``NAME.yaml``), sorted."""
    folder = shipped_config_dir()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder is not None else []


def resolve_config(arg: str) -> str:
    """The file ``vijax run ARG`` reads: ``ARG`` where it exists, else the shipped config of that name (also for
    ``configs/NAME.yaml`` outside a checkout); ConfigError naming the shipped configs otherwise."""
    if os.path.exists(arg):
        return arg
    head, name = os.path.split(os.path.normpath(arg))
    stem = name[: -len(".yaml")] if name.endswith(".yaml") else name
    folder = shipped_config_dir()
    if head in ("", "configs") and folder is not None and (folder / f"{stem}.yaml").is_file():
        return str(folder / f"{stem}.yaml")
    if head == "" and not name.endswith((".yaml", ".yml")):  # a name, not a file's path
        raise ConfigError(
            f"config: no file {arg!r} here and no shipped config of that name; shipped: {', '.join(shipped_configs())}"
        )
    return arg  # load_config names the missing file
