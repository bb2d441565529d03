"""tfp-nightly (which vijax needs) and the stable tensorflow-probability (which some environments, Colab's
among them, preinstall) install the same ``tensorflow_probability/`` folder. Reinstalling or uninstalling
either one breaks the other while ``pip check`` stays clean; TFP's first use in vijax
(``vijax.types.tfp_jax``) says so and names the command that mends it. The fast tests fake the installed
distributions; the slow ones build the clash in a virtual environment, and try vijax's TFP paths with
the newest stable tensorflow-probability (skipped while none supports the JAX vijax pins)."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap
import tomllib
import types
import warnings

import pytest

from vijax._validate import _require

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _pinned() -> str:
    """pyproject.toml's requirement on tfp-nightly."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return next(d for d in deps if d.startswith("tfp-nightly")).replace(" ", "")


@pytest.fixture
def installed(monkeypatch):
    """Fakes which of the two distributions are installed: ``installed({"tfp-nightly": "0.26", ...})``."""

    def fake(versions: dict):
        def version(name):
            if name in versions:
                return versions[name]
            raise _require.metadata.PackageNotFoundError(name)

        monkeypatch.setattr(_require.metadata, "version", version)
        _require.tfp_substrate.cache_clear()

    yield fake
    _require.tfp_substrate.cache_clear()


def _failing_import(monkeypatch, error: BaseException):
    def import_module(name):
        raise error

    monkeypatch.setattr(_require, "importlib", types.SimpleNamespace(import_module=import_module))


def test_the_fix_reinstalls_the_pinned_nightly_alone():
    spec = set(_pinned().removeprefix("tfp-nightly").split(","))
    fix = _require.tfp_fix()
    assert fix.startswith("pip uninstall -y tensorflow-probability tfp-nightly && pip install \"tfp-nightly")
    assert set(fix.split('"')[1].removeprefix("tfp-nightly").split(",")) == spec


