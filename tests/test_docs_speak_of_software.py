"""The documents a user reads speak of the software only: no sessions, issue numbers, commit hashes or
lab-notebook phrases ("that day", "re-run", "we measured"). What was tried and not kept is one line
on docs/decisions.md; user-facing changes go to the CHANGELOG."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCUMENTS = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "benchmarks" / "README.md"]
    + list((ROOT / "docs").glob("*.md"))
    + list((ROOT / "docs" / "api").glob("*.md"))
    # the benchmarks' docstrings are their --help, and the configs' comments a user's starting point
    + list((ROOT / "benchmarks").glob("*.py"))
    + list((ROOT / "configs").glob("*.yaml"))
)

NARRATION = [
    (
        re.compile(r"\b(this|that|a later|an earlier|the last|the previous|earlier|later) sessions?\b", re.I),
        "a session",
    ),
    (re.compile(r"\bissues? #?\d+\b|\(#\d+\)|\bPR #?\d+\b", re.I), "an issue number"),
    # a lab notebook's diary: the day of a measurement, its repeats, who measured
    (
        re.compile(r"\b(that|another|the same|the other|a (faster|slower|later|quieter|busier)) day\b", re.I),
        "a day of measurement",
    ),
    (re.compile(r"\bre-?run(s|ning)?\b", re.I), "a re-run"),
    (re.compile(r"\bwe (measured|tried|found|ran|timed)\b", re.I), "who measured"),
    # a commit hash: 7-40 hexadecimal characters with at least one letter and one digit, not a number
    (re.compile(r"(?<![\w#/.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w/.-])"), "a commit hash"),
]


# docs/compat.md is the record `make test-compat` writes, which names the commit it ran at (the
# release checklist asks for it): a commit hash is its content there, not narration
RECORDS_OF_A_COMMIT = {ROOT / "docs" / "compat.md"}


@pytest.mark.parametrize("path", DOCUMENTS, ids=[str(p.relative_to(ROOT)) for p in DOCUMENTS])
def test_documents_name_no_session_issue_or_commit(path):
    found = [
        f"{path.relative_to(ROOT)}:{i}: {what}: {m.group(0)!r}"
        for i, line in enumerate(path.read_text().splitlines(), 1)
        for pattern, what in NARRATION
        if not (what == "a commit hash" and path in RECORDS_OF_A_COMMIT)
        for m in pattern.finditer(line)
    ]
    assert not found, found


def test_the_patterns_catch_what_they_name():
    text = "as this session found; see issue 16 and (#12); fixed in 856cb60~1 and 95c9b05"
    hits = [m.group(0) for pattern, _ in NARRATION for m in pattern.finditer(text)]
    assert hits == ["this session", "issue 16", "(#12)", "856cb60", "95c9b05"]
    diary = "Measured that day, then on a faster day; a re-run and two reruns: we measured 2 s."
    hits = [m.group(0) for pattern, _ in NARRATION for m in pattern.finditer(diary)]
    assert hits == ["that day", "a faster day", "re-run", "reruns", "we measured"]
    assert not [m for pattern, _ in NARRATION for m in pattern.finditer("−26007187.1, 1e-5, sha256, #1f77b4")]
