"""The benchmarks' agreement rule (``benchmarks/_agree.py``): a benchmark whose vijax result
disagrees with a peer library's beyond its stated tolerance exits with status 1, naming the
quantity, both values and the tolerance, after it has written its JSON."""

import importlib.util
import io
import json
import math
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("benchmarks_agree", ROOT / "benchmarks" / "_agree.py")
agree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(agree)

# the benchmarks that compare vijax with a peer (hyper_grid.py: three ways of vijax), each ending with the agreement rule
PEER_BENCHMARKS = ("bbvi.py", "gmm_cavi.py", "gmm_em.py", "hyper_grid.py", "lda_online.py")


@pytest.mark.parametrize(
    "vijax, peer, tol, relative, at_least, expected",
    [
        (1.0, 1.4, 0.5, False, False, True),  # |diff| 0.4 <= 0.5
        (1.0, 0.5, 0.5, False, False, True),  # on the boundary
        (1.0, 1.6, 0.5, False, False, False),  # below by 0.6
        (2.0, 1.4, 0.5, False, False, False),  # above by 0.6: two-sided disagrees
        (2.0, 1.4, 0.5, False, True, True),  # one-sided: vijax above the peer agrees
        (0.8, 1.4, 0.5, False, True, False),  # one-sided: 0.6 short
        (-1000.05, -1000.0, 1e-4, True, False, True),  # relative 5e-5
        (-1000.2, -1000.0, 1e-4, True, False, False),  # relative 2e-4
        (-1000.0 - 1e-5, -1000.0, 1e-7, True, True, True),  # one-sided: 1e-8 short, within 1e-7
        (-1000.0 - 1e-3, -1000.0, 1e-7, True, True, False),  # one-sided: 1e-6 short
        (3.0, 3.0, 0.0, False, False, True),  # tolerance 0: exact equality agrees
        (3.0 + 1e-12, 3.0, 0.0, False, False, False),  # tolerance 0: any difference disagrees
        (math.nan, 1.0, 1.0, False, False, False),  # a non-finite value never agrees
        (1.0, -math.inf, 1.0, False, True, False),
        (None, 1.0, 1.0, False, True, False),
    ],
)
def test_compare_states_the_rule(vijax, peer, tol, relative, at_least, expected):
    c = agree.compare("q", "vijax", vijax, "peer", peer, tol, relative=relative, at_least=at_least)
    assert c["agree"] is expected
    assert c["tolerance"] == tol
    json.dumps(c, allow_nan=False)  # JSON-ready: non-finite values stored as None


def test_compare_records_both_values_and_the_signed_difference():
    c = agree.compare("ELBO", "vijax f64", -10.0, "scikit-learn", -8.0, 0.5, relative=True)
    assert c["vijax"] == {"name": "vijax f64", "value": -10.0}
    assert c["peer"] == {"name": "scikit-learn", "value": -8.0}
    assert c["difference"] == pytest.approx(-0.25)  # (-10 - -8) / 8
    assert c["rule"] == "|vijax - peer| / |peer| <= 0.5"


@pytest.mark.parametrize("tol", [-0.1, math.nan, math.inf, "0.1"])
def test_bad_tolerance_is_named(tol):
    with pytest.raises(ValueError, match=r"^tolerance must be a finite number >= 0, got"):
        agree.compare("q", "vijax", 1.0, "peer", 1.0, tol)


def test_exit_on_disagreement_exits_1_naming_quantity_values_and_tolerance():
    ok = agree.compare("log-likelihood (full)", "vijax_f64", -5.0, "sklearn", -5.0, 1e-9, relative=True)
    quantity = "held-out per word (synthetic, S = 256)"
    bad = agree.compare(quantity, "vijax-meanfield", -7.7, "sklearn", -7.5, 0.05, at_least=True)
    out = io.StringIO()
    with pytest.raises(SystemExit) as e:
        agree.exit_on_disagreement([ok, bad], out=out)
    message = str(e.value.code)  # a string code: Python prints it to stderr and exits with status 1
    assert "1 of 2 checks" in message
    for part in (quantity, "-7.7", "-7.5", "tolerance 0.05", "vijax - peer >= -0.05"):
        assert part in message
    assert "log-likelihood" not in message  # only the failing check is named in the error
    assert "agree: log-likelihood (full)" in out.getvalue() and "DISAGREE: held-out" in out.getvalue()


def test_exit_on_disagreement_returns_when_all_agree_or_none_compared():
    out = io.StringIO()
    assert agree.exit_on_disagreement([agree.compare("q", "v", 1.0, "p", 1.0, 0.0)], out=out) is None
    assert agree.exit_on_disagreement([], out=out) is None
    assert "no peer compared" in out.getvalue()


def test_verdict_for_the_json():
    good, bad = agree.compare("q", "v", 1.0, "p", 1.0, 0.0), agree.compare("q", "v", 1.0, "p", 2.0, 0.5)
    assert agree.verdict([good]) == {"agree": True, "agreement": [good]}
    assert agree.verdict([good, bad])["agree"] is False
    assert agree.verdict([])["agree"] is None


@pytest.mark.parametrize("name", PEER_BENCHMARKS)
def test_every_peer_benchmark_ends_with_the_agreement_rule(name):
    """Each benchmark compares through the one helper, records the verdict in its JSON and exits last."""
    text = (ROOT / "benchmarks" / name).read_text()
    assert "from _agree import compare, exit_on_disagreement, verdict" in text
    assert "**verdict(" in text or "verdict(checks)" in text
    main = text[text.index("def main(") :]
    dump, exit_at = main.rindex("json.dump("), main.rindex("exit_on_disagreement(checks)")
    assert dump < exit_at, f"{name}: the agreement exit must come after the JSON is written"
