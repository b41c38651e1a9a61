"""Run the machine on one implementation, and find every violated property in turn.

The machine stops at the first violated property. So the loop runs it, reads which
properties failed from the files the run left in its private `--leasecheck-dir`,
excuses them (`--leasecheck-excuse`) and runs again, until a run passes or nothing is left to
judge. A run that fails without leaving a property's files (an import error, an
adapter that crashes, a timeout) is an error, reported with its first line and never
read as "holds".

The final run's JUnit XML also carries what its property items exercised (the
situations `leasecheck.stateful.verdict.coverage` counts, one record per shard): the matrix
keeps them per property, so a "holds" whose situations never came up can say so.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from leasecheck.stateful.properties import ALL
from leasecheck.stateful.verdict import coverage
from leasecheck.wing import campaign
from matrix.targets import Target

MACHINE = campaign.MACHINE
"""The property run's test items, one per shard."""
GAPS = "test_leasecheck_what_is_not_checked["
_OURS = (
    "LEASECHECK_QUEUE",
    "LEASECHECK_EXCUSE",
    "LEASECHECK_DIR",
    "LEASECHECK_PROFILE",
    # A published column is run as its users run it: with the opening, unless the column
    # itself says otherwise (its `env`).
    "LEASECHECK_OPENING",
    # A slice of the shards would be judged (and counted) as if it were the whole run.
    "LEASECHECK_SHARD",
    "CI",
)


@dataclass(frozen=True)
class Run:
    """What one pytest run of the machine said."""

    violated: dict[str, list[Path]]
    gaps: list[str]
    error: str | None
    seconds: float
    exercised: dict[str, int] | None = None
    """Property -> situations produced, summed over the shards; None if none recorded."""
    situations: dict[str, int] | None = None
    """Each situation (`coverage.SITUATIONS`) -> how often it occurred; None as above."""


@dataclass
class Verdicts:
    """Everything the matrix knows about one implementation after the loop."""

    violated: dict[str, list[Path]] = field(default_factory=dict)
    not_applicable: dict[str, str] = field(default_factory=dict)
    not_exercised: list[str] = field(default_factory=list)
    holds: list[str] = field(default_factory=list)
    error: str | None = None
    runs: int = 0
    exercised: dict[str, int] | None = None
    """The final run's counts per property (`Run.exercised`); None: not recorded."""
    situations: dict[str, int] | None = None
    """The final run's counts per situation (`Run.situations`); None: not recorded."""


