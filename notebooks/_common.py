"""Pieces shared by the notebook builders (`python notebooks/_build_NN.py` regenerates NN)."""

import hashlib

import nbformat as nbf

md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell

INSTALL = code(
    "# Installs vijax where it is missing (Colab): VIJAX_SOURCE if set (a wheel, a checkout or a git URL),\n"
    "# else this repository when run from a clone, else the release on PyPI: the distribution vijax-toolkit\n"
    "# (imported as vijax; the name vijax on PyPI is an unrelated project). pip leaves the environment's own\n"
    "# JAX in place when its version is in vijax's supported range (jax>=0.10.0,<0.11). The notebooks plot:\n"
    "# the extra [plots] brings matplotlib (Colab has it already).\n"
    "import importlib.util, os, subprocess, sys\n"
    "if importlib.util.find_spec('vijax') is None:\n"
    "    source = os.environ.get('VIJAX_SOURCE')\n"
    "    if source is None and os.path.isfile('pyproject.toml') and os.path.isdir('vijax'):\n"
    "        source = '.'\n"
    "    if subprocess.call([sys.executable, '-m', 'pip', 'install', '-q', source or 'vijax-toolkit[plots]']) != 0:\n"
    "        raise RuntimeError('installing vijax failed: set VIJAX_SOURCE to a wheel, a checkout or '\n"
    "                           '\"git+<URL of the vijax repository>\" and run this cell again')"
)


def write(cells, path):
    """Writes the notebook; cell ids are derived from position and content, so that rebuilding an
    unchanged notebook changes nothing and a diff shows only the cells that changed."""
    for i, cell in enumerate(cells):
        cell["id"] = hashlib.sha1(f"{i}:{cell.source}".encode()).hexdigest()[:8]
    nb = nbf.v4.new_notebook(
        cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )
    nbf.write(nb, path)
