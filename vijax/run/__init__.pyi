"""Names of the package for type checkers and the lazy loader (vijax._lazy.attach_stub)."""

from vijax.run._bounds import (
    SEED as SEED_BOUND,
    Need as MemoryNeed,
    check_memory as check_memory,
    float_bytes as float_bytes,
)
from vijax.run._cache import compile_cache_dir as compile_cache_dir, enable_compile_cache as enable_compile_cache
from vijax.run._cli import (
    DEFAULT_EXPERIMENT as DEFAULT_EXPERIMENT,
    build_experiment as build_experiment,
    default_config as default_config,
    import_builtin_experiments as import_builtin_experiments,
    main as main,
    run_experiment as run_experiment,
)
from vijax.run._config import (
    ConfigError as ConfigError,
    load_config as load_config,
    parse_yaml as parse_yaml,
    resolve_config as resolve_config,
    shipped_config_dir as shipped_config_dir,
    shipped_configs as shipped_configs,
)
from vijax.run._experiment import (
    EXPERIMENTS as EXPERIMENTS,
    Baseline as Baseline,
    Experiment as Experiment,
    ExperimentSpec as ExperimentSpec,
    check_methods as check_methods,
    check_split as check_split,
    configured_algorithm as configured_algorithm,
    data_file as data_file,
    eval_steps as eval_steps,
    register_experiment as register_experiment,
)
from vijax.run._checkpoint import (
    CheckpointError as CheckpointError,
    ConfigChangedError as ConfigChangedError,
    CorruptCheckpointError as CorruptCheckpointError,
)
from vijax.run._fit import (
    Plan as Plan,
    PlanRow as PlanRow,
    Posterior as Posterior,
    Summary as Summary,
    fit as fit,
    plan_fit as plan_fit,
)
from vijax.run._health import RunHealth as RunHealth, run_health as run_health
from vijax.run._runner import RunConfig as RunConfig, RunResult as RunResult, lower_run as lower_run, run as run
from vijax._compile import fast_cpu_compile as fast_cpu_compile

__all__ = [
    "SEED_BOUND",
    "MemoryNeed",
    "check_memory",
    "float_bytes",
    "compile_cache_dir",
    "enable_compile_cache",
    "DEFAULT_EXPERIMENT",
    "build_experiment",
    "default_config",
    "import_builtin_experiments",
    "main",
    "run_experiment",
    "ConfigError",
    "load_config",
    "parse_yaml",
    "resolve_config",
    "shipped_config_dir",
    "shipped_configs",
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
    "CheckpointError",
    "ConfigChangedError",
    "CorruptCheckpointError",
    "Plan",
    "PlanRow",
    "Posterior",
    "Summary",
    "fit",
    "plan_fit",
    "RunHealth",
    "run_health",
    "RunConfig",
    "RunResult",
    "lower_run",
    "run",
    "fast_cpu_compile",
]
