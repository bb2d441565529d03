"""The one host loop, checkpoints, run configs and the ``vijax`` command.

``run`` drives any ``VIAlgorithm`` in jitted ``lax.scan`` chunks with progress, evaluation,
a relative-tolerance stopping rule and bit-identical checkpoint/resume, with the settings of a
``RunConfig``; ``load_config`` reads and validates a YAML config against a registered
``ExperimentSpec``; ``run_experiment`` runs one (and its ``Baseline`` runs) into a results
folder; ``main`` is ``vijax run`` / ``vijax list``; ``shipped_configs`` names the configs vijax ships
(``shipped_config_dir``: in the wheel, or a checkout's ``configs/``) and ``resolve_config`` finds the
file ``vijax run NAME`` reads. For experiment builders:
``configured_algorithm`` builds the registered algorithm a config's ``algorithm.name`` names,
``eval_steps`` gives the steps at which a run's settings evaluate; ``SEED_BOUND``, ``MemoryNeed``,
``float_bytes``, ``check_memory`` and ``check_split`` declare and check a config's ranges and memory; ``build_experiment`` builds a
resolved config's experiment as the command does, and ``lower_run`` gives the chunk program a run
compiles, lowered (for compile-time and program-size measurements). ``run_health`` reads a trace's
non-finite ELBOs and rejected steps; a resume that cannot be trusted raises ``CheckpointError``
(``CorruptCheckpointError``, ``ConfigChangedError``). ``fast_cpu_compile`` starts the process
with XLA's faster CPU compile settings (``vijax run`` does). ``enable_compile_cache`` turns on JAX's
persistent compilation cache (``run`` and the command do by default; ``compile_cache_dir`` says
where). The built-in experiments live in
``vijax.run.experiments`` and register when it is imported (the command imports it).
"""

from ._bounds import SEED as SEED_BOUND
from ._bounds import Need as MemoryNeed
from ._bounds import check_memory, float_bytes
from ._cache import compile_cache_dir, enable_compile_cache
from ._cli import DEFAULT_EXPERIMENT, build_experiment, default_config, import_builtin_experiments, main, run_experiment
from ._shipped import resolve_config, shipped_config_dir, shipped_configs
from ._config import ConfigError, load_config, parse_yaml
from ._experiment import (
    EXPERIMENTS,
    Baseline,
    Experiment,
    ExperimentSpec,
    check_methods,
    check_split,
    configured_algorithm,
    data_file,
    eval_steps,
    register_experiment,
)
from ._checkpoint import CheckpointError, ConfigChangedError, CorruptCheckpointError
from ._health import RunHealth, run_health
from ._lower import lower_run
from ._runner import RunConfig, RunResult, run
from ._xla_flags import fast_cpu_compile

__all__ = [
    "DEFAULT_EXPERIMENT",
    "EXPERIMENTS",
    "Baseline",
    "CheckpointError",
    "ConfigChangedError",
    "ConfigError",
    "CorruptCheckpointError",
    "Experiment",
    "ExperimentSpec",
    "MemoryNeed",
    "SEED_BOUND",
    "RunConfig",
    "RunHealth",
    "RunResult",
    "build_experiment",
    "check_memory",
    "check_methods",
    "check_split",
    "compile_cache_dir",
    "configured_algorithm",
    "data_file",
    "default_config",
    "enable_compile_cache",
    "fast_cpu_compile",
    "float_bytes",
    "eval_steps",
    "import_builtin_experiments",
    "load_config",
    "lower_run",
    "main",
    "resolve_config",
    "shipped_config_dir",
    "shipped_configs",
    "parse_yaml",
    "register_experiment",
    "run",
    "run_experiment",
    "run_health",
]
