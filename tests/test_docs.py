"""The documentation: its pages' code runs as a reader runs it, and the site builds strictly.

- Every fenced block of ``docs/*.md`` names its language. A ```` ```python ```` block is code to run;
  every other block is shown only, and says so by its language (``text``, ``bash``, ...): a block
  without a language fails, so that no code is skipped silently.
- Each page's Python blocks run in order in one namespace, as a reader pastes them into one
  interpreter (JAX's defaults: float32, rank promotion allowed), so that a block that needs a name
  from an earlier one, or that rebinds a name a later one reads, fails here. A few results of the
  runs are checked against what the pages say.
- The site builds strictly (`make docs`): a broken link, a cross-reference to a missing object or a
  docstring parameter that is not in the signature fails the build.
"""

import ast
import builtins
import functools
import html
import os
import pathlib
import re
import subprocess
import symtable
import sys
import time
import warnings

import jax
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted(p.relative_to(ROOT).as_posix() for p in [*ROOT.glob("docs/*.md"), *ROOT.glob("docs/api/*.md")])
RUN = "python"  # the one language whose blocks run
SHOWN = {"text", "bash", "console", "yaml", "json", "toml"}  # blocks shown, not run: commands, listings, sketches
# pages whose blocks are too long for CI (their names are checked by test_blocks_read_only_names_
# defined_before, which is cheap): composition.md's three programs (about 20 s of CPU; each also runs as
# written, in its own namespace, in tests/inference/test_composition.py) and numpyro_tfp.md's
# (about 55 s of CPU on a loaded 2-core machine: eight fits, ArviZ, compilations of NumPyro models) and
# guide.md's (about 50 s: its examples' methods are tested in tests/inference/test_bbvi.py, test_flows.py,
# tests/models/test_derived.py and test_hmm.py); test_slow_pages_import_what_they_use checks their imports
SLOW = {"docs/composition.md", "docs/guide.md", "docs/numpyro_tfp.md"}

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def code_blocks(text: str) -> list[tuple[str, int, str]]:
    """(language, line of the opening fence, code) of every fenced block, in order; a block inside a
    list item loses its indentation."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match:
            start, indent, fence = i, len(match["indent"]), match["fence"]
            body, i = [], i + 1
            while i < len(lines) and not lines[i].strip().startswith(fence):
                body.append(lines[i][indent:] if not lines[i][:indent].strip() else lines[i])
                i += 1
            out.append((match["info"].strip().split(" ")[0], start + 1, "\n".join(body) + "\n"))
        i += 1
    return out


def _python_blocks(page: str) -> list[tuple[int, str]]:
    return [(line, code) for lang, line, code in code_blocks((ROOT / page).read_text()) if lang == RUN]


@functools.cache
def run_page(page: str) -> dict:
    """Runs the page's Python blocks in order in one namespace (in a temporary folder, with JAX's
    default settings); returns, per block in order, (its line, its seconds of CPU time, a shallow
    copy of the namespace after it)."""
    import tempfile

    import matplotlib

    matplotlib.use("Agg")
    scope: dict = {"__name__": "__main__"}
    out = []
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        os.chdir(folder)
        try:
            with jax.enable_x64(False), jax.numpy_rank_promotion("allow"):
                for line, code in _python_blocks(page):
                    start = time.process_time()
                    # blank lines first, so that a traceback names the block's line in the page
                    exec(compile("\n" * line + code, str(ROOT / page), "exec"), scope)
                    out.append((line, round(time.process_time() - start, 1), dict(scope)))
        finally:
            os.chdir(cwd)
            import matplotlib.pyplot as plt

            plt.close("all")
    return out


def after(page: str, heading: str) -> dict:
    """The page's namespace right after the first Python block under ``heading``."""
    text = (ROOT / page).read_text()
    first = text[: text.index(heading)].count("\n") + 1
    return next(scope for line, _, scope in run_page(page) if line > first)


def test_code_blocks_are_found_with_their_lines():
    text = "a\n```python\nx = 1\n```\n\n- item\n\n    ```text\n    shown\n    ```\n```\nbare\n```\n"
    assert code_blocks(text) == [("python", 2, "x = 1\n"), ("text", 8, "shown\n"), ("", 11, "bare\n")]


