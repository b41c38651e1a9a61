"""Faults real queues meet that the machine made none of before, replayed as programs.

Each program runs through the driver against the real PostgreSQL: the mutant the
fault was written for breaks its property, the reference keeps every property over
the very same steps, and the run without the fault's move lets the mutant through.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from psycopg import Connection

import mutants
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract, program
from leasecheck.stateful.contract import Claim
from leasecheck.stateful.engine import actors
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.moves import Stall, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import (
    EXCLUSIVE_LEASE,
    NO_LOST_JOBS,
    OWNER_PROGRESS,
    PropertyViolated,
)
from leasecheck.stateful.story import replay
from tests.fixtures import REFERENCE


def _harness(spec: str, pool: actors.Pool) -> Harness:
    harness = Harness(queue=contract.load(spec), pool=pool, spec=spec)
    harness.reset()
    return harness


RESTART_UNDER_ITS_NAME = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": Take(worker=0, held=False)}),  # w0: job1, token 1, lease to 30 s
    Step("restart", {"pick": 0}),  # w0 dies; w0.2 comes up under the name w0, holding nothing
    Step("claim", {"how": Take(worker=0, held=False)}),  # w0.2 claims as "w0"
]
"""A worker restarted under its old name claims while its old lease still runs."""


def test_a_restart_under_the_old_name_is_caught_reclaiming_a_live_lease(
    reference_pool: actors.Pool,
) -> None:
    harness = _harness(mutants.ALL["recover-by-name"], reference_pool)
    with pytest.raises(PropertyViolated) as caught:
        replay.replay(harness, RESTART_UNDER_ITS_NAME)
    violation = caught.value.violation
    assert violation.prop == EXCLUSIVE_LEASE, violation
    assert "w0.2:job1#2 was granted" in violation.message, violation.message
    assert "w0:job1#1 held a lease" in violation.message, violation.message
    (history,) = [f.history for f in harness.recorder.last.values()]
    crash = [e for e in history.events if e.op == "crash"]
    assert [e.note for e in crash] == ["restarted; w0.2 starts under the old name w0"]


def test_the_reference_holds_over_a_restart_under_the_old_name(
    reference_pool: actors.Pool,
) -> None:
    done = replay.replay(_harness(REFERENCE, reference_pool), RESTART_UNDER_ITS_NAME)
    assert done.skipped == [], done.skipped


def test_a_crash_gives_a_new_name_and_the_mutant_goes_free(reference_pool: actors.Pool) -> None:
    """The same program with a crash instead: the replacement is w0.2 to the queue too,
    so nothing is marked with its name and the claim takes nothing early."""
    steps = [
        s if s.rule != "restart" else Step("crash", {"pick": 0}) for s in RESTART_UNDER_ITS_NAME
    ]
    done = replay.replay(_harness(mutants.ALL["recover-by-name"], reference_pool), steps)
    assert done.skipped == [], done.skipped


def _late_completion_behind_a_reclaim(commit: bool) -> list[Step]:
    return [
        Step("start", {"workers": 2}),
        Step("claim", {"how": Take(worker=0, held=False)}),  # w0: job1#1
        Step("asleep", {"how": Stall(worker=0, alone=True, then="nothing")}),  # lease runs out
        Step("open_transaction", {"pick": 1}),  # w1 begins
        Step("claim", {"how": Take(worker=1, held=False)}),  # w1 takes job1#2 in it: row locked
        Step("time_out", {"pick": 0}),  # w0's next lock wait times out
        Step("complete", {"pick": 0}),  # w0, a late owner, completes: 55P03 on w1's row lock
        Step("close_transaction", {"pick": 0, "commit": commit}),
    ]


def test_a_completion_that_swallows_its_lock_timeout_is_caught(
    reference_pool: actors.Pool,
) -> None:
    """The swallowed timeout answers True while the completion rolled back; the reclaim
    that held the lock commits, and the job is handed out after an accepted completion."""
    harness = _harness(mutants.ALL["swallowed-timeout"], reference_pool)
    with pytest.raises(PropertyViolated) as caught:
        replay.replay(harness, _late_completion_behind_a_reclaim(commit=True))
    violation = caught.value.violation
    assert violation.prop == NO_LOST_JOBS, violation
    assert "handed out again (w1:job1#2)" in violation.message, violation.message
    (history,) = [f.history for f in harness.recorder.last.values()]
    completes = [e for e in history.events if e.op == "complete" and e.worker == "w0"]
    assert [e.kind for e in completes][:2] == ["invoke", "ok"], completes


@pytest.mark.parametrize("commit", [True, False], ids=["reclaim-commits", "reclaim-rolls-back"])
def test_the_reference_times_out_honestly(reference_pool: actors.Pool, commit: bool) -> None:
    """The reference raises the lock timeout (its "no"); judged once the reclaim it waited
    for commits (a stale call's refusal), said and not judged when it rolls back."""
    lines: list[str] = []
    harness = _harness(REFERENCE, reference_pool)
    done = replay.replay(harness, _late_completion_behind_a_reclaim(commit), say=lines.append)
    assert done.skipped == [], done.skipped
    story = "\n".join(lines)
    assert "refused, it raised LockNotAvailable: canceling statement due to lock timeout" in story
    assert "judged once it commits, not judged if it rolls back" in story, story
    rolled = "transaction was open, which then rolled back" in story
    assert rolled is not commit, story


def test_without_the_timeout_the_completion_waits_and_the_mutant_goes_free(
    reference_pool: actors.Pool,
) -> None:
    steps = [s for s in _late_completion_behind_a_reclaim(commit=True) if s.rule != "time_out"]
    done = replay.replay(_harness(mutants.ALL["swallowed-timeout"], reference_pool), steps)
    assert done.skipped == [], done.skipped


def _completion_after_its_own_beat(level: str) -> list[Step]:
    return [
        Step("start", {"workers": 2}),
        Step("claim", {"how": Take(worker=0, held=False)}),  # w0: job1#1
        Step("open_transaction", {"pick": 0, "level": level}),  # w0 begins at `level`
        Step("claim", {"how": Take(worker=0, held=False)}),  # in it, nothing: the snapshot
        Step("time_passes", {"to": "beat"}),  # w0's heartbeat connection renews job1
        Step("complete", {"pick": 0}),  # in the old snapshot: 40001 above read committed
        Step("close_transaction", {"pick": 0, "commit": True}),
    ]


def test_a_completion_that_swallows_a_serialization_failure_is_caught(
    reference_pool: actors.Pool,
) -> None:
    harness = _harness(mutants.ALL["swallowed-conflict"], reference_pool)
    with pytest.raises(PropertyViolated) as caught:
        replay.replay(harness, _completion_after_its_own_beat("repeatable read"))
    violation = caught.value.violation
    assert violation.prop == NO_LOST_JOBS, violation
    assert "after the queue had accepted its completion" in violation.message, violation


def test_the_reference_refuses_its_owner_above_read_committed(
    reference_pool: actors.Pool,
) -> None:
    """What the stricter levels find in the reference itself: its heartbeat and its
    completion update one row, so in a caller's transaction whose snapshot predates the
    worker's own renewal, the completion raises 40001: the current owner is refused."""
    for level in ("repeatable read", "serializable"):
        harness = _harness(REFERENCE, reference_pool)
        with pytest.raises(PropertyViolated) as caught:
            replay.replay(harness, _completion_after_its_own_beat(level))
        violation = caught.value.violation
        assert violation.prop == OWNER_PROGRESS, violation
        assert "raised SerializationFailure" in violation.message, violation.message
        assert "--leasecheck-excuse owner-progress" in violation.evidence[-1]  # how to run it


@pytest.mark.parametrize("spec", [REFERENCE, mutants.ALL["swallowed-conflict"]])
def test_read_committed_hides_it(reference_pool: actors.Pool, spec: str) -> None:
    """At the default level the completion re-reads the renewed row and is accepted."""
    done = replay.replay(
        _harness(spec, reference_pool), _completion_after_its_own_beat("read committed")
    )
    assert done.skipped == [], done.skipped


def _late_batch_behind_a_reclaim(commit: bool) -> list[Step]:
    return [
        Step("start", {"workers": 2}),
        Step("claim_batch", {"pick": 0, "size": 1}),  # w0: job1#1, by claim_many
        Step("asleep", {"how": Stall(worker=0, alone=True, then="nothing")}),  # lease runs out
        Step("open_transaction", {"pick": 1}),  # w1 begins
        Step("claim", {"how": Take(worker=1, held=False)}),  # w1 takes job1#2 in it: row locked
        Step("time_out", {"pick": 0}),  # w0's next lock wait times out
        Step("complete_batch", {"pick": 0, "size": 1}),  # w0's batch: 55P03 on w1's row lock
        Step("close_transaction", {"pick": 0, "commit": commit}),
    ]


@pytest.mark.parametrize("commit", [True, False], ids=["reclaim-commits", "reclaim-rolls-back"])
def test_a_batch_completion_that_times_out_waits_for_what_held_the_lock(
    reference_pool: actors.Pool, commit: bool
) -> None:
    """The batch's claims are the call's releases, not its `held`: its refusal by timeout
    waits for the reclaim's transaction like a single completion's (it was judged at once
    as the owner's refusal, late-owner, while the reclaim had not committed)."""
    lines: list[str] = []
    harness = _harness(REFERENCE, reference_pool)
    done = replay.replay(harness, _late_batch_behind_a_reclaim(commit), say=lines.append)
    assert done.skipped == [], done.skipped
    story = "\n".join(lines)
    assert "LockNotAvailable" in story, story
    assert "judged once it commits, not judged if it rolls back" in story, story
    rolled = "transaction was open, which then rolled back" in story
    assert rolled is not commit, story


def _completion_in_an_older_snapshot(level: str) -> list[Step]:
    return [
        Step("start", {"workers": 2}),
        Step("claim", {"how": Take(worker=0, held=False)}),  # w0: job1#1
        Step("open_transaction", {"pick": 0, "level": level}),  # the application's: it reads
        Step("time_passes", {"to": "beat"}),  # w0's heartbeat connection renews job1
        Step("complete", {"pick": 0}),  # in the snapshot taken at the open: 40001
    ]


def test_an_application_transaction_takes_its_snapshot_when_it_opens(
    reference_pool: actors.Pool,
) -> None:
    """open_transaction is the application's transaction, which reads before it calls the
    queue: the heartbeat that commits next is a concurrent update to the completion, with
    no claim in between to take the snapshot. The mutant swallows the 40001 and is caught
    when teardown finds the job it called done still to hand out."""
    harness = _harness(mutants.ALL["swallowed-conflict"], reference_pool)
    with pytest.raises(PropertyViolated) as caught:
        replay.replay(harness, _completion_in_an_older_snapshot("repeatable read"))
    assert caught.value.violation.prop == NO_LOST_JOBS, caught.value.violation


@pytest.mark.parametrize("spec", [REFERENCE, mutants.ALL["swallowed-conflict"]])
def test_at_read_committed_the_open_takes_no_snapshot(
    reference_pool: actors.Pool, spec: str
) -> None:
    done = replay.replay(
        _harness(spec, reference_pool), _completion_in_an_older_snapshot("read committed")
    )
    assert done.skipped == [], done.skipped


def _told(pool: actors.Pool, steps: list[Step]) -> str:
    """Replay `steps` on the reference, every step taken; return the story it told."""
    lines: list[str] = []
    done = replay.replay(_harness(REFERENCE, pool), steps, say=lines.append)
    assert done.skipped == [], done.skipped
    return "\n".join(lines)


LIVE_CLAIM_BATCHED_WITH_A_HELD_ONE = [
    Step("start", {"workers": 2}),
    Step("claim_batch", {"pick": 0, "size": 1}),  # w0: job1#1
    Step("enqueue", {"jobs": 1}),  # job2
    # w0 sleeps past its lease; w1 reclaims job1 in a transaction it keeps open; w0 wakes
    # under lock_timeout, fetches job2 and acknowledges both in one batch: 55P03
    Step(
        "asleep", {"how": Stall(worker=0, alone=False, then="batch", rival="holds, lock_timeout")}
    ),
    Step("close_transaction", {"pick": 0, "commit": True}),  # w1's reclaim commits
]


def test_a_live_claim_in_a_batch_that_timed_out_on_another_job_is_not_judged(
    reference_pool: actors.Pool,
) -> None:
    """The batch waited on job1's row, which w1's reclaim held: its refusal of w0's live
    claim on job2 says nothing of job2 (it was an owner-progress break once w1 committed);
    the stale claim on job1 is judged once w1 commits, as a single completion's is."""
    story = _told(reference_pool, LIVE_CLAIM_BATCHED_WITH_A_HELD_ONE)
    assert (
        "not judged: the complete of w0:job2#1 timed out on a lock with job1 in its batch, "
        "which w1's open transaction holds" in story
    ), story
    assert "w0:job1#1's complete timed out while w1 held a transaction open" in story, story


CRASH_ENDS_WHAT_A_PAUSED_TIMEOUT_WAITED_ON = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": Take(worker=0, held=False)}),  # w0: job1#1, lease to 30 s
    Step("preempt", {"after": 2, "hold": 1, "pick": 0}),  # w0's next call pauses after its 2nd
    # w0 sleeps past its lease; w1 reclaims job1 in a transaction it keeps open; w0 wakes
    # under lock_timeout and completes: its UPDATE waits on w1's row lock and times out,
    # the answer not yet read (the call is paused after that statement)
    Step(
        "asleep",
        {"how": Stall(worker=0, alone=False, then="complete", rival="holds, lock_timeout")},
    ),
    Step("crash", {"pick": 1}),  # w1 dies: its reclaim rolls back; then w0's answer is read
]


