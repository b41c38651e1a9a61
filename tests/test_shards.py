"""Shards explore disjoint space, keep their examples apart, and a contract error is told
once per run.

A seeded run (`--hypothesis-seed N`) gives every shard a seed of its own derived from
N: the same N replays the same run shard by shard, and two shards never run the
same examples. The example database of the profiles that keep one is keyed by the
queue and the shard, so a failure one shard found is tried again by that shard
alone. A queue that breaks the contract is reported in full once, however many
shards meet it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from leasecheck.wing import options, outdir, reports, shards
from tests import child

LOGGED = '''
import os
from pathlib import Path

from leasecheck.reference.queue import ReferenceQueue


class Logged(ReferenceQueue):
    """The reference, writing down each claim under the shard that made it."""

    name = "logged"

    def claim(self, conn, worker, lease):
        test = os.environ.get("PYTEST_CURRENT_TEST", "")
        if "[" in test:
            shard = test.split("[", 1)[1].split("]", 1)[0]
            with (Path(os.environ["CLAIMS"]) / f"{shard}.log").open("a") as log:
                log.write(f"{worker}\\n")
        return super().claim(conn, worker, lease)
'''

BROKEN = '''
from leasecheck.reference.queue import ReferenceQueue


class Broken(ReferenceQueue):
    """Answers a state outside the contract's once a job is done."""

    name = "broken"

    def state(self, conn, job_id):
        state = super().state(conn, job_id)
        return "finished" if state == "done" else state
