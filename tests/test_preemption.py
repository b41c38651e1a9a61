"""Calls preempted between their own statements: the races inside one call are reachable.

At the session level a gated call parks before a round trip and holds what its open
transaction holds; at the machine's level a rule program pauses a completion after its
check, or a sweep after its read, lets other workers act, and resumes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import mutants
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors, sending
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.moves import Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import FENCING, NO_LOST_JOBS, PropertyViolated
from leasecheck.stateful.story import replay

XACT_LOCK = "select pg_advisory_xact_lock(4242)"


@pytest.fixture
def pool(reference_dsn: str) -> Iterator[actors.Pool]:
    """Return a pool of sessions on this worker's database, closed afterwards."""
    pool = actors.Pool(reference_dsn)
    yield pool
    pool.close()


def _two_statements(conn: psycopg.Connection[Any]) -> int:
    with conn.transaction():
        conn.execute(XACT_LOCK)
        row = conn.execute("select 7").fetchone()
        assert row is not None
        return int(row[0])


def test_a_parked_call_holds_its_transaction_until_resumed(pool: actors.Pool) -> None:
    """Parked after BEGIN and the lock, the call holds the lock: another call on it waits,
    settle returns (both are held still by the harness), and resuming lets both finish."""
    a, b = pool.open("a"), pool.open("b")
    try:
        sending.submit(pool, a, _two_statements, [a, b], after=2)
        sending.settle(pool, [a, b])
        assert a.parked and a.in_transaction
        sending.submit(pool, b, lambda c: c.execute(XACT_LOCK), [a, b])
        sending.settle(pool, [a, b])
        assert b.pending is not None and not b.pending.done()
        assert pool.blocked([b]) == {b.pid: [a.pid]}
        sending.resume(a)
        sending.settle(pool, [a, b])
        assert sending.outcome(a) == 7
        sending.outcome(b)
    finally:
        pool.release(a)
        pool.release(b)


def test_a_cancelled_call_armed_to_pause_goes_on_to_its_rollback(pool: actors.Pool) -> None:
    """The harness cancels a second waiter; armed to pause after its 2nd round trip (the
    lock it waits on), it must not park at its 3rd, the ROLLBACK its cancel leads to:
    the cancel returns and the call answers with the cancel."""
    a, b = pool.open("a"), pool.open("b")
    try:
        a.conn.execute("begin")
        a.conn.execute(XACT_LOCK)  # held between steps

        def locks(c: psycopg.Connection[Any]) -> None:
            with c.transaction():
                c.execute(XACT_LOCK)

        sending.submit(pool, b, locks, [a, b], after=2)
        sending.settle(pool, [a, b])
        assert pool.blocked([b]) == {b.pid: [a.pid]} and not b.parked
        pool.cancel(b)
        assert b.pending is not None and b.pending.done()
        with pytest.raises(psycopg.errors.QueryCanceled):
            sending.outcome(b)
    finally:
        a.conn.execute("rollback")
        pool.release(a)
        pool.release(b)


def test_a_call_that_ends_before_its_gate_never_parks(pool: actors.Pool) -> None:
    a = pool.open("a")
    try:
        sending.submit(pool, a, lambda c: c.execute("select 1").fetchone(), [a], after=3)
        sending.settle(pool, [a])
        assert not a.parked and sending.outcome(a) == (1,)
    finally:
        pool.release(a)


def test_terminating_a_parked_call_loses_its_outcome(pool: actors.Pool) -> None:
    """A crash while a call waits at its gate: the call goes on into a dead connection."""
    a = pool.open("a")
    sending.submit(pool, a, _two_statements, [a], after=1)
    sending.settle(pool, [a])
    assert a.parked
    pool.terminate(a)
    with pytest.raises(psycopg.OperationalError):
        sending.outcome(a)
    pool.release(a)


