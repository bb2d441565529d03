"""The settings of a run: ``RunConfig`` and ``SETTINGS``, the one table that ``vijax.run.run`` and
the YAML schema of a config's ``run`` section read."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Union

import jax
import numpy as np

from . import _cache
from vijax._compile import fast_cpu_compile
from vijax._validate import ArgumentError


# name -> (default, accepted types, may be None, minimum); each described in RunConfig's docstring
SETTINGS = {
    "num_steps": (1000, (int,), False, 0),
    "chunk_size": (100, (int,), False, 1),
    "tol": (None, (float,), True, None),
    "patience": (3, (int,), False, 1),
    "min_steps": (0, (int,), False, 0),
    "eval_every": (None, (int,), True, 1),
    "checkpoint_every": (None, (int,), True, 1),
    "progress": (True, (bool,), False, None),
    "max_rejected_share": (0.5, (float,), False, 0.0),
    "x64": (False, (bool,), False, None),
    "cpu_devices": (None, (int,), True, 1),
    "compile_cache": (None, (bool, str), True, None),
    "fast_cpu_compile": (True, (bool,), False, None),
    "prefetch": (2, (int,), False, 0),
    "check_values": (True, (bool,), False, None),
}


def type_name(x) -> str:
    """``"null"`` for None, else the name of ``x``'s type (for messages)."""
    return "null" if x is None else type(x).__name__


