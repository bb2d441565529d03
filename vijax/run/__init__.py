"""The one host loop, checkpoints, run configs and the ``vijax`` command.

``run`` drives any ``VIAlgorithm`` in jitted ``lax.scan`` chunks with progress, evaluation,
a relative-tolerance stopping rule and bit-identical checkpoint/resume; ``load_config`` reads and
validates a YAML config against a registered ``ExperimentSpec``; ``main`` is ``vijax run`` /
``vijax list``.
"""
from vijax.run._cli import main, run_experiment
from vijax.run._config import ConfigError, load_config
from vijax.run._experiment import EXPERIMENTS, Experiment, ExperimentSpec, register_experiment
from vijax.run._runner import RunResult, run

__all__ = [
    "EXPERIMENTS",
    "ConfigError",
    "Experiment",
    "ExperimentSpec",
    "RunResult",
    "load_config",
    "main",
    "register_experiment",
    "run",
    "run_experiment",
]
