"""What the matrix reads from a run: the violated properties, from each failure's history
(not its name), and what the final run exercised, from its JUnit XML."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from leasecheck.stateful.properties import ALL
from leasecheck.stateful.verdict import coverage
from leasecheck.wing import exercised
from leasecheck.wing.shards import DEFAULT_COUNT
from matrix import runs
from matrix.targets import Target


def _failure(directory: Path, stem: str, prop: str) -> None:
    (directory / f"{stem}.json").write_text(json.dumps({"property": prop, "program": []}))
    (directory / f"{stem}.txt").write_text(f"[{prop}] ...\n")


def test_a_dotted_queue_name_does_not_hide_the_property(tmp_path: Path) -> None:
    """`chancy-0.25.1-fencing-1234abcd` cut to `chancy-0.25` by with_suffix is still fencing."""
    _failure(tmp_path, "chancy-0.25", "fencing")
    _failure(tmp_path, "pgqueuer-single-completion-1234abcd", "single-completion")
    (tmp_path / "notes.json").write_text("[1, 2]")
    found = runs._violations(tmp_path)
    assert sorted(found) == ["fencing", "single-completion"]
    assert [p.name for p in found["fencing"]] == ["chancy-0.25.json", "chancy-0.25.txt"]


def test_no_histories_no_violations(tmp_path: Path) -> None:
    """An empty failures directory (or none) names no property."""
    assert runs._violations(tmp_path) == {}
    assert runs._violations(tmp_path / "missing") == {}


REPO = Path(__file__).resolve().parent.parent
PYTHON = Path(sys.executable)
REFERENCE = Target("reference", "leasecheck.reference.queue:ReferenceQueue")
SEARCH_ONLY = {"LEASECHECK_OPENING": "off"}
"""A column's env for a run that tests the matrix's counting, not the search: the opening's
small scopes are a third of a `dev` run, and test_layer.py tests them."""
SAID = re.compile(r"^  ([a-z-]+): (?:exercised (\d+) times|holds, not exercised)$")


def _summary(output: str) -> dict[str, int]:
    """Return the counts the run's own closing summary printed (`leasecheck.wing.exercised`)."""
    found = {}
    for line in output.splitlines():
        said = SAID.match(line)
        if said and said.group(1) in ALL:
            found[said.group(1)] = int(said.group(2) or 0)
    return found


def _situations_said(output: str) -> dict[str, int]:
    """Return the situations the closing summary listed under the properties, zeros too."""
    found: dict[str, int] = {}
    for line in output.splitlines():
        if not line.startswith("      "):
            continue
        said = line.strip()
        if said.startswith("never met: "):
            found.update(dict.fromkeys(said.removeprefix("never met: ").split("; "), 0))
            continue
        for item in said.split("; "):
            name, n = item.rsplit(" ", 1)
            found[name] = int(n)
    return found


