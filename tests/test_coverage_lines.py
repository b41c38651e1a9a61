"""The closing lines of a run: each property's count, then each of its situations.

A property's count adds up its situations, so "fencing: exercised 140 times" could
stand over a stale heartbeat never sent; the lines list every situation with its own
count and name again the ones at zero.
"""

from __future__ import annotations

from pathlib import Path

from leasecheck.stateful import properties as P
from leasecheck.stateful.verdict import coverage
from tests import child


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
        "    never met: claim at the attempt cap; claim past the attempt cap tried; "
        "failure report on the last attempt",
    ]


def test_every_situation_is_listed_under_each_property_it_tests() -> None:
    """No situation is left out of the lines, whichever property it belongs to."""
    counts = {s: i + 1 for i, s in enumerate(coverage.SITUATIONS)}
    listed = "\n".join(coverage.summary(counts))
    for situation, props in coverage.SITUATIONS.items():
        assert listed.count(f"{situation} {counts[situation]}") >= len(props), situation


def _adopted(tmp_path: Path, *args: str) -> child.Finished:
    """Run leasecheck's not-checked items as an adopting repository's pytest would."""
    (tmp_path / "test_suite.py").write_text("from leasecheck.suite import *  # noqa: F403\n")
    argv = child.command(
        "test_suite.py",
        "--leasecheck-queue",
        "leasecheck.reference.queue:ReferenceQueue",
        "--leasecheck-excuse",
        "fencing",
        "-k",
        "what_is_not_checked",
        *args,
        rootdir=tmp_path,
    )
    return child.run(argv, tmp_path / "tmp", cwd=tmp_path)


def test_what_is_not_checked_is_said_without_rs(tmp_path: Path) -> None:
    """pytest shows skip reasons only under `-rs`; leasecheck says its own at the end."""
    done = _adopted(tmp_path)
    assert done.returncode == 0, done.output
    section = done.output.split("leasecheck: not checked", 1)
    assert len(section) == 2, done.output
    assert "  fencing: excused (--leasecheck-excuse)" in section[1].splitlines(), done.output


def test_what_is_not_checked_is_said_once_under_rs(tmp_path: Path) -> None:
    """Under `-rs` pytest's summary names each reason, and leasecheck adds nothing."""
    done = _adopted(tmp_path, "-rs")
    assert done.returncode == 0, done.output
    assert "leasecheck: not checked" not in done.output, done.output
    assert done.output.count("fencing: excused (--leasecheck-excuse)") == 1, done.output


def test_a_property_not_judged_says_why_and_never_holds() -> None:
    """Excused, or ruled out by a declaration: said so, with what its situations met."""
    unjudged = {P.RETRY_CAP: "not checked (the queue declares max_attempts = None)"}
    lines = coverage.summary({"claim at the attempt cap": 2}, [P.RETRY_CAP], unjudged=unjudged)
    assert lines[0] == (
        "retry-cap: not checked (the queue declares max_attempts = None); "
        "its situations met 2 times"
    )
    assert "holds" not in "\n".join(lines)
