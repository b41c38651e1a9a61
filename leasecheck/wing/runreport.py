"""The run's verdicts as data a CI system reads.

`--leasecheck-report FILE` writes them as JSON: per property its verdict (holds; holds,
not exercised; violated; not checked; excused; or no verdict when the queue broke the
contract), how
often it was exercised and each of its situations; the small scopes searched; and each
failure with its story and its files. Under GitHub Actions (`GITHUB_ACTIONS=true`) the
run also appends a job summary to `$GITHUB_STEP_SUMMARY` and prints one `::error`
annotation per failure. All of it is built once, in the process that prints (the
controller under xdist), from what pytest's reports already carry, and only when
leasecheck's property tests ran: an unrelated test run writes nothing.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from leasecheck.stateful import properties as P
from leasecheck.stateful.verdict import coverage
from leasecheck.wing import exercised

FORMAT = 1
_SAVED = re.compile(r"^leasecheck: saved (.+?\.json) ", re.MULTILINE)


def build(reporter: Any, queue: str, excused: Iterable[str]) -> dict[str, Any] | None:
    """Return the run's report, or None when no property item ran."""
    reports = reporter.stats.get("passed", []) + reporter.stats.get("failed", [])
    runs = _user(reports, exercised.KEY)
    if not runs:
        return None
    counts = coverage.merge(dict(r) for r in runs)
    failures = [_failure(r) for r in reporter.stats.get("failed", []) if _info(r) is not None]
    contract = any(f["kind"] == "contract" for f in failures)
    violated = {p for f in failures if f["kind"] == "violation" for p in f["properties"]}
    gaps = exercised.not_checked(reporter)
    judged = coverage.per_property(counts)
    props: dict[str, dict[str, Any]] = {}
    for prop in P.ALL:
        verdict, why = _verdict(prop, violated, gaps, frozenset(excused), contract)
        if verdict == "holds" and not judged.get(prop, 0):
            verdict = "holds, not exercised"  # a budget's silence is not a proof
        props[prop] = {
            "verdict": verdict,
            **({"why": why} if why else {}),
            "exercised": judged.get(prop, 0),
            "situations": {s: counts.get(s, 0) for s in coverage.situations_of(prop)},
        }
    outcome = "no verdict" if contract else "failed" if failures else "passed"
    return {
        "format": FORMAT,
        "queue": queue,
        "outcome": outcome,
        "properties": props,
        "searched": [s for r in _user(reports, exercised.SEARCHED) for s in r],
        "opening_stories": sum(int(r) for r in _user(reports, exercised.OPENING)),
        "failures": failures,
    }


def _user(reports: list[Any], key: str) -> list[Any]:
    """Return the `key` user property of each call report that carries one."""
    return [
        value
        for report in reports
        for name, value in getattr(report, "user_properties", ())
        if name == key and getattr(report, "when", "") == "call"
    ]


def _info(report: Any) -> dict[str, Any] | None:
    info = getattr(report, "leasecheck", None)
    return info if isinstance(info, dict) else None


def _failure(report: Any) -> dict[str, Any]:
    """Return one failed item as the report lists it: its story and its saved files."""
    info = _info(report) or {}
    story = str(report.longrepr)
    files = []
    for saved in _SAVED.findall(story):
        files += [saved, *(str(Path(saved).with_suffix(s)) for s in (".txt", ".svg"))]
    kind = str(info.get("kind", ""))
    if kind == "violation" and "NOT A VERDICT" in story:
        kind = "no verdict"
    return {
        "test": report.nodeid,
        "kind": kind,
        "properties": list(info.get("props", [])),
        "headline": str(info.get("line", "")),
        "story": story,
        "files": files,
    }


def _verdict(
    prop: str, violated: set[str], gaps: Mapping[str, str], excused: frozenset[str], cut: bool
) -> tuple[str, str]:
    """Return a property's verdict, and why when it is not judged."""
    if prop in violated:
        return "violated", ""
    if prop in excused:
        return "excused", "--leasecheck-excuse"
    if prop in gaps:
        return "not checked", gaps[prop]
    if cut:
        return "no verdict", "the queue broke the contract"
    return "holds", ""


def write(path: Path, data: dict[str, Any]) -> None:
    """Write the report whole, or leave what was there: never a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=2) + "\n")
    partial.replace(path)


def summary(data: dict[str, Any]) -> str:
    """Return the job summary: the verdicts and situations, then each failure's story."""
    icon = {"passed": "✅", "failed": "❌", "no verdict": "⚠️"}[data["outcome"]]
    lines = [
        f"## {icon} leasecheck: {data['queue']} — {data['outcome']}",
        "",
        "| property | verdict | exercised | never met |",
        "|---|---|---:|---|",
    ]
    for prop, p in data["properties"].items():
        verdict = p["verdict"] + (f" ({p['why']})" if p.get("why") else "")
        never = ", ".join(s for s, n in p["situations"].items() if not n)
        lines.append(f"| {prop} | {_cell(verdict)} | {p['exercised']} | {_cell(never)} |")
    searched = [s for s in data["searched"] if s.get("complete")]
    if searched:
        lines += ["", "Small scopes searched whole:", ""]
        lines += [f"- {s['scope']}" for s in searched]
    for f in data["failures"]:
        lines += ["", f"<details><summary>{_cell(f['headline'] or f['test'])}</summary>", ""]
        lines += ["```", f["story"], "```", "", "</details>"]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def error_lines(data: dict[str, Any]) -> list[str]:
    """Return one `::error` workflow command per failure (GitHub reads them from stdout)."""
    lines = []
    for f in data["failures"]:
        title = "leasecheck: " + (", ".join(f["properties"]) or f["kind"])
        lines.append(f"::error title={_escape(title, True)}::{_escape(f['story'], False)}")
    return lines


def _escape(text: str, prop: bool) -> str:
    """Escape a workflow command's message (and, `prop`, a property value)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def hook(reporter: Any, config: Any, queue: str, excused: Iterable[str]) -> None:
    """Write the report where asked, and the job summary under GitHub Actions: only in
    the process that prints (an xdist worker knows only its own items)."""
    if hasattr(config, "workerinput"):
        return
    target = config.getoption("--leasecheck-report")
    github = os.environ.get("GITHUB_ACTIONS") == "true"
    if not target and not github:
        return
    data = build(reporter, queue, excused)
    if data is None:
        return
    if target:
        write(Path(target), data)
        reporter.write_line(f"leasecheck: report written to {target}")
    if github:
        step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if step_summary:
            with open(step_summary, "a", encoding="utf-8") as out:
                out.write(summary(data))
        for line in error_lines(data):
            reporter.write_line(line)
