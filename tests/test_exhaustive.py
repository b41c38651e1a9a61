"""The explorer's state is exact: programs that reach one state have one future.

The false proof it guards against: with a lock timeout armed left out of the state,
"a held claim, then time_out" was merged with "a held claim", so the claim that times
out after its own UPDATE committed was never tried, and a scope holding a 5-step
counterexample read "no violation in scope".
"""

from __future__ import annotations

from collections.abc import Hashable
from datetime import timedelta
from typing import Any, cast

import pytest
from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.exhaustive import audit, state
from leasecheck.stateful.exhaustive.scope import Scope
from leasecheck.stateful.exhaustive.search import explore, run_program
from leasecheck.stateful.harness import Harness
from leasecheck.stateful.moves import TIMES, Stall, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import NO_HIDDEN_CLAIMS

AHEAD = "select count(*) from (select id from jobs where id < %(id)s for update) as ahead"
TAKE = (
    "select id from jobs where status = 'queued' "
    "or (status = 'running' and lease_until < now() and attempt < max_attempts) "
    "order by id limit 1 for update skip locked"
)
MARK = (
    "update jobs set status = 'running', attempt = attempt + 1, locked_by = %(worker)s, "
    "lease_until = now() + %(lease)s, claimed_at = now() where id = %(id)s returning attempt"
)


class CountsAfterClaim(ReferenceQueue):
    """Claims (and commits), then counts the jobs ahead of its own in a second statement
    that locks them: behind another worker's open transaction it waits, and under a
    lock timeout it raises, though the claim it made has committed."""

    name = "counts-after-claim"

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        with conn.transaction():  # outside a held transaction, this commits the claim
            row = conn.execute(TAKE).fetchone()
            if row is None:
                return None
            params = {"worker": worker, "lease": lease, "id": row[0]}
            marked = conn.execute(MARK, params).fetchone()
        conn.execute(AHEAD, {"id": row[0]})
        assert marked is not None
        return Claim(job_id=int(row[0]), token=int(marked[0]), worker=worker)


SCOPE = Scope(workers=2, jobs=2, moves=3, preemptions=0, rules=frozenset({"claim", "time_out"}))


@pytest.fixture
def forgetful(monkeypatch: pytest.MonkeyPatch) -> None:
    """The state as it was: without the lock timeouts armed."""
    exact = state.harness_state

    def without_timeouts(d: Driver) -> Hashable:
        armed, d.calls.timeouts.armed = d.calls.timeouts.armed, set()
        try:
            return exact(d)
        finally:
            d.calls.timeouts.armed = armed

    monkeypatch.setattr(state, "harness_state", without_timeouts)


def test_the_claim_that_times_out_after_committing_is_found(reference_pool: actors.Pool) -> None:
    done = explore(Harness(queue=CountsAfterClaim(), pool=reference_pool), SCOPE, schedules=500)
    assert done.violation is not None, done.said(SCOPE)
    assert done.violation.violation.prop == NO_HIDDEN_CLAIMS
    assert [s.rule for s in done.counterexample] == [
        "start", "enqueue", "claim", "time_out", "claim",
    ]  # fmt: skip


def test_without_the_armed_timeouts_the_scope_reads_as_proven(
    reference_pool: actors.Pool, forgetful: None
) -> None:
    """The teeth of the test above: the old state gives the false proof."""
    done = explore(Harness(queue=CountsAfterClaim(), pool=reference_pool), SCOPE, schedules=500)
    assert done.violation is None and done.complete


def test_programs_that_reach_one_state_answer_alike(reference_pool: actors.Pool) -> None:
    """Twins continued with the same random moves answer the same, on a queue whose
    lock waits and timeouts the moves reach."""
    harness = Harness(queue=CountsAfterClaim(), pool=reference_pool)
    scope = Scope(workers=2, jobs=2, moves=2, preemptions=1)
    checked, parted = audit.audit(harness, scope, pairs=25, continuations=2, length=4)
    assert checked == 25
    assert not parted, "\n".join(str(p) for p in parted)


