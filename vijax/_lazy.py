"""Names of a package imported at their first use (PEP 562), so that a program pays only for
the modules it touches: ``from vijax.models import LDA`` loads LDA's module, not every model's.

A package's stub ``__init__.pyi`` lists the names it re-exports (``from vijax.models.lda import LDA
as LDA``), read by type checkers as its interface; its ``__init__.py`` loads them by::

    __getattr__, __dir__, __all__ = attach_stub(__name__, __file__)

Each name is looked up once; the value is then stored in the package, so later lookups are plain
attribute reads. Nothing here imports JAX.
"""

from __future__ import annotations

import importlib
import sys
from typing import Callable, Iterable, Mapping


def lazy_names(
    package: str, modules: Mapping[str, Iterable[str]], public: Iterable[str]
) -> tuple[Callable[[str], object], Callable[[], list]]:
    """``(__getattr__, __dir__)`` for ``package``: each name of ``modules[module]`` is read from
    ``module`` at its first lookup, and a listed module of the package is its attribute too, as
    after an import (``"vijax.inference.schedules": ()`` makes ``schedules`` the module)."""
    table: dict[str, tuple[str, str | None]] = {}
    for module, names in modules.items():
        for entry in names:
            name, _, attribute = entry.partition("=")
            if name in table:
                raise ValueError(f"{package}: the name {name!r} is listed twice")
            table[name] = (module, attribute or name)
    for module in modules:
        parent, _, child = module.rpartition(".")
        if parent == package and table.setdefault(child, (module, None)) != (module, None):
            raise ValueError(f"{package}: the name {child!r} is both a module and a name of another")
    public = tuple(public)

    def __getattr__(name: str):
        try:
            module, attribute = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        loaded = importlib.import_module(module)
        value = loaded if attribute is None else getattr(loaded, attribute)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list:
        return sorted(set(vars(sys.modules[package])) | set(public))

    return __getattr__, __dir__


def attach_stub(package: str, init_file: str) -> tuple[Callable[[str], object], Callable[[], list], list]:
    """``(__getattr__, __dir__, __all__)`` for ``package`` from its stub ``__init__.pyi`` beside
    ``init_file``: the one table of what the package re-exports, read by type checkers and IDEs as
    the package's interface and here as the names to load at first use. Each statement
    ``from module import attribute as name`` of the stub lists one name (``from package import
    child as child``: the submodule ``package.child``); ``__all__`` is the stub's. The stub is
    parsed with ``ast`` (no import of anything it names)."""
    import ast
    import pathlib

    tree = ast.parse(pathlib.Path(init_file).with_suffix(".pyi").read_text())
    modules: dict[str, list] = {}
    public: list = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if node.module == package:  # a submodule
                    modules.setdefault(f"{package}.{alias.name}", [])
                else:
                    name = alias.asname or alias.name
                    entry = name if name == alias.name else f"{name}={alias.name}"
                    modules.setdefault(node.module, []).append(entry)
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            public = list(ast.literal_eval(node.value))
    getattr_, dir_ = lazy_names(package, modules, public)
    return getattr_, dir_, public
