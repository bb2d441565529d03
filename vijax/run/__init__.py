"""The one host loop, checkpoints, run configs and the ``vijax`` command.

``run`` drives any ``VIAlgorithm`` in jitted ``lax.scan`` chunks with progress, evaluation, a
stopping rule and bit-identical checkpoint/resume, with the settings of a ``RunConfig``;
``load_config`` reads and validates a YAML config against a registered ``ExperimentSpec``;
``run_experiment`` runs one into a results folder; ``main`` is ``vijax run`` / ``vijax list``.
The built-in experiments live in ``vijax.run.experiments`` and register when it is imported.
"""

from vijax._lazy import attach_stub

# the names of __init__.pyi, each loaded from its module at its first use (vijax._lazy)
__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
