"""Calls judged by their window (`stateful.verdict.window`): a heartbeat, completion or
failure report answered "yes" after its job was granted again is stale only if it was
sent after that grant, or if every placement of it in its window breaks a property.

The case that showed the gap: a correct queue whose fenced `fail` commits its UPDATE,
then sends `pg_notify` in a second statement (the usual "wake the listeners after the
change"). Paused between the two, the report has already given the job back; another
worker claims it, and the report then answers True. The oracle used to call that a
stale failure report accepted, in every profile (the opening's story "report paused in
flight: fail, after 1"). The same report sent after the other claim is still one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from psycopg import Connection

from leasecheck.dbfixtures import janitor
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import clock, contract, opening
from leasecheck.stateful.contract import Claim, Effect
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.program import Step
from leasecheck.stateful.verdict.judge import Judge, rejudge
from tests.fixtures import derandomized

LEASE = 30_000_000
RULES = {"lease": LEASE, "max_attempts": 3, "ordered_tokens": True, "observes": True}
T = 30_000_000
"""The instant w0's lease ran out, and everything after it happens (simulated time)."""


def _grant(token: int, worker: str, at: int, event: int) -> dict[str, Any]:
    label = f"{worker}:job1#{token}"
    args = {"job_id": 1, "token": token, "worker": worker, "label": label, "at": at, "key": "k1"}
    return {"op": "grant", "args": {**args, "event": event}}


W0 = _grant(1, "w0", 0, 2)
W1 = _grant(2, "w1", T, 9)
ENQUEUED = {"op": "enqueued", "args": {"job_id": 1, "label": "job1"}}


def _call(op: str, at: int = T, answered: int = T) -> dict[str, Any]:
    return {"op": op, "args": {"grant": 0, "accepted": True, "at": at, "answered": answered}}


def _releasing(op: str) -> dict[str, Any]:
    return {"op": "releasing", "args": {"grant": 0, "op": op, "at": T}}


def _state(status: str) -> dict[str, Any]:
    return {"op": "state", "args": {"job_id": 1, "status": status}}


def _judged(*facts: dict[str, Any]) -> Judge:
    return rejudge({"rules": RULES, "facts": [ENQUEUED, W0, *facts]})


def _props(judge: Judge) -> list[str]:
    ledger = judge.oracle.ledger
    return [v.prop for v in [*ledger.violations, *ledger.deferred]]


# ------------------------------------------------------------- literal histories


def test_a_report_sent_before_the_reclaim_and_answered_after_it_is_not_stale() -> None:
    """w0's lease ran out; its failure report is sent (and stays in flight: its UPDATE
    committed, its NOTIFY not yet sent); w1 claims the job it gave back; the report
    answers True. It may have landed before w1's claim, and the queue shows w1 running
    the job, as that placement says: no violation, and the unjudged line says why."""
    judge = _judged(_releasing("fail"), W1, _call("fail"), _state("running"))
    assert _props(judge) == []
    said = [u for u in judge.oracle.ledger.unjudged if "may have landed first" in u]
    assert len(said) == 1 and "w1:job1#2 was granted job1" in said[0], said
    assert judge.oracle.owner(judge.oracle.jobs[1]) is judge.grants[1]  # w1 owns it


def test_a_report_sent_after_the_reclaim_is_stale_wherever_it_landed() -> None:
    """The same answers with the report SENT after w1's claim (in flight or not): stale
    for every placement, a fencing violation as before."""
    for facts in ([W1, _releasing("fail"), _call("fail")], [W1, _call("fail")]):
        judge = _judged(*facts)
        (violation,) = judge.oracle.ledger.violations
        assert violation.prop == "fencing"
        assert violation.message == "the failure report of stale w0:job1#1 was accepted at t=30s"
        assert violation.evidence == ("job1 had been granted again to w1:job1#2 at t=30s",)


def test_a_report_in_flight_that_undid_the_reclaim_is_stale() -> None:
    """Check-then-act: the report read its row, w1 claimed the job, then the report wrote
    it back by id. Its window alone would excuse it; the queue does not: it shows job1
    queued while w1's lease runs, which only a report landing after w1's claim explains."""
    judge = _judged(_releasing("fail"), W1, _call("fail"), _state("queued"))
    (violation,) = judge.oracle.ledger.violations
    assert violation.prop == "fencing" and "of stale w0:job1#1" in violation.message
    assert "the queue shows job1 queued" in violation.evidence[1]


def test_a_report_that_cannot_be_placed_without_state_is_not_judged() -> None:
    """Without the queue's state() nothing tells whether the report came after the claim."""
    rules = {**RULES, "observes": False}
    facts = [ENQUEUED, W0, _releasing("fail"), W1, _call("fail")]
    judge = rejudge({"rules": rules, "facts": facts})
    assert _props(judge) == []
    assert any("may have landed first" in u for u in judge.oracle.ledger.unjudged)


