"""The architecture's rules (docs/design.md), checked on the source so that they cannot erode:
layers import only downwards, no package imports another package's private module,
experiments/notebooks/benchmarks use package-level names only, modules stay small, and every
registered algorithm follows the one factory convention."""

import ast
import inspect
import json
import pathlib
import re
import sys
from typing import NamedTuple

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# bottom to top; a module may import its own layer and those below
LAYERS = {
    "_validate": 0,
    "types": 0,
    "expfam": 1,
    "solvers": 2,
    "models": 3,
    "interop": 3,  # NumPyro and TFP models as targets: beside the models, below the algorithms
    "inference": 4,
    "data": 5,
    "metrics": 5,
    "testing": 6,
    "run": 6,
}
PRIVATE_IMPORT = re.compile(r"import vijax\.[a-z_]*\._|from vijax\.[a-z_.]*\._")


def _vijax_imports(path: pathlib.Path):
    """(imported vijax module name, line) of every absolute vijax import of a module."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("vijax"):
            yield node.module, node.lineno
            for alias in node.names:  # from vijax import expfam
                if node.module == "vijax":
                    yield f"vijax.{alias.name}", node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("vijax"):
                    yield alias.name, node.lineno


def _layer(module: str):
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


LIBRARY = sorted(p for p in (ROOT / "vijax").rglob("*.py") if p.parent != ROOT / "vijax" or p.name != "__init__.py")


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(ROOT)))
def test_layers_import_only_downwards(path):
    own = _layer("vijax." + ".".join(path.relative_to(ROOT / "vijax").with_suffix("").parts))
    for module, line in _vijax_imports(path):
        layer = _layer(module)
        assert layer is None or own is None or layer <= own, f"{path.name}:{line} imports {module} (an upper layer)"
    if "data" in path.parts:
        assert not any(m.startswith("vijax.models._") for m, _ in _vijax_imports(path)), path


# the documented exceptions: every layer validates through the private package vijax._validate, the
# packages load their names at first use through vijax._lazy, jit_step and vijax.run take the one
# compile-tuning policy from vijax._compile, and `python -m vijax` runs the console script's entry point
SHARED_PRIVATE = {"vijax._validate", "vijax._lazy", "vijax._compile"}
ENTRY_POINTS = {"vijax/__main__.py": {"vijax.run._cli"}}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imported_paths(path: pathlib.Path):
    """(dotted path, line) of everything a vijax module imports: the module of each import, and
    for ``from m import _a`` also ``m._a`` (``_a`` may be a private submodule; public names of an
    allowed module stay allowed); relative imports resolved against the importing module's package."""
    package = ["vijax", *path.relative_to(ROOT / "vijax").parent.parts]  # what `from .` names
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield module, node.lineno
            for alias in node.names:
                if _is_private(alias.name):
                    yield f"{module}.{alias.name}", node.lineno


def _other_packages_private(path: pathlib.Path, module: str) -> bool:
    """Whether ``module``, imported by the file at ``path``, is (inside) a private module of a
    top-level vijax package other than the file's own."""
    parts = module.split(".")
    if parts[0] != "vijax" or len(parts) < 2:
        return False
    own = path.relative_to(ROOT / "vijax").parts
    if len(own) > 1 and parts[1] == own[0]:
        return False  # the file's own package
    if module in SHARED_PRIVATE or module in ENTRY_POINTS.get(path.relative_to(ROOT).as_posix(), ()):
        return False
    return any(_is_private(p) for p in parts[1:])


def test_no_package_imports_another_packages_private_module():
    offenders = [
        f"{p.relative_to(ROOT)}:{line} imports {module}"
        for p in sorted((ROOT / "vijax").rglob("*.py"))
        for module, line in _imported_paths(p)
        if _other_packages_private(p, module)
    ]
    assert not offenders, offenders


def _module_file(dotted: str):
    """The source file of the vijax module ``dotted``, or None (not a module: a name in one)."""
    base = ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _private_names_crossing(path: pathlib.Path):
    """``(line, what)`` for each private name (``_x``) this module takes from another module:
    ``from m import _x`` where ``_x`` is not a submodule, and ``_m._x`` where ``_m`` is a module
    it imported (``from . import _m``, ``import vijax.a._m as _m``)."""
    package = ["vijax", *path.relative_to(ROOT / "vijax").parent.parts]
    tree = ast.parse(path.read_text())
    modules = set()  # local names bound to vijax modules
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            if not module.startswith("vijax"):
                continue
            for alias in node.names:
                if _module_file(f"{module}.{alias.name}") is not None:
                    modules.add(alias.asname or alias.name)
                elif _is_private(alias.name):
                    yield node.lineno, f"from {module} import {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("vijax") and alias.asname:
                    modules.add(alias.asname)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and _is_private(node.attr)
        ):
            yield node.lineno, f"{node.value.id}.{node.attr}"