def _replay(
    queue: contract.Queue, pool: actors.Pool, steps: list[Step], harness: Harness | None = None
) -> replay.Replayed:
    harness = harness or Harness(queue=queue, pool=pool)
    harness.reset()
    return replay.replay(harness, steps)


STALE_AFTER_CHECK = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": Take(worker=0, held=False)}),
    Step("preempt", {"pick": 0, "after": 1}),
    Step("complete", {"pick": 0}),  # w0's completion pauses after its first statement
    Step("pause", {"pick": 0}),  # w0 freezes: no heartbeats
    Step("time_passes", {"to": "past-lease-end"}),
    Step("claim", {"how": Take(worker=0, held=False)}),  # w1 claims job1 again
    Step("resume", {"pick": 0}),
    Step("resume_call", {"pick": 0}),
]
"""The check-then-act race: w0 checks its attempt, w1 takes the job, w0 acts."""


def test_a_completion_checked_then_acted_on_is_caught_between_its_statements(
    reference_pool: actors.Pool,
) -> None:
    queue = contract.load(mutants.ALL["check-then-act"])
    harness = Harness(queue=queue, pool=reference_pool)
    with pytest.raises(PropertyViolated) as caught:
        _replay(queue, reference_pool, STALE_AFTER_CHECK, harness)
    assert caught.value.violation.prop == FENCING, caught.value
    assert "the completion of stale w0:job1#1 was accepted" in caught.value.violation.message
    assert "paused after statement 1" in str(caught.value)  # the timeline shows it
    (history,) = [f.history for f in harness.recorder.last.values()]
    paused = [e for e in history.events if e.note == "paused after statement 1"]
    assert [(e.worker, e.op, e.job) for e in paused] == [("w0", "complete", "job1")]
    assert paused[0].value.startswith("select attempt from jobs where id = $1")


def test_the_reference_holds_the_same_program(reference_pool: actors.Pool) -> None:
    """Its completion checks and acts in one statement: paused after BEGIN, it still refuses."""
    done = _replay(ReferenceQueue(), reference_pool, STALE_AFTER_CHECK)
    assert [s.rule for s in done.ran] == [s.rule for s in STALE_AFTER_CHECK]


SWEEP_AFTER_READ = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": Take(worker=0, held=False)}),
    Step("pause", {"pick": 0}),
    Step("time_passes", {"to": "past-lease-end"}),
    Step("preempt", {"pick": 1, "after": 1}),  # the sweeper (w0 is paused)
    Step("sweep", {"after": "now"}),  # it reads job1 expired and pauses
    Step("resume", {"pick": 0}),
    Step("complete", {"pick": 0}),  # the late owner completes: accepted
    Step("resume_call", {"pick": 0}),  # the sweep writes what it read
]


def test_a_sweep_that_reads_then_writes_undoes_a_completion(reference_pool: actors.Pool) -> None:
    queue = contract.load(mutants.ALL["sweep-undoes"])
    with pytest.raises(PropertyViolated) as caught:
        _replay(queue, reference_pool, SWEEP_AFTER_READ)
    assert caught.value.violation.prop == NO_LOST_JOBS, caught.value
    assert "after the queue had accepted its completion" in caught.value.violation.message


BEAT_IN_FLIGHT = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": Take(worker=0, held=False)}),
    Step("preempt", {"pick": 0, "after": 2}),
    Step("complete", {"pick": 0}),  # BEGIN, UPDATE ... done: paused holding the row
    Step("time_passes", {"to": "beat"}),  # w0's heartbeat thread beats: blocked on the row
    Step("resume_call", {"pick": 0}),  # the completion commits; the beat lands after it
]