def check_run_setting(name: str, value, label: str):
    """``value`` checked against the run setting ``name`` (an int made a float where one is expected)."""
    _, types, nullable, minimum = SETTINGS[name]
    if value is None and nullable:
        return None
    if float in types and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = float(value)
    if isinstance(value, np.integer) and int in types:
        value = int(value)
    if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
        kinds = " or ".join([t.__name__ for t in types] + (["null"] if nullable else []))
        raise ArgumentError(label, f"{label}: expected {kinds}, got {type_name(value)} {value!r}")
    if minimum is not None and value < minimum:
        raise ArgumentError(label, f"{label}: must be >= {minimum}, got {value!r}")
    if name == "num_steps" and value >= 2**31 - 1:
        raise ArgumentError(label, f"{label}: must be < 2**31 - 1, got {value!r}")
    if name == "max_rejected_share" and not value <= 1.0:
        raise ArgumentError(label, f"{label}: must lie in [0, 1], got {value!r}")
    if name == "compile_cache" and isinstance(value, str) and not value.strip():
        raise ArgumentError(label, f"{label}: expected true, false or a folder, got an empty string")
    if name == "tol" and not (np.isfinite(value) and value > 0):
        raise ArgumentError(label, f"{label}: must be positive or null, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The settings of one run: the defaults that ``run()``, the YAML ``run:`` section and the
    command line share. Every field is checked on construction (ValueError naming it).

    Attributes:
      num_steps: the total number of updates, counting those done before a resume.
      chunk_size: updates per jitted ``lax.scan`` call.
      tol: relative ELBO tolerance of the stopping rule, or None to run all steps.
      patience: consecutive chunk boundaries below ``tol`` needed to stop.
      min_steps: updates before the stopping rule may stop the run.
      eval_every: evaluation period in updates (rounded up to chunk boundaries); None: at the end.
      checkpoint_every: checkpoint period in updates (rounded up to chunk boundaries); None: at the end only.
      progress: show a tqdm bar (off by itself when stderr is not a terminal).
      max_rejected_share: the largest share of rejected steps that ``vijax run`` accepts (above: exit status 3).
      x64: run in float64 (``jax_enable_x64``). A process setting (``apply_process_settings``).
      cpu_devices: the number of CPU devices JAX shows; None leaves JAX's default. A process setting.
      compile_cache: JAX's persistent compilation cache: True (the default folder), False (off), a folder, or
        None (on for the ``vijax`` command, opt-in for a library call unless ``$VIJAX_COMPILE_CACHE`` is set).
      fast_cpu_compile: quicker CPU compile settings (``vijax.run.fast_cpu_compile``). A process setting.
      prefetch: with ``host_batches``, how many chunks a background thread builds ahead (0: none); same results.
      check_values: the value checks of every step's batch (as ``vijax.inference.jit_step``'s).
    """

    num_steps: int = SETTINGS["num_steps"][0]
    chunk_size: int = SETTINGS["chunk_size"][0]
    tol: Optional[float] = SETTINGS["tol"][0]
    patience: int = SETTINGS["patience"][0]
    min_steps: int = SETTINGS["min_steps"][0]
    eval_every: Optional[int] = SETTINGS["eval_every"][0]
    checkpoint_every: Optional[int] = SETTINGS["checkpoint_every"][0]
    progress: bool = SETTINGS["progress"][0]
    max_rejected_share: float = SETTINGS["max_rejected_share"][0]
    x64: bool = SETTINGS["x64"][0]
    cpu_devices: Optional[int] = SETTINGS["cpu_devices"][0]
    compile_cache: Union[bool, str] = SETTINGS["compile_cache"][0]
    fast_cpu_compile: bool = SETTINGS["fast_cpu_compile"][0]
    prefetch: int = SETTINGS["prefetch"][0]
    check_values: bool = SETTINGS["check_values"][0]

    def __post_init__(self):
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, check_run_setting(f.name, getattr(self, f.name), f.name))

    @classmethod
    def from_dict(cls, values: Mapping, prefix: str = "run") -> "RunConfig":
        """A RunConfig from a mapping (a config's ``run`` section); errors name ``<prefix>.<key>``."""
        unknown = sorted(set(values) - set(SETTINGS))
        if unknown:
            raise ValueError(
                f"unknown config key {prefix + '.' + str(unknown[0])!r}; allowed keys of {prefix}: {sorted(SETTINGS)}"
            )
        checked = {k: check_run_setting(k, v, f"{prefix}.{k}") for k, v in values.items()}
        return cls(**checked)

    def as_dict(self) -> dict:
        """The settings as a plain dict, setting name -> value (``dataclasses.asdict``)."""
        return dataclasses.asdict(self)

    def replace(self, **settings) -> "RunConfig":
        """A copy with ``settings`` changed and checked; ValueError naming an unknown setting."""
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise ValueError(f"unknown run setting(s) {unknown}; the settings of RunConfig are {sorted(SETTINGS)}")
        return dataclasses.replace(self, **settings)

    def apply_process_settings(self) -> None:
        """Applies ``x64``, ``cpu_devices``, ``fast_cpu_compile`` and ``compile_cache`` to this process, the first
        three before JAX makes arrays (ValueError naming ``cpu_devices`` when too late)."""
        if self.fast_cpu_compile:
            fast_cpu_compile()
        if self.x64:
            jax.config.update("jax_enable_x64", True)
        if self.cpu_devices is not None:
            try:
                jax.config.update("jax_num_cpu_devices", int(self.cpu_devices))
            except RuntimeError as e:
                if len(jax.devices("cpu")) != self.cpu_devices:
                    raise ValueError(
                        f"run.cpu_devices: cannot set {self.cpu_devices} CPU devices, JAX has already "
                        f"started with {len(jax.devices('cpu'))} ({e}); set it before any JAX "
                        "computation"
                    ) from None
        _cache.enable_compile_cache(self.compile_cache)

    def check_process_settings(self) -> None:
        """ValueError when this process does not run with ``x64`` / ``cpu_devices``."""
        if self.x64 and not jax.config.jax_enable_x64:
            raise ValueError(
                "x64=True but JAX runs in float32: call RunConfig.apply_process_settings() (or "
                "jax.config.update('jax_enable_x64', True)) before any array is made"
            )
        if self.cpu_devices is not None and len(jax.devices("cpu")) != self.cpu_devices:
            raise ValueError(
                f"cpu_devices={self.cpu_devices} but JAX shows {len(jax.devices('cpu'))} CPU devices: "
                "call RunConfig.apply_process_settings() before any JAX computation"
            )
