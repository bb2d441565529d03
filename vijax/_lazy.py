"""Names of a package imported at their first use (PEP 562), so that a program pays only for the
modules it touches: ``from vijax.models import LDA`` loads LDA's module, not every model's.

A package's stub ``__init__.pyi`` lists the names it re-exports (``from vijax.models.lda import LDA
as LDA``), read by type checkers as its interface; its ``__init__.py`` loads them by::

    __getattr__, __dir__, __all__ = attach_stub(__name__, __file__)

Each name is looked up once, then stored in the package. Nothing here imports JAX.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import sys
from typing import Callable


def attach_stub(package: str, init_file: str) -> tuple[Callable[[str], object], Callable[[], list], list]:
    """``(__getattr__, __dir__, __all__)`` for ``package`` from its stub ``__init__.pyi`` beside
    ``init_file``, parsed with ``ast`` (nothing it names is imported). Each statement ``from module
    import attribute as name`` lists one name (``from package import child as child``: the
    submodule ``package.child``); ``__all__`` is the stub's. A name listed twice is a ValueError."""
    tree = ast.parse(pathlib.Path(init_file).with_suffix(".pyi").read_text())
    table: dict[str, tuple[str, str | None]] = {}  # name -> (module, attribute; None: the module itself)
    modules, public = [], []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if node.module == package:  # a submodule
                    modules.append(f"{package}.{alias.name}")
                    continue
                name = alias.asname or alias.name
                if name in table:
                    raise ValueError(f"{package}: the name {name!r} is listed twice")
                table[name] = (node.module, alias.name)
                modules.append(node.module)
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            public = list(ast.literal_eval(node.value))
    for module in modules:  # a module of the package is its attribute too, as after an import
        parent, _, child = module.rpartition(".")
        if parent == package and table.setdefault(child, (module, None)) != (module, None):
            raise ValueError(f"{package}: the name {child!r} is both a module and a name of another")

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

    return __getattr__, __dir__, public