def test_the_audit_finds_the_part_left_out(reference_pool: actors.Pool, forgetful: None) -> None:
    """The audit's own teeth: with the armed timeouts left out, twins part."""
    harness = Harness(queue=CountsAfterClaim(), pool=reference_pool)
    found = audit.twins(harness, SCOPE, 50)
    armed = [t for t in found if t.second[-1].rule == "time_out"]
    assert armed, "no twin was made by the forgotten move, so this shows nothing"
    parted = audit.futures(harness, armed[0], SCOPE, continuations=4, length=2, seed=0)
    assert parted


@pytest.mark.parametrize("then", ["complete", "fail", "heartbeat", "nothing"])
def test_with_one_worker_a_stall_with_a_rival_is_the_lone_stall(
    reference_pool: actors.Pool, then: str
) -> None:
    """The explorer offers one worker only lone stalls (`exhaustive.moves`): the stall
    it leaves out must reach the very state, and offer the same moves, or the pruning
    would hide programs from "no violation in scope"."""
    harness = Harness(queue=ReferenceQueue(), pool=reference_pool)
    scope = Scope(workers=1, jobs=1, moves=3, preemptions=0)
    reached = []
    for alone in (True, False):
        stall = Stall(worker=0, alone=alone, then=then)
        steps = [
            *scope.start(),
            Step("claim", {"how": Take(0, False)}),
            Step("asleep", {"how": stall}),
        ]
        reached.append(run_program(harness, steps, scope))
    assert reached[0] == reached[1]


def test_clock_moves_to_one_instant_are_offered_once(reference_pool: actors.Pool) -> None:
    """With no lease ending ahead, eight of the clock's moves land one second on: the
    explorer offers the first, and each it leaves out must reach the very state and offer
    the same moves, or "no violation in scope" would skip programs it never ran."""
    harness = Harness(queue=ReferenceQueue(), pool=reference_pool)
    scope = Scope(workers=1, jobs=1, moves=2, preemptions=0)
    _, offered = run_program(harness, scope.start(), scope)
    clock = [s.args["to"] for s in offered if s.rule == "time_passes"]
    assert clock == ["lease-end", "beat"]
    left_out = [t for t in TIMES if t not in clock and t != "beat"]
    reached = [
        run_program(harness, [*scope.start(), Step("time_passes", {"to": t})], scope)
        for t in ["lease-end", *left_out]
    ]
    assert len(left_out) == 8 and all(r == reached[0] for r in reached)


def test_one_program_run_twice_reaches_one_state(reference_pool: actors.Pool) -> None:
    """A state holds no address: a batch completion in flight (its claims once kept by
    id()) and a paused call (its gate's lock, whose repr has one) kept every run of the
    program apart from the last, so twins never merged and two searches of one scope
    counted different numbers of states."""
    harness = Harness(queue=ReferenceQueue(), pool=reference_pool)
    scope = Scope(workers=2, jobs=1, moves=3, preemptions=1)
    stall = Stall(worker=0, alone=False, then="batch", rival="holds, lock_timeout")
    steps = [
        *scope.start(),
        Step("claim", {"how": Take(0, False)}),
        Step("preempt", {"pick": 0, "after": 1}),
        Step("asleep", {"how": stall}),
    ]
    first, second = (run_program(harness, steps, scope) for _ in range(2))
    assert first == second


def test_what_the_planner_believes_is_part_of_the_state(reference_pool: actors.Pool) -> None:
    """Tables analyzed at one job and grown by two, or analyzed at one and at two jobs,
    hold the same three queued jobs, but the planner believes different sizes of them, and
    a claim's plan follows what it believes: two states, or the second would be pruned."""
    harness = Harness(queue=ReferenceQueue(), pool=reference_pool)
    if not harness.can_replan():
        pytest.skip("replans need PostgreSQL 18 or later (statistics put back)")
    scope = Scope(workers=1, jobs=1, moves=2, preemptions=0, rules=frozenset({"replan"}))
    once = [*scope.start(), Step("replan", {"grow": 2})]
    twice = [*scope.start(), Step("replan", {"grow": 1}), Step("replan", {"grow": 1})]
    reached = [cast(tuple[Any, Any, Any], run_program(harness, p, scope)[0]) for p in (once, twice)]
    (_, shown_once, rows_once), (_, shown_twice, rows_twice) = reached
    assert shown_once == shown_twice and rows_once[:-1] == rows_twice[:-1]  # the same rows
    assert rows_once[-1] != rows_twice[-1]  # what the planner believes of them
