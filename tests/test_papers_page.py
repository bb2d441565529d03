"""docs/papers.md, the papers' figures and tables beside vijax's results, points only at things that
exist: every config and experiment it names, every relative link and image (and the heading a link's
anchor names), and every table row carries a status from the page's legend. Its numbers from runs are
generated from the recorded runs (benchmarks/papers_table.py, benchmarks/results/papers/*.json),
and a row with numbers that no recorded run gives says so."""

import importlib.util
import pathlib
import sys
import re
import unicodedata

import pytest

from vijax.run import EXPERIMENTS, import_builtin_experiments, shipped_configs

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGE = DOCS / "papers.md"
STATUSES = {"reproduced", "reproduced with differences", "mismatch", "not built"}
# pages the documentation site makes from other files of the repository (docs/_hooks.py)
GENERATED = {"benchmarks.md": ROOT / "benchmarks" / "README.md"}

_spec = importlib.util.spec_from_file_location("papers_table", ROOT / "benchmarks" / "papers_table.py")
papers_table = importlib.util.module_from_spec(_spec)
sys.path.insert(0, str(ROOT / "benchmarks"))  # the script imports its folder's modules (_device)
try:
    _spec.loader.exec_module(papers_table)
finally:
    sys.path.remove(str(ROOT / "benchmarks"))

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.*?)\s*$")


def _slug(heading: str) -> str:
    """The anchor mkdocs gives a heading (Python-Markdown's toc slugify, on the heading's text)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(path: pathlib.Path) -> set[str]:
    seen, out, in_fence = {}, set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match:
            slug = _slug(match.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}_{n}")
    return out


def _target(link: str) -> pathlib.Path:
    if link in GENERATED:
        return GENERATED[link]
    if link.startswith("notebooks/"):  # the site copies the repository's notebooks (docs/_hooks.py)
        return ROOT / link
    return DOCS / link


def _rows(text: str) -> list[tuple[int, dict]]:
    """Every data row of every table on the page, as {column heading: cell}."""
    rows, header = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if header is None:
            header = cells
        elif not all(set(c) <= set("-: ") for c in cells):
            assert len(cells) == len(header), f"line {number}: {len(cells)} cells under {len(header)} headings"
            rows.append((number, dict(zip(header, cells))))
    return rows


TEXT = PAGE.read_text()
ROWS = _rows(TEXT)


def test_every_table_row_has_a_status_from_the_legend():
    assert len(ROWS) >= 30 and all("Status" in row for _, row in ROWS)
    bad = [(n, row["Status"]) for n, row in ROWS if row["Status"].split(",")[0].strip("* ") not in STATUSES]
    assert not bad, bad


def test_every_paper_has_a_heading_and_a_table():
    sections = re.split(r"^## ", TEXT, flags=re.M)[1:]
    for name in ("Hoffman & Blei", "Khan", "Blei, Kucukelbir & McAuliffe", "Raise your ELBO", "blog post"):
        section = next((s for s in sections if name in s.splitlines()[0]), None)
        assert section is not None, f"no heading for {name}"
        assert "| Status |" in section, f"no table under {name}"


def test_cited_configs_and_experiments_exist():
    import_builtin_experiments()
    configs = set(re.findall(r"configs/([\w-]+)\.yaml", TEXT))
    missing = sorted(c for c in configs if not (ROOT / "configs" / f"{c}.yaml").is_file())
    # `vijax run NAME` reads a shipped config of that name
    names = set(re.findall(r"vijax run ([\w-]+)(?![\w/.-])", TEXT))
    missing += sorted(f"vijax run {n}" for n in names - set(shipped_configs()))
    experiments = set(re.findall(r"experiment `([\w-]+)`", TEXT))
    missing += sorted(f"experiment {e}" for e in experiments - set(EXPERIMENTS))
    assert configs and names and experiments
    assert not missing, missing


def test_relative_links_and_images_resolve():
    links = [link for link in _LINK.findall(TEXT) if not re.match(r"^[a-z]+:", link)]
    assert any(link.startswith("figures/") for link in links)
    broken = []
    for link in links:
        path, _, anchor = link.partition("#")
        target = _target(path) if path else PAGE
        if not target.is_file():
            broken.append(f"{link}: no file {target.relative_to(ROOT)}")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: no heading with the anchor #{anchor}")
    assert not broken, broken


@pytest.mark.parametrize(
    "heading, slug",
    [
        ("SSVI and SSVI-A on LDA (`lda_ssvi`)", "ssvi-and-ssvi-a-on-lda-lda_ssvi"),
        (
            "Hidden Markov models: EM (Baum–Welch), Viterbi and Bayesian HMMs",
            "hidden-markov-models-em-baumwelch-viterbi-and-bayesian-hmms",
        ),
        (
            "Structured SVI: SSVI, SSVI-A and the E-step × M-step matrix (Hoffman & Blei 2015)",
            "structured-svi-ssvi-ssvi-a-and-the-e-step-m-step-matrix-hoffman-blei-2015",
        ),
    ],
)
def test_slug_is_the_anchor_mkdocs_makes(heading, slug):
    assert _slug(heading) == slug


def test_generated_numbers_are_the_recorded_runs():
    """The text between the markers (on docs/papers.md, and on a page that shows one of its runs in
    more detail) is what benchmarks/papers_table.py makes from the runs' recorded metrics.json: a
    number edited by hand, or a run recorded again without rewriting the pages (`python
    benchmarks/papers_table.py write`), fails."""
    texts = {page.name: page.read_text() for page in papers_table.PAGES}
    names = re.findall(r"<!-- papers:([\w.-]+) -->", "".join(texts.values()))
    assert names and set(names) == set(papers_table.FORMAT)
    assert {n.split(".")[0] for n in names} == set(papers_table.RUNS)
    assert all((papers_table.RESULTS / f"{n}.json").is_file() for n in papers_table.RUNS)
    for name, text in texts.items():
        expected = papers_table.render(text).splitlines()
        differ = [n for n, (line, want) in enumerate(zip(text.splitlines(), expected), 1) if line != want]
        assert not differ and len(expected) == len(text.splitlines()), (
            f"lines of docs/{name} that differ from the recorded runs: {differ}"
        )


def test_recorded_runs_are_the_rows_commands():
    """Each recorded run was made by the command its row names, with the config the command reads."""
    import yaml

    for name, command in papers_table.RUNS.items():
        record = papers_table.load(name)
        assert record["command"] == command
        assert f"`vijax run {' '.join(command)}`" in TEXT
        config = yaml.safe_load((ROOT / command[0]).read_text())
        assert record["experiment"] == config["experiment"] and record["config"]["seed"] == config["seed"]
        assert record["config"]["run"]["num_steps"] == config["run"]["num_steps"]


def test_a_row_with_numbers_from_no_recorded_run_says_so():
    """A vijax cell with measured numbers either takes them from a recorded run (its markers) or
    says they are not regenerated."""
    bare = [
        number
        for number, row in ROWS
        if re.search(r"\d\.\d", re.sub(r"\(figures/[^)]*\)", "", row["vijax"]))
        and "<!-- papers:" not in row["vijax"]
        and "not regenerated" not in row["vijax"]
    ]
    assert not bare, f"rows of docs/papers.md with numbers from no recorded run: lines {bare}"
