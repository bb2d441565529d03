"""The README's Python example runs as written (the docs pages' examples run in tests/test_docs.py)."""

import pathlib
import re

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_readme_example_runs():
    """``vijax.fit``'s means within 0.3 posterior sd of the exact posterior (by quadrature on a grid) and its
    predictive draws' shape."""
    pytest.importorskip("numpyro")
    from scipy.stats import gamma, norm, poisson

    text = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    scope = {}
    exec(compile(block, "README.md", "exec"), scope)
    x, y = np.asarray(scope["x"], np.float64), np.asarray(scope["y"], np.float64)
    rate, w = np.meshgrid(np.linspace(0.5, 6.0, 300), np.linspace(-1.5, 2.5, 300), indexing="ij")
    log_p = gamma.logpdf(rate, 2.0) + norm.logpdf(w)
    log_p = log_p + poisson.logpmf(y, rate[..., None] * np.exp(w[..., None] * x)).sum(-1)
    p = np.exp(log_p - log_p.max())
    p /= p.sum()
    summary = scope["post"].summary()
    for name, grid in (("rate", rate), ("w", w)):
        mean = np.sum(p * grid)
        sd = np.sqrt(np.sum(p * (grid - mean) ** 2))
        assert abs(float(summary[name]["mean"]) - mean) < 0.3 * sd, name
    assert scope["y_new"].shape == (1000, 1)