def test_a_working_tfp_beside_both_distributions_warns_with_the_fix(installed, monkeypatch):
    substrate = types.SimpleNamespace(distributions=None)  # TFP's import faked (the slow tests import it)
    monkeypatch.setattr(_require, "importlib", types.SimpleNamespace(import_module=lambda name: substrate))
    installed({"tfp-nightly": "0.26.0.dev20261027"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _require.tfp_substrate() is substrate  # the usual environment: no warning
    installed({"tfp-nightly": "0.26.0.dev20261027", "tensorflow-probability": "0.25.0"})
    with pytest.warns(UserWarning, match=r"both tfp-nightly .* and tensorflow-probability 0.25.0 .*pip uninstall -y"):
        _require.tfp_substrate()


@pytest.mark.parametrize(
    "versions, error, says",
    [
        (  # the stable reinstalled over the nightly: its files, which fail with this JAX
            {"tfp-nightly": "0.26.0.dev20261027", "tensorflow-probability": "0.25.0"},
            AttributeError("module 'jax.interpreters.xla' has no attribute 'pytype_aval_mappings'"),
            "both tfp-nightly 0.26.0.dev20261027 and tensorflow-probability 0.25.0 are installed",
        ),
        (  # the stable uninstalled after the nightly: the shared files are gone
            {"tfp-nightly": "0.26.0.dev20261027"},
            ModuleNotFoundError("No module named 'tensorflow_probability.python'"),
            "tfp-nightly 0.26.0.dev20261027 is installed but its files are missing",
        ),
        (  # the stable alone
            {"tensorflow-probability": "0.25.0"},
            AttributeError("pytype_aval_mappings"),
            "tensorflow-probability 0.25.0 is installed where vijax needs tfp-nightly",
        ),
        ({}, ModuleNotFoundError("No module named 'tensorflow_probability'"), "TFP is not installed"),
    ],
)
def test_a_broken_tfp_install_raises_naming_what_is_wrong_and_the_fix(installed, monkeypatch, versions, error, says):
    from vijax.types import tfp_jax

    installed(versions)
    _failing_import(monkeypatch, error)
    with pytest.raises(ImportError) as e:
        tfp_jax()
    assert says in str(e.value) and str(e.value).endswith(_require.tfp_fix()), str(e.value)
    assert e.value.name == "tensorflow_probability" and e.value.__cause__ is error


def _venv_beside_this_one(tmp_path, *tfp: str) -> str:
    """A fresh virtual environment seeing this one's packages, TFP's excepted (through a folder of links
    appended to its path, with the checkout), and ``tfp`` pip-installed into it without dependencies."""
    site = pathlib.Path(next(p for p in sys.path if p.endswith("site-packages")))
    links = tmp_path / "links"
    links.mkdir()
    for entry in site.iterdir():
        if not entry.name.startswith(
            ("tensorflow_probability", "tfp_nightly", "tensorflow_probability-", "__editable__")
        ):
            (links / entry.name).symlink_to(entry)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (own,) = venv.glob("lib/python*/site-packages")
    (own / "beside.pth").write_text(f"{ROOT}\n{links}\n")
    py = str(venv / "bin" / "python")
    for spec in tfp:
        pip(py, "install", "-q", "--no-deps", spec)
    return py


def pip(py: str, *args: str) -> str:
    """This environment's pip acting on the environment of ``py``."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", py, *args], capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0 and "Could not find a version" in done.stderr + done.stdout:
        pytest.skip(f"the package index is not reachable or lacks the package: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _python(py: str, code: str) -> str:
    done = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=600)
    return done.stdout or done.stderr[-3000:]  # what CALL_TFP prints, or why it printed nothing


CALL_TFP = textwrap.dedent("""
    import warnings
    warnings.simplefilter("error", UserWarning)  # the clash warning (not the DeprecationWarnings of TFP)
    from vijax.types import tfp_jax
    try:
        tfp_jax()
    except ImportError as e:
        print("ImportError:", e)
    except UserWarning as w:
        print("UserWarning:", w)
    else:
        print("ok")
    """)


@pytest.mark.slow  # pip downloads the two TFP wheels (about 14 MB)
def test_the_clash_built_in_a_venv_is_named_with_the_fix(tmp_path):
    from importlib.metadata import version

    nightly = f"tfp-nightly=={version('tfp-nightly')}"
    py = _venv_beside_this_one(tmp_path, nightly, "tensorflow-probability")
    stable = subprocess.run(
        [py, "-c", "import importlib.metadata as m; print(m.version('tensorflow-probability'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    run = lambda: _python(py, CALL_TFP)  # noqa: E731
    both = run()  # the stable's files over the nightly's: broken (or, at best, a warning)
    assert f"both tfp-nightly {version('tfp-nightly')} and tensorflow-probability {stable}" in both, both
    assert _require.tfp_fix() in both
    pip(py, "uninstall", "-y", "tensorflow-probability")
    gone = run()  # the nightly's shared files went with the stable
    assert "ImportError: TFP's JAX substrate fails to import" in gone, gone
    assert f"tfp-nightly {version('tfp-nightly')} is installed but its files are missing" in gone, gone
    assert gone.rstrip().endswith(_require.tfp_fix()), gone
    # the fix, run as given (with the nightly this environment has, from pip's cache or the index)
    for command in _require.tfp_fix().replace(_require.tfp_requirement(), nightly).split(" && "):
        args = command.replace('"', "").split()[1:]
        pip(py, *args, *(["--no-deps"] if args[0] == "install" else []))
    assert run().strip() == "ok"


@pytest.mark.slow  # pip downloads the newest stable tensorflow-probability; then vijax's TFP tests
def test_vijax_tfp_paths_with_the_newest_stable_tensorflow_probability(tmp_path):
    """Skipped, saying why, while the newest stable tensorflow-probability fails to import with the JAX
    vijax pins (0.25.0 with JAX 0.10: ``jax.interpreters.xla.pytype_aval_mappings`` is gone); from the
    first release that imports, vijax's TFP tests run against it."""
    import jax

    py = _venv_beside_this_one(tmp_path, "tensorflow-probability")
    probe = subprocess.run(
        [
            py,
            "-c",
            "import importlib.metadata as m; import tensorflow_probability.substrates.jax as t; print(m.version('tensorflow-probability'))",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if probe.returncode != 0:
        pytest.skip(
            f"no stable tensorflow-probability release supports jax {jax.__version__} yet: "
            f"{probe.stderr.strip().splitlines()[-1][:200]}"
        )
    tests = [
        "tests/interop/test_targets.py",
        "tests/interop/test_conjugate_sites_tfp.py",
        "tests/expfam/test_families.py",
    ]
    done = subprocess.run(
        [py, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow", *tests],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3000,
    )
    assert done.returncode == 0, done.stdout[-3000:]