def test_no_private_name_crosses_a_module_boundary():
    """A helper one module shares with another is public inside its private module: no module of
    vijax takes another module's ``_name`` (``python -m vijax``'s ``__main__`` aside)."""
    offenders = [
        f"{p.relative_to(ROOT)}:{line}: {what}"
        for p in sorted((ROOT / "vijax").rglob("*.py"))
        if p.name != "__main__.py"
        for line, what in _private_names_crossing(p)
    ]
    assert not offenders, f"{len(offenders)} private names cross module boundaries: {offenders}"


def _sources_outside_the_library():
    for folder in ("vijax/run", "benchmarks", "notebooks"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix == ".py":
                yield path, path.read_text()
            elif path.suffix == ".ipynb":
                cells = json.loads(path.read_text())["cells"]
                yield path, "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def test_run_benchmarks_and_notebooks_import_no_private_module():
    offenders = [
        f"{p.relative_to(ROOT)}: {m.group(0)}"
        for p, text in _sources_outside_the_library()
        for m in PRIVATE_IMPORT.finditer(text)
    ]
    assert not offenders, offenders


def test_every_registered_algorithm_follows_the_factory_convention():
    from vijax.inference import ALGORITHMS

    for name, spec in ALGORITHMS.items():
        params = inspect.signature(spec.factory).parameters
        first = next(iter(params.values()))
        assert first.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD, name  # the model
        assert params["num_data"].kind == inspect.Parameter.KEYWORD_ONLY, name
        if spec.takes_schedule:
            assert params["schedule"].kind == inspect.Parameter.KEYWORD_ONLY, name
        for setting in spec.settings:
            assert setting in params or any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values()), (
                name,
                setting,
            )


def test_a_new_algorithm_is_its_step_body_and_one_registration_line():
    """An algorithm written as its step's math under ``validated_step`` and registered by one line:
    its settings come from its signature, and its step checks the batch and, under
    ``reject_non_finite``, rejects a non-finite result without a line of its own for either."""
    import jax
    import jax.numpy as jnp

    from vijax.inference import ALGORITHMS, make_algorithm, register_algorithm
    from vijax.inference.base import VIAlgorithm, reject_non_finite, safe_increment, validated_step
    from vijax.models import DiagonalGMM

    class State(NamedTuple):
        q_global: jax.Array
        count: jax.Array

    class Info(NamedTuple):
        elbo: jax.Array

    @validated_step
    def step(key, state, batch, *, model, shift):
        new = state.q_global + shift * jnp.mean(batch)
        return State(new, safe_increment(state.count)), Info(jnp.log(new))

    def toy(model, *, num_data, schedule=None, shift: float = 1.0):
        init = lambda key, batch=None: State(jnp.ones(()), jnp.zeros((), jnp.int32))
        return reject_non_finite(VIAlgorithm(init, lambda k, s, b: step(k, s, b, model=model, shift=shift)))

    register_algorithm("toy", toy, description="a test's algorithm")
    try:
        assert ALGORITHMS["toy"].settings == ("shift",) and ALGORITHMS["toy"].takes_schedule
        alg = make_algorithm("toy", DiagonalGMM(2, 1), num_data=4, shift=-1.0)
        s0 = alg.init(jax.random.PRNGKey(0))
        x = jnp.array([[0.25], [0.25], [0.25], [0.25]])
        s1, info = alg.step(jax.random.PRNGKey(1), s0, x)
        assert bool(info.accepted) and float(s1.q_global) == 0.75 and int(s1.count) == 1
        s2, info = alg.step(jax.random.PRNGKey(2), s1, x * 4)  # log(0.75 - 1) is NaN: rejected
        assert not bool(info.accepted) and float(s2.q_global) == 0.75 and int(s2.num_rejected) == 1
        with pytest.raises(ValueError, match=r"batch x nan at \[1, 0\] is not finite"):
            alg.step(jax.random.PRNGKey(3), s1, x.at[1, 0].set(jnp.nan))
        with pytest.raises(ValueError, match="takes the settings"):
            make_algorithm("toy", DiagonalGMM(2, 1), num_data=4, scale=2.0)
    finally:
        del ALGORITHMS["toy"]


