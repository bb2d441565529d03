"""The README's Python example runs as written."""

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


def test_readme_bring_your_own_model_example_runs():
    """The black-box VI example: its posterior mean of w is near least squares (n = 200, prior
    N(0, I): within 0.05) and sigma near the noise scale 0.3; its k-hat is reported."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Bring your own model") :]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    scope = {}
    exec(compile(block, "README.md", "exec"), scope)
    x, y = np.asarray(scope["x"]), np.asarray(scope["y"])
    w_ls = np.linalg.lstsq(x, y, rcond=None)[0]
    mean = scope["posterior_mean"]
    np.testing.assert_allclose(np.asarray(mean["w"]), w_ls, atol=0.05)
    assert abs(float(mean["sigma"]) - 0.3) < 0.05
    assert np.isfinite(scope["khat"])


def test_readme_derived_conjugate_model_example_runs():
    """The Poisson mixture with derived updates recovers its two rates (2 and 12, 300 and 200
    points: within 0.5) and weights."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Bring your own conjugate model") :]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    scope = {}
    exec(compile(block, "README.md", "exec"), scope)
    rates = np.sort(np.asarray(scope["rates"]))
    np.testing.assert_allclose(rates, [2.0, 12.0], atol=0.5)
    alpha = np.sort(np.asarray(scope["state"].q_global["pi"].concentration))
    np.testing.assert_allclose(alpha, [201.0, 301.0], atol=5.0)


def test_readme_hmm_example_runs():
    """The HMM example: 20 Baum–Welch steps on 200 sampled sequences; padded steps get state -1."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Hidden Markov models") :]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    scope = {}
    exec(compile(block, "README.md", "exec"), scope)
    data, paths = scope["data"], np.asarray(scope["paths"])
    lengths = np.asarray(data.lengths)
    assert np.all((paths == -1) == (np.arange(50)[None, :] >= lengths[:, None]))
    np.testing.assert_allclose(np.asarray(scope["post"].marginals).sum(-1), np.arange(50)[None, :] < lengths[:, None])
