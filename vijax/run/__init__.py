"""The one host loop, checkpoints, run configs and the ``vijax`` command.

``run`` drives any ``VIAlgorithm`` in jitted ``lax.scan`` chunks with progress, evaluation, a
stopping rule and bit-identical checkpoint/resume, with the settings of a ``RunConfig``;
``load_config`` reads and validates a YAML config against a registered ``ExperimentSpec``;
``run_experiment`` runs one into a results folder; ``main`` is ``vijax run`` / ``vijax list``.
The built-in experiments live in ``vijax.run.experiments`` and register when it is imported.
"""

from vijax._lazy import exported, lazy_names

# name -> its module, loaded at the name's first use (vijax._lazy)
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
