"""Campaigns: two jobs' failure directories merged, reported on, and replayed by a third run.

The pipeline runs here as a CI matrix runs it, without a network: two `leasecheck
check` processes (the matrix's jobs, each one of two shards, each with a directory of
its own and its JUnit XML), `leasecheck campaign merge`, `campaign report`, then a pull
request's run that replays what the jobs found. The jobs are seeded, so each takes
seconds every time (a random run of a queue that breaks many properties may shrink
each of them for minutes); seeded runs save no examples, so reading a campaign's
examples is tested on Hypothesis's own directory databases, and its usage on the command.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import hypothesis
import pytest

from leasecheck.wing import campaign, outdir
from tests import child

NAIVE = "mutants.naive:Naive"


def _leasecheck(cwd: Path, tmp: Path, *argv: str, **env: str) -> child.Finished:
    command = [str(Path(sys.executable).with_name("leasecheck")), *argv]
    return child.run(command, tmp, cwd=cwd, timeout=300, **env)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _job(where: Path, shard: str, dsn: str) -> tuple[child.Finished, Path, Path]:
    """One nightly job: one of two shards, seeded, its own directory and JUnit XML."""
    out, junit = where / f"job-{shard[0]}", where / f"job-{shard[0]}.xml"
    done = _leasecheck(
        where, where / "tmp",
        "check", NAIVE, "-n", "0", "--leasecheck-shards", "2", "--leasecheck-shard", shard,
        "--pg-dsn", dsn, "--", "-k", "properties", "--hypothesis-seed=2", f"--junitxml={junit}",
        LEASECHECK_DIR=str(out),
    )  # fmt: skip
    return done, out, junit


@pytest.mark.slow
def test_two_jobs_merge_report_and_feed_a_third_run(
    tmp_path: Path, leasecheck_server_dsn: str
) -> None:
    first, a, a_xml = _job(tmp_path, "1/2", leasecheck_server_dsn)
    second, b, b_xml = _job(tmp_path, "2/2", leasecheck_server_dsn)
    assert first.returncode == 1 and second.returncode == 1, first.output + second.output

    merged = tmp_path / "nightly"
    done = _leasecheck(tmp_path, tmp_path / "tmp", "campaign", "merge", str(a), str(b),
                       "--into", str(merged))  # fmt: skip
    assert done.returncode == 0, done.output
    failures = sorted(merged.glob("*.json"))
    assert failures, done.output
    assert {p.name for p in failures} == {p.name for p in [*a.glob("*.json"), *b.glob("*.json")]}
    again = _leasecheck(tmp_path, tmp_path / "tmp", "campaign", "merge", str(a), str(b),
                        "--into", str(merged))  # fmt: skip
    assert "0 failure files and 0 examples merged" in again.output, again.output

    told = _leasecheck(tmp_path, tmp_path / "tmp", "campaign", "report", str(a_xml), str(b_xml))
    assert told.returncode == 1, told.output
    assert told.lines[0] == "leasecheck campaign: 2 jobs, 2 property items", told.output
    failed = [f for xml in (a_xml, b_xml) for f in ET.parse(xml).iter("failure")]
    assert told.lines[1] == f"failures: {len(failed)}", told.output
    assert len([line for line in told.lines if line.startswith(f"  {tmp_path}")]) == len(failed)
    assert "exercised, summed over every job:" in told.lines, told.output

    snapshot = _tree(merged)
    replayed = _leasecheck(
        tmp_path, tmp_path / "tmp",
        "check", NAIVE, "-n", "0", "--leasecheck-profile", "ci", "--pg-dsn",
        leasecheck_server_dsn, "--leasecheck-regressions", str(merged), "--", "-k", "regression",
        LEASECHECK_DIR=str(tmp_path / "pr"),
    )  # fmt: skip
    assert replayed.returncode == 1, replayed.output
    assert f"{len(failures)} failed" in replayed.lines[-1], replayed.output

    assert _tree(merged) == snapshot, "a replay reads the campaign's files, never writes them"


def test_examples_from_a_campaign_under_ci_is_one_line(tmp_path: Path) -> None:
    """ci is derandomized and reads no saved examples: naming some is a usage error."""
    nightly = tmp_path / "nightly"
    outdir._ExamplesOf(nightly, "q", created=True).save(b"k", b"v")
    done = _leasecheck(
        tmp_path, tmp_path / "tmp", "check", NAIVE, "-n", "0", "--leasecheck-profile", "ci",
        "--leasecheck-examples-from", str(nightly),
    )  # fmt: skip
    assert done.returncode == 2, done.output
    assert "Traceback" not in done.output, done.output
    assert done.lines[-1:] == [
        f"ERROR: leasecheck: --leasecheck-examples-from {nightly}: a derandomized run (the ci "
        "profile, or --hypothesis-seed) reads no saved examples; use --leasecheck-profile dev "
        "or deep, or replay the campaign's failure files with --leasecheck-regressions DIR"
    ], done.output


def test_the_examples_of_a_campaign_are_read_and_never_written(tmp_path: Path) -> None:
    """A run reads every example the campaign holds of its queue, whichever shard of
    however many found it (nightly jobs split the run otherwise), and writes only its own."""
    one, two = tmp_path / "job-1", tmp_path / "job-2"
    outdir._ExamplesOf(one, "q:Q|q|shard-1-of-64", created=True).save(b"key", b"found by 1")
    outdir._ExamplesOf(two, "q:Q|q|shard-9-of-64", created=True).save(b"key", b"found by 9")
    outdir._ExamplesOf(two, "r:R|r|shard-9-of-64", created=True).save(b"key", b"another queue")
    shared = tmp_path / "nightly"
    campaign.merge([one, two], shared)
    scopes = (shared / "examples" / campaign.SCOPES_FILE).read_text().splitlines()
    assert sorted(scopes) == ["q:Q|q|shard-1-of-64", "q:Q|q|shard-9-of-64", "r:R|r|shard-9-of-64"]
    db = outdir.examples(tmp_path / "mine", "q:Q|q|shard-3-of-8", created=True, shared=shared)
    assert sorted(db.fetch(b"key")) == [b"found by 1", b"found by 9"]
    before = _tree(shared)
    db.save(b"key", b"found here")
    db.delete(b"key", b"found by 1")
    assert _tree(shared) == before
    assert sorted(db.fetch(b"key")) == [b"found by 1", b"found by 9", b"found here"]


def test_a_merge_refuses_mixed_hypothesis_versions_and_writes_nothing(tmp_path: Path) -> None:
    old, new, into = tmp_path / "old", tmp_path / "new", tmp_path / "into"
    for where, version in ((old, "6.1.0"), (new, hypothesis.__version__)):
        outdir._ExamplesOf(where, "q", created=True).save(b"k", where.name.encode())
        (where / "examples" / campaign.VERSION_FILE).write_text(version)
    with pytest.raises(campaign.CampaignError, match=r"several Hypothesis versions .*pin"):
        campaign.merge([old, new], into)
    assert not into.exists()
    with pytest.raises(campaign.CampaignError, match="is not a directory"):
        campaign.merge([new, tmp_path / "missing"], into)
    assert not into.exists()
    with pytest.raises(campaign.CampaignError, match=r"written by Hypothesis 6\.1\.0"):
        campaign.usable_examples(old, derandomized=False)
    with pytest.raises(campaign.CampaignError, match="derandomized run"):
        campaign.usable_examples(new, derandomized=True)
    with pytest.raises(campaign.CampaignError, match="no examples/"):
        campaign.usable_examples(tmp_path, derandomized=False)


def test_a_failure_file_found_twice_with_other_contents_keeps_the_first(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for where, text in ((one, "first"), (two, "second")):
        where.mkdir()
        (where / "q-fencing-abc.json").write_text(text)
    done = campaign.merge([one, two], tmp_path / "into")
    assert (done.failures, done.kept) == (1, ["q-fencing-abc.json"])
    assert (tmp_path / "into" / "q-fencing-abc.json").read_text() == "first"


def test_a_report_of_files_without_property_items_says_nothing_was_exercised(
    tmp_path: Path,
) -> None:
    junit = tmp_path / "other.xml"
    junit.write_text('<testsuites><testsuite><testcase name="test_x"/></testsuite></testsuites>')
    lines = campaign.report([campaign.read_job(junit)])
    assert lines == [
        "leasecheck campaign: 1 jobs, 0 property items",
        "  no property item ran in these files: nothing was exercised",
    ]
    (tmp_path / "broken.xml").write_text("<testsuites>")
    with pytest.raises(campaign.CampaignError, match=r"cannot read .* as JUnit XML"):
        campaign.read_job(tmp_path / "broken.xml")


def test_the_command_refuses_a_merge_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    into = tmp_path / "into"
    missing = tmp_path / "missing"
    done = _leasecheck(tmp_path, tmp_path / "tmp", "campaign", "merge", str(missing),
                       "--into", str(into))  # fmt: skip
    assert done.returncode == 2, done.output
    assert done.lines == [
        f"leasecheck campaign: {missing} is not a directory: name each job's failure "
        "directory (its --leasecheck-dir, .leasecheck by default)"
    ]
    assert not into.exists()
