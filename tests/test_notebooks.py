"""Notebooks run top to bottom (at a small size: VIJAX_NOTEBOOK_SMALL=1)."""

import pathlib

import pytest

import nbformat
import nbclient

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


# Executing a notebook is mostly compiling its programs (20-75 s each here): `make test` runs the first
# one (the kernel, the install cell, the small-size switch); `make test-slow` and `make notebooks` run all.
SMOKE = "01_cavi_gmm.ipynb"


@pytest.mark.parametrize(
    "path",
    [p if p.name == SMOKE else pytest.param(p, marks=pytest.mark.slow) for p in NOTEBOOKS],
    ids=[p.name for p in NOTEBOOKS],
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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
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
