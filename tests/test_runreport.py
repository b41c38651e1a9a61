"""The run's verdicts as data a CI system reads: the JSON report, GitHub's job summary
and its annotations (`leasecheck.wing.runreport`), from a real property run in a child pytest.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import mutants
from leasecheck.stateful.properties import ALL
from leasecheck.wing import runreport
from tests import child

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, dsn: str, *extra: str, **env: str) -> child.Finished:
    argv = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
        "--pyargs", "leasecheck.suite", f"--leasecheck-queue={mutants.ALL['naive']}",
        "--leasecheck-profile=dev", f"--leasecheck-pg-dsn={dsn}", "-k", "properties",
        f"--leasecheck-dir={tmp_path / 'failures'}", *extra,
    ]  # fmt: skip
    return child.run(argv, tmp_path / "tmp", cwd=tmp_path, timeout=300, **env)


def test_a_failing_run_reports_its_verdicts_summary_and_annotations(
    tmp_path: Path, leasecheck_server_dsn: str
) -> None:
    """The naive queue breaks single-completion in the opening: the report says so, with
    the story and the files it saved; the other properties hold or are not exercised.
    Under xdist, written once, by the process that prints, from every worker's items."""
    summary = tmp_path / "summary.md"
    done = _run(
        tmp_path, leasecheck_server_dsn, "-n", "2",
        "--leasecheck-report", str(tmp_path / "out/run.json"),
        GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary),
    )  # fmt: skip
    assert done.returncode == 1, done.output
    data: dict[str, Any] = json.loads((tmp_path / "out/run.json").read_text())
    assert data["outcome"] == "failed" and data["queue"] == mutants.ALL["naive"]
    assert set(data["properties"]) == set(ALL)
    assert data["properties"]["single-completion"]["verdict"] == "violated"
    verdicts = {p: v["verdict"] for p, v in data["properties"].items()}
    assert set(verdicts.values()) == {"violated", "holds", "holds, not exercised"}, verdicts
    assert all(
        (v["verdict"] == "holds, not exercised") == (v["exercised"] == 0)
        for p, v in data["properties"].items()
        if p != "single-completion"
    )
    (failure,) = data["failures"]
    assert failure["kind"] == "violation" and failure["properties"] == ["single-completion"]
    assert "completed 2 times" in failure["story"]
    assert failure["files"] and all(Path(f).exists() for f in failure["files"])
    situations = data["properties"]["fencing"]["situations"]
    assert data["properties"]["fencing"]["exercised"] == sum(situations.values())
    assert not (tmp_path / "out/run.json.partial").exists()
    said = summary.read_text()
    assert said.startswith("## ❌ leasecheck: ") and said.count("## ") == 1, said
    assert "| single-completion | violated |" in said
    assert "completed 2 times" in said
    assert done.output.count("::error title=leasecheck%3A single-completion::") == 1
    assert f"leasecheck: report written to {tmp_path / 'out/run.json'}" in done.output


def test_without_asking_nothing_is_written(tmp_path: Path, leasecheck_server_dsn: str) -> None:
    """Outside GitHub Actions and without the option, the run writes no report."""
    done = _run(tmp_path, leasecheck_server_dsn, "-n", "0")
    assert done.returncode == 1, done.output
    assert "::error" not in done.output and "report written" not in done.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["failures", "tmp"]


def test_each_verdict_says_why_it_is_not_judged() -> None:
    """A violation stands even when excused later; an excuse, a declaration's gap or a
    contract error each say why the property was not judged."""
    gaps = {"retry-cap": "retry-cap: the queue declares max_attempts = None"}
    cases = [
        ("fencing", {"fencing"}, frozenset({"fencing"}), False, ("violated", "")),
        ("fencing", set(), frozenset({"fencing"}), False, ("excused", "--leasecheck-excuse")),
        ("retry-cap", set(), frozenset(), True, ("not checked", gaps["retry-cap"])),
        ("fencing", set(), frozenset(), True, ("no verdict", "the queue broke the contract")),
        ("fencing", set(), frozenset(), False, ("holds", "")),
    ]
    for prop, violated, excused, cut, expected in cases:
        assert runreport._verdict(prop, violated, gaps, excused, cut) == expected
