"""The closing lines of a run: each property's count, then each of its situations.

A property's count adds up its situations, so "fencing: exercised 140 times" could
stand over a stale heartbeat never sent; the lines list every situation with its own
count and name again the ones at zero.
"""

from __future__ import annotations

from leasecheck.stateful import coverage
from leasecheck.stateful import properties as P


def test_a_situation_at_zero_is_named_under_a_property_that_was_exercised() -> None:
    lines = coverage.summary({"stale completion sent": 120}, judged=[P.FENCING])
    assert lines[0] == "fencing: exercised 120 times"
    assert lines[1] == "    stale completion sent 120"
    never = lines[2].removeprefix("    never met: ").split("; ")
    assert "stale heartbeat sent" in never and "stale completion sent" not in never
    assert sorted([*never, "stale completion sent"]) == sorted(coverage.situations_of(P.FENCING))


def test_a_property_never_exercised_names_all_its_situations() -> None:
    lines = coverage.summary({"stale completion sent": 3}, judged=[P.RETRY_CAP])
    assert lines == [
        "retry-cap: holds, not exercised",
        "    never met: claim at the attempt cap; claim past the attempt cap tried",
    ]


def test_every_situation_is_listed_under_each_property_it_tests() -> None:
    """No situation is left out of the lines, whichever property it belongs to."""
    counts = {s: i + 1 for i, s in enumerate(coverage.SITUATIONS)}
    listed = "\n".join(coverage.summary(counts))
    for situation, props in coverage.SITUATIONS.items():
        assert listed.count(f"{situation} {counts[situation]}") >= len(props), situation
