"""``benchmarks/lda_scale.py``: docs/lda.md's table is the one its recorded JSON gives (nothing between
the markers is written by hand), and the Wikipedia-like corpus's base measure is Zipfian with mean eta."""

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def lda_scale():
    sys.path.insert(0, str(BENCH))  # the script imports its folder's modules (_device, _memory)
    try:
        spec = importlib.util.spec_from_file_location("benchmarks_lda_scale", BENCH / "lda_scale.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))


def test_docs_table_is_the_recorded_runs(lda_scale):
    page = (ROOT / "docs" / "lda.md").read_text()
    span = page.split("<!-- lda_scale.table -->", 1)[1].split("<!-- /lda_scale -->", 1)[0]
    assert span.strip() == lda_scale.markdown(*lda_scale.recorded()).strip()


def test_wikipedia_like_base_measure(lda_scale):
    eta = lda_scale._eta(7702)
    assert eta.mean() == pytest.approx(lda_scale.ETA_MEAN)
    slope = np.polyfit(np.log(np.arange(1, 7703)), np.log(eta), 1)[0]
    assert slope == pytest.approx(-lda_scale.ZIPF)


def test_append_replaces_rows_of_the_sizes_run_and_keeps_the_others(lda_scale):
    old = {"machine": "m0", "settings": {}, "rows": [{"docs": 10, "v": 1}, {"docs": 100, "v": 2}]}
    new = {"machine": "m1", "settings": {}, "rows": [{"docs": 1000, "v": 3}, {"docs": 10, "v": 4}]}
    out = lda_scale.appended(old, new)
    assert out["machine"] == "m0" and [(r["docs"], r["v"]) for r in out["rows"]] == [(10, 4), (100, 2), (1000, 3)]
    assert [r.get("machine") for r in out["rows"]] == ["m1", None, "m1"]
