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
(``CorruptCheckpointError``, ``ConfigChangedError``). ``fast_cpu_compile`` opts the process
in to quicker CPU compiles (``vijax run`` does). ``enable_compile_cache`` turns on JAX's
persistent compilation cache (``run`` and the command do by default; ``compile_cache_dir`` says
where). The built-in experiments live in
``vijax.run.experiments`` and register when it is imported (the command imports it).
"""

from vijax._lazy import exported, lazy_names

# name -> the module it is read from at its first use (vijax._lazy): `enable_compile_cache` or
# `fast_cpu_compile` load neither the runner nor the experiments
_MODULES = {
    "vijax.run._bounds": ("SEED_BOUND=SEED", "MemoryNeed=Need", "check_memory", "float_bytes"),
    "vijax.run._cache": ("compile_cache_dir", "enable_compile_cache"),
    "vijax.run._cli": (
        "DEFAULT_EXPERIMENT",
        "build_experiment",
        "default_config",
        "import_builtin_experiments",
        "main",
        "run_experiment",
    ),
    "vijax.run._config": (
        "ConfigError",
        "load_config",
        "parse_yaml",
        "resolve_config",
        "shipped_config_dir",
        "shipped_configs",
    ),
    "vijax.run._experiment": (
        "EXPERIMENTS",
        "Baseline",
        "Experiment",
        "ExperimentSpec",
        "check_methods",
        "check_split",
        "configured_algorithm",
        "data_file",
        "eval_steps",
        "register_experiment",
    ),
    "vijax.run._checkpoint": ("CheckpointError", "ConfigChangedError", "CorruptCheckpointError"),
    "vijax.run._health": ("RunHealth", "run_health"),
    "vijax.run._runner": ("RunConfig", "RunResult", "lower_run", "run"),
    "vijax._compile": ("fast_cpu_compile",),
}

__all__ = exported(_MODULES)

__getattr__, __dir__ = lazy_names(__name__, _MODULES, __all__)
