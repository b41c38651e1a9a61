"""The machine plays only executions PostgreSQL can have, and never judges what it caused.

Each program here once drew a verdict on a correct queue: a claim whose two statements
saw two instants, a failure report whose worker the harness crashed (the library
swallowed the error), a heartbeat refused while its own completion was in flight, and
a claim of a job whose release had lost its answer. Replayed now, each holds, and
says what it could not judge; a control shows each program reaches its race.
"""

from __future__ import annotations

import pytest

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.engine import actors
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.moves import Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import EXCLUSIVE_LEASE, RETRY_CAP, PropertyViolated
from tests import fidelity_queues as q
from tests.fixtures import replayed

CLAIM = Step("claim", {"how": Take(worker=0, held=False)})


CAP_THEN_PICK = [
    Step("start", {"workers": 2}),
    CLAIM,  # w0 claims job1: its one attempt
    Step("crash", {"pick": 0}),
    Step("preempt", {"pick": 0, "after": 2}),  # w0.2's claim pauses after its first statement
    CLAIM,
    Step("time_passes", {"to": "past-lease-end"}),  # job1's lease runs out meanwhile
]
"""A claim of two statements in one transaction, paused between them across a lease end."""


def test_a_claim_of_two_statements_sees_one_now(reference_pool: actors.Pool) -> None:
    """Its second statement runs after the lease ended, in the transaction begun before:
    `now()` is that transaction's start, so job1 is not expired for it and not claimed a
    second time past its cap of one."""
    story = replayed(q.CapThenPick(), reference_pool, CAP_THEN_PICK)
    assert any("paused after statement 2" in line for line in story), story


def test_the_same_claim_on_the_moving_clock_breaks_the_cap(reference_pool: actors.Pool) -> None:
    """The control: read with `clock_timestamp()`, the second statement sees the lease end
    and claims job1 again, so the program does reach the race."""
    with pytest.raises(PropertyViolated) as caught:
        replayed(q.CapThenPickOnTheClock(), reference_pool, CAP_THEN_PICK)
    assert caught.value.violation.prop == RETRY_CAP, caught.value
    assert "job1 claimed 2 times" in caught.value.violation.message


PAUSED_IN_EVERY_CALL = [
    Step("start", {"workers": 2}),
    Step("preempt", {"pick": 0, "after": 2}),
    CLAIM,  # paused after its first now()
    Step("time_passes", {"to": "beat"}),
    Step("resume_call", {"pick": 0}),
    Step("preempt", {"pick": 0, "after": 2}),
    Step("heartbeat", {"pick": 0}),
    Step("time_passes", {"to": "beat"}),
    Step("resume_call", {"pick": 0}),
    Step("preempt", {"pick": 0, "after": 3}),
    Step("complete", {"pick": 0}),
    Step("time_passes", {"to": "beat"}),
    Step("resume_call", {"pick": 0}),
]


def test_now_stands_still_through_a_transaction_the_harness_pauses(
    reference_pool: actors.Pool,
) -> None:
    """A queue that raises if two `now()` reads of one transaction differ is paused inside
    its claim, heartbeat and completion while the clock moves: it never raises."""
    story = replayed(q.NowTwice(), reference_pool, PAUSED_IN_EVERY_CALL)
    paused = [line for line in story if "paused after statement" in line]
    assert len(paused) == 3, story
    assert not any("raised" in line for line in story), story


SWALLOWED_CRASH = [
    Step("start", {"workers": 2}),
    CLAIM,
    Step("preempt", {"pick": 0, "after": 1}),
    Step("fail", {"pick": 0}),  # paused after its notification
    Step("crash", {"pick": 0}),  # its save runs into the dead session: swallowed, False
]


SWALLOWED_CUT = [*SWALLOWED_CRASH[:-1], Step("cut", {"pick": 0})]


@pytest.mark.parametrize("steps", [SWALLOWED_CRASH, SWALLOWED_CUT], ids=["crash", "cut"])
def test_a_call_whose_session_the_harness_ended_is_not_judged(
    reference_pool: actors.Pool, steps: list[Step]
) -> None:
    """The library swallowed `terminating connection` and answered False: that is no
    refusal of the owner, as the harness ended the session; the answer is recorded as
    lost, and nothing is judged from it."""
    harness = Harness(queue=q.SwallowingFail(), pool=reference_pool)
    harness.reset()
    machine = LeaseMachine(harness)
    try:
        for step in steps:
            getattr(machine, step.rule)(**step.args)
            machine.every_property_holds()
        lost = [e for e in machine.d.core.history.events if e.op == "fail" and e.kind == "info"]
        assert len(lost) == 1, machine.d.core.history.events
        assert lost[0].note == (
            "its session was ended by the harness; the library returned False anyway"
        )
    finally:
        machine.teardown()


BEAT_WHILE_COMPLETING = [
    Step("start", {"workers": 1}),
    CLAIM,
    Step("preempt", {"pick": 0, "after": 4}),
    Step("complete", {"pick": 0}),  # BEGIN, done, effect, COMMIT: paused before notifying
    Step("time_passes", {"to": "beat"}),  # w0's heartbeat thread: refused, the job is done
    Step("resume_call", {"pick": 0}),  # the completion answers: accepted
]

BEAT_WHILE_COMPLETING_A_BATCH = [
    *BEAT_WHILE_COMPLETING[:3],
    Step("complete_batch", {"pick": 0, "size": 1}),
    *BEAT_WHILE_COMPLETING[4:],
]


