"""The README's Python example runs as written (the docs pages' examples run in tests/test_docs.py)."""

import pathlib
import re

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_readme_example_runs():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    scope = {}
    exec(compile(block, "README.md", "exec"), scope)
    w = np.sort(np.asarray(scope["weights"]))
    assert abs(w[-1] - 0.5) < 0.05 and abs(w[-2] - 0.5) < 0.05  # two clusters of 500 points each
