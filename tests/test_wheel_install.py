"""The built wheel installs into a fresh virtual environment (no system site-packages, nothing of
this checkout on the path) through the notebooks' install cell, which installs ``vijax-toolkit`` by
name as on Colab, here from the built wheel in a local package folder (``PIP_FIND_LINKS``), and the
README's Python example, ``vijax --version`` and ``vijax run gmm_simulation`` run there from an empty
folder. Slow: pip installs JAX and the other dependencies (at the versions of constraints.txt; pip may
use its cache)."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(args, **kwargs):
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
def test_wheel_installs_in_a_fresh_venv_and_runs_the_readme_example(tmp_path):
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(ROOT)])
    (wheel,) = (tmp_path / "dist").glob("vijax_toolkit-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    work = tmp_path / "work"  # not a clone: the install cell installs the distribution by name
    work.mkdir()
    cell = next(
        c
        for c in json.loads((ROOT / "notebooks" / "01_cavi_gmm.ipynb").read_text())["cells"]
        if c["cell_type"] == "code"
    )
    (work / "install_cell.py").write_text("".join(cell["source"]))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    # the cell as a Colab user runs it once the package is published (no VIJAX_SOURCE: it installs the
    # distribution by name), with the built wheel served from a local package folder
    env.update(PIP_FIND_LINKS=str(wheel.parent), PIP_CONSTRAINT=str(ROOT / "constraints.txt"))
    env.pop("VIJAX_SOURCE", None)
    _run([py, "install_cell.py"], cwd=work, env=env, timeout=1800)
    readme = (ROOT / "README.md").read_text()
    example = readme[readme.index("```python\n") + len("```python\n") :]
    example = example[: example.index("```")]
    (work / "example.py").write_text(
        example
        + textwrap.dedent("""
        import numpy as np, os
        assert "site-packages" in vijax.__file__, vijax.__file__
        w = np.sort(np.asarray(weights))
        assert abs(w[-1] - 0.5) < 0.05 and abs(w[-2] - 0.5) < 0.05, w  # two clusters of 500 points
        print("ok", vijax.__version__)
        """)
    )
    import vijax

    out = _run([py, "example.py"], cwd=work, env=env, timeout=600)
    assert out.split()[-2:] == ["ok", vijax.__version__]
    # the installed command, from the empty folder: its version and a shipped experiment by name
    command = str(venv / "bin" / "vijax")
    assert _run([command, "--version"], cwd=work, env=env).split() == ["vijax", vijax.__version__]
    short = ["--set", "run.num_steps=3", "--set", "run.eval_every=3", "--no-progress", "--no-compile-cache"]
    _run([command, "run", "gmm_simulation", "--out", str(work / "out"), *short], cwd=work, env=env, timeout=600)
    assert (work / "out" / "metrics.json").is_file()


SHIPPED = ("LICENSE", "CITATION.cff", "CONTRIBUTING.md", "README.md", "CHANGELOG.md")


def test_license_citation_and_contributing_guide_are_declared_for_the_sdist():
    """LICENSE is the Apache-2.0 text pyproject names (and its license-files), CITATION.cff is at the
    package's version, and MANIFEST.in ships them with CONTRIBUTING.md in the sdist (built for real
    by the slow test below)."""
    import tomllib

    import vijax

    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert f'version: "{vijax.__version__}"' in (ROOT / "CITATION.cff").read_text()
    manifest = (ROOT / "MANIFEST.in").read_text().split()
    assert all(name in manifest for name in SHIPPED)


@pytest.mark.slow
def test_sdist_ships_the_license_citation_and_contributing_guide(tmp_path):
    """The sdist built as pip builds (an isolated environment with the setuptools pyproject asks for)."""
    import tarfile

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    _run([py, "-m", "pip", "install", "-q", "setuptools>=77", "wheel"])
    _run([py, "-c", f"from setuptools import build_meta as b; b.build_sdist({str(tmp_path)!r})"], cwd=ROOT)
    (sdist,) = tmp_path.glob("vijax_toolkit-*.tar.gz")
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    assert set(SHIPPED) <= names, sorted(names)[:20]
    assert {
        f"configs/{p.name}" for p in (ROOT / "configs").glob("*.yaml")
    } <= names  # the wheel built from it ships them


def test_the_wheel_ships_the_configs_and_its_command_runs_one_by_name(tmp_path):
    """The fast part of the install check: the wheel (built without dependencies) is named
    ``vijax-toolkit``, holds every ``configs/*.yaml`` as package data, and, unpacked outside the
    checkout (its dependencies from this environment), ``vijax run gmm_simulation`` runs the shipped
    config from an empty folder."""
    import zipfile

    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(ROOT)])
    (wheel,) = (tmp_path / "dist").glob("vijax_toolkit-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    configs = sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))
    assert {f"vijax/run/configs/{n}" for n in configs} <= names
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert "Name: vijax-toolkit" in zipfile.ZipFile(wheel).read(meta).decode()
    site = tmp_path / "site"
    _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(site), str(wheel)])
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=str(site), JAX_PLATFORMS="cpu")
    code = "import sys, vijax; from vijax.run import main; assert str(vijax.__file__).startswith(sys.argv[1]); sys.exit(main(sys.argv[2:]))"
    short = ["--set", "run.num_steps=3", "--set", "run.eval_every=3", "--no-progress", "--no-compile-cache"]
    # the name form runs the shipped config (the README's configs/NAME.yaml form resolves to the
    # same file: tests/run/test_cli.py)
    out = _run(
        [sys.executable, "-c", code, str(site), "run", "gmm_simulation", "--out", str(work / "out"), *short],
        cwd=work,
        env=env,
        timeout=600,
    )
    assert "gmm" in out and (work / "out" / "metrics.json").is_file()
    done = subprocess.run(
        [sys.executable, "-c", code, str(site), "run", "no_such_config"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "shipped: " in done.stderr and "gmm_simulation" in done.stderr
