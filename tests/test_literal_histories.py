"""Each property family judged on a hand-written history, without a database.

The judge takes facts (what the queue answered and showed, as a run records them) and
nothing else, so every family can be pinned down on a few lines of history: one that
breaks the property, and its nearest neighbour that does not.
"""

from __future__ import annotations

from typing import Any

import pytest

from leasecheck.stateful.verdict.judge import rejudge

LEASE = 30_000_000
END = 1 + LEASE
"""The instant w0's lease, granted at t=1 µs, runs out (simulated microseconds)."""
RULES = {
    "lease": LEASE,
    "max_attempts": 3,
    "ordered_tokens": True,
    "revokes_expired": False,
    "answers_complete": False,
    "observes": True,
    "heartbeat_answers": True,
}
Fact = dict[str, Any]
ENQUEUED: Fact = {"op": "enqueued", "args": {"job_id": 1, "label": "job1"}}
DRAINED: Fact = {"op": "drained", "args": {}}


def grant(token: int, worker: str, at: int, key: str = "job-1") -> Fact:
    label = f"{worker}:job1#{token}"
    args = {"job_id": 1, "token": token, "worker": worker, "label": label, "at": at}
    return {"op": "grant", "args": {**args, "key": key, "event": token}}


def call(op: str, grant: int, accepted: bool, at: int) -> Fact:
    return {"op": op, "args": {"grant": grant, "accepted": accepted, "at": at, "answered": at}}


def refused(op: str, grant: int, at: int, raised: str) -> Fact:
    """A call refused with an exception (its quote, as a run records it)."""
    fact = call(op, grant, False, at)
    fact["args"]["raised"] = raised
    return fact


def state(status: str) -> Fact:
    return {"op": "state", "args": {"job_id": 1, "status": status}}


def rows(*committed: tuple[int, int, str]) -> Fact:
    """The effect rows committed so far: (call, token, worker) each, all of job1."""
    listed = [[c, "1", str(t), w] for c, t, w in committed]
    return {"op": "effect_rows", "args": {"rows": listed, "refused": [], "voided": []}}


def effect(grant: int, key: str) -> Fact:
    return {"op": "external_effect", "args": {"grant": grant, "key": key}}


SERIALIZATION = "SerializationFailure: could not serialize access due to concurrent update"
W0 = grant(1, "w0", 1)
W1_LATE = grant(2, "w1", END + 1)
"""w1 claims job1 again once w0's lease has run out."""

