"""Papers are cited as a reader would (authors, title, year, section): the names of the project's
private copies of the papers (numbered seed names, the files' hash names) never appear in the repo."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
FORBIDDEN = re.compile(r"seed 0\d\d\b|\b00[0-4]_[0-9a-f]{16}\b", re.IGNORECASE)


def test_no_paper_file_names_or_seed_numbers_in_the_repo():
    hits = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if (
            not path.is_file()
            or rel.parts[0] in {".git", ".venv", "results", "build", "dist-compat"}
            or rel.parts[0].startswith(".venv")
            or path.suffix in {".png", ".npz", ".pyc", ".whl"}
            or path.name == "test_citations.py"
        ):
            continue
        try:
            text = path.read_text(errors="ignore")
        except OSError:
            continue
        hits += [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in FORBIDDEN.finditer(text)]
    assert not hits, "cite papers by authors, title and year:\n" + "\n".join(hits[:20])
