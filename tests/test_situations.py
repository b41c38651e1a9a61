"""The dangerous situations: each new one counted where the harness sees it, every count
told to one listener (a property run's Hypothesis events), and the rare ones aimed at.

Each program is replayed on a real database: on the reference, and for the crash between
a call's two transactions on ack-then-work (the reference with its completion split in
two), since every call of the reference is one transaction and never pauses between two.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import psycopg
import pytest
from hypothesis.statistics import collector, describe_statistics
from psycopg import Connection

import mutants
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract
from leasecheck.stateful.contract import Queue
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.engine.timeouts import _Trips
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.moves import Stall, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import DONE_EFFECT, PropertyViolated
from leasecheck.stateful.story import replay
from leasecheck.stateful.verdict import coverage
from tests.fixtures import derandomized

LAST_FAIL = "failure report on the last attempt"
BEAT_AFTER = "heartbeat after its own worker's completion"
LATER_TIMEOUT = "lock timeout on a call's later statement"
CRASH_BETWEEN = "crash between a call's two transactions"
NEW = (LAST_FAIL, BEAT_AFTER, LATER_TIMEOUT, CRASH_BETWEEN)

START = Step("start", {"workers": 2})
CLAIM = Step("claim", {"how": Take(worker=0, held=False)})
FAIL = Step("fail", {"pick": 0})

THREE_FAILURES = [START, CLAIM, FAIL, CLAIM, FAIL, CLAIM, FAIL]
"""w0 claims job1 and reports it failed, three times: the third is the reference's cap."""

BEAT_IN_FLIGHT = [
    START,
    CLAIM,
    Step("preempt", {"pick": 0, "after": 2}),
    Step("complete", {"pick": 0}),  # BEGIN, UPDATE ... done: paused holding the row
    Step("time_passes", {"to": "beat"}),  # w0's heartbeat thread beats: blocked on the row
    Step("resume_call", {"pick": 0}),  # the completion commits; the beat lands after it
]


def _rival_holds_the_row(call: str) -> list[Step]:
    """w0's lease runs out and w1 claims job1 inside a transaction it keeps open (the
    row stays locked); w0 wakes, armed with a lock timeout, and sends `call` on job1."""
    return [
        START,
        CLAIM,
        Step("pause", {"pick": 0}),
        Step("time_passes", {"to": "past-lease-end"}),
        Step("claim", {"how": Take(worker=0, held=True)}),  # w1, in its open transaction
        Step("resume", {"pick": 0}),
        Step("time_out", {"pick": 0}),  # w0's next call that waits on a lock times out
        Step(call, {"pick": 0}),
    ]


ACK_THEN_CRASH = [
    START,
    CLAIM,
    Step("preempt", {"pick": 0, "after": 1}),  # w0's next call pauses after statement 1
    Step("complete", {"pick": 0}),  # ack-then-work: done committed, the effect not begun
    Step("crash", {"pick": 0}),
]


def _harness(queue: Queue, pool: actors.Pool) -> Harness:
    harness = Harness(queue=queue, pool=pool)
    harness.reset()
    return harness


def _counts(queue: Queue, pool: actors.Pool, steps: list[Step]) -> Counter[str]:
    """Replay `steps` on `queue`; return the situations it counted."""
    harness = _harness(queue, pool)
    done = replay.replay(harness, steps)
    assert done.skipped == [], done.skipped
    return harness.coverage


def test_a_failure_report_on_the_last_attempt(reference_pool: actors.Pool) -> None:
    """Only the third report (attempt 3 of 3) is on the last attempt."""
    counts = _counts(ReferenceQueue(), reference_pool, THREE_FAILURES)
    assert counts[LAST_FAIL] == 1
    assert _counts(ReferenceQueue(), reference_pool, THREE_FAILURES[:-2])[LAST_FAIL] == 0


def test_a_heartbeat_after_its_own_workers_completion(reference_pool: actors.Pool) -> None:
    """The heartbeat thread beats a claim whose completion is paused mid-call."""
    assert _counts(ReferenceQueue(), reference_pool, BEAT_IN_FLIGHT)[BEAT_AFTER] == 1
    no_pause = [START, CLAIM, Step("time_passes", {"to": "beat"}), Step("complete", {"pick": 0})]
    assert _counts(ReferenceQueue(), reference_pool, no_pause)[BEAT_AFTER] == 0


def test_a_lock_timeout_on_a_calls_later_statement(reference_pool: actors.Pool) -> None:
    """The reference's completion begins a transaction, then its UPDATE waits on the row
    and times out: its second round trip. Its heartbeat, one statement, times out on its
    first: a lock timeout, not on a later statement."""
    later = _counts(ReferenceQueue(), reference_pool, _rival_holds_the_row("complete"))
    assert later["call timed out on a lock"] == 1
    assert later[LATER_TIMEOUT] == 1
    first = _counts(ReferenceQueue(), reference_pool, _rival_holds_the_row("heartbeat"))
    assert first["call timed out on a lock"] == 1
    assert first[LATER_TIMEOUT] == 0