def test_the_final_run_counts_what_its_summary_printed(
    leasecheck_server_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counts read from the junit XML are the run's own summary, summed over all shards.

    $LEASECHECK_SHARD in the matrix's environment would cut the run to a slice of its
    shards, judged and counted as the whole: the run must not inherit it.
    """
    monkeypatch.setenv("LEASECHECK_SHARD", "1/4")
    reference = dataclasses.replace(REFERENCE, env=SEARCH_ONLY)
    verdicts = runs.judge(PYTHON, reference, REPO, leasecheck_server_dsn, tmp_path, "dev", 600)
    assert verdicts.error is None and verdicts.runs == 1, verdicts
    assert verdicts.holds == list(ALL)
    junit = ET.parse(tmp_path / "run1" / "junit.xml")
    recorded = [
        case
        for case in junit.iter("testcase")
        if case.get("name", "").startswith(runs.MACHINE)
        and any(p.get("name") == exercised.KEY for p in case.iter("property"))
    ]
    assert len(recorded) == DEFAULT_COUNT  # every shard ran and recorded, not a slice
    printed = _summary((tmp_path / "run1" / "output.txt").read_text())
    assert sorted(printed) == sorted(ALL)
    assert verdicts.exercised == printed
    assert sum(printed.values()) > 0
    # Every situation is listed under its properties with the count the matrix keeps.
    assert verdicts.situations == _situations_said((tmp_path / "run1" / "output.txt").read_text())


def _stand_in(tmp_path: Path, body: str) -> Path:
    """Run pytest on a module whose items carry the property run's name; return its junit.

    A real JUnit file, written by pytest as the matrix's runs write it (xunit1), for
    what the real run cannot be made to record: counts of our choosing, or none.
    """
    (tmp_path / "test_stand_in.py").write_text(textwrap.dedent(body))
    junit = tmp_path / "junit.xml"
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-c", "pytest.ini"]
    argv += ["--rootdir", str(tmp_path), "--junitxml", str(junit), "-o", "junit_family=xunit1"]
    done = subprocess.run(
        [*argv, "test_stand_in.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return junit


@pytest.fixture
def stand_in_dir(tmp_path: Path) -> Path:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return tmp_path


def test_counts_are_summed_over_shards_and_mapped_to_properties(stand_in_dir: Path) -> None:
    """Two shards' situations are added, each mapped to every property it tests; other
    items' records are not the property run's."""
    junit = _stand_in(
        stand_in_dir,
        """
        import pytest

        from leasecheck.wing import exercised

        SHARDS = {
            "shard-1-of-2": {"stale completion sent": 2},
            "shard-2-of-2": {"stale completion sent": 3, "completion refused": 1},
        }

        @pytest.mark.parametrize("shard", list(SHARDS))
        def test_leasecheck_properties(shard, request):
            request.node.user_properties.append((exercised.KEY, SHARDS[shard]))

        def test_leasecheck_regression(request):
            request.node.user_properties.append((exercised.KEY, {"claim at the attempt cap": 9}))
        """,
    )
    met = runs.read_situations(junit)
    assert met == {
        **dict.fromkeys(coverage.SITUATIONS, 0),
        "stale completion sent": 5,
        "completion refused": 1,
    }
    counts = runs.read_exercised(junit)
    assert counts == {
        **dict.fromkeys(ALL, 0),
        "fencing": 5,
        "single-completion": 5,
        "atomic-rejection": 1,
    }


def test_no_record_is_not_recorded(stand_in_dir: Path) -> None:
    """Property items that recorded nothing give None, never a row of zeros."""
    junit = _stand_in(
        stand_in_dir,
        """
        import pytest

        @pytest.mark.parametrize("shard", ["shard-1-of-1"])
        def test_leasecheck_properties(shard):
            pass
        """,
    )
    assert runs.read_exercised(junit) is None
    assert runs.read_situations(junit) is None


@pytest.mark.parametrize(
    "value", ["Odd({'stale completion sent': 1})", "Shy({'stale completion sent': 1})", "[]"]
)
def test_an_unreadable_record_is_an_error_not_a_count(stand_in_dir: Path, value: str) -> None:
    """A value whose text is not the dict the suite records is refused (run_once: not
    recorded), though the run's own summary could still read it."""
    junit = _stand_in(
        stand_in_dir,
        f"""
        import pytest

        from leasecheck.wing import exercised

        class Odd(dict):
            def __repr__(self):
                return "<odd>"

        class Shy(dict):
            def __repr__(self):
                return "counts"

        @pytest.mark.parametrize("shard", ["shard-1-of-1"])
        def test_leasecheck_properties(shard, request):
            request.node.user_properties.append((exercised.KEY, {value}))
        """,
    )
    with pytest.raises(ValueError, match=exercised.KEY):
        runs.read_exercised(junit)


def test_a_run_that_errors_records_no_counts(leasecheck_server_dsn: str, tmp_path: Path) -> None:
    """An adapter that cannot be imported is an error, and its counts are not recorded."""
    broken = Target("broken", "tests.nowhere:Queue")
    verdicts = runs.judge(PYTHON, broken, REPO, leasecheck_server_dsn, tmp_path, "dev", 120)
    assert verdicts.error is not None and "nowhere" in verdicts.error, verdicts
    assert verdicts.exercised is None


def test_a_failure_outranks_a_shard_that_stopped_for_it(tmp_path: Path) -> None:
    """A shard that stopped shrinking a failure another shard told is skipped, and xdist
    may write it first: the run's outcome is still the failure, not an error cell."""
    junit = tmp_path / "junit.xml"
    junit.write_text(
        "<testsuites><testsuite>"
        '<testcase name="test_leasecheck_properties[shard-2-of-8]"><skipped message="'
        "leasecheck: stopped shrinking its fencing failure: shard-1-of-8 told that "
        "property's failure in full\"/></testcase>"
        '<testcase name="test_leasecheck_properties[shard-1-of-8]">'
        '<failure message="[fencing] the completion of stale w0:job1#1 was accepted"/>'
        "</testcase>"
        '<testcase name="test_leasecheck_properties[shard-3-of-8]"/>'
        "</testsuite></testsuites>"
    )
    outcome, gaps = runs._read_junit(junit)
    assert outcome == "failure: [fencing] the completion of stale w0:job1#1 was accepted"
    assert gaps == []
