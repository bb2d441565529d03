"""The API reference is complete and speaks of public paths only (no docs build; `test_docs.py`
builds the site).

The site (mkdocs.yml: mkdocstrings with ``show_if_no_docstring: false``) hides every member without
a docstring, so an undocumented public method is missing from the reference. Checked here:

- every function or class named in ``__all__`` of a public package has a docstring, and so does
  every public method, property, classmethod and staticmethod that a vijax class defines or
  inherits from a vijax base (a docstring inherited from a base class counts);
- the docs pages name no private module path: no dotted ``vijax.x._y`` in ``docs/*.md`` and
  ``docs/api/*.md`` (``docs/design.md`` documents the internals and may name them), and no
  docstring rendered on the site spells a publicly exported object by a private path;
- mkdocstrings renders a class's bases by their ``__module__`` (the package is loaded by
  inspection), which is private for most bases, so ``show_bases`` must stay off while it is.
"""

import importlib
import inspect
import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = (
    "vijax",
    "vijax.expfam",
    "vijax.solvers",
    "vijax.models",
    "vijax.inference",
    "vijax.inference.schedules",
    "vijax.data",
    "vijax.metrics",
    "vijax.run",
    "vijax.testing",
)
# public names allowed to lack a docstring for now (none): the list may only shrink, and a name here
# that gains a docstring fails the test until it is removed
PENDING: set = set()
# a dotted path through a private module: vijax._validate, vijax.run._yaml.ConfigError, ...
PRIVATE_PATH = re.compile(r"\bvijax(?:\.[A-Za-z]\w*)*\._[A-Za-z]\w*(?:\.[A-Za-z]\w*)*")
# the last line of a doctest's traceback, which Python prints with the exception's module
TRACEBACK_LINE = re.compile(r"^\s*vijax\.[\w.]+: ")


def _exported():
    """(public name, object) of every name in a public package's ``__all__``."""
    for pkg in PACKAGES:
        module = importlib.import_module(pkg)
        for name in getattr(module, "__all__", ()):
            yield f"{pkg}.{name}", getattr(module, name)


def _public_names() -> dict:
    """id(object) -> its first public name."""
    names = {}
    for name, obj in _exported():
        names.setdefault(id(obj), name)
    return names


def _members(cls):
    """(defining class, name, raw attribute) of the public methods, properties, classmethods and
    staticmethods that ``cls`` defines or inherits from a class of vijax."""
    for owner in cls.__mro__:
        if not owner.__module__.startswith("vijax"):
            continue
        for attr, raw in vars(owner).items():
            if attr.startswith("_") or inspect.getattr_static(cls, attr) is not raw:
                continue
            func = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw
            if isinstance(func, property) or inspect.isfunction(func):
                yield owner, attr, raw


def _has_doc(cls, attr: str, raw) -> bool:
    if isinstance(raw, property):  # property(fget, doc=...) or a def with a docstring
        doc = raw.__doc__
    else:  # inspect.getdoc finds a docstring inherited from a base class
        doc = inspect.getdoc(getattr(cls, attr))
    return bool((doc or "").strip())


def _undocumented() -> set:
    public, missing = _public_names(), set()
    for name, obj in _exported():
        if inspect.ismodule(obj) or not (inspect.isclass(obj) or callable(obj)):
            continue
        if not (inspect.getdoc(obj) or "").strip():
            missing.add(name)
        if inspect.isclass(obj) and obj.__module__.startswith("vijax"):
            for owner, attr, raw in _members(obj):
                if not _has_doc(owner, attr, raw):
                    owner_name = public.get(id(owner), f"{owner.__module__}.{owner.__qualname__}")
                    missing.add(f"{owner_name}.{attr}")
    return missing


def test_every_public_name_has_a_docstring():
    missing = _undocumented()
    new = sorted(missing - PENDING)
    assert not new, "public names without a docstring (the site hides them): " + ", ".join(new)
    done = sorted(PENDING - missing)
    assert not done, "documented now, remove from PENDING in tests/test_docs_complete.py: " + ", ".join(done)


class _Base:
    def documented(self):
        """Docstring."""


class _Model(_Base):  # at module level: inspect.getdoc finds inherited docstrings through __qualname__
    __module__ = "vijax.models.fake"

    def documented(self):  # inherits the base's docstring
        return 1

    def bare(self):
        return 2

    width = property(lambda self: 3)
    height = property(lambda self: 4, doc="The height.")

    @classmethod
    def build(cls):
        return cls()


def test_the_check_sees_undocumented_members():
    undocumented = {attr for owner, attr, raw in _members(_Model) if not _has_doc(owner, attr, raw)}
    assert undocumented == {"bare", "width", "build"}


# every page but the design notes, which document the internals and where they live
PAGES = sorted(
    p.relative_to(ROOT).as_posix()
    for p in [*ROOT.glob("docs/*.md"), *ROOT.glob("docs/api/*.md")]
    if p.name != "design.md" or p.parent.name == "api"
)


@pytest.mark.parametrize("page", PAGES)
def test_docs_pages_name_no_private_module_path(page):
    text = (ROOT / page).read_text()
    found = sorted(set(PRIVATE_PATH.findall(text)))
    assert not found, f"{page} names private module paths {found}; use the public path (vijax.<package>.<name>)"


def _rendered_docstrings():
    """(where, docstring) of every package docstring and docstring of a public name and member."""
    for pkg in PACKAGES:
        yield pkg, importlib.import_module(pkg).__doc__ or ""
    for name, obj in _exported():
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        yield name, obj.__doc__ or ""
        if inspect.isclass(obj) and obj.__module__.startswith("vijax"):
            for _owner, attr, raw in _members(obj):
                func = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw
                yield f"{name}.{attr}", func.__doc__ or ""


def _resolve(path: str):
    parts = path.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr, None)
        return obj
    return None


def test_docstrings_spell_public_objects_by_their_public_path():
    public, bad = _public_names(), []
    for where, doc in _rendered_docstrings():
        for line in doc.splitlines():
            if TRACEBACK_LINE.match(line):  # printed by Python as module.qualname
                continue
            for path in PRIVATE_PATH.findall(line):
                obj = _resolve(path)
                if obj is not None and not inspect.ismodule(obj) and id(obj) in public:
                    bad.append(f"{where}: {path} (public: {public[id(obj)]})")
    assert not bad, "docstrings spell public objects by a private path:\n" + "\n".join(sorted(set(bad)))


def test_bases_are_not_rendered_by_private_paths():
    """A "Bases:" line shows ``base.__module__ + "." + base.__qualname__``; while some public class
    has a base from a private module, mkdocs.yml must not show bases."""
    private_bases = sorted(
        {
            f"{name} <- {base.__module__}.{base.__qualname__}"
            for name, obj in _exported()
            if inspect.isclass(obj)
            for base in obj.__bases__
            if PRIVATE_PATH.fullmatch(f"{base.__module__}.{base.__qualname__}")
        }
    )
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)  # ignores !!python tags
    (mkdocstrings,) = [p["mkdocstrings"] for p in config["plugins"] if isinstance(p, dict) and "mkdocstrings" in p]
    show_bases = mkdocstrings["handlers"]["python"]["options"].get("show_bases", "true")
    assert not private_bases or show_bases == "false", (
        "mkdocs.yml shows class bases, rendered by private paths: " + "; ".join(private_bases)
    )
