"""Run configs: YAML files naming a registered experiment, validated against its defaults.

A config has exactly these top-level keys::

    experiment: gmm_simulation   # a name in EXPERIMENTS (required)
    seed: 0                      # int; the run's key is jax.random.PRNGKey(seed)
    model: {...}                 # validated against the experiment's defaults["model"]
    data: {...}                  #   ... defaults["data"]
    algorithm: {...}             #   ... defaults["algorithm"]
    run: {...}                   # the fields of vijax.run.RunConfig (num_steps, chunk_size, ...)
    output: {dir}                # default "results/<experiment>"

Rules: a key that the schema does not list is an error naming its full path (``model.nmae``)
and the allowed keys; a value must have its default's type (an int is accepted, and converted,
where the default is a float; bools are not ints; a list is accepted for a tuple; a default of
None accepts anything; a dict default is validated recursively). Missing keys take their
defaults. Scientific notation without a dot (``1e-3``) reads as a float, not as YAML 1.1's string.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import re
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Union

import yaml

from vijax.inference import ALGORITHMS

from ._experiment import EXPERIMENTS
from ._runner import _SETTINGS, RunConfig

RUN_SETTINGS = tuple(f.name for f in dataclasses.fields(RunConfig))

TOP_LEVEL_KEYS = ("experiment", "seed", "model", "data", "algorithm", "run", "output")
SECTIONS = ("model", "data", "algorithm")


class ConfigError(ValueError):
    """An invalid config; the message names the offending key's full path."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``1e-3`` (no dot) as a float."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def parse_yaml(text: str) -> Any:
    """Parses YAML text with vijax's loader (safe, with dot-less scientific floats)."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)


def _type_name(x: Any) -> str:
    return "null" if x is None else type(x).__name__


def _check_type(path: str, value: Any, default: Any) -> Any:
    """``value`` checked against (and converted to) the type of ``default``."""
    if default is None:
        return value
    if isinstance(default, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected a mapping, got {_type_name(value)} {value!r}")
        return _merge(path, value, default)
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
            f"{path}: expected {_type_name(default)} (like the default {default!r}), got {_type_name(value)} {value!r}"
        )
    return value


def _merge(prefix: str, given: Mapping, defaults: Mapping) -> dict:
    """``defaults`` updated with ``given``, validating every key of ``given``."""
    out = copy.deepcopy(dict(defaults))
    for key, value in given.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in defaults:
            raise ConfigError(
                f"unknown config key {path!r}; allowed keys of {prefix or 'the config'}: {sorted(map(str, defaults))}"
            )
        out[key] = _check_type(path, value, defaults[key])
    return out


def _check_run(given: Mapping, experiment_defaults: Mapping) -> dict:
    """The ``run`` section: ``RunConfig``'s defaults, then the experiment's, then the config's."""
    for source, values in (("the experiment's run defaults", experiment_defaults), ("run", given)):
        for key in values:
            if key not in RUN_SETTINGS:
                where = repr(f"run.{key}") if source == "run" else f"{key!r} in {source}"
                raise ConfigError(f"unknown config key {where}; allowed keys of run: {sorted(RUN_SETTINGS)}")
    try:
        return RunConfig.from_dict({**experiment_defaults, **given}).as_dict()
    except ValueError as e:
        raise ConfigError(str(e)) from None


def apply_overrides(raw: dict, overrides: Iterable[str]) -> dict:
    """Applies ``"a.b.c=value"`` overrides (values parsed as YAML) to a raw config dict.

    Args:
      raw: the config as read (not modified).
      overrides: strings ``dotted.key=value``; ``value`` is YAML (``7``, ``0.5``, ``[1, 2]``,
        ``null``, ``text``).

    Returns:
      A new dict with the overrides set (validation happens afterwards, in ``load_config``).
    """
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
        node[keys[-1]] = parse_yaml(text) if text.strip() else None
    return out


