"""The reference queue's semantics against a real PostgreSQL, one behaviour per test."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from leasecheck.reference.queue import QUERIES, BadInput, ReferenceQueue
from leasecheck.stateful import clock
from leasecheck.stateful.contract import Claim

LEASE = timedelta(seconds=30)


@pytest.fixture
def queue() -> ReferenceQueue:
    """Return the reference queue with its default cap of 3 attempts."""
    return ReferenceQueue()


def _effect(conn: psycopg.Connection[Any]) -> None:
    conn.execute("insert into receipts (job_id, worker, attempt) values (0, 'effect', 0)")


def _receipts(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("select count(*) from receipts").fetchone()
    assert row is not None
    return int(row[0])


def test_claim_takes_the_oldest_job_first(
    db: psycopg.Connection[Any], queue: ReferenceQueue
) -> None:
    """Jobs are handed out in the order they were enqueued."""
    ids = [queue.enqueue(db, {"n": n}) for n in range(3)]
    claimed = [queue.claim(db, "w", LEASE) for _ in ids]
    assert [c.job_id for c in claimed if c] == ids
    assert queue.claim(db, "w", LEASE) is None


def test_claim_skips_a_row_another_transaction_locked(
    db: psycopg.Connection[Any], reference_dsn: str, queue: ReferenceQueue
) -> None:
    """A claim in flight elsewhere does not block or duplicate: the next job is taken."""
    first = queue.enqueue(db, {})
    second = queue.enqueue(db, {})
    with clock.connect(reference_dsn) as other, other.transaction():
        held = queue.claim(other, "a", LEASE)
        assert held is not None and held.job_id == first
        got = queue.claim(db, "b", LEASE)
        assert got is not None and got.job_id == second


def test_claim_takes_back_a_job_whose_lease_ran_out(
    db: psycopg.Connection[Any], queue: ReferenceQueue
) -> None:
    """After the lease expires the job goes to the next claimer with a new attempt."""
    job = queue.enqueue(db, {})
    first = queue.claim(db, "a", LEASE)
    clock.advance(db, LEASE)
    assert queue.claim(db, "b", LEASE) is None, "a lease is held up to and including its end"
    clock.advance(db, timedelta(microseconds=1))
    second = queue.claim(db, "b", LEASE)
    assert first == Claim(job, 1, "a")
    assert second == Claim(job, 2, "b")


def test_heartbeat_extends_only_the_owning_attempt(
    db: psycopg.Connection[Any], queue: ReferenceQueue
) -> None:
    """The owner's heartbeat moves the lease; a stale attempt's heartbeat changes nothing."""
    queue.enqueue(db, {})
    stale = queue.claim(db, "a", LEASE)
    assert stale is not None
    clock.advance(db, LEASE + timedelta(seconds=1))
    owner = queue.claim(db, "b", LEASE)
    assert owner is not None
    before = queue.job(db, int(owner.job_id))
    assert queue.heartbeat(db, stale, LEASE) is False
    assert queue.job(db, int(owner.job_id)) == before
    clock.advance(db, timedelta(seconds=10))
    assert queue.heartbeat(db, owner, LEASE) is True
    after = queue.job(db, int(owner.job_id))
    assert before is not None and after is not None
    assert after["lease_until"] - before["lease_until"] == timedelta(seconds=10)


def test_stale_completion_is_rejected_and_leaves_no_effect(
    db: psycopg.Connection[Any], queue: ReferenceQueue
) -> None:
    """The paused worker of the story wakes after a reclaim: its completion is refused."""
    queue.enqueue(db, {})
    stale = queue.claim(db, "a", LEASE)
    assert stale is not None
    clock.advance(db, LEASE * 2)
    owner = queue.claim(db, "b", LEASE)
    assert owner is not None
    assert queue.complete(db, stale, _effect) is False
    assert _receipts(db) == 0
    assert queue.complete(db, owner, _effect) is True
    assert _receipts(db) == 1
    job = queue.job(db, int(owner.job_id))
    assert job is not None and job["status"] == "done"


def test_late_completion_nobody_reclaimed_is_accepted(
    db: psycopg.Connection[Any], queue: ReferenceQueue
) -> None:
    """A lease that ran out is no reason to refuse the owner if no one took the job."""
    queue.enqueue(db, {})
    owner = queue.claim(db, "a", LEASE)
    assert owner is not None
    clock.advance(db, LEASE * 3)
    assert queue.complete(db, owner, _effect) is True
    assert _receipts(db) == 1


def test_effect_failure_rolls_back_the_completion(
    db: psycopg.Connection[Any], queue: ReferenceQueue
) -> None:
    """If the effect raises, the job is not marked done: completion and effect are one unit."""
    queue.enqueue(db, {})
    owner = queue.claim(db, "a", LEASE)
    assert owner is not None

    def broken(conn: psycopg.Connection[Any]) -> None:
        raise RuntimeError("receipt service down")

    with pytest.raises(RuntimeError):
        queue.complete(db, owner, broken)
    job = queue.job(db, int(owner.job_id))
    assert job is not None and job["status"] == "running"


def test_fail_retries_until_the_cap_then_fails_for_good(db: psycopg.Connection[Any]) -> None:
    """Each failure puts the job back until the last attempt, which marks it failed."""
    queue = ReferenceQueue(max_attempts=2)
    job = queue.enqueue(db, {})
    first = queue.claim(db, "a", LEASE)
    assert first is not None and queue.fail(db, first, "boom") is True
    row = queue.job(db, job)
    assert row is not None and row["status"] == "queued"
    second = queue.claim(db, "a", LEASE)
    assert second is not None and queue.fail(db, second, "boom again") is True
    row = queue.job(db, job)
    assert row is not None and (row["status"], row["attempt"], row["last_error"]) == (
        "failed",
        2,
        "boom again",
    )
    assert queue.claim(db, "a", LEASE) is None


def test_lease_expiry_on_the_last_attempt_fails_the_job(db: psycopg.Connection[Any]) -> None:
    """A job that kills its worker every time is failed for good, not reclaimed forever."""
    queue = ReferenceQueue(max_attempts=2)
    job = queue.enqueue(db, {})
    for _ in range(2):
        assert queue.claim(db, "a", LEASE) is not None
        clock.advance(db, LEASE * 2)
    assert queue.claim(db, "b", LEASE) is None
    row = queue.job(db, job)
    assert row is not None and (row["status"], row["attempt"]) == ("failed", 2)


def test_stale_fail_is_rejected(db: psycopg.Connection[Any], queue: ReferenceQueue) -> None:
    """A stale attempt cannot put back a job another worker is running."""
    queue.enqueue(db, {})
    stale = queue.claim(db, "a", LEASE)
    clock.advance(db, LEASE * 2)
    owner = queue.claim(db, "b", LEASE)
    assert stale is not None and owner is not None
    assert queue.fail(db, stale, "late") is False
    row = queue.job(db, int(owner.job_id))
    assert row is not None and (row["status"], row["locked_by"]) == ("running", "b")


def test_claim_reads_the_partial_index(db: psycopg.Connection[Any], queue: ReferenceQueue) -> None:
    """With many finished jobs, the claim's plan scans jobs_claimable, not the table."""
    db.execute(
        "insert into jobs (payload, status, finished_at)"
        " select '{}', 'done', now() from generate_series(1, 20000)"
    )
    queue.enqueue(db, {})
    db.execute("analyze jobs")
    plan = db.execute(
        "explain " + QUERIES["claim"].text,
        {"worker": "w", "lease": LEASE},
    ).fetchall()
    text = "\n".join(r[0] for r in plan)
    assert "jobs_claimable" in text, text
    assert "Seq Scan on jobs" not in text, text