'''


def test_each_shard_has_a_seed_of_its_own() -> None:
    plain = shards.select(8, None)
    assert len({s.seed for s in plain}) == 8
    assert [s.seed for s in plain] == [s.seed for s in shards.select(8, None)]
    seeded = shards.select(8, None, "7")
    assert len({s.seed for s in seeded}) == 8
    assert [s.seed for s in seeded] == [s.seed for s in shards.select(8, None, 7)]
    assert not {s.seed for s in seeded} & {s.seed for s in shards.select(8, None, "8")}
    assert not {s.seed for s in seeded} & {s.seed for s in plain}
    assert [s.seed for s in shards.select(8, (2, 4), "7")] == [seeded[1].seed, seeded[5].seed]


def test_examples_are_kept_per_queue_and_shard(tmp_path: Path) -> None:
    """One directory, two scopes: neither sees the other's examples."""
    out = tmp_path / ".leasecheck"
    one = outdir._ExamplesOf(out, "q:Q|q|shard-1-of-8", created=True)
    two = outdir._ExamplesOf(out, "q:Q|q|shard-2-of-8", created=True)
    other = outdir._ExamplesOf(out, "r:R|r|shard-1-of-8", created=True)
    assert not out.exists(), "nothing is written before an example is saved"
    one.save(b"key", b"failing")
    assert list(one.fetch(b"key")) == [b"failing"]
    assert list(two.fetch(b"key")) == [] and list(other.fetch(b"key")) == []
    assert (out / ".gitignore").read_text() == "*\n"


def test_a_directory_of_ones_own_gets_no_gitignore(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    outdir._ExamplesOf(out, "q:Q|q|shard-1-of-8", created=False).save(b"key", b"value")
    assert not (out / ".gitignore").exists()


def test_the_budget_keys_examples_by_queue_and_shard(tmp_path: Path) -> None:
    """The fixture the property test gets: a database scoped to its queue and its shard
    under dev; none, and derandomized, when the run is seeded."""
    (tmp_path / "test_budget.py").write_text(
        "def test_budget(leasecheck_shard, leasecheck_budget):\n"
        "    database = leasecheck_budget.database\n"
        "    print('SCOPE', leasecheck_shard.id, database and database.scope.decode(),\n"
        "          leasecheck_budget.derandomize)\n"
    )
    queue = "--leasecheck-queue=leasecheck.reference.queue:ReferenceQueue"
    with child.scratch() as tmp:
        runs = [
            child.run(
                child.command("test_budget.py", "-s", queue, "--leasecheck-profile=dev", *more,
                              rootdir=tmp_path),
                tmp,
                cwd=tmp_path,
            )
            for more in ([], ["--hypothesis-seed=3"])
        ]  # fmt: skip
    for done in runs:
        assert done.returncode == 0, done.output
    scoped = [line.split() for line in runs[0].lines if "SCOPE" in line]
    assert len(scoped) == 8 and len({words[2] for words in scoped}) == 8
    assert all(words[3] == "False" for words in scoped)
    seeded = [line.split() for line in runs[1].lines if "SCOPE" in line]
    assert len(seeded) == 8 and all(words[2:] == ["None", "True"] for words in seeded)


def _claims(tmp_path: Path, dsn: str, seed: str, name: str) -> dict[str, str]:
    """Run shards 1 and 5 of 8 seeded with `seed`; return each one's claims, in order.
    The search alone: the opening is the same on every seed, and not what is compared."""
    logs = tmp_path / name
    logs.mkdir()
    argv = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
        "--pyargs", "leasecheck.suite", "--leasecheck-queue=logged:Logged",
        "--leasecheck-profile=dev", "--leasecheck-shards=8", "--leasecheck-shard=1/4",
        f"--hypothesis-seed={seed}", f"--leasecheck-pg-dsn={dsn}", "-k", "properties",
        "--leasecheck-opening=off",
    ]  # fmt: skip
    done = child.run(argv, tmp_path / "tmp", cwd=tmp_path, timeout=300, CLAIMS=str(logs))
    assert done.returncode == 0, done.output
    return {log.stem: log.read_text() for log in logs.glob("shard-*.log")}


@pytest.mark.slow
def test_a_seeded_run_gives_each_shard_its_own_examples_and_replays(
    tmp_path: Path, leasecheck_server_dsn: str
) -> None:
    (tmp_path / "logged.py").write_text(LOGGED)
    first = _claims(tmp_path, leasecheck_server_dsn, "7", "first")
    again = _claims(tmp_path, leasecheck_server_dsn, "7", "again")
    other = _claims(tmp_path, leasecheck_server_dsn, "8", "other")
    assert sorted(first) == ["shard-1-of-8", "shard-5-of-8"]
    assert first["shard-1-of-8"] != first["shard-5-of-8"], "two shards ran the same examples"
    assert first == again, "the same seed did not replay the same run"
    assert other["shard-1-of-8"] != first["shard-1-of-8"], "another seed ran the same examples"


@pytest.mark.slow
def test_a_contract_error_is_told_once_per_run(tmp_path: Path, leasecheck_server_dsn: str) -> None:
    """Under xdist: the first shard to meet it tells it (its timeline and program, as a
    violation's story); the others that met it say so in one line, the shards not yet
    begun are not run, and the closing lines say no property holds."""
    (tmp_path / "broken.py").write_text(BROKEN)
    argv = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
        "--pyargs", "leasecheck.suite", "--leasecheck-queue=broken:Broken",
        "--leasecheck-profile=dev", f"--leasecheck-pg-dsn={leasecheck_server_dsn}",
        "-n", "2", "-k", "properties",
    ]  # fmt: skip
    done = child.run(argv, tmp_path / "tmp", cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.output
    told = "the queue broke the contract (shard-"
    assert done.output.count(told) == 1, done.output
    assert "broken: state() answered 'finished' for job" in done.output
    for line in done.lines:
        if "the queue broke the contract" in line and told not in line:
            assert "here too; told in full under shard-" in line or "not run:" in line, line
    assert "Traceback" not in done.output and "machine.py" not in done.output, done.output
    assert "not run: the queue broke the contract in shard-" in done.output
    # told in a violation's form, and nothing said to hold
    assert "timeline (simulated time" in done.output and "Failing program, " in done.output
    assert "Failing test case" not in done.output and "LeaseMachine()" not in done.output
    assert "leasecheck: what the run exercised until the contract error" in done.output
    assert "holds, not exercised" not in done.output, done.output


def test_a_failure_told_in_full_is_not_shrunk_again(
    tmp_path: Path, leasecheck_server_dsn: str
) -> None:
    """Every shard meets naive's double completion; once one has told it in full, the
    others stop shrinking theirs (they said "the same failure as shard-1-of-8" only after
    shrinking it on their own). Under `ci` (derandomized) each shard's first failure is
    that one; under `dev` a shard may first meet another property's, which it shrinks
    and tells, as it should. The search alone: the opening would break it first."""
    argv = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
        "--pyargs", "leasecheck.suite", "--leasecheck-queue=mutants.naive:Naive",
        "--leasecheck-profile=ci", f"--leasecheck-pg-dsn={leasecheck_server_dsn}",
        "-n", "0", "-k", "properties", f"--leasecheck-dir={tmp_path / 'out'}",
        "--leasecheck-opening=off",
    ]  # fmt: skip
    done = child.run(argv, tmp_path / "tmp", cwd=child.REPO, timeout=300)
    assert done.returncode == 1, done.output
    assert "1 failed, 7 skipped" in done.lines[-1], done.output
    stopped = "stopped shrinking its single-completion failure: shard-1-of-8 told"
    assert "SKIPPED [7] " in done.output and stopped in done.output, done.output
    assert "the same failure as" not in done.output, done.output


def test_two_shards_that_shrank_one_failure_at_once_tell_it_once() -> None:
    """Shards that shrank the same failure side by side (neither knew the other had) are
    told once: the second report names the first shard's, in one line."""

    class Config:
        stash = pytest.Stash()

    config: Any = Config()
    reports.run_state(config).start(config, 0)
    told = reports.Reports(config)
    info = {"kind": "violation", "key": "f.json", "line": "[fencing] x", "props": ["fencing"]}
    first, second = (
        pytest.TestReport(
            f"suite.py::test_leasecheck_properties[shard-{n}-of-8]", ("", 0, ""), {}, "failed",
            "story in full", "call",
        )
        for n in (1, 2)
    )  # fmt: skip
    for report in (first, second):
        report.leasecheck = info  # type: ignore[attr-defined]
        told.pytest_runtest_logreport(report)
    assert first.longrepr == "story in full"
    said = "[fencing] x: the same failure as shard-1-of-8, told in full there (f.json)"
    assert second.longrepr == said


def test_space_form_values_that_name_paths_are_rewritten(tmp_path: Path) -> None:
    names = set(options.option_names())
    there = str(tmp_path)
    args = ["-x", "--leasecheck-dir", there, "--leasecheck-queue", "m:Q", "tests", "--", "-k"]
    assert options.equals_form(args, names) == [
        "-x", f"--leasecheck-dir={there}", "--leasecheck-queue", "m:Q", "tests", "--", "-k",
    ]  # fmt: skip
    assert options.equals_form(["--leasecheck-dir"], names) == ["--leasecheck-dir"]


def test_progress_lines_stop_once_every_shard_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    """A line every PROGRESS_EVERY seconds while shards run, the last saying all are done."""
    monkeypatch.setattr(reports, "PROGRESS_EVERY", 0.05)

    class Reporter:
        lines: list[str] = []

        def write(self, text: str) -> None: ...

        def write_line(self, line: str) -> None:
            self.lines.append(line)

    class Config:
        stash = pytest.Stash()
        pluginmanager = type("PM", (), {"get_plugin": staticmethod(lambda name: Reporter())})()

    config: Any = Config()
    state = reports.RunState()
    state.start(config, 2)
    deadline = time.monotonic() + 10
    while len(Reporter.lines) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    state.done |= {"a", "b"}
    assert state.thread is not None
    state.thread.join(timeout=10)
    assert not state.thread.is_alive(), "progress lines went on after the last shard"
    assert "2/2 shards done" in Reporter.lines[-1]
    assert all("examples generated" in line for line in Reporter.lines)
    state.finish()


def test_the_progress_line_says_a_failure_is_being_shrunk() -> None:
    """Examples Hypothesis runs to shrink a failure are not counted as generated, and the
    line says what is happening instead of "no violation so far"."""

    class Config:
        stash = pytest.Stash()

    config: Any = Config()
    progress = reports.progress_of(config)
    for _ in range(3):
        progress.example()
    progress.example(True, "fencing")  # the first failure, generated: then shrinking
    progress.example(False, "fencing")
    state = reports.RunState(shards=8, started=time.monotonic())
    line = state.line(config)
    assert "4 examples generated, 0/8 shards done, shrinking a failure of fencing (" in line
    assert "no violation so far" not in line
    progress.idle()
    assert state.line(config).endswith("4 examples generated, 0/8 shards done, no violation so far")


def test_a_failure_the_opening_finds_is_told_once_and_never_searched_for(
    tmp_path: Path, leasecheck_server_dsn: str
) -> None:
    """naive breaks single-completion in the opening's first story: shard 1 tells it (the
    program as the story wrote it, no shrinking); a shard whose share of the opening breaks
    it too stops there, before any search, and says so."""
    argv = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
        "--pyargs", "leasecheck.suite", "--leasecheck-queue=mutants.naive:Naive",
        "--leasecheck-profile=ci", f"--leasecheck-pg-dsn={leasecheck_server_dsn}",
        "-n", "0", "-k", "properties", f"--leasecheck-dir={tmp_path / 'out'}",
    ]  # fmt: skip
    done = child.run(argv, tmp_path / "tmp", cwd=child.REPO, timeout=300)
    assert done.returncode == 1, done.output
    assert "1 failed, 7 skipped" in done.lines[-1], done.output
    told = "(the opening's story 'takeover: complete, rival commits'; no step could be deleted)"
    assert "Failing program, 3 steps " + told in done.output, done.output
    stopped = "its opening story 'takeover: complete, rival holds' broke single-completion: "
    assert stopped + "shard-1-of-8 told" in done.output, done.output
