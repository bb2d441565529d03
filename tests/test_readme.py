"""The README's Python example and the user guide's (docs/guide.md) run as written."""

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
    text = (ROOT / "docs" / "guide.md").read_text()
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
    text = (ROOT / "docs" / "guide.md").read_text()
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
    text = (ROOT / "docs" / "guide.md").read_text()
    section = text[text.index("## Hidden Markov models") :]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    scope = {}
    exec(compile(block, "README.md", "exec"), scope)
    data, paths = scope["data"], np.asarray(scope["paths"])
    lengths = np.asarray(data.lengths)
    assert np.all((paths == -1) == (np.arange(50)[None, :] >= lengths[:, None]))
    np.testing.assert_allclose(np.asarray(scope["post"].marginals).sum(-1), np.arange(50)[None, :] < lengths[:, None])


def test_components_guide_example_runs():
    """docs/components.md: a user's Exponential-Gamma component as a finite mixture by CAVI recovers
    the two rates (0.5 and 8 from 300 and 200 points: within 20%) and weights; the same component
    starts a DP mixture and an HMM."""
    import jax

    text = (ROOT / "docs" / "components.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    scope = {}
    exec(compile(block, "docs/components.md", "exec"), scope)
    order = np.argsort(np.asarray(scope["rates"])[:, 0])
    np.testing.assert_allclose(np.asarray(scope["rates"])[order, 0], [0.5, 8.0], rtol=0.2)
    np.testing.assert_allclose(np.asarray(scope["weights"])[order], [0.6, 0.4], atol=0.05)
    assert scope["dp_state"].q_global[1].batch_shape == (6, 1)
    assert scope["hmm_state"].q_global[2].batch_shape == (2, 1)
    assert all(np.all(np.isfinite(a)) for a in jax.tree_util.tree_leaves((scope["dp_state"], scope["hmm_state"])))
