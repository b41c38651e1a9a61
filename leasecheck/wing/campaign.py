"""Campaigns: many runs on many machines, one result — `leasecheck campaign merge|report`.

A nightly CI matrix runs the `deep` profile (random, long) in N jobs, each with
`--leasecheck-shard I/N` and a failure directory of its own. A merge job takes the
union of the jobs' directories: failure files are named by queue, property and a
hash of the program, and Hypothesis's directory database by hashes of key and value,
so a union never overwrites one job's find with another's. Pull-request runs then
replay every failure found overnight (`--leasecheck-regressions MERGED`) and, under a
random profile, try the merged examples first (`--leasecheck-examples-from MERGED`,
read-only). The report adds up what every job exercised, situation by situation,
from the jobs' JUnit XML, and names the failures and the situations nobody met.

Hypothesis's saved examples are only meaningful to the Hypothesis that wrote them:
each failure directory records that version (`examples/HYPOTHESIS_VERSION`), and a
merge or a read of examples of another version stops with one line.
"""

from __future__ import annotations

import argparse
import ast
import filecmp
import shutil
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis

from leasecheck.stateful.verdict import coverage
from leasecheck.wing import exercised

VERSION_FILE = "HYPOTHESIS_VERSION"
"""Beside a failure directory's examples: the Hypothesis version that wrote them."""

SCOPES_FILE = "SCOPES"
"""Beside them too: the scope (queue and shard) of each run that saved any, one a line;
a merge takes the union, so a campaign's reader finds every shard's examples."""

MACHINE = "test_leasecheck_properties["
"""The name of every property-run item (one per shard) in a run's JUnit XML."""

FAILURE_SUFFIXES = (".json", ".txt", ".svg")


class CampaignError(ValueError):
    """A campaign input that cannot be used: said in one line, nothing written."""


def examples_version(directory: Path) -> str | None:
    """Return the Hypothesis version that wrote `directory`'s examples (None: none said)."""
    marker = directory / "examples" / VERSION_FILE
    return marker.read_text().strip() if marker.is_file() else None


def check_version(directory: Path) -> None:
    """Refuse examples another Hypothesis wrote: their choice sequences mean other programs."""
    found = examples_version(directory)
    if found is not None and found != hypothesis.__version__:
        raise CampaignError(
            f"the examples in {directory} were written by Hypothesis {found}, "
            f"this is {hypothesis.__version__}: pin hypothesis=={found} wherever the "
            "examples are shared, or start a new campaign"
        )


def usable_examples(directory: Path, *, derandomized: bool) -> None:
    """Refuse a `--leasecheck-examples-from` that would read nothing, or the wrong things."""
    if derandomized:
        raise CampaignError(
            f"--leasecheck-examples-from {directory}: a derandomized run (the ci profile, "
            "or --hypothesis-seed) reads no saved examples; use --leasecheck-profile dev or "
            "deep, or replay the campaign's failure files with --leasecheck-regressions DIR"
        )
    if not (directory / "examples").is_dir():
        raise CampaignError(
            f"--leasecheck-examples-from {directory}: no examples/ in it; name a failure "
            "directory or a campaign's merged one (leasecheck campaign merge ... --into DIR)"
        )
    check_version(directory)


@dataclass
class Merged:
    """What a merge took from its sources."""

    failures: int = 0
    """Failure files (program, story, picture) copied."""
    examples: int = 0
    """Example database entries copied."""
    already: int = 0
    """Files the union already held (the same failure or example found twice)."""
    kept: list[str] = field(default_factory=list)
    """Failure files of the same name but other contents, kept as first found."""


def merge(sources: list[Path], into: Path) -> Merged:
    """Copy into `into` every failure file and example of `sources` it does not hold yet.

    Checked before anything is written: each source is a directory, and all of them
    (and `into`, if it holds examples) were written by one Hypothesis version.
    """
    versions = {str(s): examples_version(s) for s in [*sources, into] if s.is_dir()}
    for source in sources:
        if not source.is_dir():
            raise CampaignError(
                f"{source} is not a directory: name each job's failure "
                "directory (its --leasecheck-dir, .leasecheck by default)"
            )
    said = {v for v in versions.values() if v is not None}
    if len(said) > 1:
        listed = ", ".join(f"{d} ({v})" for d, v in versions.items() if v is not None)
        raise CampaignError(
            f"examples of several Hypothesis versions ({listed}): run every "
            "job of a campaign with one pinned hypothesis"
        )
    done = Merged()
    into.mkdir(parents=True, exist_ok=True)
    for source in sources:
        for path in sorted(source.iterdir()):
            if path.is_file() and path.suffix in FAILURE_SUFFIXES:
                _copy(path, into / path.name, done, failure=True)
        examples = source / "examples"
        if examples.is_dir():
            for path in sorted(p for p in examples.rglob("*") if p.is_file()):
                relative = path.relative_to(examples)
                _copy(path, into / "examples" / relative, done, failure=False)
    return done


