"""Without ArviZ or matplotlib, ``to_arviz`` and the run's plots fail with an ImportError that names
the extra installing them (``vijax-toolkit[arviz]``, ``vijax-toolkit[plots]``)."""

import sys

import numpy as np
import pytest

from vijax.metrics import to_arviz
from vijax.run._plots import plot_elbo


def test_to_arviz_without_arviz_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "arviz", None)  # `import arviz` raises ImportError
    with pytest.raises(ImportError, match=r"vijax-toolkit\[arviz\]"):
        to_arviz({"w": np.zeros((20, 2))})


def test_plots_without_matplotlib_name_the_extra(monkeypatch, tmp_path):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    trace = {"step": np.arange(5), "elbo": np.linspace(-10.0, -1.0, 5)}
    with pytest.raises(ImportError, match=r"vijax-toolkit\[plots\]"):
        plot_elbo(trace, [], str(tmp_path / "elbo.png"))
    assert not (tmp_path / "elbo.png").exists()
