"""Regenerates the notebooks with their outputs (`make notebooks`).

Each builder (`notebooks/_build_NN.py`) writes its notebook, which is then executed top to bottom
at its documented size (not the test suite's small one) and saved with its outputs, so the plots are
visible where the notebook is read (GitHub, the documentation site). Figures are PNGs at a modest
resolution to keep each notebook small. `python notebooks/_execute.py 01 03` regenerates only those.
`--keep-outputs` rebuilds without executing what did not change: each code cell whose source is unchanged
keeps its saved outputs, and a changed install cell (the first code cell, which needs nothing before it)
is executed alone; any other changed code cell is refused (run without the flag).
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import nbclient
import nbformat

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
DPI = 80  # PNG figures at a modest resolution: each notebook stays well under 400 KB


def _execute(path: pathlib.Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=3600, kernel_name="python3", record_timing=False, resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    nbformat.write(nb, path)


def _keep_outputs(old, path: pathlib.Path) -> None:
    """The rebuilt notebook at ``path`` with the outputs of ``old``'s unchanged code cells (by their place
    among the code cells), its changed install cell executed alone."""
    nb = nbformat.read(path, as_version=4)
    before = [c for c in old.cells if c.cell_type == "code"]
    after = [c for c in nb.cells if c.cell_type == "code"]
    changed = [i for i, c in enumerate(after) if i >= len(before) or before[i].source != c.source]
    if len(before) != len(after) or any(i != 0 for i in changed):
        raise SystemExit(f"{path.name}: code cells other than the install cell changed: run without --keep-outputs")
    for new, saved in zip(after, before):
        new.outputs, new.execution_count = saved.outputs, saved.execution_count
    if changed:
        alone = nbformat.v4.new_notebook(cells=[after[0]], metadata=nb.metadata)
        nbformat.write(alone, path)
        _execute(path)
        after[0].outputs, after[0].execution_count = nbformat.read(path, as_version=4).cells[0].outputs, 1
    nb.metadata = old.metadata
    nbformat.write(nb, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("numbers", nargs="*", help="two-digit notebook numbers (default: all)")
    parser.add_argument("--keep-outputs", action="store_true", help="execute only a changed install cell")
    args = parser.parse_args(argv)
    os.environ.pop("VIJAX_NOTEBOOK_SMALL", None)  # the documented size
    os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend, so figures become outputs
    rc_dir = tempfile.mkdtemp()
    pathlib.Path(rc_dir, "matplotlibrc").write_text(f"figure.dpi: {DPI}\n")
    os.environ["MATPLOTLIBRC"] = rc_dir  # read by the kernel's matplotlib; the notebooks stay as built
    # tqdm's notice that ipywidgets is missing names a path of this machine: not kept in the outputs
    os.environ["PYTHONWARNINGS"] = "ignore:IProgress not found"
    builders = sorted(NOTEBOOKS.glob("_build_*.py"))
    if args.numbers:
        builders = [b for b in builders if b.stem.removeprefix("_build_") in args.numbers]
    for builder in builders:
        number = builder.stem.removeprefix("_build_")
        (path,) = NOTEBOOKS.glob(f"{number}_*.ipynb")
        old = nbformat.read(path, as_version=4)
        subprocess.check_call([sys.executable, str(builder)], cwd=ROOT)
        start = time.perf_counter()
        if args.keep_outputs:
            _keep_outputs(old, path)
        else:
            _execute(path)
        print(f"{path.name}: {time.perf_counter() - start:.0f} s, {path.stat().st_size / 1024:.0f} KB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