@pytest.mark.parametrize("page", PAGES)
def test_every_block_names_its_language(page):
    """A block that does not run says what it is: a block without a language, or in one the test
    neither runs nor knows as shown-only (``py``, ``pycon``), would be skipped silently."""
    bad = [
        f"{page}:{line} ```{lang}"
        for lang, line, _ in code_blocks((ROOT / page).read_text())
        if lang not in SHOWN | {RUN}
    ]
    assert not bad, f"blocks that neither run (```{RUN}) nor say they are shown only ({sorted(SHOWN)}): {bad}"


def _names(code: str) -> tuple[set, set]:
    """(names the block binds at its top level, names it reads from the top level): the module
    scope's reads, and the global reads of its functions, classes and comprehensions."""
    bound, read = set(), set()

    def walk(table):
        for sym in table.get_symbols():
            if table.get_type() == "module":  # a str, or a StrEnum from Python 3.13
                if sym.is_assigned() or sym.is_imported() or sym.is_namespace():
                    bound.add(sym.get_name())
                if sym.is_referenced():
                    read.add(sym.get_name())
            elif sym.is_global() and sym.is_referenced():
                read.add(sym.get_name())
        for child in table.get_children():
            walk(child)

    walk(symtable.symtable(code, "<block>", "exec"))
    return bound, read


@pytest.mark.parametrize("page", [page for page in PAGES if _python_blocks(page)])
def test_blocks_read_only_names_defined_before(page):
    """Cheap, for every page (those whose run is `slow` too): each block reads only names that it
    or an earlier block of the page binds, or builtins. A block that leans on a name the reader
    never defined (a fragment) fails here without running anything."""
    known, missing = set(dir(builtins)) | {"__name__"}, []
    for line, code in _python_blocks(page):
        bound, read = _names(code)
        missing += [f"{page}:{line} reads {name}" for name in sorted(read - bound - known)]
        known |= bound
    assert not missing, missing