CASES: dict[str, tuple[list[Fact], set[str], dict[str, Any]]] = {
    "a second grant inside the lease": ([W0, grant(2, "w1", 1_000)], {"exclusive-lease"}, {}),
    "a second grant after the lease": ([W0, W1_LATE], set(), {}),
    "a stale completion accepted": (
        [W0, W1_LATE, call("complete", 1, True, END + 2), call("complete", 0, True, END + 3)],
        {"fencing"},
        {},
    ),
    "a stale completion refused": (
        [W0, W1_LATE, call("complete", 1, True, END + 2), call("complete", 0, False, END + 3)],
        set(),
        {},
    ),
    "a token that does not grow": ([grant(2, "w0", 1), grant(1, "w1", END + 1)], {"fencing"}, {}),
    "the owner's heartbeat refused": (
        [W0, call("heartbeat", 0, False, 1_000)],
        {"owner-progress"},
        {},
    ),
    "the owner's heartbeat accepted": ([W0, call("heartbeat", 0, True, 1_000)], set(), {}),
    "the owner's completion refused by a serialization failure": (
        [W0, refused("complete", 0, 1_000, SERIALIZATION)],
        {"owner-progress"},
        {},
    ),
    "a late owner refused with nobody else on the job": (
        [W0, call("complete", 0, False, END + 1), state("running")],
        {"late-owner"},
        {},
    ),
    "a fourth claim under a cap of three": (
        [W0, W1_LATE, grant(3, "w0", 2 * END + 2), grant(4, "w1", 3 * END + 3)],
        {"retry-cap"},
        {},
    ),
    "a third claim under a cap of three": (
        [W0, W1_LATE, grant(3, "w0", 2 * END + 2)],
        set(),
        {},
    ),
    "a job given back and never taken again": (
        [W0, call("fail", 0, True, 1_000), DRAINED, state("queued")],
        {"no-lost-jobs"},
        {},
    ),
    "a job done with its effect": (
        [W0, call("complete", 0, True, 1_000), rows((7, 1, "w0")), DRAINED, state("done")],
        set(),
        {},
    ),
    "a job done with no effect": (
        [W0, call("complete", 0, True, 1_000), DRAINED, state("done")],
        {"done-effect"},
        {},
    ),
    "two effects committed for one job": (
        [W0, W1_LATE, rows((7, 2, "w1")), rows((7, 2, "w1"), (9, 1, "w0"))],
        {"single-completion"},
        {},
    ),
    "an idempotency key from the attempt": (
        [grant(1, "w0", 1, "job-1#1"), effect(0, "job-1#1"), grant(2, "w1", END + 1, "job-1#2")],
        {"unique-effects"},
        {"answers_complete": True},
    ),
    "an idempotency key from the job": (
        [W0, effect(0, "job-1"), W1_LATE, effect(1, "job-1")],
        set(),
        {"answers_complete": True},
    ),
    "a job running that no claim holds": (
        [
            {"op": "claim_sent", "args": {"call": 6}},
            {"op": "claim_answered", "args": {"call": 6, "jobs": [], "known": True}},
            {"op": "claims_settled", "args": {"unknown": False}},
            state("running"),
        ],
        {"no-hidden-claims"},
        {},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_history_gets_its_verdict(case: str) -> None:
    facts, broken, rules = CASES[case]
    judge = rejudge({"rules": {**RULES, **rules}, "facts": [ENQUEUED, *facts]})
    ledger = judge.oracle.ledger
    assert {v.prop for v in [*ledger.violations, *ledger.deferred]} == broken


def test_a_serialization_failure_says_how_a_retrying_queue_is_run() -> None:
    """The owner refused by PostgreSQL's 40001 above READ COMMITTED is still refused (the
    queue chose not to retry), and the story says how a queue whose callers retry runs."""
    facts = [ENQUEUED, W0, refused("complete", 0, 1_000, SERIALIZATION)]
    judge = rejudge({"rules": RULES, "facts": facts})
    (violation,) = judge.oracle.ledger.violations
    assert violation.prop == "owner-progress"
    assert "--leasecheck-excuse owner-progress" in violation.evidence[-1]
    plain = rejudge({"rules": RULES, "facts": [ENQUEUED, W0, call("complete", 0, False, 1_000)]})
    assert not any("excuse" in e for e in plain.oracle.ledger.violations[0].evidence)


def releasing(grant: int, op: str, at: int) -> Fact:
    """The grant's completion or failure report, sent at `at`, is in flight."""
    return {"op": "releasing", "args": {"grant": grant, "op": op, "at": at}}


def answered_late(op: str, grant: int, accepted: bool, at: int, answered: int) -> Fact:
    """A call sent at `at` that answered only at `answered` (it waited, or was paused)."""
    fact = call(op, grant, accepted, at)
    fact["args"]["answered"] = answered
    return fact


def claim_in_flight(call: int) -> Fact:
    return {"op": "claim_sent", "args": {"call": call}}


def claim_answered(call: int, jobs: list[int]) -> Fact:
    return {"op": "claim_answered", "args": {"call": call, "jobs": jobs, "known": True}}


RIVAL = grant(2, "w1", 2_000)
"""w1 claims job1 inside w0's lease, while w0's completion, sent at 1 ms, is in flight."""
HEARTBEAT_REFUSED = call("heartbeat", 0, False, 2_000)
"""The owner's heartbeat refused while its own completion, sent at 1 ms, is in flight."""

WAITS: dict[str, tuple[list[Fact], list[str], int]] = {
    "a rival granted, then the completion in flight refused": (
        [
            W0,
            releasing(0, "complete", 1_000),
            RIVAL,
            answered_late("complete", 0, False, 1_000, 3_000),
        ],
        ["exclusive-lease: w1:job1#2 was granted at t=0.002s while w0:job1#1 held"],
        0,
    ),
    "a rival granted, then the completion in flight lost its answer": (
        [
            W0,
            releasing(0, "complete", 1_000),
            RIVAL,
            {"op": "release_unknown", "args": {"grant": 0, "op": "complete", "at": 1_000}},
        ],
        [],
        1,
    ),
    "the heartbeat refused, then the completion in flight refused": (
        [
            W0,
            releasing(0, "complete", 1_000),
            HEARTBEAT_REFUSED,
            answered_late("complete", 0, False, 1_000, 3_000),
        ],
        [
            "owner-progress: the heartbeat of w0:job1#1, which owns job1, was refused",
            "owner-progress: the completion of w0:job1#1, which owns job1, was refused",
        ],
        0,
    ),
    "the heartbeat refused, then the completion in flight accepted": (
        [
            W0,
            releasing(0, "complete", 1_000),
            HEARTBEAT_REFUSED,
            answered_late("complete", 0, True, 1_000, 3_000),
        ],
        [],
        1,
    ),
    "a late owner refused while a claim that takes nothing is in flight": (
        [
            W0,
            claim_in_flight(6),
            call("complete", 0, False, END + 1),
            state("running"),
            claim_answered(6, []),
        ],
        ["late-owner: the completion of w0:job1#1, which owns job1, was refused"],
        0,
    ),
    "a late owner refused while a claim that takes its job is in flight": (
        [
            W0,
            claim_in_flight(6),
            call("complete", 0, False, END + 1),
            state("running"),
            claim_answered(6, [1]),
        ],
        [],
        0,
    ),
}


@pytest.mark.parametrize("case", list(WAITS))
def test_a_verdict_that_waits_is_told_only_when_what_it_waited_on_says_so(case: str) -> None:
    """A verdict resting on a grant whose release is in flight waits for the release's
    answer (told if refused, said but not judged if accepted or lost); a late owner's
    refusal waits for the claims in flight (told unless one of them took the job)."""
    facts, told, unjudged = WAITS[case]
    ledger = rejudge({"rules": RULES, "facts": [ENQUEUED, *facts]}).oracle.ledger
    said = [f"{v.prop}: {v.message}" for v in [*ledger.violations, *ledger.deferred]]
    assert len(said) == len(told), said
    assert all(s.startswith(t) for s, t in zip(said, told, strict=True)), said
    assert len(ledger.unjudged) == unjudged, ledger.unjudged
