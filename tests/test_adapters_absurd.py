"""The Absurd adapter against a real PostgreSQL: round trip, Absurd's clock, its claim sweep.

The sweep tests pin down what absurd 0.5.1 does (its `claim_task` fails expired runs,
`complete_run` refuses a failed run with AB002): they assert the library's behaviour.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import psycopg
import pytest

pytest.importorskip(
    "absurd_sdk",
    reason="absurd-sdk is not installed: pip install absurd-sdk==0.5.1 absurdctl==0.5.1",
)

from leasecheck import kit
from leasecheck.adapters.absurd_queue import AbsurdClaim, AbsurdQueue
from leasecheck.stateful import clock, contract

LEASE = timedelta(seconds=30)
TICK = timedelta(microseconds=1)


adapter_dsn, pool, conn = kit.fixtures(AbsurdQueue, "absurd")


def _never(conn: psycopg.Connection[Any]) -> None:
    raise AssertionError("complete() ran the effect: Absurd's task body runs before, outside")


def _run(conn: psycopg.Connection[Any], claim: AbsurdClaim) -> dict[str, Any]:
    """Absurd's run row of this claim."""
    row = conn.execute(
        "select state, attempt, claimed_by, claim_expires_at, started_at"
        " from absurd.r_leasecheck where run_id = %s",
        [claim.run_id],
    ).fetchone()
    assert row is not None
    return dict(zip(("state", "attempt", "claimed_by", "expires", "started"), row, strict=True))


def _claimed(q: AbsurdQueue, conn: psycopg.Connection[Any], worker: str) -> AbsurdClaim:
    claim = q.claim(conn, worker, LEASE)
    assert claim is not None
    return claim


def _expired(
    q: AbsurdQueue, conn: psycopg.Connection[Any], silence: timedelta = LEASE
) -> AbsurdClaim:
    """Worker a takes the only task and falls silent for `silence` (its claim's end)."""
    task = q.enqueue(conn, {"n": 0})
    clock.advance(conn, TICK)
    stale = _claimed(q, conn, "a")
    assert stale.job_id == task
    clock.advance(conn, silence)
    return stale


def test_round_trip_spawn_claim_complete(conn: psycopg.Connection[Any]) -> None:
    """A task is handed out once, completes, and is not handed out again; state follows."""
    q = AbsurdQueue()
    task = q.enqueue(conn, {"n": 1})
    assert q.state(conn, task) == "queued"
    claim = _claimed(q, conn, "a")
    assert (claim.job_id, claim.token, claim.worker) == (task, 1, "a")
    assert q.state(conn, task) == "running"
    assert q.claim(conn, "b", LEASE) is None
    assert q.heartbeat(conn, claim, LEASE)
    assert q.complete(conn, claim, _never)
    assert _run(conn, claim)["state"] == "completed"
    assert q.state(conn, task) == "done"
    assert q.claim(conn, "b", LEASE) is None


def test_declarations() -> None:
    """The body runs outside the completion, the claim sweep revokes, the cap is the task's."""
    q = AbsurdQueue()
    caps = contract.capabilities(cast(contract.Queue, q))  # its claims are AbsurdClaims
    assert q.max_attempts == 3
    assert caps.ordered_tokens and caps.heartbeat_answers and caps.revokes_expired
    assert not caps.transactional_effects
    assert not caps.held_transactions
    assert caps.maintain is None and caps.state is not None
    assert caps.advance_clock is None


def test_absurds_clock_is_the_simulated_one(conn: psycopg.Connection[Any]) -> None:
    """`absurd.current_time()` answers the harness's clock: claims and heartbeats follow it."""
    q = AbsurdQueue()
    q.enqueue(conn, {"n": 1})
    clock.advance(conn, timedelta(seconds=7))
    claim = _claimed(q, conn, "a")
    seven = clock.EPOCH + timedelta(seconds=7)
    assert _run(conn, claim)["started"] == seven
    assert _run(conn, claim)["expires"] == seven + LEASE
    clock.advance(conn, timedelta(seconds=5))
    assert q.heartbeat(conn, claim, LEASE)
    assert _run(conn, claim)["expires"] == seven + timedelta(seconds=5) + LEASE


def test_a_claim_at_the_lease_end_takes_the_task_over(conn: psycopg.Connection[Any]) -> None:
    """`claim_expires_at <= now`: at its end the run is failed and its successor claimed."""
    q = AbsurdQueue()
    stale = _expired(q, conn, LEASE - TICK)
    assert q.claim(conn, "b", LEASE) is None
    clock.advance(conn, TICK)
    owner = _claimed(q, conn, "b")
    assert (owner.job_id, owner.token) == (stale.job_id, 2)
    assert _run(conn, stale)["state"] == "failed"


def test_a_stale_owner_is_refused_after_the_takeover(conn: psycopg.Connection[Any]) -> None:
    """The failed run's heartbeat, completion and failure meet AB002: all refused."""
    q = AbsurdQueue()
    stale = _expired(q, conn)
    owner = _claimed(q, conn, "b")
    assert not q.heartbeat(conn, stale, LEASE)
    assert not q.complete(conn, stale, _never)
    assert not q.fail(conn, stale, "late")
    assert _run(conn, owner)["state"] == "running"
    assert q.complete(conn, owner, _never)
    assert q.state(conn, owner.job_id) == "done"


def test_a_late_owner_nobody_swept_still_completes(conn: psycopg.Connection[Any]) -> None:
    """`complete_run` reads the run's state, not its claim's end: no claim, no refusal."""
    q = AbsurdQueue()
    stale = _expired(q, conn)
    assert q.heartbeat(conn, stale, LEASE)
    assert q.complete(conn, stale, _never)
    assert q.state(conn, stale.job_id) == "done"


def test_the_sweep_revokes_without_taking_the_task(conn: psycopg.Connection[Any]) -> None:
    """A claim that takes another task still fails the expired run (`revokes_expired`)."""
    q = AbsurdQueue()
    stale = _expired(q, conn)
    other = q.enqueue(conn, {"n": 1})
    clock.advance(conn, TICK)
    taken = _claimed(q, conn, "b")
    assert taken.job_id != stale.job_id  # the successor run is due later than `other`
    assert taken.job_id == other
    assert _run(conn, stale)["state"] == "failed"
    assert q.state(conn, stale.job_id) == "queued"
    assert not q.complete(conn, stale, _never)


def test_failures_retry_until_the_cap(conn: psycopg.Connection[Any]) -> None:
    """`max_attempts=3`: two failures make a next run, the third is final."""
    q = AbsurdQueue()
    task = q.enqueue(conn, {"n": 1})
    for attempt in (1, 2, 3):
        claim = _claimed(q, conn, "a")
        assert claim.token == attempt
        assert q.fail(conn, claim, "boom")
        clock.advance(conn, timedelta(seconds=1))
    assert q.state(conn, task) == "failed"
    assert q.claim(conn, "a", LEASE) is None


def test_an_expired_last_attempt_fails_the_task(conn: psycopg.Connection[Any]) -> None:
    """The claim sweep counts as a failure: on the last attempt the task ends failed."""
    q = AbsurdQueue(max_attempts=1)
    stale = _expired(q, conn)
    assert q.claim(conn, "b", LEASE) is None
    assert q.state(conn, stale.job_id) == "failed"
    assert not q.complete(conn, stale, _never)


class TestAbsurd(kit.AdapterTests):
    """Absurd gives nothing up: with no property excused, the search finds no violation."""

    queue = AbsurdQueue
