"""The built wheel installs into a fresh virtual environment (no system site-packages, nothing of this
checkout on the path) by name, as from the package index, here from a local package folder
(``PIP_FIND_LINKS``), without extras: there ``vijax --version`` and ``vijax list`` run, each shipped
config whose experiment needs an extra exits 2 naming the extra's install line before any work, and
the others run at a few steps from an empty folder. Then the extras the README's install line names are
installed and the README's Python example runs. Slow: pip installs JAX and the other dependencies (at
the versions of constraints.txt; pip may use its cache)."""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(args, **kwargs):
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


class Venv:
    def __init__(self, root: pathlib.Path, env: dict):
        self.py, self.vijax, self.work, self.env = (
            str(root / "bin" / "python"),
            str(root / "bin" / "vijax"),
            root.parent / "work",
            env,
        )

    def run(self, *args, timeout=600) -> subprocess.CompletedProcess:
        return subprocess.run(args, capture_output=True, text=True, cwd=self.work, env=self.env, timeout=timeout)


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> Venv:
    """A fresh environment where ``pip install vijax-toolkit`` installed the built wheel, no extras."""
    tmp = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "dist"), str(ROOT)])
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    (tmp / "work").mkdir()  # not a clone
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "VIJAX_", "MPL"))}
    env.update(PIP_FIND_LINKS=str(tmp / "dist"), PIP_CONSTRAINT=str(ROOT / "constraints.txt"), JAX_PLATFORMS="cpu")
    v = Venv(venv, env)
    done = v.run(v.py, "-m", "pip", "install", "-q", "vijax-toolkit", timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return v


def _shipped_extras() -> dict[str, dict]:
    """shipped config -> the extras its experiment needs there (this checkout's, the wheel's configs)."""
    from vijax.run import import_builtin_experiments, load_config, resolve_config, shipped_configs
    from vijax.run._cli import experiment_extras

    import_builtin_experiments()
    return {name: experiment_extras(load_config(resolve_config(name))) for name in shipped_configs()}


SHORT = ["--set", "run.num_steps=3", "--set", "run.eval_every=3", "--no-progress", "--no-compile-cache"]
# what a config needs beside SHORT to be valid at three steps
FEWER = {  # the sources' last step (num_steps - restart_steps) is an evaluation step
    "lda_ssvi_restarts": [
        f"--set={k}" for k in ("run.num_steps=4", "run.eval_every=2", "run.chunk_size=2", "algorithm.restart_steps=2")
    ]
}


@pytest.mark.slow
def test_without_extras_vijax_lists_and_an_experiment_needing_one_names_it_before_any_work(bare):
    import vijax

    done = bare.run(bare.vijax, "--version")
    assert done.stdout.split() == ["vijax", vijax.__version__], done.stderr
    done = bare.run(bare.vijax, "list")
    assert done.returncode == 0 and "gmm_cavi_vs_nuts" in done.stdout and "[needs: numpyro]" in done.stdout
    listed = bare.run(bare.py, "-m", "pip", "list", "--format=json")
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert not names & {"numpyro", "arviz", "scikit-learn", "matplotlib", "equinox", "flowjax"}, names
    for name, extras in _shipped_extras().items():
        if not extras:
            continue
        out = bare.work / "out" / name
        done = bare.run(bare.vijax, "run", name, "--out", str(out), *SHORT)
        assert done.returncode == 2, (name, done.stdout[-2000:], done.stderr[-2000:])
        assert f'pip install "vijax-toolkit[{next(iter(extras))}]"' in done.stderr, (name, done.stderr)
        assert "Traceback" not in done.stderr and not out.exists(), name


@pytest.mark.slow  # each shipped config without extras, at three steps (compiling each: minutes in all)
def test_without_extras_each_shipped_config_that_needs_none_runs(bare):
    """Each runs to its end (exit 0, or 3 where three steps leave a result not to be trusted), or, where
    its data files are not on this machine (the corpora and UCI sets of the shared data folder), exits 2
    saying so, before any work."""
    for name, extras in _shipped_extras().items():
        if extras:
            continue
        out = bare.work / "runs" / name
        done = bare.run(bare.vijax, "run", name, "--out", str(out), *SHORT, *FEWER.get(name, []), timeout=900)
        assert "Traceback" not in done.stderr, (name, done.stderr[-3000:])
        if done.returncode == 2:
            assert re.search(r"data|file|folder|not found", done.stderr, re.I), (name, done.stderr[-2000:])
            assert not (out / "metrics.json").exists(), name
        else:
            assert done.returncode in (0, 3) and (out / "metrics.json").is_file(), (name, done.stderr[-2000:])


@pytest.mark.slow  # runs after the two above: it installs extras into their environment
def test_the_readme_example_runs_with_the_extras_of_its_install_line(bare):
    readme = (ROOT / "README.md").read_text()
    bash = readme[readme.index("```bash\n") + len("```bash\n") :]
    line = bash[: bash.index("```")].splitlines()[0]
    match = re.fullmatch(r'pip install "?vijax-toolkit(\[[\w,]+\])?"?', line.split("#")[0].strip())
    assert match, line
    done = bare.run(bare.py, "-m", "pip", "install", "-q", f"vijax-toolkit{match.group(1) or ''}", timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    example = readme[readme.index("```python\n") + len("```python\n") :]
    (bare.work / "example.py").write_text(
        example[: example.index("```")]
        + "\nimport vijax\nassert 'site-packages' in vijax.__file__, vijax.__file__\nprint('ok', vijax.__version__)\n"
    )
    import vijax

    done = bare.run(bare.py, "example.py")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["ok", vijax.__version__]


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


@pytest.mark.slow  # builds and installs the wheel: a release check (make test-slow, the release workflow)
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
