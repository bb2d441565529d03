"""The built wheel installs into a fresh virtual environment (no system site-packages, nothing of
this checkout on the path) through the notebooks' install cell, as on Colab with VIJAX_SOURCE
pointing at the wheel, and the README's Python example runs there. Slow: pip installs JAX and the
other dependencies (at the versions of constraints.txt; pip may use its cache)."""

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
    (wheel,) = (tmp_path / "dist").glob("vijax-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    work = tmp_path / "work"  # not a clone: the install cell must take VIJAX_SOURCE
    work.mkdir()
    cell = next(
        c
        for c in json.loads((ROOT / "notebooks" / "01_cavi_gmm.ipynb").read_text())["cells"]
        if c["cell_type"] == "code"
    )
    (work / "install_cell.py").write_text("".join(cell["source"]))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(VIJAX_SOURCE=str(wheel), PIP_CONSTRAINT=str(ROOT / "constraints.txt"))
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
