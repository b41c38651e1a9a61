"""The pg-boss 12.38.1 adapter against a real PostgreSQL: its own plans.js statements.

pg-boss fences every settle and heartbeat to the fetched attempt and fails expired jobs
in its supervisor; the tests show each through the adapter, on simulated time (which
pg-boss reads through its `job_now()`, re-pointed by the adapter at the harness's clock).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from leasecheck import kit
from leasecheck.adapters.pgboss_queue import PgBossQueue
from leasecheck.stateful import clock
from tests import npm_fixtures

LEASE = timedelta(seconds=30)
PAST = LEASE + timedelta(seconds=1)
PIN = "pg-boss@12.38.1"


@pytest.fixture(scope="module")
def pinned() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        npm_fixtures.use(PIN, mp)
        yield


adapter_dsn, pool, conn = kit.fixtures(PgBossQueue, "pgboss", needs=("pinned",))


@pytest.fixture
def q(pinned: None) -> PgBossQueue:
    return PgBossQueue()


def _never(conn: psycopg.Connection[Any]) -> None:
    raise AssertionError("pg-boss's completion must not run the effect")


def _expired(q: PgBossQueue, conn: psycopg.Connection[Any]) -> None:
    clock.advance(conn, PAST)
    q.maintain(conn)


def test_the_package_version_is_the_pin(q: PgBossQueue) -> None:
    assert (q.version, q.name) == ("12.38.1", "pgboss-12_38_1")


def test_job_now_reads_the_simulated_clock(q: PgBossQueue, conn: psycopg.Connection[Any]) -> None:
    """After install, pg-boss's clock function is the harness's: it moves with it."""
    before = conn.execute("select pgboss.job_now()").fetchone()
    clock.advance(conn, timedelta(hours=1))
    after = conn.execute("select pgboss.job_now(), now()").fetchone()
    assert before is not None and after is not None
    assert after[0] - before[0] == timedelta(hours=1) and after[0] == after[1]


def test_round_trip(q: PgBossQueue, conn: psycopg.Connection[Any]) -> None:
    """A job is fetched once, completes, and is not fetched again."""
    job = q.enqueue(conn, {"n": 1})
    assert q.state(conn, job) == "queued"
    claim = q.claim(conn, "w0", LEASE)
    assert claim is not None and claim.job_id == job and claim.token == 0
    assert q.state(conn, job) == "running"
    assert q.claim(conn, "w1", LEASE) is None
    assert q.complete(conn, claim, _never) is True
    assert q.state(conn, job) == "done"
    assert q.complete(conn, claim, _never) is False
    assert q.claim(conn, "w1", LEASE) is None


def test_heartbeats_keep_the_job(q: PgBossQueue, conn: psycopg.Connection[Any]) -> None:
    """A job touched within its heartbeat is not failed by the supervisor."""
    job = q.enqueue(conn, {})
    claim = q.claim(conn, "w0", LEASE)
    assert claim is not None
    for _ in range(4):
        clock.advance(conn, timedelta(seconds=20))
        assert q.heartbeat(conn, claim, LEASE) is True
        q.maintain(conn)
    assert q.state(conn, job) == "running"


def test_a_lost_heartbeat_is_failed_and_the_late_owner_refused(
    q: PgBossQueue, conn: psycopg.Connection[Any]
) -> None:
    """The supervisor retries a job whose heartbeat lapsed; its late settles are refused."""
    job = q.enqueue(conn, {})
    stale = q.claim(conn, "w0", LEASE)
    assert stale is not None
    _expired(q, conn)
    assert q.state(conn, job) == "queued"
    assert q.heartbeat(conn, stale, LEASE) is False
    assert q.complete(conn, stale, _never) is False
    owner = q.claim(conn, "w1", LEASE)
    assert owner is not None and owner.token == stale.token + 1
    assert q.fail(conn, stale, "late") is False
    assert q.complete(conn, stale, _never) is False
    assert q.complete(conn, owner, _never) is True
    assert q.state(conn, job) == "done"


def test_failures_retry_at_once_up_to_the_cap(
    q: PgBossQueue, conn: psycopg.Connection[Any]
) -> None:
    """retry_limit 2: three fetches, then failed for good."""
    job = q.enqueue(conn, {})
    for attempt in (0, 1, 2):
        claim = q.claim(conn, "w0", LEASE)
        assert claim is not None and claim.token == attempt
        assert q.fail(conn, claim, "boom") is True
    assert q.state(conn, job) == "failed"
    assert q.claim(conn, "w0", LEASE) is None


def test_declarations(q: PgBossQueue) -> None:
    assert (q.heartbeats, q.transactional_effects, q.held_transactions) == (True, False, False)
    assert q.revokes_expired and q.max_attempts == 3
