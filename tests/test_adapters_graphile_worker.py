"""The graphile-worker adapters (0.13.0, 0.18.0) against a real PostgreSQL.

Each test runs on both releases, installed from npm (see `tests/npm_fixtures.py`). What
the library does with a stale worker's completion and failure is its own (no check of
the lock holder on completion; a worker-id check on failure), and the tests say so.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from leasecheck import kit
from leasecheck.adapters.graphile_worker_queue import GraphileWorkerQueue
from leasecheck.stateful import clock
from tests import npm_fixtures

LEASE = timedelta(seconds=30)
PAST = LEASE + timedelta(seconds=1)


@pytest.fixture(scope="module", params=["0.18.0", "0.13.0"])
def release(request: pytest.FixtureRequest) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as mp:
        npm_fixtures.use(f"graphile-worker@{request.param}", mp)
        yield request.param


adapter_dsn, pool, conn = kit.fixtures(GraphileWorkerQueue, "gw", needs=("release",))


@pytest.fixture
def q(release: str) -> GraphileWorkerQueue:
    return GraphileWorkerQueue()


def _never(conn: psycopg.Connection[Any]) -> None:
    raise AssertionError("graphile-worker's completion must not run the effect")


def test_the_package_version_is_the_pin(q: GraphileWorkerQueue, release: str) -> None:
    """The SQL came from the pinned package: the helper read its version."""
    assert q.version == release
    assert q.name == f"graphile-worker-{release.replace('.', '_')}"


def test_round_trip(q: GraphileWorkerQueue, conn: psycopg.Connection[Any]) -> None:
    """A job is handed out once, its completion deletes it, and nothing is left."""
    job = q.enqueue(conn, {"n": 1})
    assert q.state(conn, job) == "queued"
    claim = q.claim(conn, "w0", LEASE)
    assert claim is not None and claim.job_id == job and claim.token == 1
    assert q.state(conn, job) == "running"
    assert q.claim(conn, "w1", LEASE) is None
    assert q.complete(conn, claim, _never) is True
    assert q.state(conn, job) == "done"
    assert q.claim(conn, "w1", LEASE) is None


def _expire(q: GraphileWorkerQueue, conn: psycopg.Connection[Any]) -> None:
    clock.advance(conn, PAST)
    maintain = getattr(q, "maintain", None)
    if maintain is not None:
        maintain(conn)


def test_an_expired_lock_is_offered_again_with_the_next_token(
    q: GraphileWorkerQueue, conn: psycopg.Connection[Any]
) -> None:
    """After the lease (graphile-worker's 4 hours), another worker gets the job, attempt 2."""
    job = q.enqueue(conn, {})
    first = q.claim(conn, "w0", LEASE)
    clock.advance(conn, LEASE - timedelta(seconds=1))
    assert q.claim(conn, "w1", LEASE) is None
    _expire(q, conn)
    second = q.claim(conn, "w1", LEASE)
    assert first is not None and second is not None
    assert second.job_id == job and second.token == 2


def test_a_stale_completion_deletes_the_new_owners_job(
    q: GraphileWorkerQueue, conn: psycopg.Connection[Any]
) -> None:
    """complete_job deletes by id alone: the stale worker's completion is accepted."""
    job = q.enqueue(conn, {})
    stale = q.claim(conn, "w0", LEASE)
    _expire(q, conn)
    owner = q.claim(conn, "w1", LEASE)
    assert stale is not None and owner is not None
    assert q.complete(conn, stale, _never) is True
    assert q.state(conn, job) == "done"
    assert q.complete(conn, owner, _never) is False


def test_a_stale_failure_is_refused(q: GraphileWorkerQueue, conn: psycopg.Connection[Any]) -> None:
    """fail_job matches the lock holder: a stale worker's failure does not touch the job."""
    job = q.enqueue(conn, {})
    stale = q.claim(conn, "w0", LEASE)
    _expire(q, conn)
    owner = q.claim(conn, "w1", LEASE)
    assert stale is not None and owner is not None
    assert q.fail(conn, stale, "late") is False
    assert q.state(conn, job) == "running"
    assert q.fail(conn, owner, "boom") is True
    assert q.state(conn, job) == "queued"


def test_failures_retry_after_the_shipped_back_off_up_to_the_cap(
    q: GraphileWorkerQueue, conn: psycopg.Connection[Any]
) -> None:
    """A failed job is due again after exp(attempts) seconds; at 3 attempts it is failed."""
    job = q.enqueue(conn, {})
    for attempt in (1, 2, 3):
        claim = q.claim(conn, "w0", LEASE)
        assert claim is not None and claim.token == attempt
        assert q.fail(conn, claim, "boom") is True
        delay = timedelta(seconds=math.exp(attempt))
        clock.advance(conn, delay - timedelta(milliseconds=10))
        assert q.claim(conn, "w0", LEASE) is None
        clock.advance(conn, timedelta(milliseconds=20))
    assert q.state(conn, job) == "failed"
    assert q.claim(conn, "w0", LEASE) is None


def test_a_crash_on_the_last_attempt_ends_failed(
    q: GraphileWorkerQueue, conn: psycopg.Connection[Any]
) -> None:
    """A job whose worker died holding its last attempt is never handed out again: failed."""
    job = q.enqueue(conn, {})
    for attempt in (1, 2):
        claim = q.claim(conn, "w0", LEASE)
        assert claim is not None and q.fail(conn, claim, "boom")
        clock.advance(conn, timedelta(seconds=math.exp(attempt) + 1))
    assert q.claim(conn, "w0", LEASE) is not None
    assert q.state(conn, job) == "running"
    _expire(q, conn)
    assert q.claim(conn, "w1", LEASE) is None
    assert q.state(conn, job) == "failed"


def test_declarations(q: GraphileWorkerQueue, release: str) -> None:
    """No heartbeats, effects outside the completion; only 0.18 sweeps expired locks."""
    assert (q.heartbeats, q.transactional_effects, q.held_transactions) == (False, False, False)
    assert hasattr(q, "maintain") == (release == "0.18.0")
    assert q.revokes_expired == (release == "0.18.0")