def _copy(path: Path, target: Path, done: Merged, *, failure: bool) -> None:
    if path.name == SCOPES_FILE:
        had = target.read_text().splitlines() if target.exists() else []
        more = [s for s in path.read_text().splitlines() if s not in had]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(f"{s}\n" for s in [*had, *more]))
        return
    if target.exists():
        if path.name == VERSION_FILE or filecmp.cmp(path, target, shallow=False):
            done.already += 1
        else:
            done.kept.append(target.name)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path, target)
    if path.name == VERSION_FILE:
        return
    if failure:
        done.failures += 1
    else:
        done.examples += 1


@dataclass
class Job:
    """One job's JUnit XML, read: what its shards met, and what failed."""

    path: Path
    shards: int = 0
    recorded: int = 0
    """Items that recorded their situations (a run cut short may record none)."""
    situations: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    """The first line of each failing shard's message."""


def read_job(path: Path) -> Job:
    """Read the property items of one run's JUnit XML (`pytest --junitxml`).

    Each item records its situations under `exercised.KEY`; pytest writes the value
    with `str()`, so it is read back as a Python literal.
    """
    try:
        tree = ET.parse(path)
    except (OSError, ET.ParseError) as exc:
        raise CampaignError(
            f"cannot read {path} as JUnit XML ({exc}): pass the files that "
            "each job's pytest --junitxml=FILE wrote"
        ) from None
    job = Job(path)
    runs: list[dict[str, int]] = []
    for case in tree.iter("testcase"):
        if not case.get("name", "").startswith(MACHINE):
            continue
        job.shards += 1
        for prop in case.iter("property"):
            if prop.get("name") == exercised.KEY:
                runs.append(_situations(path, prop.get("value", "")))
        for child in case:
            if child.tag == "failure":
                first = (child.get("message") or child.text or "").strip().splitlines()
                job.failures.append(first[0] if first else "(no message)")
    job.recorded = len(runs)
    job.situations = dict(coverage.merge(runs))
    return job


def _situations(path: Path, text: str) -> dict[str, int]:
    try:
        value: Any = ast.literal_eval(text)
    except (SyntaxError, ValueError) as exc:
        raise CampaignError(f"{path}: {exercised.KEY} is not a literal: {exc}") from None
    if not isinstance(value, dict):
        raise CampaignError(f"{path}: {exercised.KEY} is not a dict: {value!r}")
    return {str(k): int(n) for k, n in value.items()}


def report(jobs: list[Job]) -> list[str]:
    """Return the campaign's closing lines: jobs, failures, then every situation's count."""
    shards = sum(j.shards for j in jobs)
    lines = [f"leasecheck campaign: {len(jobs)} jobs, {shards} property items"]
    if not shards:
        lines.append("  no property item ran in these files: nothing was exercised")
        return lines
    failed = [(j.path, f) for j in jobs for f in j.failures]
    lines.append(f"failures: {len(failed)}" + ("" if failed else " (none found)"))
    lines += [f"  {path}: {message}" for path, message in failed]
    total = {**dict.fromkeys(coverage.SITUATIONS, 0), **coverage.merge(j.situations for j in jobs)}
    lines.append("exercised, summed over every job:")
    lines += [f"  {line}" for line in coverage.summary(total)]
    return lines


# ------------------------------------------------------------------- the command


def add_parser(commands: Any) -> None:
    """Add `leasecheck campaign merge|report` to the command's subcommands."""
    campaign = commands.add_parser(
        "campaign", help="merge the failure directories of many jobs, and report on them"
    )
    verbs = campaign.add_subparsers(dest="verb", required=True)
    merging = verbs.add_parser(
        "merge", help="the union of several jobs' failure directories (failures and examples)"
    )
    merging.add_argument("sources", nargs="+", type=Path, metavar="DIR")
    merging.add_argument("--into", required=True, type=Path, metavar="OUT")
    reporting = verbs.add_parser(
        "report", help="what every job exercised and found, from their JUnit XML"
    )
    reporting.add_argument("junit", nargs="+", type=Path, metavar="JUNIT_XML")
    campaign.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Carry out `leasecheck campaign ...`: 0 done, 1 a job failed, 2 unusable input."""
    try:
        if args.verb == "merge":
            done = merge(list(args.sources), args.into)
            print(
                f"leasecheck campaign: {done.failures} failure files and {done.examples} "
                f"examples merged into {args.into} ({done.already} already there)"
            )
            for name in done.kept:
                print(f"  {name}: another job's file of that name differs; the first is kept")
            return 0
        jobs = [read_job(path) for path in args.junit]
    except CampaignError as exc:
        print(f"leasecheck campaign: {exc}", file=sys.stderr)
        return 2
    for line in report(jobs):
        print(line)
    return 1 if any(j.failures for j in jobs) else 0
