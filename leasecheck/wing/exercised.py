"""The run's closing word on what it exercised, per property, summed over every shard.

Each property-run test item records the dangerous situations its examples produced
(`stateful.verdict.coverage`) as a user property of its report, which xdist carries to the
controller; this prints them added up, once per run, and only when leasecheck's
property tests ran. A property that held without its situation ever occurring reads
"holds, not exercised": a budget's silence is not a proof. What leasecheck's own
items skipped (a property the queue rules out or the run excused, no regressions to
replay) is said here too, since an adopting repository's pytest shows skip reasons
only under `-rs`.
"""

from __future__ import annotations

from typing import Any

import pytest

from leasecheck.stateful.exhaustive import layer
from leasecheck.stateful.verdict import coverage

KEY = "leasecheck_coverage"
OPENING = "leasecheck_opening"
"""How many of the opening's stories (`stateful.opening`) an item played."""
_NOT_CHECKED = "::test_leasecheck_what_is_not_checked["
SEARCHED = "leasecheck_searched"
"""The small scopes an item searched whole (`stateful.exhaustive.layer.Searched`)."""


def summarise(reporter: Any, excused: frozenset[str] = frozenset()) -> None:
    """Print what the run's property items exercised, if any ran; a property excused or
    ruled out by the queue's declarations is said so, never said to hold."""
    runs = [
        dict(value)
        for report in reporter.stats.get("passed", []) + reporter.stats.get("failed", [])
        for name, value in getattr(report, "user_properties", ())
        if name == KEY and getattr(report, "when", "") == "call"
    ]
    if not runs:
        return
    total = coverage.merge(runs)
    cut = any(
        isinstance(info := getattr(report, "leasecheck", None), dict)
        and info.get("kind") == "contract"
        for report in reporter.stats.get("failed", [])
    )
    title = "leasecheck: what the run exercised"
    if cut:  # nothing holds: the queue broke the contract, so no verdict was reached
        title += " until the contract error"
    reporter.write_sep("-", title)
    played = sum(
        int(value)
        for report in reporter.stats.get("passed", []) + reporter.stats.get("failed", [])
        for name, value in getattr(report, "user_properties", ())
        if name == OPENING and getattr(report, "when", "") == "call"
    )
    if played:
        stories = f"{played} fixed stor{'y' if played == 1 else 'ies'} of 2 workers and 1 job"
        reporter.write_line(f"  the opening: {stories}, played before the search")
    searched = [
        s
        for report in reporter.stats.get("passed", []) + reporter.stats.get("failed", [])
        for name, value in getattr(report, "user_properties", ())
        if name == SEARCHED and getattr(report, "when", "") == "call"
        for s in value
    ]
    for line in layer.said(searched):
        reporter.write_line(f"  {line}")
    unjudged = {p: "excused (--leasecheck-excuse), not judged" for p in excused}
    unjudged |= {p: f"not checked ({why})" for p, why in not_checked(reporter).items()}
    for line in coverage.summary(total, holds=not cut, unjudged=unjudged):
        reporter.write_line(f"  {line}")


def not_checked(reporter: Any) -> dict[str, str]:
    """Return each property the queue's declarations rule out, with the reason its item
    was skipped with (`suite.test_leasecheck_what_is_not_checked`)."""
    gaps = {}
    for report in reporter.stats.get("skipped", []):
        if _NOT_CHECKED not in report.nodeid:
            continue
        prop = report.nodeid.split(_NOT_CHECKED, 1)[1].rstrip("]")
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else ""
        gaps[prop] = str(reason).removeprefix("Skipped: ").removeprefix(f"{prop}: ")
    return gaps


def skipped(reporter: Any) -> list[str]:
    """Return the reasons leasecheck's own items were skipped, once each, in run order."""
    reasons: dict[str, None] = {}
    for report in reporter.stats.get("skipped", []):
        if "::test_leasecheck_" not in report.nodeid:
            continue
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else ""
        reasons[str(reason).removeprefix("Skipped: ")] = None
    return [r for r in reasons if r]


def say_skipped(reporter: Any) -> None:
    """Print why leasecheck's items were skipped, unless pytest's own summary does (`-rs`)."""
    chars = str(getattr(reporter, "reportchars", ""))
    if "s" in chars or "a" in chars or "A" in chars:
        return
    reasons = skipped(reporter)
    if not reasons:
        return
    reporter.write_sep("-", "leasecheck: not checked")
    for reason in reasons:
        reporter.write_line(f"  {reason}")


def hook(
    terminalreporter: Any, config: pytest.Config, excused: frozenset[str] = frozenset()
) -> None:
    """The body of `pytest_terminal_summary` for the plugin."""
    summarise(terminalreporter, excused)
    say_skipped(terminalreporter)