def test_effect_key_comes_from_the_job_not_the_attempt(queue: ReferenceQueue) -> None:
    """Two attempts of one job share the idempotency key; two jobs do not."""
    assert queue.effect_key(Claim(7, 1, "a")) == queue.effect_key(Claim(7, 2, "b"))
    assert queue.effect_key(Claim(7, 1, "a")) != queue.effect_key(Claim(8, 1, "a"))


def test_nul_in_payload_is_refused_and_nothing_is_inserted(
    db: psycopg.Connection[Any], queue: ReferenceQueue
) -> None:
    """jsonb cannot hold \\u0000: one clear error, and no half-inserted job."""
    with pytest.raises(BadInput, match="u0000"):
        queue.enqueue(db, {"note": "a\x00b"})
    row = db.execute("select count(*) from jobs").fetchone()
    assert row is not None and row[0] == 0


@pytest.mark.parametrize("worker", ["", "   ", "w" * 201])
def test_unusable_worker_names_are_refused(
    db: psycopg.Connection[Any], queue: ReferenceQueue, worker: str
) -> None:
    """Empty, blank and absurdly long worker names get a clear error before any SQL."""
    queue.enqueue(db, {})
    with pytest.raises(BadInput, match="worker name"):
        queue.claim(db, worker, LEASE)


@pytest.mark.parametrize("lease", [timedelta(0), timedelta(seconds=-5)])
def test_non_positive_leases_are_refused(
    db: psycopg.Connection[Any], queue: ReferenceQueue, lease: timedelta
) -> None:
    """A zero or negative lease would hand the job out twice at once: refused."""
    queue.enqueue(db, {})
    with pytest.raises(BadInput, match="lease must be positive"):
        queue.claim(db, "w", lease)