@pytest.mark.parametrize("page", sorted(SLOW))
def test_slow_pages_import_what_they_use(page):
    """Cheap, for the pages whose run is `slow`: each block compiles, and its imports (of vijax's public
    names and the libraries it uses) resolve."""
    imports = []
    for line, code in _python_blocks(page):
        tree = ast.parse("\n" * line + code, str(ROOT / page))
        imports += [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert imports, page
    exec(compile(ast.Module(imports, []), str(ROOT / page), "exec"), {})


RUN_PAGES = [
    pytest.param(page, marks=pytest.mark.slow) if page in SLOW else page for page in PAGES if _python_blocks(page)
]


@pytest.mark.parametrize("page", RUN_PAGES)
def test_page_runs_in_order(page):
    """Every Python block of the page, in order, in one namespace."""
    run_page(page)


# ---- what the runs give, against what the pages say -------------------------------------------------


@pytest.mark.slow  # runs the page (SLOW)
def test_guide_bring_your_own_model_example():
    """docs/guide.md's black-box VI example: its posterior mean of w is near least squares (n = 200,
    prior N(0, I): within 0.05) and sigma near the noise scale 0.3; its k-hat is reported."""
    scope = after("docs/guide.md", "## Bring your own model: black-box")
    x, y = np.asarray(scope["x"]), np.asarray(scope["y"])
    w_ls = np.linalg.lstsq(x, y, rcond=None)[0]
    mean = scope["posterior_mean"]
    np.testing.assert_allclose(np.asarray(mean["w"]), w_ls, atol=0.05)
    assert abs(float(mean["sigma"]) - 0.3) < 0.05
    assert np.isfinite(scope["khat"])


@pytest.mark.slow  # runs the page (SLOW)
def test_guide_flow_example():
    """The flow's draws are finite, with the banana's mean of z2 - z1^2 near -1 (0.3: 300 steps)."""
    scope = after("docs/guide.md", "### Normalizing flows (flowjax)")
    z = np.asarray(scope["draws"]["z"])
    assert z.shape == (1000, 2) and np.all(np.isfinite(z)) and int(scope["state"].num_rejected) == 0
    assert abs(np.mean(z[:, 1] - z[:, 0] ** 2) + 1.0) < 0.3


@pytest.mark.slow  # runs the page (SLOW)
def test_guide_conjugate_model_example():
    """The Poisson mixture with derived updates recovers its two rates (2 and 12, 300 and 200 points:
    within 0.5) and weights."""
    scope = after("docs/guide.md", "## Bring your own conjugate model")
    np.testing.assert_allclose(np.sort(np.asarray(scope["rates"])), [2.0, 12.0], atol=0.5)
    alpha = np.sort(np.asarray(scope["state"].q_global["pi"].concentration))
    np.testing.assert_allclose(alpha, [201.0, 301.0], atol=5.0)


@pytest.mark.slow  # runs the page (SLOW)
def test_guide_hmm_example():
    """The HMM example: 20 Baum–Welch steps on 200 sampled sequences; padded steps get state -1."""
    scope = after("docs/guide.md", "## Hidden Markov models")
    data, paths = scope["data"], np.asarray(scope["paths"])
    lengths = np.asarray(data.lengths)
    assert np.all((paths == -1) == (np.arange(50)[None, :] >= lengths[:, None]))
    # float32, the reader's default: rtol 1e-5
    np.testing.assert_allclose(
        np.asarray(scope["post"].marginals).sum(-1), np.arange(50)[None, :] < lengths[:, None], rtol=1e-5, atol=1e-6
    )


def test_components_example():
    """docs/components.md: a user's Exponential-Gamma component as a finite mixture by CAVI recovers
    the two rates (0.5 and 8 from 300 and 200 points: within 20%) and weights; the same component
    starts a DP mixture and an HMM."""
    scope = run_page("docs/components.md")[-1][2]
    order = np.argsort(np.asarray(scope["rates"])[:, 0])
    np.testing.assert_allclose(np.asarray(scope["rates"])[order, 0], [0.5, 8.0], rtol=0.2)
    np.testing.assert_allclose(np.asarray(scope["weights"])[order], [0.6, 0.4], atol=0.05)
    assert scope["dp_state"].q_global[1].batch_shape == (6, 1)
    assert scope["hmm_state"].q_global[2].batch_shape == (2, 1)
    assert all(np.all(np.isfinite(a)) for a in jax.tree_util.tree_leaves((scope["dp_state"], scope["hmm_state"])))


@pytest.mark.slow  # runs the page (SLOW)
def test_numpyro_tfp_examples():
    """docs/numpyro_tfp.md: the two fits of the checks' example rank alike within ArviZ's standard
    error; the conjugate split runs on the hierarchical Poisson model (its rates a Gamma) after the
    blocks before it rebound ``target`` to other models."""
    import vijax

    checks = after("docs/numpyro_tfp.md", "## Checks and comparisons")
    assert set(checks["table"].index) == {"elbo", "renyi"}
    # both fits are near the posterior: their elpd_loo agree within the reported standard error
    assert abs(checks["table"]["elpd_loo"].diff().iloc[-1]) < checks["table"]["se"].min()
    split = after("docs/numpyro_tfp.md", "**One step: the conjugate sites in closed form")
    assert isinstance(split["state"].q_global["rates"], vijax.expfam.Gamma)
    assert set(split["draws"]) == {"b", "w", "rates"}


# ---- the site -----------------------------------------------------------------------------------------


@pytest.mark.slow  # about 30 s; `make docs` builds the same site strictly
def test_docs_build_strict(tmp_path):
    for name in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "mkdocs_jupyter"):
        pytest.importorskip(name, reason="the docs extra is not installed (pip install -e '.[docs]'; `make test` does)")
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

    def text(html_page: str) -> str:  # a page's text: code spans and quotes as written
        return html.unescape(re.sub(r"<[^>]+>", "", html_page))

    missing = [h for h in headings if h.replace("`", "") not in text(page)]
    assert headings and not missing, missing
    # getting started shows the README's example
    assert "post = vijax.fit(model, x, y)" in text((site / "getting-started.html").read_text())