def test_a_completion_in_flight_across_a_reclaim_breaks_a_property_either_way() -> None:
    """A completion has no harmless placement: had it committed first, the queue handed a
    finished job out again; after, it accepted a stale completion. Still fencing."""
    judge = _judged(_releasing("complete"), W1, _call("complete"), _state("running"))
    (stale,) = judge.oracle.ledger.deferred
    assert stale.prop == "fencing" and "either way a property broke" in stale.evidence[0]
    done = _judged(_releasing("complete"), W1, _call("complete"), _state("done"))
    (stale,) = done.oracle.ledger.deferred
    assert stale.message.startswith("the completion of stale w0:job1#1 was accepted")


def test_a_heartbeat_is_placed_by_its_window_too() -> None:
    """A heartbeat sent at t=30s while w0 still owned job1, answered True after w1's
    claim: if w1 claimed after even the earliest lease it could have renewed ran out
    (t=60s), it may have landed first and broke nothing; if w1 claimed before, it broke
    exclusive-lease there or fencing here. Sent after w1's claim, it is stale."""
    late = _grant(2, "w1", 61_000_000, 9)
    after = _judged(late, _call("heartbeat", answered=61_000_000))
    assert _props(after) == []
    assert any("may have landed first" in u for u in after.oracle.ledger.unjudged)
    early = _grant(2, "w1", 45_000_000, 9)
    under = _judged(early, _call("heartbeat", answered=45_000_000))
    assert _props(under) == ["fencing"]
    assert "exclusive-lease" in under.oracle.ledger.violations[0].evidence[0]
    stale = _judged(W1, _call("heartbeat"))
    assert stale.oracle.ledger.violations[0].message == (
        "the heartbeat of stale w0:job1#1 was accepted at t=30s"
    )


# ------------------------------------------------------------- on a database


class NotifyingQueue(ReferenceQueue):
    """The reference queue, with each report's NOTIFY sent after its change committed:
    correct, and two statements apart."""

    name = "reference-notifying"

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        accepted = super().fail(conn, claim, error)
        conn.execute("select pg_notify('leasecheck_test', %s)", (f"fail {claim.job_id}",))
        return accepted

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        accepted = super().complete(conn, claim, effect)
        conn.execute("select pg_notify('leasecheck_test', %s)", (f"complete {claim.job_id}",))
        return accepted


SPEC = f"{__name__}:NotifyingQueue"


@pytest.fixture
def harness(leasecheck_server_dsn: str, leasecheck_worker_label: str) -> Iterator[Harness]:
    """A harness on a fresh database with the notifying queue installed."""
    with janitor.temporary(leasecheck_server_dsn, f"{leasecheck_worker_label}_window") as dsn:
        queue = contract.load(SPEC)
        clock.prepare(dsn, queue)
        pool = actors.Pool(dsn)
        try:
            h = Harness(queue=queue, pool=pool, spec=SPEC)
            h.reset()
            yield h
        finally:
            pool.close()


def _story(harness: Harness, name: str) -> list[Step]:
    told = {s.name: s for s in opening.stories(harness.caps, harness.queue.max_attempts)}
    return list(told[name].steps)


def test_the_notify_after_fail_story_passes(harness: Harness) -> None:
    """The opening's story, step by step: the failure report pauses between its UPDATE
    and its NOTIFY, w1 claims the job it gave back, the report answers True; nothing is
    flagged, and the oracle says it could not place the report."""
    machine = LeaseMachine(harness)
    lines: list[str] = []
    machine.d.core.say = lines.append
    try:
        for step in _story(harness, "report paused in flight: fail, after 1"):
            getattr(machine, step.rule)(**step.args)
            machine.every_property_holds()
        ledger = machine.d.core.judge.oracle.ledger
        assert any("w1 claims job1 (token 2" in line for line in lines), lines
        assert any("w0 fails w0:job1#1: accepted" in line for line in lines), lines
        assert any("may have landed first" in u for u in ledger.unjudged), ledger.unjudged
    finally:
        machine.teardown()
    assert not harness.recorder.last


def test_the_notifying_queue_holds_through_every_story(harness: Harness) -> None:
    """Every opening story plays on the notifying queue, and none of them accuses it."""
    opening.play(harness)
    assert harness.played == len(opening.stories(harness.caps, harness.queue.max_attempts))
    assert harness.opening is None and not harness.recorder.last


def test_the_notifying_queue_holds_a_short_search(harness: Harness) -> None:
    """25 derandomized examples pause its reports between UPDATE and NOTIFY at random:
    no verdict (a violation raises here)."""
    run_state_machine_as_test(lambda: LeaseMachine(harness), settings=derandomized(25))