def load_config(path_or_dict: Union[str, os.PathLike, Mapping], overrides: Iterable[str] = ()) -> dict:
    """Loads, overrides, validates and fills in a run config.

    Args:
      path_or_dict: a YAML file's path, or the config as a dict.
      overrides: ``"dotted.key=value"`` strings applied before validation (``--set``).

    The experiment must be registered: the built-in ones register when ``vijax.run.experiments``
    is imported (the ``vijax`` command does that), others where they are defined.

    Returns:
      The resolved config: a dict with every top-level key, the three sections merged over the
      experiment's defaults, ``run`` and ``output`` filled in.

    Raises:
      ConfigError: (a ``ValueError``) naming the offending key, for an unknown top-level or
        section key, a value of the wrong type, or an unknown experiment.

    Examples:
      >>> load_config({"experiment": "nope"})  # doctest: +IGNORE_EXCEPTION_DETAIL
      Traceback (most recent call last):
      ConfigError: experiment: unknown experiment 'nope'; registered: [...]
    """
    if isinstance(path_or_dict, Mapping):
        raw = copy.deepcopy(dict(path_or_dict))
    else:
        with open(path_or_dict, encoding="utf-8") as f:
            raw = parse_yaml(f.read())
        raw = {} if raw is None else raw
        if not isinstance(raw, dict):
            raise ConfigError(f"{path_or_dict}: a config must be a mapping, got {_type_name(raw)}")
    raw = apply_overrides(raw, overrides)
    for key in raw:
        if key not in TOP_LEVEL_KEYS:
            raise ConfigError(f"unknown top-level config key {key!r}; allowed: {list(TOP_LEVEL_KEYS)}")
    name = raw.get("experiment")
    if not isinstance(name, str):
        raise ConfigError(
            f"experiment: expected the name of a registered experiment, got "
            f"{_type_name(name)} {name!r}; registered: {sorted(EXPERIMENTS)}"
        )
    if name not in EXPERIMENTS:
        raise ConfigError(
            f"experiment: unknown experiment {name!r}; registered: {sorted(EXPERIMENTS)} (the "
            "built-in experiments register when vijax.run.experiments is imported)"
        )
    spec = EXPERIMENTS[name]
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed: expected int, got {_type_name(seed)} {seed!r}")
    config: dict[str, Any] = {"experiment": name, "seed": seed}
    for section in SECTIONS:
        given = raw.get(section) or {}
        if not isinstance(given, Mapping):
            raise ConfigError(f"{section}: expected a mapping, got {_type_name(given)} {given!r}")
        config[section] = _merge(section, given, spec.defaults.get(section, {}))
    run_given = raw.get("run") or {}
    if not isinstance(run_given, Mapping):
        raise ConfigError(f"run: expected a mapping, got {_type_name(run_given)} {run_given!r}")
    config["run"] = _check_run(run_given, spec.defaults.get("run", {}))
    output = raw.get("output") or {}
    if not isinstance(output, Mapping):
        raise ConfigError(f"output: expected a mapping, got {_type_name(output)} {output!r}")
    config["output"] = _merge("output", output, {"dir": f"results/{name}"})
    return config


class ConfigKey(NamedTuple):
    """One key of a config as the schema gives it (``vijax run --help``, ``vijax list NAME``)."""

    key: str  # the dotted path, e.g. "run.num_steps"
    type: str
    default: Any
    allowed: str


# the bounds check_run_setting enforces besides each setting's type and minimum (for `vijax run --help`)
_EXTRA_BOUNDS = {
    "num_steps": "< 2**31 - 1",
    "tol": "> 0",
    "max_rejected_share": "<= 1",
    "compile_cache": "true, false or a folder",
}


def run_setting_schema(name: str) -> tuple[str, Any, str]:
    """The type, default and allowed range of the run setting ``name``, as
    ``vijax.run._runner.check_run_setting`` enforces them (``("int", 100, ">= 1")``)."""
    default, types, nullable, minimum = _SETTINGS[name]
    kinds = " or ".join([t.__name__ for t in types] + (["null"] if nullable else []))
    bounds = ([f">= {minimum}"] if minimum is not None else []) + (
        [_EXTRA_BOUNDS[name]] if name in _EXTRA_BOUNDS else []
    )
    return kinds, default, " and ".join(bounds) or "any"


def _schema_type(default: Any) -> str:
    """The values ``_check_type`` accepts where the default is ``default``."""
    if default is None:
        return "any"
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, float):
        return "float (or int)"
    if isinstance(default, (list, tuple)):
        return "list"
    return type(default).__name__


def _section_keys(prefix: str, defaults: Mapping, out: list) -> None:
    for key, default in defaults.items():
        path = f"{prefix}.{key}"
        if isinstance(default, Mapping):
            _section_keys(path, default, out)
        elif path == "algorithm.name":
            out.append(
                ConfigKey(
                    path,
                    "str",
                    default,
                    "a registered algorithm the model qualifies for: " + ", ".join(sorted(ALGORITHMS)),
                )
            )
        else:
            out.append(ConfigKey(path, _schema_type(default), default, "range checked when the experiment is built"))


