"""The run's closing word on what it exercised, per property, summed over every shard.

Each property-run test item records the dangerous situations its examples produced
(`stateful.coverage`) as a user property of its report, which xdist carries to the
controller; this prints them added up, once per run, and only when leasecheck's
property tests ran. A property that held without its situation ever occurring reads
"holds, not exercised": a budget's silence is not a proof.
"""

from __future__ import annotations

from typing import Any

import pytest

from leasecheck.stateful import coverage

KEY = "leasecheck_coverage"


def summarise(reporter: Any) -> None:
    """Print what the run's property items exercised, if any ran."""
    runs = [
        dict(value)
        for report in reporter.stats.get("passed", []) + reporter.stats.get("failed", [])
        for name, value in getattr(report, "user_properties", ())
        if name == KEY and getattr(report, "when", "") == "call"
    ]
    if not runs:
        return
    total = coverage.merge(runs)
    reporter.write_sep("-", "leasecheck: what the run exercised")
    for line in coverage.summary(total):
        reporter.write_line(f"  {line}")


def hook(terminalreporter: Any, config: pytest.Config) -> None:
    """The body of `pytest_terminal_summary` for the plugin."""
    summarise(terminalreporter)
