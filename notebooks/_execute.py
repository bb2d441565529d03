"""Regenerates the notebooks with their outputs (`make notebooks`).

Each builder (`notebooks/_build_NN.py`) writes its notebook, which is then executed top to bottom
at its documented size (not the test suite's small one) and saved with its outputs, so the plots are
visible where the notebook is read (GitHub, the documentation site). Figures are PNGs at a modest
resolution to keep each notebook small. `python notebooks/_execute.py 01 03` regenerates only those.
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("numbers", nargs="*", help="two-digit notebook numbers (default: all)")
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
        subprocess.check_call([sys.executable, str(builder)], cwd=ROOT)
        (path,) = NOTEBOOKS.glob(f"{number}_*.ipynb")
        start = time.perf_counter()
        _execute(path)
        print(f"{path.name}: {time.perf_counter() - start:.0f} s, {path.stat().st_size / 1024:.0f} KB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
