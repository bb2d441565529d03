"""Whether vijax's result agrees with a peer library's: one rule and one message for every benchmark.

A benchmark that compares vijax with a peer (scikit-learn, gensim, NumPyro, BlackJAX) builds one
``compare(...)`` per quantity, adds ``verdict(checks)`` to its JSON, writes the JSON and prints
its tables, and only then calls ``exit_on_disagreement(checks)``: a failing run keeps its
measurements, and its exit status says whether vijax agreed with the peers.

Two rules, each with a stated tolerance:

- two-sided (the same algorithm from the same start, or the same estimator): agree when
  ``|vijax - peer| <= tolerance``;
- ``at_least=True`` (a score where higher is better, and the peer a different or approximate
  algorithm that vijax may beat): agree when ``vijax >= peer - tolerance``.

With ``relative=True`` the difference is divided by ``|peer|``. A non-finite value never agrees.
"""

from __future__ import annotations

import math
import sys


def compare(
    quantity: str,
    vijax_name: str,
    vijax_value,
    peer_name: str,
    peer_value,
    tolerance: float,
    *,
    relative: bool = False,
    at_least: bool = False,
) -> dict:
    """One agreement check, as a JSON-ready dict with its verdict under ``"agree"``.

    Args:
        quantity: what is compared, with its setting (e.g. ``"log-likelihood (full, N = 20000)"``).
        vijax_name: the vijax row's name.
        vijax_value: vijax's value (None counts as not finite).
        peer_name: the peer's row name.
        peer_value: the peer's value.
        tolerance: the largest difference that still agrees (absolute, or relative to ``|peer|``).
        relative: divide the difference by ``|peer_value|``.
        at_least: one-sided: only vijax falling short of the peer by more than ``tolerance`` disagrees.

    Returns:
        ``quantity``, ``vijax``, ``peer`` (each ``{"name", "value"}``), ``difference`` (vijax - peer,
        relative if asked; None when not finite), ``tolerance``, ``rule`` (the condition in words) and
        ``agree`` (bool).

    Raises:
        ValueError: ``tolerance`` is not a finite number >= 0.
    """
    if not (isinstance(tolerance, (int, float)) and math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    v = math.nan if vijax_value is None else float(vijax_value)
    p = math.nan if peer_value is None else float(peer_value)
    diff = v - p
    if relative:
        diff = diff / abs(p) if p != 0 else (0.0 if diff == 0 else math.copysign(math.inf, diff))
    per = " / |peer|" if relative else ""
    if at_least:
        rule, agree = f"{'(vijax - peer)' if relative else 'vijax - peer'}{per} >= -{tolerance:g}", diff >= -tolerance
    else:
        rule, agree = f"|vijax - peer|{per} <= {tolerance:g}", abs(diff) <= tolerance
    finite = math.isfinite(v) and math.isfinite(p)
    return {
        "quantity": quantity,
        "vijax": {"name": vijax_name, "value": v if math.isfinite(v) else None},
        "peer": {"name": peer_name, "value": p if math.isfinite(p) else None},
        "difference": diff if finite and math.isfinite(diff) else None,
        "relative": relative,
        "tolerance": float(tolerance),
        "rule": rule,
        "agree": bool(finite and agree),
    }


def verdict(checks: list) -> dict:
    """A run's checks for its JSON: ``{"agree": all agree (None without checks), "agreement": checks}``."""
    return {"agree": all(c["agree"] for c in checks) if checks else None, "agreement": list(checks)}


def describe(check: dict) -> str:
    """One line: the quantity, both values, the difference, the tolerance and the verdict."""

    def value(side):
        x = check[side]["value"]
        return "not finite" if x is None else f"{x:.10g}"

    diff = check["difference"]
    return (
        f"{'agree' if check['agree'] else 'DISAGREE'}: {check['quantity']}: "
        f"{check['vijax']['name']} {value('vijax')} vs {check['peer']['name']} {value('peer')}, "
        f"difference {'not finite' if diff is None else format(diff, '+.3g')}"
        f"{' (relative)' if check['relative'] else ''}; tolerance {check['tolerance']:g} "
        f"(agree when {check['rule']})"
    )


def exit_on_disagreement(checks: list, out=sys.stdout) -> None:
    """Prints every check; exits with status 1 and a message naming each disagreement if any.

    Call it last, after the JSON is written and the tables printed.

    Raises:
        SystemExit: some check disagrees (its message lists those checks).
    """
    if not checks:
        print("agreement with the peers: no peer compared in this run", file=out)
        return
    print(f"agreement with the peers ({len(checks)} checks):", file=out)
    for c in checks:
        print("  " + describe(c), file=out)
    bad = [c for c in checks if not c["agree"]]
    if bad:
        raise SystemExit(
            f"vijax disagrees with a peer in {len(bad)} of {len(checks)} checks:\n"
            + "\n".join("  " + describe(c) for c in bad)
        )
