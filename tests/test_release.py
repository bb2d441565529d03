"""A release is one tag (docs/releasing.md): the release workflow's trigger, checks and trusted publishing;
the tag check run for real against ``vijax.__version__``; the version's CHANGELOG section and CITATION.cff;
one repository address (pyproject.toml's ``[project.urls]``) wherever the repository names one;
docs/compat.md exactly what ``make test-compat`` renders from its recorded run; an sdist that carries
what the tests read, and (slow) whose tests pass against the package built from it."""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import tomllib

import pytest
import yaml
from packaging.version import Version

import vijax

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SOURCE = PROJECT["urls"]["Source"]


def _workflow(name):
    flow = yaml.safe_load((WORKFLOWS / name).read_text())
    flow["on"] = flow.pop(True, flow.get("on"))  # YAML 1.1 reads the key `on` as true
    return flow


def _steps(job):
    return [step.get("run", "") for step in job["steps"]] + [step.get("uses", "") for step in job["steps"]]


def test_the_release_workflow_builds_checks_tests_and_publishes_on_a_version_tag():
    flow = _workflow("release.yml")
    assert flow["on"] == {"push": {"tags": ["v*"]}}
    assert flow["permissions"] == {"contents": "read"}  # only the publishing job gets more
    jobs = flow["jobs"]
    build = "\n".join(_steps(jobs["build"]))
    assert "python -m build" in build and "twine check --strict dist/*" in build
    test = "\n".join(_steps(jobs["test"]))
    assert "smoke_wheel.py" in test and "python -m venv --clear" in test
    assert re.search(r"pytest .*-m \"not slow\".*--import-mode=append tests", test)
    publish = jobs["publish"]
    assert set(publish["needs"]) == {"build", "test"}
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["environment"]["name"] == "pypi"
    (upload,) = [s for s in publish["steps"] if s.get("uses", "").startswith("pypa/gh-action-pypi-publish@")]
    assert "with" not in upload or not {"password", "user"} & set(upload["with"])  # trusted publishing: no token
    assert _workflow("ci.yml")["jobs"]["test"]["steps"][-1]["run"] == "bash .ci/run"


def _tag_check():
    (step,) = [s for s in _workflow("release.yml")["jobs"]["build"]["steps"] if s.get("name", "").startswith("The tag")]
    return step["run"]


@pytest.mark.parametrize("tag,ok", [(f"v{vijax.__version__}", True), ("v0.0.0", False), (vijax.__version__, False)])
def test_the_tag_check_accepts_the_packages_version_only(tag, ok):
    """The workflow's own check, run here: the tag must be v + the __version__ of vijax/__init__.py (the
    one place it is written), whose CHANGELOG section and CITATION.cff version must exist."""
    env = dict(os.environ, GITHUB_REF_NAME=tag, PATH=f"{pathlib.Path(sys.executable).parent}:{os.environ['PATH']}")
    done = subprocess.run(["bash", "-c", _tag_check()], cwd=ROOT, env=env, capture_output=True, text=True)
    assert (done.returncode == 0) == ok, done.stdout + done.stderr


def test_the_changelog_has_the_versions_section_under_an_unreleased_one():
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[0] == "[Unreleased]"
    match = re.fullmatch(rf"\[{re.escape(vijax.__version__)}\] - (\d{{4}}-\d{{2}}-\d{{2}})", headings[1])
    assert match, headings[1]
    section = text.split(f"## {headings[1]}")[1].split("\n## ")[0]
    kinds = re.findall(r"^### (.+)$", section, re.M)
    breaking = [i for i, k in enumerate(kinds) if "breaking" in k]
    assert breaking == list(range(len(breaking))), kinds  # breaking changes first
    citation = (ROOT / "CITATION.cff").read_text()
    assert f'version: "{vijax.__version__}"' in citation and f'date-released: "{match.group(1)}"' in citation


def test_chex_is_the_tests_dependency_not_the_librarys():
    assert not any(r.startswith("chex") for r in PROJECT["dependencies"])
    assert any(r.startswith("chex") for r in PROJECT["optional-dependencies"]["test"])
    imports = re.compile(r"^\s*(import|from)\s+chex\b", re.M)
    assert not [p for p in (ROOT / "vijax").rglob("*.py") if imports.search(p.read_text())]


# text files a repository address could be written in, and folders that are not the project's
TEXT = {".md", ".py", ".pyi", ".toml", ".yml", ".yaml", ".cff", ".ipynb", ".in", ".txt", ".cfg", ""}
NOT_OURS = {".git", "build", "dist", "site", "results", "__pycache__", "node_modules"}
ADDRESS = re.compile(r"https?://(?:[\w.-]*github\.com/[\w.-]+/vijax\b|[\w.-]+\.github\.io/vijax\b)[^\s\"'<>)\]`]*")


def _project_files():
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not (d in NOT_OURS or d.startswith((".venv", ".mypy", ".ruff", ".hypothesis")))]
        dirs[:] = [d for d in dirs if not d.endswith(".egg-info")]
        for name in files:
            path = pathlib.Path(folder) / name
            if path.suffix in TEXT and path.stat().st_size < 2_000_000:
                yield path