def run_once(
    python: Path,
    target: Target,
    repo: Path,
    dsn: str,
    workdir: Path,
    excused: list[str],
    profile: str,
    timeout: float,
) -> Run:
    """Run the machine once in a subprocess; return what it found."""
    workdir.mkdir(parents=True, exist_ok=True)
    failures = workdir / "failures"
    junit = workdir / "junit.xml"
    command = [str(python), "-m", "pytest", "-n", "0", "properties/test_machine.py"]
    command += ["--leasecheck-queue", target.queue, "--leasecheck-pg-dsn", dsn, "-q", "-rs"]
    command += ["--leasecheck-dir", str(failures), "--junitxml", str(junit)]
    # The property items record what they exercised with record_property, which
    # pytest refuses (a PytestWarning, an error under filterwarnings) for xunit2.
    command += ["-o", "junit_family=xunit1"]
    command += [f"--leasecheck-excuse={p}" for p in excused]
    env = {k: v for k, v in os.environ.items() if k not in _OURS}
    env.update(target.env)
    env["LEASECHECK_PROFILE"] = profile
    (workdir / "command.txt").write_text(" ".join(command) + "\n")
    started = time.monotonic()
    with (workdir / "output.txt").open("w") as log:
        process = subprocess.Popen(
            command, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return Run({}, [], f"timed out after {timeout:g} s", time.monotonic() - started)
    seconds = time.monotonic() - started
    output = (workdir / "output.txt").read_text()
    if code not in (0, 1) or not junit.exists():
        return Run({}, [], _first_error(output, code), seconds)
    outcome, gaps = _read_junit(junit)
    try:
        met = read_situations(junit)
    except ValueError:
        met = None  # unreadable counts are not recorded, never a partial sum or zeros
    counts = None if met is None else coverage.per_property(met)
    violated = _violations(failures)
    if code == 0 and outcome == "passed":
        return Run({}, gaps, None, seconds, counts, met)
    if outcome.startswith("failure") and violated:
        return Run(violated, gaps, None, seconds, counts, met)
    return Run({}, gaps, f"{outcome or 'no result'}", seconds, counts, met)


def _read_junit(path: Path) -> tuple[str, list[str]]:
    """Return the machine test's outcome ('passed', or 'failure: first line') and the gaps."""
    outcomes: dict[str, str] = {}
    gaps = []
    for case in ET.parse(path).iter("testcase"):
        name = case.get("name", "")
        children = list(case)
        if name.startswith(MACHINE):
            outcomes.setdefault("passed", "passed")
            for child in children:
                if child.tag in ("failure", "error", "skipped") and child.tag not in outcomes:
                    first = (child.get("message") or child.text or "").strip().splitlines()
                    outcomes[child.tag] = f"{child.tag}: {first[0] if first else '(no message)'}"
        elif name.startswith(GAPS):
            gap = name.removeprefix(GAPS).removesuffix("]")
            messages = [c.get("message", "") for c in children if c.tag == "skipped"]
            gaps += [m for m in messages if m.startswith(f"{gap}: ")]
    # A failure outranks a skip: a shard that stopped shrinking a failure another shard
    # told in full is skipped, and may be written before the failure it defers to.
    for kind in ("failure", "error", "skipped", "passed"):
        if kind in outcomes:
            return outcomes[kind], gaps
    return "", gaps


def read_exercised(path: Path) -> dict[str, int] | None:
    """Return how often each property was exercised in the run `path` reports, or None.

    The situations (`read_situations`) mapped to properties as the run's own summary
    maps them (`coverage.per_property`).
    """
    met = read_situations(path)
    return None if met is None else coverage.per_property(met)


def read_situations(path: Path) -> dict[str, int] | None:
    """Return how often each situation occurred in the run `path` reports, or None.

    Read as a campaign reads each job (`leasecheck.wing.campaign.read_job`), every known
    situation present (zeros included, so a zero is never an absent key). None when no
    item recorded any: an absent count must never read as "not exercised".
    """
    job = campaign.read_job(path)
    if not job.recorded:
        return None
    return {**dict.fromkeys(coverage.SITUATIONS, 0), **job.situations}


def _violations(failures: Path) -> dict[str, list[Path]]:
    """Return the properties the run left counterexample files for, with the files.

    The property is read from each history (its `property` field), not from the file
    name, which a queue name with dots in it can cut short.
    """
    found: dict[str, list[Path]] = {}
    for history in sorted(failures.glob("*.json")):
        try:
            prop = json.loads(history.read_text()).get("property")
        except (OSError, ValueError, AttributeError):
            continue
        # Several shards may find several programs: keep the first.
        if prop in ALL and prop not in found:
            found[prop] = sorted(history.parent.glob(f"{glob.escape(history.stem)}.*"))
    return found


def _first_error(output: str, code: int) -> str:
    """Return the line that says why a run errored (pytest's usage error, or the last line)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for line in lines:
        if line.startswith(("ERROR: ", "leasecheck: ", "ImportError", "ModuleNotFoundError")):
            return line.removeprefix("ERROR: ")
    return f"pytest exit status {code}: {lines[-1] if lines else 'no output'}"


def judge(
    python: Path,
    target: Target,
    repo: Path,
    dsn: str,
    workdir: Path,
    profile: str,
    timeout: float,
) -> Verdicts:
    """Run the machine until it passes with every violated property excused."""
    verdicts = Verdicts()
    excused: list[str] = []
    gaps: list[str] = []
    while len(excused) < len(ALL):
        run = run_once(
            python,
            target,
            repo,
            dsn,
            workdir / f"run{verdicts.runs + 1}",
            excused,
            profile,
            timeout,
        )
        verdicts.runs += 1
        gaps = run.gaps
        verdicts.exercised = run.exercised
        verdicts.situations = run.situations
        if run.error is not None:
            verdicts.error = run.error
            return verdicts
        new = sorted(set(run.violated) - set(excused))
        if not run.violated:
            break
        if not new:
            verdicts.error = (
                f"run {verdicts.runs} failed again on excused {', '.join(run.violated)}"
            )
            return verdicts
        for prop in new:
            verdicts.violated[prop] = run.violated[prop]
        excused += new
    for gap in gaps:
        key, _, reason = gap.partition(": ")
        if key in excused or key == "nothing":
            continue
        if key in ALL:
            verdicts.not_applicable[key] = reason
        else:
            verdicts.not_exercised.append(gap)
    verdicts.holds = [
        p for p in ALL if p not in verdicts.violated and p not in verdicts.not_applicable
    ]
    return verdicts
