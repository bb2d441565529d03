"""The extras are optional: vijax and every layer import without ArviZ and matplotlib and without
loading them; what needs an extra's module raises an ImportError (through ``vijax._validate.require``)
that names its ``pip install "vijax-toolkit[extra]"`` line; ``vijax run`` without matplotlib writes its
results, skips the plots and says so once; an experiment declares the extras it needs, and ``vijax run``
checks them before any work, exiting 2 with the line."""

from __future__ import annotations

import ast
import inspect
import json
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAYERS = ("types", "expfam", "solvers", "models", "interop", "inference", "data", "metrics", "testing", "run")
OPTIONAL = ("arviz", "matplotlib")


def _python(code: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _block(monkeypatch, *modules):
    """Makes ``import m`` (and of its submodules) raise ImportError, as where m is not installed."""
    for module in modules:
        for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
            monkeypatch.delitem(sys.modules, name)
        monkeypatch.setitem(sys.modules, module, None)


def test_every_layer_and_the_experiments_import_without_arviz_and_matplotlib_and_never_try_them():
    # a fresh interpreter where importing either fails, as where they are not installed, and where
    # every attempt is recorded: importing vijax, every layer and every experiment attempts none
    done = _python(f"""
        import importlib, sys

        class Missing:
            attempts = []

            @classmethod
            def find_spec(cls, name, path=None, target=None):
                if name.split(".")[0] in {OPTIONAL!r}:
                    cls.attempts.append(name)
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

        for name in [m for m in sys.modules if m.split(".")[0] in {OPTIONAL!r}]:
            del sys.modules[name]
        sys.meta_path.insert(0, Missing)
        import vijax
        for layer in {LAYERS!r}:
            importlib.import_module("vijax." + layer)
        vijax.to_arviz, vijax.cavi  # the re-exported names resolve
        import vijax.run.experiments  # every built-in experiment registers
        from vijax.run import EXPERIMENTS
        print(len(EXPERIMENTS), Missing.attempts)
        try:
            vijax.to_arviz({{"w": __import__("numpy").zeros((20, 2))}})
        except ImportError as e:
            print(e, Missing.attempts)
        """)
    lines = done.stdout.splitlines()
    count, attempts = lines[0].split(" ", 1)
    assert int(count) >= 20 and attempts == "[]", done.stdout
    assert lines[1] == 'to_arviz needs arviz, which is not installed: pip install "vijax-toolkit[arviz]" [\'arviz\']', (
        done.stdout
    )


def test_to_arviz_and_psis_without_arviz_name_the_extra(monkeypatch):
    import vijax
    from vijax.metrics import psis

    _block(monkeypatch, "arviz")
    with pytest.raises(
        ImportError, match=r'to_arviz needs arviz, which is not installed: pip install "vijax-toolkit\[arviz\]"'
    ) as e:
        vijax.to_arviz({"w": np.zeros((20, 2))})
    assert e.value.name == "arviz"
    # any input, equal weights included (the one case that needs no fit), so a missing ArviZ shows at once
    for lw in (np.linspace(-3.0, 0.0, 50), np.zeros(50)):
        with pytest.raises(ImportError, match=r"psis \(ArviZ's psislw\) needs arviz.*vijax-toolkit\[arviz\]"):
            psis(lw)
    with pytest.raises(ValueError, match="log_weights"):  # the arguments are still checked first
        psis(np.zeros(3))


def _toy_config(tmp_path) -> str:
    from tests.run.test_config import TOY

    path = tmp_path / "toy.yaml"
    path.write_text(f"experiment: {TOY}\nseed: 1\nrun: {{num_steps: 40, chunk_size: 20, eval_every: 20}}\n")
    return str(path)


def test_vijax_run_without_matplotlib_writes_the_results_and_says_once_the_plots_were_skipped(
    tmp_path, monkeypatch, capsys
):
    from vijax.run import main

    _block(monkeypatch, "matplotlib")
    out = tmp_path / "out"
    assert main(["run", _toy_config(tmp_path), "--out", str(out), "--no-progress", "--no-compile-cache"]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("plots (elbo.png and the experiment's figures) were skipped") == 1, captured.err
    assert 'pip install "vijax-toolkit[plots]"' in captured.err and "Traceback" not in captured.err
    assert "plots skipped: no matplotlib" in captured.out
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["num_steps"] == 40 and (out / "config.yaml").is_file() and (out / "checkpoints").is_dir()
    assert not (out / "elbo.png").exists()


def test_a_report_that_draws_without_optional_plot_costs_its_summary_not_the_run(tmp_path, monkeypatch, capsys):
    from vijax.run import _cli, main

    def report(result, out_dir, baselines):
        from matplotlib.figure import Figure  # not under optional_plot

        return {"figure": Figure}

    build = _cli.build_experiment
    monkeypatch.setattr(_cli, "build_experiment", lambda config: build(config)._replace(report=report))
    _block(monkeypatch, "matplotlib")
    out = tmp_path / "out"
    assert main(["run", _toy_config(tmp_path), "--out", str(out), "--no-progress", "--no-compile-cache"]) == 0
    err = capsys.readouterr().err
    assert "its report needs matplotlib, so its summary is left out too" in err and "Traceback" not in err
    assert json.loads((out / "metrics.json").read_text())["summary"] == {}


def _imports_matplotlib(fn) -> bool:
    return any(
        (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "matplotlib")
        or (isinstance(n, ast.Import) and any(a.name.split(".")[0] == "matplotlib" for a in n.names))
        or (isinstance(n, ast.Call) and getattr(n.func, "id", None) == "figure")  # _plotting.figure imports it
        for n in ast.walk(fn)
    )


def test_every_plot_function_of_the_experiments_is_skipped_without_matplotlib(monkeypatch):
    """Each experiment's function that imports matplotlib is an ``optional_plot`` (a new experiment's
    too), which does nothing where matplotlib is missing and plots where it is there."""
    from vijax.run.experiments._plotting import optional_plot

    plots = []
    # the experiments of the vijax imported (the checkout's, or an installed wheel's under make test-compat)
    for path in sorted(pathlib.Path(inspect.getfile(optional_plot)).parent.glob("*.py")):
        if path.name == "_plotting.py":
            continue
        for fn in ast.parse(path.read_text()).body:
            if isinstance(fn, ast.FunctionDef) and _imports_matplotlib(fn):
                plots.append(f"{path.name}:{fn.name}")
                assert any(getattr(d, "id", None) == "optional_plot" for d in fn.decorator_list), plots[-1]
    assert len(plots) >= 15, plots
    calls = []
    plot = optional_plot(lambda path: calls.append(path) or path)
    assert plot("a.png") == "a.png" and calls == ["a.png"]
    _block(monkeypatch, "matplotlib")
    assert plot("b.png") is None and calls == ["a.png"]


@pytest.mark.slow  # about 10-20 s on 2 cores (compilation and scikit-learn's ARD); the fast test above covers each plot
def test_an_experiments_own_plots_are_skipped_and_its_report_still_written(tmp_path, monkeypatch, capsys):
    """ard_regression's report draws ard_coefficients.png beside results.md and its summary: without
    matplotlib the summary, results.md and metrics.json are written, the figure is not."""
    from vijax.run import main

    _block(monkeypatch, "matplotlib")
    out = tmp_path / "out"
    args = ["run", str(ROOT / "configs" / "ard_regression.yaml"), "--out", str(out), "--no-progress"]
    assert main(args + ["--no-compile-cache", "--set", "run.num_steps=5"]) == 0
    summary = json.loads((out / "metrics.json").read_text())["summary"]
    assert np.isfinite(summary["coef_rmse"]) and (out / "results.md").is_file()
    assert not (out / "ard_coefficients.png").exists() and not (out / "elbo.png").exists()
    assert capsys.readouterr().err.count("were skipped") == 1


def test_an_experiment_that_reports_psis_does_not_start_without_arviz(tmp_path, monkeypatch, capsys):
    from vijax.run import import_builtin_experiments, main

    import_builtin_experiments()
    _block(monkeypatch, "arviz")
    out = tmp_path / "out"
    args = ["run", str(ROOT / "configs" / "mean_field_gaussian.yaml"), "--out", str(out), "--no-progress"]
    assert main(args + ["--no-compile-cache"]) == 2
    err = capsys.readouterr().err
    assert "PSIS k-hat" in err and 'pip install "vijax-toolkit[arviz]"' in err and "Traceback" not in err
    assert not (out / "metrics.json").exists() and not (out / "checkpoints").exists()


@pytest.mark.parametrize(
    "config, module, extra",
    [("gmm_cavi_vs_nuts.yaml", "numpyro", "numpyro"), ("gpc_digits.yaml", "sklearn", "datasets")],
)
def test_an_experiment_whose_package_is_missing_names_its_extra_before_it_starts(
    tmp_path, monkeypatch, capsys, config, module, extra
):
    from vijax.run import import_builtin_experiments, main

    import_builtin_experiments()
    _block(monkeypatch, module)
    out = tmp_path / "out"
    args = ["run", str(ROOT / "configs" / config), "--out", str(out), "--no-progress", "--no-compile-cache"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f'pip install "vijax-toolkit[{extra}]"' in err and "Traceback" not in err
    assert not (out / "metrics.json").exists() and not (out / "checkpoints").exists()


def test_require_returns_the_module_or_names_what_needs_it_and_the_extra(monkeypatch, tmp_path):
    from vijax._validate import install_line, require

    assert require("json", "none", "this test") is json
    _block(monkeypatch, "numpyro")
    with pytest.raises(ImportError, match="^from_x needs numpyro, which is not installed: ") as e:
        require("numpyro.infer", "numpyro", "from_x")
    assert e.value.name == "numpyro" and str(e.value).endswith(install_line("numpyro"))
    assert install_line("numpyro") == 'pip install "vijax-toolkit[numpyro]"'
    # installed, but its own import of something else fails: said so, with the failing import
    (tmp_path / "broken_pkg_for_require.py").write_text("import no_such_module_for_require\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="broken_pkg_for_require is installed but fails to import .*no_such_mod"):
        require("broken_pkg_for_require", "nn", "from_x")


def _shipped_extras() -> dict[str, dict]:
    """shipped config -> the extras its experiment needs there (the CLI's ``experiment_extras``)."""
    from vijax.run import import_builtin_experiments, load_config, resolve_config, shipped_configs
    from vijax.run._cli import experiment_extras

    import_builtin_experiments()
    return {name: experiment_extras(load_config(resolve_config(name))) for name in shipped_configs()}


def test_every_shipped_config_that_needs_an_extra_names_it_before_any_work(tmp_path, monkeypatch, capsys):
    """Each shipped config whose experiment needs an extra, with that extra's module missing: ``vijax
    run`` exits 2 with the extra's install line and writes nothing (the check runs before the build)."""
    from vijax._validate import EXTRA_MODULES
    from vijax.run import _cli, main

    needing = {name: extras for name, extras in _shipped_extras().items() if extras}
    assert {"gmm_cavi_vs_nuts", "eight_schools", "gpc_digits", "vae_digits", "bayes_last_layer"} <= set(needing)
    assert "gpc_sonar" not in needing and "gmm_simulation" not in needing
    built = []
    monkeypatch.setattr(_cli, "build_experiment", lambda config: built.append(config) or None)
    for name, extras in needing.items():
        for extra in extras:
            with monkeypatch.context() as m:
                _block(m, EXTRA_MODULES[extra])
                out = tmp_path / f"{name}-{extra}"
                assert main(["run", name, "--out", str(out), "--no-progress", "--no-compile-cache"]) == 2, name
            err = capsys.readouterr().err
            assert f'needs {EXTRA_MODULES[extra]}, which is not installed: pip install "vijax-toolkit[{extra}]"' in err
            assert "Traceback" not in err and not out.exists(), (name, err)
    assert built == []


# the modules the required dependencies provide (pyproject.toml's dependencies)
REQUIRED = {"jax", "jaxlib", "optax", "chex", "tensorflow_probability", "numpy", "scipy", "tqdm", "yaml", "vijax"}


def _optional_imports(tree: ast.AST) -> tuple[set, set]:
    """(modules a module imports outside ``try: ... except ImportError``, those under one): ``import m``,
    ``from m import x`` and ``require("m", ...)``, by top-level name; relative imports as ``.name``."""
    guarded_nodes = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            "ImportError" in ast.unparse(h.type or ast.Name("BaseException")) for h in node.handlers
        ):
            guarded_nodes |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    plain, guarded = set(), set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = ["." + (node.module or "")] if node.level else [node.module or ""]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "require" and node.args:
            names = [node.args[0].value] if isinstance(node.args[0], ast.Constant) else []
        for name in names:
            top = "." + name[1:].split(".")[0] if name.startswith(".") else name.split(".")[0]
            (guarded if id(node) in guarded_nodes else plain).add(top)
    return plain, guarded


def _declared(tree: ast.AST) -> set:
    """The extras a module's ``@needs(...)`` decorators declare (``dataset_extras``: ``datasets``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "needs":
            if isinstance(node.args[0], ast.Dict):
                out |= {k.value for k in node.args[0].keys}
            elif "dataset_extras" in ast.unparse(node.args[0]):
                out.add("datasets")
    return out


def test_every_experiment_declares_the_extras_of_the_modules_it_imports():
    """A static scan of vijax/run/experiments: each module's imports (and ``require`` calls) outside
    ``except ImportError``, with those of the private modules it imports from, are the standard
    library, a required dependency, or the module of an extra one of its builders declares (matplotlib
    aside: every figure is an ``optional_plot``, skipped without it, tested above)."""
    from vijax._validate import EXTRA_MODULES
    from vijax.run.experiments._plotting import optional_plot

    folder = pathlib.Path(inspect.getfile(optional_plot)).parent
    trees = {p.stem: ast.parse(p.read_text()) for p in folder.glob("*.py")}
    extra_of = {module: extra for extra, module in EXTRA_MODULES.items()}

    def needed(stem, seen=()):
        plain, _ = _optional_imports(trees[stem])
        own = {m for m in plain if not m.startswith(".")}
        for rel in {m[1:] for m in plain if m.startswith(".")} - {stem, *seen}:
            own |= needed(rel, (*seen, stem))
        return own

    checked = 0
    for stem, tree in trees.items():
        if stem.startswith("_"):
            continue
        for module in needed(stem):
            if module in sys.stdlib_module_names or module in REQUIRED or module in ("__future__", "matplotlib"):
                continue
            assert module in extra_of, f"{stem}.py imports {module}, which no extra of vijax-toolkit installs"
            assert extra_of[module] in _declared(tree), f"{stem}.py needs {module} but declares no {extra_of[module]!r}"
            checked += 1
    assert checked >= 4  # numpyro (gmm), arviz (the three PSIS experiments through _posterior)