@pytest.mark.parametrize(
    "steps", [BEAT_WHILE_COMPLETING, BEAT_WHILE_COMPLETING_A_BATCH], ids=["one", "batch"]
)
def test_a_heartbeat_refused_while_its_completion_is_in_flight_waits_for_it(
    reference_pool: actors.Pool, steps: list[Step]
) -> None:
    """The refusal is no owner-progress violation: the completion in flight had committed,
    as its answer then says; which came first cannot be told, and the story says so."""
    story = replayed(q.NotifiesAfter(), reference_pool, steps)
    said = [line for line in story if "not judged" in line]
    assert any("in flight then was accepted" in line for line in said), story


LOST_RELEASE = [
    Step("start", {"workers": 2}),
    CLAIM,
    Step("preempt", {"pick": 0, "after": 1}),
    Step("fail", {"pick": 0}),  # committed (job1 queued again), paused before notifying
    Step("time_passes", {"to": "beat"}),  # w0's own heartbeat: refused, job1 is queued
    Step("crash", {"pick": 0}),  # the failure report's answer is lost
    CLAIM,  # w0.2 claims job1 within w0's old lease
]


def test_a_release_whose_answer_was_lost_may_have_given_the_job_back(
    reference_pool: actors.Pool,
) -> None:
    """Neither the heartbeat refused while the failure report was in flight nor the next
    claim of job1 within w0's lease is judged: the report may have committed (it did)."""
    story = replayed(q.NotifiesAfter(), reference_pool, LOST_RELEASE)
    said = [line for line in story if "not judged" in line]
    assert any("in flight then lost its answer" in line for line in said), story
    assert any("job1#2 was granted" in line and "lost its answer" in line for line in said), story


RENEWED_INTO_THE_PAST = [
    Step("start", {"workers": 2}),
    CLAIM,
    Step("pause", {"pick": 0}),  # w0 sends no heartbeats
    *[Step("time_passes", {"to": "beat"})] * 7,  # t=70s: past the old end plus a lease
    Step("resume", {"pick": 0}),
    Step("heartbeat", {"pick": 0}),  # accepted: the lease now ends at 60s, still past
    Step("claim", {"how": Take(worker=1, held=False)}),  # w1 takes job1
]


def test_a_heartbeat_from_the_stored_end_is_judged(reference_pool: actors.Pool) -> None:
    """The clock probe lets it through, and its bug is judged: renewed from its old end, a
    lease that ran out long ago is still out, and w1 takes the job w0 was told it holds."""
    with pytest.raises(PropertyViolated) as caught:
        replayed(q.FromStoredEnd(), reference_pool, RENEWED_INTO_THE_PAST)
    assert caught.value.violation.prop == EXCLUSIVE_LEASE, caught.value
    # to the microsecond: the heartbeat at 70.000001 s told w0 its lease ran to 100.000001 s
    said = "w1:job1#2 was granted at t=70.000001s while w0:job1#1 held a lease until t=100.000001s"
    assert said in caught.value.violation.message, caught.value.violation.message


LEASE_FROM_A_HELD_TRANSACTION = [
    Step("start", {"workers": 2}),
    Step("open_transaction", {"pick": 0}),  # w0's transaction begins at t=0
    Step("time_passes", {"to": "beat"}),
    Step("time_passes", {"to": "beat"}),  # t=20s
    CLAIM,  # w0 claims job1 inside it: now() is t=0, so its lease ends at t=30s
    Step("close_transaction", {"pick": 0, "commit": True}),
    Step("pause", {"pick": 0}),  # w0 sends no heartbeats
    Step("time_passes", {"to": "beat"}),
    Step("time_passes", {"to": "beat"}),  # t=40s
    Step("claim", {"how": Take(worker=0, held=False)}),  # w1 takes job1: its lease ran out
]


def test_a_lease_written_in_a_held_transaction_counts_from_its_start(
    reference_pool: actors.Pool,
) -> None:
    """The lease a claim writes inside a transaction begun earlier ends a lease after the
    transaction's start, as its `now()` says: w1's claim at t=40s takes an expired lease."""
    story = replayed(ReferenceQueue(), reference_pool, LEASE_FROM_A_HELD_TRANSACTION)
    assert any("w1 claims job1" in line for line in story), story


SWALLOWED_CANCEL = [
    Step("start", {"workers": 2}),
    CLAIM,  # w0: job1
    Step("pause", {"pick": 0}),
    Step("time_passes", {"to": "past-lease-end"}),
    Step("claim", {"how": Take(worker=0, held=True)}),  # w1 takes job1 in a held transaction
    Step("resume", {"pick": 0}),
    Step("time_passes", {"to": "second"}),  # w0's heartbeat waits on w1's row lock
    Step("complete", {"pick": 0}),  # a second waiter: the harness cancels it; swallowed, True
]


def test_a_call_the_harness_cancelled_is_not_judged_whatever_it_answers(
    reference_pool: actors.Pool,
) -> None:
    """The library swallowed the harness's cancel and acknowledged the job: that True is no
    acceptance (w1's claim, committed at teardown, would read as a job handed out again
    after its completion), so it is recorded as ended by the harness and not judged."""
    harness = Harness(queue=q.SwallowingComplete(), pool=reference_pool)
    harness.reset()
    machine = LeaseMachine(harness)
    try:
        for step in SWALLOWED_CANCEL:
            getattr(machine, step.rule)(**step.args)
            machine.every_property_holds()
        ended = [
            e for e in machine.d.core.history.events if e.op == "complete" and e.kind != "invoke"
        ]
        assert [(e.kind, e.value) for e in ended] == [("event", "cancelled")] * 2, ended
    finally:
        machine.teardown()