def test_import_vijax_loads_nothing_heavy():
    """``import vijax`` leaves TFP (about 0.4 s), ArviZ, matplotlib and scikit-learn to their first
    use; a fresh interpreter shows which modules it loaded."""
    import subprocess
    import sys

    code = (
        "import sys, vijax\n"
        "print(sorted(m for m in ('tensorflow_probability', 'arviz', 'matplotlib', 'sklearn') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_packages_load_only_the_modules_a_program_uses():
    """A user's LDA script imports LDA's, SVI's, the corpus reader's and the compile cache's modules,
    not every model's, every algorithm's, every family's, the guides', the text tokenizer's, the
    synthetic corpora's, the runner's, optax nor checkify (vijax._lazy); every public name still
    resolves."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from vijax.data import Minibatcher, read_ldac\n"
        "from vijax.inference import schedules, svi\n"
        "from vijax.models import LDA\n"
        "from vijax.run import enable_compile_cache\n"
        "print(sorted(m for m in ('optax', 'vijax.models.ctm', 'vijax.models.vae', 'vijax.inference._aevb',\n"
        "    'vijax.inference._registry', 'vijax.data._hmm', 'vijax.run._runner', 'vijax.expfam._beta',\n"
        "    'vijax.expfam._mvn', 'vijax.expfam._normal_wishart', 'vijax.inference._guides', 'vijax.data._text',\n"
        "    'vijax.data._prepare', 'vijax.data._synthetic_corpus', 'jax.experimental.checkify', 'vijax.models.lda')\n"
        "    if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['vijax.models.lda']", out
    import vijax

    for layer in ("data", "expfam", "inference", "interop", "metrics", "models", "run", "solvers"):
        package = getattr(vijax, layer)
        assert set(package.__all__) <= set(dir(package)), layer
        for name in package.__all__:
            assert getattr(package, name) is not None, (layer, name)
    with pytest.raises(AttributeError, match="'vijax.models' has no attribute 'Nope'"):
        _ = vijax.models.Nope


def test_attach_stub_reads_the_stub_and_rejects_a_name_listed_twice(tmp_path, monkeypatch):
    import types

    from vijax._lazy import attach_stub

    monkeypatch.setitem(sys.modules, "stubbed", types.ModuleType("stubbed"))
    stub = tmp_path / "__init__.pyi"
    stub.write_text('from vijax.models import LDA as LDA, LDA as TopicModel\n__all__ = ["LDA", "TopicModel"]\n')
    getattr_, dir_, public = attach_stub("stubbed", str(tmp_path / "__init__.py"))
    assert public == ["LDA", "TopicModel"] and "TopicModel" in dir_()
    assert getattr_("TopicModel") is getattr_("LDA") and getattr_("LDA").__name__ == "LDA"
    stub.write_text("from vijax.models import LDA as LDA\nfrom vijax.data import Corpus as LDA\n")
    with pytest.raises(ValueError, match="'LDA' is listed twice"):
        attach_stub("stubbed", str(tmp_path / "__init__.py"))


def _runtime_protocols() -> set[str]:
    """The names of the runtime-checkable protocols the package defines."""
    import importlib

    names = set()
    for module in ("vijax.expfam._base", "vijax.models._base", "vijax.models._nonconjugate"):
        for name, obj in vars(importlib.import_module(module)).items():
            if isinstance(obj, type) and getattr(obj, "_is_runtime_protocol", False):
                names.add(name)
    return names


def test_protocols_are_tested_with_implements_not_isinstance():
    """From Python 3.12 ``isinstance(x, P)`` on a runtime-checkable protocol looks members up
    statically and misses those a wrapper hands on through ``__getattr__``: a ``data_parallel``
    model then fails ``check_protocol`` and, silently, the optional protocols (a padded batch's
    rows, a model's batch checks). The package tests protocols with ``vijax._validate.implements``
    only."""
    protocols = _runtime_protocols()
    assert {"ConditionallyConjugateModel", "PaddedBatchModel", "BatchChecked", "HasMode"} <= protocols
    found = []
    for path in sorted((ROOT / "vijax").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("isinstance", "issubclass")):
                continue
            if len(node.args) < 2:
                continue
            kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            named = {getattr(k, "id", None) or getattr(k, "attr", None) for k in kinds}
            if named & protocols:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


def test_implements_sees_the_members_a_wrapper_hands_on():
    from vijax._validate import implements
    from vijax.inference import data_parallel
    from vijax.models import LDA, ConditionallyConjugateModel, PaddedBatchModel
    from vijax.models._base import BatchChecked, HyperparameterModel

    class Static:  # what Python 3.12's isinstance sees of a wrapper: no member handed on
        pass

    wrapped = data_parallel(LDA(3, 40))
    for protocol in (ConditionallyConjugateModel, PaddedBatchModel, BatchChecked, HyperparameterModel):
        assert implements(LDA(3, 40), protocol) and implements(wrapped, protocol), protocol
        assert not implements(Static(), protocol)
