"""Each property family returns what it found, as data, and writes nowhere.

The families are called directly on hand-built jobs: the findings they return are the
whole verdict, and the oracle's ledger stays empty until it takes them, in order.
"""

from __future__ import annotations

from leasecheck.stateful import properties as P
from leasecheck.stateful.contract import DONE, FAILED, RUNNING, Claim
from leasecheck.stateful.verdict import claims, drain, hidden, refusals, releases, stale, window
from leasecheck.stateful.verdict.findings import Declared, Deferred, Finding, Saw, Unjudged
from leasecheck.stateful.verdict.grants import Grant
from leasecheck.stateful.verdict.hidden import Doubts
from leasecheck.stateful.verdict.ledger import Ledger
from leasecheck.stateful.verdict.model import Oracle
from leasecheck.stateful.verdict.window import Sent

LEASE = 30


def oracle(shows: str | None = None, revokes_expired: bool = False) -> Oracle:
    """An oracle with job1 enqueued; `shows`: what its state() answers (None: no state())."""
    judged = Oracle(
        lease=LEASE,
        max_attempts=None,
        ordered_tokens=True,
        observe=None if shows is None else (lambda _job: shows),
        revokes_expired=revokes_expired,
    )
    judged.enqueued(1, "job1")
    return judged


def granted(judged: Oracle, token: int, worker: str, at: int) -> Grant:
    return judged.grant(Claim(1, token, worker), f"{worker}:job1#{token}", at, "job-1")


def nothing_written(ledger: Ledger) -> bool:
    return not (
        ledger.violations or ledger.deferred or ledger.unjudged or ledger.declared
    ) and not sum(ledger.situations.values())


def test_a_refused_owner_is_a_violation_returned_not_written() -> None:
    judged = oracle()
    owner = granted(judged, 1, "w0", at=1)
    judged.ledger = Ledger()
    found = refusals.refused(judged, owner, "heartbeat", at=10)
    assert [f.prop for f in found if hasattr(f, "prop")] == [P.OWNER_PROGRESS]
    assert nothing_written(judged.ledger)


def test_a_late_owner_refused_by_design_is_declared() -> None:
    judged = oracle(shows=RUNNING, revokes_expired=True)
    owner = granted(judged, 1, "w0", at=1)
    found = refusals.refused(judged, owner, "completion", at=1 + LEASE)
    assert len(found) == 1
    assert isinstance(found[0], Declared)
    assert "revokes_expired" in found[0].said


def test_a_late_owner_given_up_at_its_cap_is_no_finding() -> None:
    judged = oracle(shows=FAILED)
    judged.max_attempts = 1
    owner = granted(judged, 1, "w0", at=1)
    assert refusals.refused(judged, owner, "completion", at=1 + LEASE) == []
    judged.max_attempts = 2  # a cap not reached: the same refusal is late-owner
    [found] = refusals.refused(judged, owner, "completion", at=1 + LEASE)
    assert getattr(found, "prop", None) == P.LATE_OWNER


def test_a_refusal_behind_a_release_in_flight_waits_on_the_grant() -> None:
    judged = oracle()
    owner = granted(judged, 1, "w0", at=1)
    judged.releasing(owner, "complete", at=5)
    assert refusals.refused(judged, owner, "heartbeat", at=10) == []
    assert len(owner.held) == 1  # judged again if the completion is refused
    settled = refusals.settled(judged, releases.answered(owner, "completion", accepted=False))
    assert props(settled) == [P.OWNER_PROGRESS]


def test_a_second_claim_inside_a_lease_and_a_reused_token_are_found() -> None:
    judged = oracle()
    granted(judged, 1, "w0", at=1)
    job = judged.jobs[1]
    rival = Grant(Claim(1, 1, "w1"), "w1:job1#1", granted_at=5, lease_end=5 + LEASE, seq=1)
    found, meanwhile = claims.judge(judged, job, rival, sent=None, answered=5)
    assert sorted(props(found)) == [P.EXCLUSIVE_LEASE, P.FENCING]  # in w0's lease, token 1
    assert meanwhile == []
    after = Grant(Claim(1, 2, "w1"), "w1:job1#2", 1 + LEASE, 1 + 2 * LEASE, seq=1)
    found, _ = claims.judge(judged, job, after, sent=None, answered=1 + LEASE)
    assert props(found) == []  # the lease had run out
    assert Saw("expired lease claimed again") in found


def test_a_stale_call_is_a_violation_or_said_by_where_it_was_sent() -> None:
    judged = oracle(shows=RUNNING)
    first = granted(judged, 1, "w0", at=1)
    second = granted(judged, 2, "w1", at=1 + LEASE)
    job = judged.jobs[1]
    after = Sent(at=2 + LEASE, answered=2 + LEASE, moment=None)
    win = window.place(job, first, after, own_release_first=True)
    found = stale.accepted(judged, job, first, "failure report", win, after)
    assert getattr(found, "prop", None) == P.FENCING
    assert found.grants[:2] == (first.label, second.label)  # type: ignore[union-attr]
    before = Sent(at=LEASE, answered=2 + LEASE)  # sent while w0 still owned it
    win = window.place(job, first, before, own_release_first=True)
    said = stale.accepted(judged, job, first, "failure report", win, before)
    assert isinstance(said, Unjudged), said  # it may have given the job back first


def props(found: list[Finding]) -> list[str]:
    return [f.prop for f in found if isinstance(f, P.Violation)]


def test_the_drain_returns_no_lost_jobs_and_done_effect() -> None:
    judged = oracle(shows=DONE)
    owner = granted(judged, 1, "w0", at=1)
    judged.complete(owner, True, at=5)
    judged.ledger = Ledger()
    found = drain.judge(judged)
    assert props(found) == [P.DONE_EFFECT]  # no effect row committed
    assert nothing_written(judged.ledger)
    judged = oracle(shows=RUNNING)
    granted(judged, 1, "w0", at=1)
    assert props(drain.judge(judged)) == [P.NO_LOST_JOBS]


def test_a_hidden_claim_is_found_and_nothing_while_a_claim_is_in_flight() -> None:
    judged = oracle(shows=RUNNING)
    found = hidden.judge(judged, Doubts(), unknown=False)
    assert Saw("job no claim holds looked at after a claim") in found
    assert props(found) == [P.NO_HIDDEN_CLAIMS]
    judged.claim_sent(7)
    assert hidden.judge(judged, Doubts(), unknown=False) == []


def test_the_ledger_takes_findings_in_order_and_a_deferred_culprit_leads() -> None:
    ledger = Ledger()
    culprit = P.Violation(P.FENCING, "stale", jobs=("job1",))
    victim = P.Violation(P.OWNER_PROGRESS, "wronged", jobs=("job1",))
    ledger.take([Deferred(culprit), Unjudged("a"), Declared("b"), Saw("s"), victim])
    assert ledger.violations == [culprit, victim]
    assert (ledger.unjudged, ledger.declared, ledger.situations["s"]) == (["a"], ["b"], 1)
    assert ledger.deferred == []