def config_keys(experiment: Optional[str] = None) -> list[ConfigKey]:
    """Every key of a config, from the schema: without ``experiment``, the keys every config has
    (``experiment``, ``seed``, ``run.*`` with ``RunConfig``'s defaults, ``output.dir``); with it,
    also that experiment's ``model``, ``data`` and ``algorithm`` keys, its own run defaults in
    place of ``RunConfig``'s.

    Raises:
      ConfigError: naming ``experiment`` when it is not registered.
    """
    if experiment is not None and experiment not in EXPERIMENTS:
        raise ConfigError(f"experiment: unknown experiment {experiment!r}; registered: {sorted(EXPERIMENTS)}")
    defaults = EXPERIMENTS[experiment].defaults if experiment is not None else {}
    keys = [
        ConfigKey("experiment", "str", experiment, "required: a registered experiment (vijax list)"),
        ConfigKey("seed", "int", 0, "any; the run's key is jax.random.PRNGKey(seed)"),
    ]
    for section in SECTIONS:
        _section_keys(section, defaults.get(section, {}), keys)
    run_defaults = defaults.get("run", {})
    for name in RUN_SETTINGS:
        kind, default, allowed = run_setting_schema(name)
        keys.append(ConfigKey(f"run.{name}", kind, run_defaults.get(name, default), allowed))
    keys.append(ConfigKey("output.dir", "str", f"results/{experiment or '<experiment>'}", "a writable folder"))
    return keys


# run settings that do not change what a run computes (its state and trace): a resume may change them
FINGERPRINT_IGNORED = (
    "output.dir",
    "run.progress",
    "run.eval_every",
    "run.checkpoint_every",
    "run.max_rejected_share",
    "run.prefetch",
    "run.check_values",
)
_IDENTITY_BYTES = 1 << 20  # a data file is identified by its size and the SHA-256 of its first and last MiB


def _flatten(prefix: str, value: Any, out: dict) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = list(value) if isinstance(value, tuple) else value


def file_identity(path: Union[str, os.PathLike]) -> str:
    """A cheap identity of a data file: ``"<size> bytes, sha256 <hex>"`` of its first and last
    MiB (the whole file when it is smaller), independent of its name and modification time."""
    size = os.path.getsize(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read(_IDENTITY_BYTES))
        if size > 2 * _IDENTITY_BYTES:
            f.seek(size - _IDENTITY_BYTES)
        h.update(f.read(_IDENTITY_BYTES))
    return f"{size} bytes, sha256 {h.hexdigest()[:16]}"


def config_fingerprint(config: Mapping) -> dict:
    """What a resolved config's run computes, for ``vijax.run.run(fingerprint=...)``:
    ``{"hash": sha256, "values": {dotted key: value}}`` over every key except
    ``FINGERPRINT_IGNORED``, plus ``data_files.<key>`` with ``file_identity`` for each string
    value of the ``data`` section that names a file (as the experiments resolve it:
    ``vijax.data.resolve_data_path``).

    Examples:
      >>> a = config_fingerprint({"experiment": "x", "run": {"num_steps": 10, "progress": True}})
      >>> b = config_fingerprint({"experiment": "x", "run": {"num_steps": 10, "progress": False}})
      >>> a == b, sorted(a["values"])
      (True, ['experiment', 'run.num_steps'])
    """
    from vijax.data import resolve_data_path

    values: dict = {}
    _flatten("", {k: v for k, v in config.items()}, values)
    for key in FINGERPRINT_IGNORED:
        values.pop(key, None)
    data: dict = {}
    _flatten("", config.get("data") or {}, data)
    for key, value in data.items():
        if isinstance(value, str) and value:
            path = resolve_data_path(value)
            if path is not None and os.path.isfile(path):
                values[f"data_files.{key}"] = file_identity(path)
    values = json.loads(json.dumps(values, sort_keys=True, default=str))
    digest = hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()
    return {"hash": digest, "values": values}


__all__ = [
    "ConfigError",
    "ConfigKey",
    "FINGERPRINT_IGNORED",
    "apply_overrides",
    "config_fingerprint",
    "config_keys",
    "file_identity",
    "load_config",
    "parse_yaml",
    "run_setting_schema",
]
