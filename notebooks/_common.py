"""Pieces shared by the notebook builders (`python notebooks/_build_NN.py` regenerates NN)."""

import hashlib
import pathlib
import tomllib

import nbformat as nbf

md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell

# each extra of vijax-toolkit a notebook may need -> the module it installs, and what it is for
EXTRAS = {
    "plots": ("matplotlib", "matplotlib"),
    "datasets": ("sklearn", "scikit-learn's data sets"),
    "numpyro": ("numpyro", "NumPyro"),
    "arviz": ("arviz", "ArviZ"),
}


def install(*extras: str):
    """The install cell of a notebook needing ``extras`` (vijax-toolkit's, e.g. ``"plots", "numpyro"``):
    where vijax or the module of one of them is missing (Colab), it installs vijax-toolkit with exactly
    those extras, from VIJAX_SOURCE, a clone, or the package index."""
    modules = ("vijax", *(EXTRAS[e][0] for e in extras))
    return code(
        f"# Installs what this notebook needs where it is missing (Colab): vijax-toolkit[{','.join(extras)}]\n"
        f"# (vijax; {', '.join(EXTRAS[e][1] for e in extras)}), from VIJAX_SOURCE if set (a wheel, a checkout\n"
        "# or a git URL), else this repository when run from a clone, else the package index (the distribution\n"
        "# vijax-toolkit, imported as vijax; the name vijax there is an unrelated project). pip keeps the\n"
        "# environment's JAX where its version is in vijax's range. The stable tensorflow-probability (Colab\n"
        "# has it) shares its folder with the tfp-nightly vijax needs, so it goes first.\n"
        "import importlib.metadata, importlib.util, os, subprocess, sys\n"
        f"EXTRAS, MODULES = {','.join(extras)!r}, {modules!r}\n"
        "if any(importlib.util.find_spec(m) is None for m in MODULES):\n"
        "    source = os.environ.get('VIJAX_SOURCE')\n"
        "    if source is None and os.path.isfile('pyproject.toml') and os.path.isdir('vijax'):\n"
        "        source = '.'\n"
        "    if source is None or source.startswith('git+'):\n"
        "        spec = f'vijax-toolkit[{EXTRAS}]' + (f' @ {source}' if source else '')\n"
        "    else:\n"
        "        spec = f'{source}[{EXTRAS}]'\n"
        "    pip = [sys.executable, '-m', 'pip']\n"
        "    try:\n"
        "        importlib.metadata.version('tensorflow-probability')\n"
        "        subprocess.check_call(pip + ['uninstall', '-q', '-y', 'tensorflow-probability', 'tfp-nightly'])\n"
        "    except importlib.metadata.PackageNotFoundError:\n"
        "        pass\n"
        "    if subprocess.call(pip + ['install', '-q', spec]) != 0:\n"
        "        raise RuntimeError('installing vijax failed: set VIJAX_SOURCE to a wheel, a checkout or '\n"
        "                           '\"git+<URL of the vijax repository>\" and run this cell again')"
    )


def _repository() -> str:
    """pyproject.toml's [project.urls].Source (the repository's one address), read when building."""
    pyproject = pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"
    source = tomllib.loads(pyproject.read_text())["project"].get("urls", {}).get("Source")
    if not source or not source.startswith("https://github.com/"):
        raise SystemExit(f"{pyproject}: [project.urls] Source must be the GitHub repository's address, got {source!r}")
    return source.removeprefix("https://github.com/").rstrip("/")


def colab_badge(path: str) -> str:
    """The Markdown of an 'Open in Colab' badge opening the notebook at ``path`` (relative to the
    repository's root) from the main branch of the repository pyproject.toml names."""
    path = pathlib.Path(path).resolve().relative_to(pathlib.Path(__file__).resolve().parents[1]).as_posix()
    url = f"https://colab.research.google.com/github/{_repository()}/blob/main/{path}"
    return f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({url})\n\n"


def write(cells, path):
    """Writes the notebook; cell ids are derived from position and content, so that rebuilding an
    unchanged notebook changes nothing and a diff shows only the cells that changed. The first cell (the
    title) starts with the notebook's 'Open in Colab' badge."""
    cells[0]["source"] = colab_badge(path) + cells[0].source
    for i, cell in enumerate(cells):
        cell["id"] = hashlib.sha1(f"{i}:{cell.source}".encode()).hexdigest()[:8]
    nb = nbf.v4.new_notebook(
        cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )
    nbf.write(nb, path)
