"""The public surface resolves for tools: each lazily loaded package's stub (``__init__.pyi``) is the
table of what it exports at run time, and mypy passes on the README's example and the docs' examples
(``[tool.mypy]`` in pyproject.toml: the repository on mypy's path, vijax's own modules followed
silently, the untyped optional libraries ignored)."""

import ast
import importlib
import pathlib

import pytest

from tests.test_docs import PAGES, code_blocks

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAZY = ["vijax", "vijax.data", "vijax.expfam", "vijax.inference", "vijax.models", "vijax.run"]


def _stub_names(package: str) -> tuple[list, list]:
    """(the names the stub imports, its ``__all__``)."""
    path = ROOT / (package.replace(".", "/") + "/__init__.pyi")
    tree = ast.parse(path.read_text())
    names, public = [], []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            names += [alias.asname or alias.name for alias in node.names]
        elif isinstance(node, ast.Assign) and node.targets[0].id == "__all__":
            public = list(ast.literal_eval(node.value))
    return names, public


@pytest.mark.parametrize("package", LAZY)
def test_the_stub_lists_what_the_package_exports(package):
    names, public = _stub_names(package)
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(public)
    assert set(names) <= set(public), f"{package}: imported in the stub, not in __all__: {set(names) - set(public)}"
    assert set(public) - set(names) <= {"__version__"}, f"{package}: in __all__, not imported in the stub"
    for name in public:
        assert getattr(module, name) is not None  # every listed name loads


def _examples() -> dict:
    """file name -> source: the README's example, and each docs page's Python blocks in order."""
    out = {"readme_example.py": code_blocks((ROOT / "README.md").read_text())}
    for page in PAGES:
        out[page.replace("/", "_").replace(".md", ".py")] = code_blocks((ROOT / page).read_text())
    return {
        name: "\n".join(code for lang, _, code in blocks if lang == "python")
        for name, blocks in out.items()
        if any(lang == "python" for lang, _, _ in blocks)
    }


def test_mypy_passes_on_the_readme_and_docs_examples(tmp_path):
    api = pytest.importorskip("mypy.api")
    files = []
    for name, source in _examples().items():
        (tmp_path / name).write_text(source)
        files.append(str(tmp_path / name))
    # a name the stubs must resolve: mypy's error here would mean vijax was not found (typed Any)
    (tmp_path / "resolves.py").write_text("from vijax.inference import svi\n\nx: int = svi\n")
    # a page's blocks run in one namespace, as a reader pastes them: a later block may bind a name again
    redefinitions = ["--allow-redefinition-new", "--local-partial-types", "--disable-error-code", "no-redef"]
    args = ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / ".mypy_cache"), *redefinitions]
    out, err, _ = api.run([*args, *files, str(tmp_path / "resolves.py")])
    errors = [line for line in out.splitlines() if ": error:" in line]
    expected = "resolves.py:3: error: Incompatible types in assignment"
    assert any(expected in line for line in errors), out + err  # else vijax was not found
    assert [line for line in errors if expected not in line] == [], out + err
