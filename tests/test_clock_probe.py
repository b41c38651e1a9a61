"""The clock probe: a queue that does not follow simulated time is told so, in one line,
before anything is explored; a queue that does is let through."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mutants
from leasecheck.dbfixtures import janitor
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import clock, contract
from leasecheck.stateful.engine import probe
from tests import child
from tests.clock_blind import PinnedSearchPath, WallClock, WallClockHeartbeat
from tests.fidelity_queues import FromStoredEnd


@pytest.fixture
def probed(leasecheck_server_dsn: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Return a function that installs a queue in a fresh database and probes it."""
    with janitor.temporary(leasecheck_server_dsn, "probe_test") as dsn:

        def run(queue: contract.Queue) -> str | None:
            clock.prepare(dsn, queue)
            with clock.connect(dsn) as conn:
                return probe.clock_problem(queue, conn)

        yield run


def test_the_reference_follows_simulated_time(probed: Any) -> None:
    assert probed(ReferenceQueue()) is None


@pytest.mark.parametrize("queue", [WallClock(), PinnedSearchPath()], ids=lambda q: q.name)
def test_a_queue_on_the_wall_clock_is_named_with_the_likely_causes(
    probed: Any, queue: contract.Queue
) -> None:
    line = probed(queue)
    assert line is not None
    assert line.startswith(f"leasecheck: {queue.name} does not follow simulated time")
    for cause in ("CURRENT_TIMESTAMP", "pinned search_path", "advance_clock"):
        assert cause in line
    assert "\n" not in line


def test_a_heartbeat_on_the_wall_clock_is_named(probed: Any) -> None:
    """The claim reads simulated time, the heartbeat does not: the line names the heartbeat."""
    line = probed(WallClockHeartbeat())
    assert line is not None
    assert "its heartbeat() never read now()" in line, line
    assert "CURRENT_TIMESTAMP" in line


def test_a_heartbeat_from_the_stored_lease_end_is_let_through(probed: Any) -> None:
    """`lease_until = lease_until + lease` reads no clock, but the lease it keeps is on
    simulated time: the probe judges behaviour, and the machine then judges the queue."""
    assert probed(FromStoredEnd()) is None


def test_a_queue_that_never_recovers_is_left_to_the_machine(probed: Any) -> None:
    """A queue on simulated time that never hands an expired job out again passes the probe:
    whether a job is lost is a verdict (no-lost-jobs), not a question about the clock."""
    queue = contract.load(mutants.ALL["no-recovery"])
    assert probed(queue) is None


class _Raising(ReferenceQueue):
    name = "raising-heartbeat"

    def heartbeat(self, conn: Any, claim: Any, lease: Any) -> bool:
        conn.execute("select lease_untill from jobs")  # a typo: UndefinedColumn on every call
        return True


def test_a_call_that_raises_is_left_to_the_machine(probed: Any) -> None:
    """An exception is the queue's answer, judged by the machine: the probe cannot tell
    the clock from it, so it lets the queue through."""
    assert probed(_Raising()) is None


def test_the_probe_leaves_the_queue_and_the_clock_reset(
    leasecheck_server_dsn: str,
) -> None:
    queue = ReferenceQueue()
    with janitor.temporary(leasecheck_server_dsn, "probe_reset") as dsn:
        clock.prepare(dsn, queue)
        with clock.connect(dsn) as conn:
            assert probe.clock_problem(queue, conn) is None
            assert conn.execute("select count(*) from jobs").fetchone() == (0,)
            assert conn.execute("select now() = %s", (clock.EPOCH,)).fetchone() == (True,)


def test_a_wall_clock_queue_stops_the_run_in_one_line(tmp_path: Path) -> None:
    """Adopted as a user would, the run ends before any test with the probe's line, not
    with a violation per shard."""
    (tmp_path / "test_suite.py").write_text("from leasecheck.suite import *  # noqa: F403\n")
    argv = child.command(
        "test_suite.py", "--leasecheck-queue", "tests.clock_blind:WallClock", rootdir=tmp_path
    )
    with child.scratch() as scratch:
        done = child.run(argv, scratch, cwd=tmp_path)
        assert child.processes_under(scratch) == []
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.output
    errors = [line for line in done.lines if line.startswith("ERROR")]
    assert len(errors) == 1, done.output
    assert errors[0].startswith("ERROR: leasecheck: wall-clock does not follow simulated time")
    assert "violated" not in done.output.lower()