def test_a_crash_between_a_calls_two_transactions(reference_pool: actors.Pool) -> None:
    """ack-then-work's completion commits `done`, pauses before its effect's transaction,
    and its worker crashes: counted, and done-effect breaks. The reference's completion,
    paused after its BEGIN, is inside its one transaction: the crash rolls it all back."""
    harness = _harness(contract.load(mutants.ALL["ack-then-work"]), reference_pool)
    with pytest.raises(PropertyViolated) as caught:
        replay.replay(harness, ACK_THEN_CRASH)
    assert caught.value.violation.prop == DONE_EFFECT
    assert harness.coverage[CRASH_BETWEEN] == 1
    assert _counts(ReferenceQueue(), reference_pool, ACK_THEN_CRASH)[CRASH_BETWEEN] == 0


def test_every_count_is_told_to_the_listener_once(reference_pool: actors.Pool) -> None:
    """What `seen` hears (a property run's Hypothesis events) is what the ledger counts,
    the oracle's situations and the driver's alike, the teardown's drain among them."""
    heard: list[str] = []
    d = Driver(_harness(ReferenceQueue(), reference_pool), seen=heard.append)
    try:
        d.start(2)
        d.claim(Take(worker=0, held=False))
        d.asleep(Stall(worker=0, alone=False, then="complete"))  # reclaimed; stale completion
        d.check()
        d.preempt(1, 2)  # w1, the new owner: its completion pauses after its UPDATE
        d.complete(0)
        d.time_passes("beat")
        d.resume_call(0)
        d.check()
    finally:
        d.teardown()
    counted = d.core.oracle.ledger.situations
    assert Counter(heard) == counted
    assert counted["expired lease claimed again"] and counted["stale completion sent"]
    assert counted["call paused between its statements"] and counted[BEAT_AFTER]


def test_the_new_situations_are_catalogued_and_aimed_at() -> None:
    """Each maps to the properties it puts to the test; the aimed set is those of
    retry-cap and no-lost-jobs, and the four new ones, each once."""
    assert coverage.SITUATIONS[LAST_FAIL] == ("no-lost-jobs", "retry-cap")
    assert set(coverage.SITUATIONS[CRASH_BETWEEN]) == {"done-effect", "no-lost-jobs"}
    assert set(NEW) <= set(coverage.AIMED) <= set(coverage.SITUATIONS)
    assert len(set(coverage.AIMED)) == len(coverage.AIMED)
    assert "claim at the attempt cap" in coverage.AIMED
    assert "stale heartbeat sent" not in coverage.AIMED


def test_a_property_run_shows_situations_as_events_and_aims_at_the_rare_ones(
    reference_pool: actors.Pool,
) -> None:
    """What `--hypothesis-show-statistics` prints for a Hypothesis test running the machine
    (the statistics Hypothesis hands its collector): each situation an event, each aimed
    situation a target label. Hypothesis refuses a label twice in one example, so the run
    passing shows each example aims once."""
    collected: list[Any] = []  # Hypothesis's statistics dicts
    harness = _harness(ReferenceQueue(), reference_pool)
    with collector.with_value(collected.append):  # type: ignore[arg-type]  # typed as None
        run_state_machine_as_test(lambda: LeaseMachine(harness), settings=derandomized(5))
    (stats,) = collected
    shown = describe_statistics(stats)
    met = [name for name, n in harness.coverage.items() if n]
    assert met and all(name in shown for name in met), shown
    assert set(stats["targets"]) == set(coverage.AIMED)
    assert "Highest target scores:" in shown


LOCK = "select pg_advisory_xact_lock(4242)"


def test_the_round_trip_that_timed_out_is_told_from_its_clean_up(
    reference_pool: actors.Pool,
) -> None:
    """A statement that times out on its call's first round trip, then a clean-up sent while
    its error is handled (a ROLLBACK, a logging query): the first timed out, not a later
    one. Behind a BEGIN, the one that timed out is the second."""
    holder, caller = reference_pool.open("holder"), reference_pool.open("caller")
    try:
        holder.conn.execute("begin")
        holder.conn.execute(LOCK)
        caller.conn.execute("set lock_timeout = '10ms'")

        def cleans_up(conn: Connection[Any]) -> None:
            try:
                conn.execute(LOCK)
            except psycopg.errors.LockNotAvailable:
                conn.execute("select 1")
                raise

        def in_a_transaction(conn: Connection[Any]) -> None:
            with conn.transaction():
                conn.execute(LOCK)

        for fn, trips, timed_out_at in ((cleans_up, 2, 1), (in_a_transaction, 3, 2)):
            counter = _Trips()
            with pytest.raises(psycopg.errors.LockNotAvailable):
                counter.counting(fn)(caller.conn)
            assert (counter.trips, counter.timed_out_at) == (trips, timed_out_at), fn.__name__
            assert getattr(caller.conn, "gate", None) is None  # put back as it was
    finally:
        holder.conn.execute("rollback")
        caller.conn.execute("reset lock_timeout")
        reference_pool.release(holder)
        reference_pool.release(caller)