def test_a_heartbeat_in_flight_while_its_worker_completes_is_judged_after_it(
    reference_pool: actors.Pool,
) -> None:
    """heartbeat-revives: fenced on the attempt only, the beat that waited out its own
    worker's completion is accepted on the finished job."""
    queue = contract.load(mutants.ALL["heartbeat-revives"])
    with pytest.raises(PropertyViolated) as caught:
        _replay(queue, reference_pool, BEAT_IN_FLIGHT)
    assert caught.value.violation.prop == FENCING, caught.value
    assert "the heartbeat of stale w0:job1#1 was accepted" in caught.value.violation.message


def test_the_reference_refuses_the_beat_that_waited_out_its_completion(
    reference_pool: actors.Pool,
) -> None:
    done = _replay(ReferenceQueue(), reference_pool, BEAT_IN_FLIGHT)
    assert [s.rule for s in done.ran] == [s.rule for s in BEAT_IN_FLIGHT]


def test_a_crash_ends_the_heartbeat_waiting_behind_its_own_paused_completion_first(
    reference_pool: actors.Pool,
) -> None:
    """w0 crashes while its completion is paused holding the job's row and its heartbeat
    waits on that row. Its heartbeat's backend must end first: ended after the main one,
    the beat was released by the completion's rollback and raced its own termination to
    extend the lease, so whether a claim after the lease end found the job free fell to
    timing (a FlakyStrategyDefinition in a mutant's search, one CI run in three)."""
    machine = LeaseMachine(Harness(queue=ReferenceQueue(), pool=reference_pool))
    machine.d.core.h.reset()
    for step in BEAT_IN_FLIGHT[:-1]:
        getattr(machine, step.rule)(**step.args)
        machine.every_property_holds()
    lease = "select lease_until from jobs"
    before = reference_pool.monitor.execute(lease).fetchall()
    machine.play("crash", pick=0)
    machine.every_property_holds()
    assert reference_pool.monitor.execute(lease).fetchall() == before
    machine.teardown()


STALE_AFTER_CHECK_HELD = [
    *STALE_AFTER_CHECK[:2],
    Step("preempt", {"pick": 0, "after": 1, "hold": 1}),
    *STALE_AFTER_CHECK[3:-1],
]
"""The same race with the shortest pause drawn: one step, but w0 is stopped (SIGSTOP) by
then, so its call goes on when w0 resumes; no `resume_call` is needed."""


def test_a_pause_with_a_hold_goes_on_by_itself_after_its_steps(
    reference_pool: actors.Pool,
) -> None:
    """The completion paused at step 4 is due after step 5, when its worker is stopped; it
    goes on at the end of step 8, which resumes the worker, and the race is caught."""
    queue = contract.load(mutants.ALL["check-then-act"])
    machine = LeaseMachine(Harness(queue=queue, pool=reference_pool))
    machine.d.core.h.reset()
    parked: list[bool] = []

    def run() -> None:
        for step in STALE_AFTER_CHECK_HELD:
            getattr(machine, step.rule)(**step.args)
            parked.append(bool(machine.d.core.parked()))
            machine.every_property_holds()
        machine.teardown()  # the judge names the accepted stale completion by then

    with pytest.raises(PropertyViolated) as caught:
        run()
    assert parked == [False, False, False, True, True, True, True, False]
    assert caught.value.violation.prop == FENCING, caught.value
    assert "the completion of stale w0:job1#1 was accepted" in caught.value.violation.message


def test_a_program_saved_without_a_hold_pauses_until_resume_call(
    reference_pool: actors.Pool,
) -> None:
    """Programs written before `hold` replay as they ran: the pause lasts until resume_call."""
    machine = LeaseMachine(Harness(queue=ReferenceQueue(), pool=reference_pool))
    machine.d.core.h.reset()
    for step in STALE_AFTER_CHECK[:-1]:
        getattr(machine, step.rule)(**step.args)
        machine.every_property_holds()
    for _ in range(8):
        machine.play("time_passes", to="second")
    assert [w.name for w in machine.d.core.parked()] == ["w0"]
    machine.play("resume_call", pick=0)
    assert not machine.d.core.parked()
    machine.teardown()