def test_a_timeout_whose_lock_holder_crashed_before_the_answer_was_read_is_not_judged(
    reference_pool: actors.Pool,
) -> None:
    """The transaction w0 waited on rolled back (a crash) before w0's refusal was read:
    nobody else holds job1 then, but the refusal was that transaction's lock, not the
    queue refusing a late owner (it was a late-owner break, 6 seeds of 20 in
    bench.time_to_detect on the reference)."""
    story = _told(reference_pool, CRASH_ENDS_WHAT_A_PAUSED_TIMEOUT_WAITED_ON)
    assert "w1 crashes" in story and "LockNotAvailable" in story, story
    assert (
        "not judged: the complete of w0:job1#1 timed out on a lock while w1's transaction "
        "was open, which then rolled back" in story
    ), story


class LocksBeforeItFences(ReferenceQueue):
    """A heartbeat that reads its job's row `for update` before it checks the attempt: a
    stale worker's refused heartbeat, inside its application's open transaction, holds
    the row the owner must update."""

    name = "locks-before-it-fences"

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        conn.execute("select 1 from jobs where id = %s for update", [claim.job_id])
        return super().heartbeat(conn, claim, lease)


def test_a_refusal_after_an_armed_lock_timeout_names_it_and_the_holder(
    reference_pool: actors.Pool,
) -> None:
    """The owner's completion waits on the row a stale worker's open transaction locked,
    until the lock timeout the harness armed: the refusal's story says both."""
    harness = Harness(queue=LocksBeforeItFences(), pool=reference_pool)
    harness.reset()
    steps = [
        Step("start", {"workers": 2}),
        Step("claim", {"how": Take(worker=0, held=False)}),  # w0: job1#1
        Step("asleep", {"how": Stall(worker=0, alone=True, then="nothing")}),  # lease runs out
        Step("claim", {"how": Take(worker=1, held=False)}),  # w1 owns job1#2
        Step("open_transaction", {"pick": 0}),  # w0 begins
        Step("heartbeat", {"pick": 0}),  # stale, refused; job1's row stays locked
        Step("time_out", {"pick": 1}),  # w1's next lock wait times out
        Step("complete", {"pick": 1}),  # w1, the owner: 55P03 on w0's row lock
        Step("close_transaction", {"pick": 0, "commit": True}),
    ]
    with pytest.raises(PropertyViolated) as caught:
        replay.replay(harness, steps)
    violation = caught.value.violation
    assert violation.prop == OWNER_PROGRESS, violation
    said = (
        "the lock_timeout the harness armed (time_out) ended its wait on a lock, while w0's "
        "transaction (open since t="
    )
    assert said in violation.message, violation.message


