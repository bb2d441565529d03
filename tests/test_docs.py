"""The documentation site builds strictly (`make docs`): a broken link, a cross-reference to a
missing object or a docstring parameter that is not in the signature fails the build."""

import os
import pathlib
import subprocess
import sys

import pytest

for _name in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "mkdocs_jupyter"):
    pytest.importorskip(_name, reason="the docs extra is not installed (pip install -e '.[docs]'; `make test` does)")

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow  # about 30 s; `make docs` builds the same site strictly
def test_docs_build_strict(tmp_path):
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # one page per layer, each with the layer's objects from their docstrings
    assert 'id="vijax.inference.cavi"' in (site / "api" / "inference.html").read_text()
    assert 'id="vijax.expfam.Dirichlet"' in (site / "api" / "expfam.html").read_text()
    assert 'id="vijax.run.RunConfig"' in (site / "api" / "run.html").read_text()
    # every notebook rendered, with the figures of its committed outputs
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks and all((site / "notebooks" / f"{p.stem}.html").is_file() for p in notebooks)
    # the benchmark page carries every benchmark section of benchmarks/README.md
    readme = (ROOT / "benchmarks" / "README.md").read_text()
    page = (site / "benchmarks.html").read_text()
    headings = [
        line.lstrip("#").strip() for line in readme.splitlines() if line.startswith("#") and "Benchmark" in line
    ]
    assert headings and all(h.replace("&", "&amp;") in page for h in headings)
    # getting started shows the README's example
    assert "DiagonalGMM.from_data" in (site / "getting-started.html").read_text().replace(
        '<span class="o">.</span>', "."
    ).replace('<span class="n">', "").replace("</span>", "")