def test_one_repository_address():
    """pyproject.toml's [project.urls] is the one place the address is written: the docs' repo_url, the
    citation, the notebooks and every page use that Source (or the Documentation site built from it)."""
    urls = PROJECT["urls"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/vijax", SOURCE)
    assert urls["Issues"] == SOURCE + "/issues" and urls["Changelog"].startswith(SOURCE + "/blob/")
    owner = SOURCE.split("/")[-2]
    assert urls["Documentation"] == f"https://{owner}.github.io/vijax/"
    site = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert site["repo_url"] == SOURCE and site["site_url"] == urls["Documentation"]
    assert f'repository-code: "{SOURCE}"' in (ROOT / "CITATION.cff").read_text()
    stray = [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for path in _project_files()
        for m in ADDRESS.finditer(path.read_text(errors="replace"))
        if not m.group(0).startswith((SOURCE, urls["Documentation"]))
    ]
    assert not stray, stray
    other = "https://other" + ".github.io/vijax/api"  # not written whole: this file is searched too
    assert [m.group(0) for m in ADDRESS.finditer(f"see {SOURCE}/issues and {other}")] == [f"{SOURCE}/issues", other]


def _compat_page():
    spec = importlib.util.spec_from_file_location("compat_page", ROOT / ".ci" / "compat_page.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_compat_page_is_what_make_test_compat_rendered():
    """docs/compat.md is rendered whole from its recorded run and pyproject.toml: an edit by hand, or a
    floor (or its reason) changed in pyproject.toml since the run, fails here; run `make test-compat`."""
    compat = _compat_page()
    page = (ROOT / "docs" / "compat.md").read_text()
    assert page.startswith(compat.HEADER)
    assert page == compat.render((ROOT / "pyproject.toml").read_text(), compat.recorded_run(page))
    run = compat.recorded_run(page)
    assert [f["flavour"] for f in run["flavours"]] == ["oldest", "newest"]
    floors = {name: spec.split(",")[0] for name, spec, _ in compat.floors((ROOT / "pyproject.toml").read_text())}
    oldest = dict(item.split(" ", 1) for item in run["flavours"][0]["installed"].split(", "))
    assert oldest.keys() == floors.keys() - {"Python"}
    for name, version in oldest.items():  # the oldest flavour installed each floor
        assert floors[name].startswith(">=") and Version(floors[name][2:]) == Version(version), (name, version)


def _manifest():
    lines = [line.split() for line in (ROOT / "MANIFEST.in").read_text().splitlines() if line.strip()]
    grafted = {words[1] for words in lines if words[0] == "graft"}
    included = {name for words in lines if words[0] == "include" for name in words[1:]}
    return grafted, included


def test_the_sdist_carries_what_the_tests_read():
    """Every top-level file or folder a test reads (through ROOT or Path(__file__).parents) is in the sdist: the package,
    pyproject.toml and MANIFEST.in always, the rest by MANIFEST.in, which grafts the whole of tests/."""
    grafted, included = _manifest()
    assert "tests" in grafted
    named = set()
    for path in (ROOT / "tests").rglob("*.py"):
        up = len(path.relative_to(ROOT).parts) - 1  # Path(__file__).parents[up] is ROOT
        named |= {
            m.group(1).split("/")[0]
            for m in re.finditer(rf"(?:\bROOT|\.parents\[{up}\])\s*/\s*\"([^\"]+)\"", path.read_text())
        }
    assert {"README.md", "docs", "configs"} <= named
    missing = sorted(named - grafted - included - {"vijax", "pyproject.toml", "MANIFEST.in"})
    assert not missing, f"tests read {missing}, which MANIFEST.in leaves out of the sdist"


def _run(args, **kwargs):
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
def test_sdist_runs_its_tests(tmp_path):
    """The sdist as the release workflow builds it (python -m build, an isolated build): unpacked, the
    wheel built from it, and a few of its own test files run from the unpacked folder against that
    wheel (on the path ahead of this checkout; pytest's --import-mode=append and python -P keep the
    unpacked sources behind it). The release workflow runs the sdist's whole suite the same way."""
    _run([sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path / "dist"), str(ROOT)], timeout=900)
    (sdist,) = (tmp_path / "dist").glob("vijax_toolkit-*.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    (source,) = (tmp_path / "unpacked").iterdir()
    assert (source / "tests" / "conftest.py").is_file() and (source / ".github" / "workflows" / "release.yml").is_file()
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "wheel"), str(source)])
    (wheel,) = (tmp_path / "wheel").glob("vijax_toolkit-*.whl")
    site = tmp_path / "site"
    _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)])
    env = dict(os.environ, PYTHONPATH=str(site))
    where = _run([sys.executable, "-P", "-c", "import vijax; print(vijax.__file__)"], cwd=source, env=env)
    assert where.strip().startswith(str(site)), where
    subset = ["tests/test_readme.py", "tests/test_release.py", "tests/run/test_cli.py", "tests/test_citations.py"]
    out = _run(
        [sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow"]
        + ["--import-mode=append", *subset],
        cwd=source,
        env=env,
        timeout=1800,
    )
    assert re.search(r"\d+ passed", out) and "failed" not in out, out[-2000:]