A_BATCH_WITH_A_JOB_GIVEN_UP_IN_A_HELD_CLAIM = program.from_json([
    {"rule": "start", "args": {"workers": 2}},
    {"rule": "enqueue", "args": {"jobs": 2}},
    {"rule": "claim", "args": {"how": {"Take": {"worker": 4, "held": False}}}},
    {"rule": "fail", "args": {"pick": 4}},
    {"rule": "claim_batch", "args": {"pick": 7, "size": 3}},
    {"rule": "restart", "args": {"pick": 4}},
    {"rule": "time_passes", "args": {"to": "past-lease-end-ms"}},
    {"rule": "claim", "args": {"how": {"Take": {"worker": 6, "held": True}}}},
    {"rule": "time_out", "args": {"pick": 6}},
    {"rule": "close_transaction", "args": {"commit": True, "pick": 7}},
    {"rule": "asleep", "args": {"how": {"Stall": {
        "worker": 3, "alone": False, "then": "batch", "rival": "holds", "long": False,
    }}}},
])  # fmt: skip
"""Found by a `dev` run of the reference, which it accused of owner-progress: w0 wakes
past its lease with job1 at the attempt cap and acknowledges its batch (job1#3, stale,
and job3#2, its own), under lock_timeout, while w1.2's claim in a held transaction took
job2 and, in the same statement, gave job1 up at its cap, locking job1's row. The batch
waited on that row and timed out: its refusal of job3 was job1's lock, not the queue
refusing an owner, and nothing the run saw (w1.2 holds only job2) could tell it."""


def test_a_batch_that_timed_out_while_a_transaction_held_no_claim_of_it_is_not_judged(
    reference_pool: actors.Pool,
) -> None:
    story = _told(reference_pool, A_BATCH_WITH_A_JOB_GIVEN_UP_IN_A_HELD_CLAIM)
    assert (
        "not judged: the complete of w0:job3#2 timed out on a lock with job1 in its batch "
        "while w1.2's transaction was open" in story
    ), story
