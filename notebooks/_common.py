"""Pieces shared by the notebook builders (`python notebooks/_build_NN.py` regenerates NN)."""
import hashlib

import nbformat as nbf

md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell

INSTALL = code(
    "# On Colab: install vijax first (set VIJAX_SOURCE to a checkout path or a git URL of the repo).\n"
    "import importlib.util, os, subprocess, sys\n"
    "VIJAX_SOURCE = os.environ.get('VIJAX_SOURCE', '.')\n"
    "if importlib.util.find_spec('vijax') is None:\n"
    "    subprocess.check_call([sys.executable, '-m', 'pip', 'install', '-q', VIJAX_SOURCE])")


def write(cells, path):
    """Writes the notebook; cell ids are derived from position and content, so that rebuilding an
    unchanged notebook changes nothing and a diff shows only the cells that changed."""
    for i, cell in enumerate(cells):
        cell["id"] = hashlib.sha1(f"{i}:{cell.source}".encode()).hexdigest()[:8]
    nb = nbf.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbf.write(nb, path)
