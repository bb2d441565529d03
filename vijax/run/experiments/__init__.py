"""Registered experiments: importing this package imports every module in it, and each module
registers its builders with ``vijax.run.register_experiment``. A new experiment is a new module
here; nothing else needs editing."""

import importlib
import pkgutil

for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")
