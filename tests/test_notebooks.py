"""Notebooks run top to bottom (at a small size: VIJAX_NOTEBOOK_SMALL=1); each one's install cell installs
exactly what it needs (checked on its imports here, and for real in a fresh virtual environment with only
what the cell installs, slow), and each opens in Colab from the repository pyproject.toml names."""

import ast
import json
import os
import pathlib
import re
import subprocess
import sys
import tomllib

import pytest

import nbformat
import nbclient

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IDS = [p.name for p in NOTEBOOKS]


# Executing a notebook is mostly compiling its programs (20-75 s each here): `make test` runs the first
# one (the kernel, the install cell, the small-size switch); `make test-slow` and `make notebooks` run all.
SMOKE = "01_cavi_gmm.ipynb"


@pytest.mark.parametrize(
    "path", [p if p.name == SMOKE else pytest.param(p, marks=pytest.mark.slow) for p in NOTEBOOKS], ids=IDS
)
def test_notebook_runs(path, monkeypatch):
    monkeypatch.setenv("VIJAX_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_committed_with_outputs(path):
    """`make notebooks` saved every code cell executed, in order, without errors, each figure as a
    PNG, the file at most 400 KB (figures at 80 dpi), and no path of the machine that ran it."""
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1))
    outputs = [o for c in cells for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    shows = sum(c.source.count("plt.show()") for c in cells)
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= min(shows, 1)
    assert path.stat().st_size <= 400 * 1024
    assert "site-packages" not in path.read_text()


def _install_cell(path) -> tuple[str, str, tuple]:
    """(the install cell's source, its EXTRAS, its MODULES)."""
    source = next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code").source
    (line,) = [x for x in source.splitlines() if x.startswith("EXTRAS, MODULES = ")]
    extras, modules = ast.literal_eval(line.split(" = ", 1)[1])
    return source, extras, modules


# the modules of vijax's required dependencies (pyproject.toml) and of the extras a notebook may take
REQUIRED = {"jax", "jaxlib", "optax", "tensorflow_probability", "numpy", "scipy", "tqdm", "yaml", "vijax"}
EXTRA_OF = {"matplotlib": "plots", "sklearn": "datasets", "numpyro": "numpyro", "arviz": "arviz"}
# what a notebook needs beyond its imports: the loaders of scikit-learn's data sets
NEEDS = {r"load_digits_images|load_binary_dataset\(NAME\)": "sklearn", r"\bpsis\(": "arviz"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_install_cell_installs_what_the_notebook_imports_and_it_opens_in_colab(path):
    """Each notebook's imports (and the data-set loaders and PSIS it calls) are the standard library,
    vijax's dependencies, or the modules of the extras its install cell installs: no more, no less."""
    nb = nbformat.read(path, as_version=4)
    source, extras, modules = _install_cell(path)
    body = "\n".join(c.source for c in nb.cells if c.cell_type == "code" and c.source != source)
    used = set()
    for node in ast.walk(ast.parse(body)):
        if isinstance(node, ast.Import):
            used |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            used.add(node.module.split(".")[0])
    used |= {module for pattern, module in NEEDS.items() if re.search(pattern, body)}
    used -= set(sys.stdlib_module_names) | REQUIRED | {"threadpoolctl"}  # threadpoolctl: scikit-learn's
    assert used <= set(EXTRA_OF), f"{path.name} imports {used - set(EXTRA_OF)}, which no extra installs"
    assert set(extras.split(",")) == {EXTRA_OF[m] for m in used}, (path.name, extras, used)
    assert set(modules) == {"vijax", *used}
    repository = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Source"]
    colab = repository.replace("https://github.com/", "https://colab.research.google.com/github/")
    assert (
        f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab}/blob/main/"
        f"notebooks/{path.name})" in nb.cells[0].source.splitlines()[0]
    )


# runs a notebook's code cells in order in one namespace, naming the cell that fails (no kernel: the
# fresh environment holds only what the install cell installed)
RUN_CELLS = """
import json, sys, traceback
cells = [c["source"] for c in json.load(open(sys.argv[1]))["cells"] if c["cell_type"] == "code"]
scope = {"__name__": "__main__"}
for i, cell in enumerate(cells):
    try:
        exec(compile("".join(cell), f"<cell {i + 1}>", "exec"), scope)
    except BaseException:
        traceback.print_exc()
        sys.exit(f"cell {i + 1} failed")
print("all", len(cells), "cells ran")
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    dist = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = dist.glob("vijax_toolkit-*.whl")
    return path


@pytest.mark.slow  # pip installs JAX and the extras into a fresh environment (minutes each), then the notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_runs_in_a_fresh_venv_with_only_its_install_cell(path, wheel, tmp_path):
    """A fresh virtual environment (no system site-packages); the notebook's install cell, run there
    with VIJAX_SOURCE the built wheel (at constraints.txt's versions), installs vijax-toolkit with its
    extras; then every code cell runs in order, at the small size, from an empty folder."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "VIJAX_", "MPL"))}
    env.update(
        VIJAX_SOURCE=str(wheel),
        PIP_CONSTRAINT=str(ROOT / "constraints.txt"),
        VIJAX_NOTEBOOK_SMALL="1",
        MPLBACKEND="Agg",
        JAX_PLATFORMS="cpu",
    )
    (work / "run_cells.py").write_text(RUN_CELLS)
    done = subprocess.run(
        [py, "run_cells.py", str(path)], cwd=work, env=env, capture_output=True, text=True, timeout=3600
    )
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    _, extras, _ = _install_cell(path)
    installed = subprocess.run([py, "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True)
    names = {p["name"].lower() for p in json.loads(installed.stdout)}
    assert "vijax-toolkit" in names and "tensorflow-probability" not in names
    # no extra it did not ask for (ArviZ brings matplotlib: only when plots is asked for too)
    for extra, dist in {"datasets": "scikit-learn", "numpyro": "numpyro", "arviz": "arviz", "nn": "equinox"}.items():
        assert (dist in names) == (extra in extras.split(",")), (path.name, extra)
