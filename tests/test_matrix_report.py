"""The conformance page with and without exercised counts.

A holds whose situations never came up reads "holds, not exercised"; a results file
written before the matrix kept counts renders as it was written, plus one line that
says they were not recorded; a missing count never reads as 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from leasecheck.stateful.properties import ALL
from leasecheck.stateful.verdict import coverage
from matrix import markdown, report
from matrix.runs import Verdicts
from matrix.targets import Target

OLDER = Path(__file__).resolve().parent / "data" / "older" / "conformance-pg15"
"""`matrix/results/pg15/conformance.json` and `.md` as the matrix wrote them on 2026-12-01
(commit 5d1b96e), before it kept counts."""
META = {"date": "today", "postgres": "18.6", "profile": "ci", "python": "3", "seconds": 2.0}
IDLE = "exclusive-lease"


def _column(name: str, exercised: dict[str, int] | None, **verdicts: Any) -> report.Column:
    holds = [p for p in ALL if p not in verdicts.get("not_applicable", {})]
    v = Verdicts(holds=holds, runs=1, exercised=exercised, **verdicts)
    return report.Column(Target(name, f"tests.{name}:Queue"), None, v, 1.0)


def _counts(**special: int) -> dict[str, int]:
    return {p: special.get(p.replace("-", "_"), 7) for p in ALL}


def _row(page: str, first: str) -> list[str]:
    """Return the cells of the table row that starts with `| first |` (the first such row)."""
    line = next(ln for ln in page.splitlines() if ln.startswith(f"| {first} |"))
    return [c.strip() for c in line.strip("|").split("|")][1:]


def test_an_older_file_renders_as_written_and_says_counts_were_not_recorded() -> None:
    """Byte for byte the page it was written with, and one line more after the legend."""
    data = json.loads(OLDER.with_suffix(".json").read_text())
    assert all("exercised" not in impl for impl in data["implementations"])
    written = OLDER.with_suffix(".md").read_text()
    assert markdown.LEGEND + "\n" in written
    expected = written.replace(
        markdown.LEGEND + "\n", f"{markdown.LEGEND}\n\n{markdown.NO_COUNTS}\n"
    )
    page = markdown.render(data)
    assert page == expected
    assert markdown.NOT_EXERCISED not in page and "| exercised |" not in page


def test_a_holds_with_no_situation_says_so_and_the_counts_are_shown() -> None:
    """0 for a holding property marks its cell; every count is in the counts table."""
    counts = _counts(exclusive_lease=0, atomic_rejection=0)
    reason = "runs the effect outside its completion"
    column = _column("q", counts, not_applicable={"atomic-rejection": reason})
    data = json.loads(report.as_json([column], META, [{}]))
    impl = data["implementations"][0]
    assert impl["exercised"] == counts
    # The verdict stays "holds" (majors compares verdicts); the count says the rest.
    assert impl["properties"][IDLE] == {"verdict": "holds"}
    page = report.as_markdown([column], META, [{}])
    assert _row(page, IDLE) == [markdown.NOT_EXERCISED]
    assert _row(page, "fencing") == ["holds"]
    assert _row(page, "atomic-rejection") == ["n/a [1]"]  # n/a with 0 is still n/a
    assert markdown.COUNTS in page and markdown.NO_COUNTS not in page
    table = page[page.index("| exercised | q |") :]
    assert _row(table, IDLE) == ["0"] and _row(table, "fencing") == ["7"]
    assert page == markdown.render(data)


def test_a_column_without_counts_beside_one_with_them_is_not_recorded() -> None:
    """A merged page mixes columns: the one without counts reads "not recorded", never 0,
    and its holds cells stay plain."""
    counted = _column("new", _counts(exclusive_lease=0))
    uncounted = _column("old", None)
    page = report.as_markdown([counted, uncounted], META, [{}, {}])
    assert _row(page, IDLE) == [markdown.NOT_EXERCISED, "holds"]
    table = page[page.index("| exercised | new |\n") :]
    assert _row(table, IDLE) == ["0"] and _row(table, "fencing") == ["7"]
    assert f"\nCounts {markdown.NOT_RECORDED} for: old.\n" in page
    assert markdown.NO_COUNTS not in page


def test_a_property_missing_from_the_counts_is_not_recorded() -> None:
    """Counts from a run that knew fewer properties say nothing of the one it lacked."""
    counts = _counts(exclusive_lease=0)
    del counts[IDLE]
    page = report.as_markdown([_column("q", counts)], META, [{}])
    assert _row(page, IDLE) == ["holds"]
    assert _row(page[page.index("| exercised |") :], IDLE) == [markdown.NOT_RECORDED]


def test_each_situation_has_its_row_and_a_zero_reads_as_one() -> None:
    """A property's count can stand over a situation that never came up: the situations
    table shows it as 0; a column that recorded none is named, never shown as zeros."""
    met = {**dict.fromkeys(coverage.SITUATIONS, 0), "stale completion sent": 4}
    counted = _column("new", coverage.per_property(met), situations=met)
    uncounted = _column("old", None)
    data = json.loads(report.as_json([counted, uncounted], META, [{}, {}]))
    assert data["implementations"][0]["situations"] == met
    assert data["implementations"][1]["situations"] is None
    page = markdown.render(data)
    table = page[page.index("| situation | new |\n") :]
    assert _row(table, "stale completion sent") == ["4"]
    assert _row(table, "stale heartbeat sent") == ["0"]
    assert f"\nSituations {markdown.NOT_RECORDED} for: old.\n" in page
    assert page == report.as_markdown([counted, uncounted], META, [{}, {}])
