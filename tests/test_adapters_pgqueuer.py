"""The pgqueuer adapter against a real PostgreSQL: round trip, heartbeats, stale calls."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

import psycopg
import pytest

pytest.importorskip("pgqueuer", reason="pgqueuer is not installed: pip install 'pgqueuer==1.6.*'")


from leasecheck import kit
from leasecheck.adapters.pgqueuer_queue import PgQueuerQueue, queue_manager_id
from leasecheck.stateful import clock, contract
from leasecheck.stateful.contract import Claim

LEASE = timedelta(seconds=30)
TICK = timedelta(microseconds=1)
GIVEN_UP = frozenset({"fencing", "exclusive-lease"})
"""What pgqueuer does not promise: no fencing token, so a stale worker's retry or
completion lands, by id, on a job someone else holds, and a job a stale retry re-queued
goes to another worker while its owner runs it. (owner-progress and late-owner are not
given up: pgqueuer's heartbeat answers nothing, so no refusal is read from it.)"""


adapter_dsn, pool, conn = kit.fixtures(PgQueuerQueue, "pgqueuer")


class TestPgQueuer(kit.AdapterTests):
    queue = PgQueuerQueue
    given_up = GIVEN_UP


def _holder(conn: psycopg.Connection[Any], job: object) -> tuple[str, uuid.UUID, float]:
    """pgqueuer's row: status, queue manager, and seconds since its heartbeat."""
    row = conn.execute(
        "select status::text, queue_manager_id, extract(epoch from now() - heartbeat)::float"
        " from pgqueuer where id = %s",
        [job],
    ).fetchone()
    assert row is not None, f"pgqueuer has no queue row for job {job}"
    return (str(row[0]), row[1], float(row[2]))


def _as_queue(q: PgQueuerQueue) -> contract.Queue:
    """Return `q` as the harness and the contract's checks take it (its fire-and-forget
    heartbeat answers None, which contract.Queue allows)."""
    return q


def _beat(q: PgQueuerQueue, conn: psycopg.Connection[Any], claim: Claim) -> object:
    """Send a heartbeat and return its answer as the harness reads it, any object (mypy
    would not let a caller look at the answer of a method annotated to return None)."""
    heartbeat: Callable[[psycopg.Connection[Any], Claim, timedelta], object] = q.heartbeat
    return heartbeat(conn, claim, LEASE)


def _attempt(claim: Claim) -> int:
    """The claim's attempt: the adapter's token is (queue manager, attempts)."""
    return cast(tuple[str, int], claim.token)[1]


def _never(conn: psycopg.Connection[Any]) -> None:
    raise AssertionError("complete() ran the effect: pgqueuer's task body runs before, outside")


def test_a_job_and_a_retry_are_due_once_the_clock_moves(
    conn: psycopg.Connection[Any],
) -> None:
    """`execute_after < NOW()` is strict: on frozen time a fresh job, like a zero-delay
    retry, waits for the tick the machine makes after each enqueue."""
    q = PgQueuerQueue()
    q.enqueue(conn, {})
    assert q.claim(conn, "a", LEASE) is None
    clock.advance(conn, TICK)
    claim = q.claim(conn, "a", LEASE)
    assert claim is not None
    assert q.fail(conn, claim, "boom")
    assert q.claim(conn, "a", LEASE) is None
    clock.advance(conn, TICK)
    assert q.claim(conn, "a", LEASE) is not None


def test_round_trip_enqueue_claim_complete(conn: psycopg.Connection[Any]) -> None:
    """A job is handed out once, completes, and is gone afterwards; state follows it."""
    q = PgQueuerQueue()
    job = q.enqueue(conn, {"n": 1})
    assert q.state(conn, job) == "queued"
    clock.advance(conn, TICK)
    claim = q.claim(conn, "a", LEASE)
    assert claim is not None and claim.job_id == job
    assert q.state(conn, job) == "running"
    assert q.claim(conn, "b", LEASE) is None
    assert q.complete(conn, claim, _never)
    assert q.state(conn, job) == "done"
    assert q.claim(conn, "b", LEASE) is None
    assert _beat(q, conn, claim) is None  # pgqueuer answers nothing, job or none


def test_declarations() -> None:
    """The task body runs outside log_jobs; nothing revokes; no cap on picks is promised;
    the heartbeat is fire and forget."""
    q = PgQueuerQueue()
    assert q.transactional_effects is False and q.revokes_expired is False
    assert q.max_attempts is None and not hasattr(q, "maintain")
    assert q.heartbeat_answers is False
    assert any(g.startswith("heartbeat-answers:") for g in contract.not_checked(_as_queue(q)))


def test_a_live_worker_keeps_its_job(conn: psycopg.Connection[Any]) -> None:
    """Heartbeats every 10 s keep a job from being re-picked past the 30 s timeout."""
    q = PgQueuerQueue()
    q.enqueue(conn, {})
    clock.advance(conn, TICK)
    claim = q.claim(conn, "a", LEASE)
    assert claim is not None
    for _ in range(6):
        clock.advance(conn, timedelta(seconds=10))
        assert _beat(q, conn, claim) is None
    assert q.claim(conn, "b", LEASE) is None
    assert _holder(conn, claim.job_id) == ("picked", queue_manager_id("a"), 0.0)


def test_a_stale_worker_is_not_fenced(conn: psycopg.Connection[Any]) -> None:
    """A silent job is re-picked; the old holder no longer holds it, yet its completion lands."""
    q = PgQueuerQueue()
    q.enqueue(conn, {})
    clock.advance(conn, TICK)
    stale = q.claim(conn, "a", LEASE)
    clock.advance(conn, LEASE + TICK)
    owner = q.claim(conn, "b", LEASE)
    assert stale is not None and owner is not None and owner.job_id == stale.job_id
    assert owner.token != stale.token
    assert _holder(conn, owner.job_id) == ("picked", queue_manager_id("b"), 0.0)
    clock.advance(conn, timedelta(seconds=10))
    assert _beat(q, conn, stale) is None
    # update_heartbeat matches by id alone: the stale worker's beat refreshes b's row.
    assert _holder(conn, owner.job_id) == ("picked", queue_manager_id("b"), 0.0)
    assert q.complete(conn, stale, _never)
    assert q.state(conn, owner.job_id) == "done"
    assert not q.complete(conn, owner, _never)


def test_failures_retry_until_the_executor_gives_up(conn: psycopg.Connection[Any]) -> None:
    """DatabaseRetryEntrypointExecutor(max_attempts=2) runs a failing job three times."""
    q = PgQueuerQueue(retries=2)
    q.enqueue(conn, {})
    attempts = []
    for _ in range(3):
        clock.advance(conn, TICK)
        claim = q.claim(conn, "a", LEASE)
        assert claim is not None
        attempts.append(_attempt(claim))
        assert q.fail(conn, claim, "boom")
        assert q.state(conn, claim.job_id) in ("queued", "failed")
    assert attempts == [0, 1, 2]
    assert claim is not None  # as the loop asserted: mypy does not carry it past the loop
    assert q.state(conn, claim.job_id) == "failed"
    clock.advance(conn, TICK)
    assert q.claim(conn, "a", LEASE) is None


def test_re_picks_do_not_count_against_the_retry_cap(conn: psycopg.Connection[Any]) -> None:
    """A job whose workers keep going silent is picked again and again at attempt 0."""
    q = PgQueuerQueue(retries=2)
    q.enqueue(conn, {})
    clock.advance(conn, TICK)
    tokens = []
    for worker in ("a", "b", "c", "d"):
        claim = q.claim(conn, worker, LEASE)
        assert claim is not None
        tokens.append(_attempt(claim))
        clock.advance(conn, LEASE + TICK)
    assert tokens == [0, 0, 0, 0]


def test_a_late_worker_does_not_get_its_own_job_twice(conn: psycopg.Connection[Any]) -> None:
    """Like QueueManager.run, a re-pick of a job still running here is skipped, not handed out."""
    q = PgQueuerQueue()
    q.enqueue(conn, {})
    clock.advance(conn, TICK)
    held = q.claim(conn, "a", LEASE)
    assert held is not None
    clock.advance(conn, LEASE + TICK)
    assert q.claim(conn, "a", LEASE) is None
    assert q.claim(conn, "b", LEASE) is None  # the re-pick refreshed the heartbeat
    assert q.complete(conn, held, _never)


def test_a_job_picked_away_and_back_is_still_skipped(conn: psycopg.Connection[Any]) -> None:
    """a's job goes to b and back: a still runs it (job_context), so a gets the next job."""
    q = PgQueuerQueue()
    first = q.enqueue(conn, {})
    clock.advance(conn, TICK)
    held = q.claim(conn, "a", LEASE)
    assert held is not None and held.job_id == first
    clock.advance(conn, LEASE + TICK)
    assert q.claim(conn, "b", LEASE) is not None
    clock.advance(conn, LEASE + TICK)
    second = q.enqueue(conn, {})
    clock.advance(conn, TICK)
    again = q.claim(conn, "a", LEASE)
    assert again is not None and again.job_id == second
    assert _holder(conn, first)[:2] == ("picked", queue_manager_id("a"))  # the skipped re-pick
