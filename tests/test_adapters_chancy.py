"""The chancy adapter against a real PostgreSQL: round trip, recovery, stale completions.

What a stale completion does depends on the release (0.26.0 added claim ids), and the
tests say so per version.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from importlib.metadata import version
from typing import Any

import psycopg
import pytest

pytest.importorskip("chancy", reason="chancy is not installed: pip install 'chancy==0.26.0'")

from leasecheck.adapters.chancy_queue import ChancyQueue
from leasecheck.dbfixtures import janitor
from leasecheck.stateful import clock

LEASE = timedelta(seconds=30)
RELEASE = tuple(int(p) for p in version("chancy").split(".")[:3])


@pytest.fixture(scope="module")
def adapter_dsn(leasecheck_server_dsn: str, leasecheck_worker_label: str) -> Iterator[str]:
    """Return a DSN for a database of this module's own with chancy migrated."""
    with janitor.temporary(leasecheck_server_dsn, f"{leasecheck_worker_label}_chancy") as dsn:
        with clock.connect(dsn) as conn:
            clock.install(conn)
            ChancyQueue().install(conn)
        yield dsn


@pytest.fixture
def conn(adapter_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """Return a connection on simulated time with the queue and the clock reset."""
    with clock.connect(adapter_dsn) as c:
        ChancyQueue().reset(c)
        clock.reset(c)
        yield c


def _effect(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "insert into leasecheck.effects (call_id, job, token, worker) "
        "values ((select count(*) + 1 from leasecheck.effects), 'j', 't', 'w')"
    )


def _effects(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("select count(*) from leasecheck.effects").fetchone()
    assert row is not None
    return int(row[0])


def _job(conn: psycopg.Connection[Any], job_id: object) -> tuple[str, int, int]:
    row = conn.execute(
        "select state, attempts, max_attempts from chancy_jobs where id = %s", [job_id]
    ).fetchone()
    assert row is not None
    return str(row[0]), int(row[1]), int(row[2])


def _recovered_and_refetched(q: ChancyQueue, conn: psycopg.Connection[Any]) -> tuple[Any, Any]:
    """Worker a claims and goes silent past the lease; b's claim recovers and refetches."""
    q.enqueue(conn, {})
    stale = q.claim(conn, "a", LEASE)
    clock.advance(conn, LEASE + timedelta(seconds=1))
    owner = q.claim(conn, "b", LEASE)
    assert stale is not None and owner is not None and owner.job_id == stale.job_id
    return stale, owner


def test_round_trip_enqueue_claim_complete(conn: psycopg.Connection[Any]) -> None:
    """A job is handed out once, completes with its effect, and is not handed out again."""
    q = ChancyQueue()
    job = q.enqueue(conn, {"n": 1})
    claim = q.claim(conn, "a", LEASE)
    assert claim is not None and claim.job_id == job
    assert q.claim(conn, "b", LEASE) is None
    assert q.complete(conn, claim, _effect)
    assert _job(conn, job)[:2] == ("succeeded", 1) and _effects(conn) == 1
    assert q.claim(conn, "b", LEASE) is None


def test_jobs_come_out_in_push_order(conn: psycopg.Connection[Any]) -> None:
    """Jobs pushed within one millisecond are fetched in push order, every time."""
    q = ChancyQueue()
    pushed = [q.enqueue(conn, {"n": n}) for n in range(4)]
    fetched = []
    for _ in pushed:
        claim = q.claim(conn, "a", LEASE)
        assert claim is not None
        fetched.append(claim.job_id)
    assert fetched == pushed


def test_a_heartbeating_worker_keeps_its_job(conn: psycopg.Connection[Any]) -> None:
    """Worker heartbeats every 10 s keep a job from being recovered past the 30 s lease."""
    q = ChancyQueue()
    q.enqueue(conn, {})
    claim = q.claim(conn, "a", LEASE)
    assert claim is not None
    for _ in range(6):
        clock.advance(conn, timedelta(seconds=10))
        assert q.heartbeat(conn, claim, LEASE)
    assert q.claim(conn, "b", LEASE) is None


def test_recovery_hands_the_job_on_and_raises_its_cap(conn: psycopg.Connection[Any]) -> None:
    """A silent worker's job is recovered to the next worker, with max_attempts + 1."""
    stale, owner = _recovered_and_refetched(ChancyQueue(max_attempts=3), conn)
    assert _job(conn, owner.job_id) == ("running", 0, 4)
    assert (owner.token == stale.token) is (RELEASE < (0, 26, 0))


def test_a_heartbeat_is_per_worker_not_per_job(conn: psycopg.Connection[Any]) -> None:
    """The recovered worker's heartbeat is accepted: it names no job."""
    q = ChancyQueue()
    stale, _ = _recovered_and_refetched(q, conn)
    assert q.heartbeat(conn, stale, LEASE)


@pytest.mark.skipif(RELEASE < (0, 26, 0), reason="chancy < 0.26.0 has no claim ids")
def test_from_0_26_a_stale_completion_is_rejected(conn: psycopg.Connection[Any]) -> None:
    """0.26.0 fences updates by claim_id: the recovered execution's late update is dropped."""
    q = ChancyQueue()
    stale, owner = _recovered_and_refetched(q, conn)
    assert not q.complete(conn, stale, _effect)
    assert not q.fail(conn, stale, "late")
    assert q.complete(conn, owner, _effect)
    assert _effects(conn) == 1


@pytest.mark.skipif(RELEASE >= (0, 26, 0), reason="from 0.26.0 updates are fenced (above)")
def test_before_0_26_a_stale_completion_is_written(conn: psycopg.Connection[Any]) -> None:
    """0.25.1 updates by id: both executions' completions are written, the job twice done."""
    q = ChancyQueue()
    stale, owner = _recovered_and_refetched(q, conn)
    assert q.complete(conn, stale, _effect)
    assert q.complete(conn, owner, _effect)
    assert _effects(conn) == 2


def test_a_refused_completion_leaves_no_effect(conn: psycopg.Connection[Any]) -> None:
    """A completion chancy does not write runs no effect (0.26.0 refuses; 0.25.1 writes)."""
    q = ChancyQueue()
    stale, _ = _recovered_and_refetched(q, conn)
    accepted = q.complete(conn, stale, _effect)
    assert accepted is (RELEASE < (0, 26, 0))
    assert _effects(conn) == (1 if accepted else 0)


def test_failures_retry_until_max_attempts(conn: psycopg.Connection[Any]) -> None:
    """max_attempts=3: three failing runs, then the job is failed and not fetched again."""
    q = ChancyQueue(max_attempts=3)
    job = q.enqueue(conn, {})
    for _ in range(3):
        claim = q.claim(conn, "a", LEASE)
        assert claim is not None
        assert q.fail(conn, claim, "boom")
    assert _job(conn, job) == ("failed", 3, 3)
    assert q.claim(conn, "a", LEASE) is None
