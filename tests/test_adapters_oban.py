"""The oban adapter against a real PostgreSQL: round trip, rescue, stale completions.

What a stale completion does depends on the release, and the tests say so per version.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from importlib.metadata import version
from typing import Any

import psycopg
import pytest

pytest.importorskip(
    "oban", reason="oban is not installed (Python >= 3.12): pip install 'oban==0.7.0'"
)

from leasecheck.adapters.oban_queue import ObanQueue
from leasecheck.dbfixtures import janitor
from leasecheck.stateful import clock

LEASE = timedelta(seconds=30)
RELEASE = tuple(int(p) for p in version("oban").split(".")[:3])


@pytest.fixture(scope="module")
def adapter_dsn(leasecheck_server_dsn: str, leasecheck_worker_label: str) -> Iterator[str]:
    """Return a DSN for a database of this module's own with oban installed."""
    with janitor.temporary(leasecheck_server_dsn, f"{leasecheck_worker_label}_oban") as dsn:
        with clock.connect(dsn) as conn:
            clock.install(conn)
            ObanQueue().install(conn)
        yield dsn


@pytest.fixture
def conn(adapter_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """Return a connection on simulated time with the queue and the clock reset."""
    with clock.connect(adapter_dsn) as c:
        ObanQueue().reset(c)
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


def _state(conn: psycopg.Connection[Any], job_id: object) -> str:
    row = conn.execute("select state::text from oban_jobs where id = %s", [job_id]).fetchone()
    assert row is not None
    return str(row[0])


def _rescued_and_refetched(q: ObanQueue, conn: psycopg.Connection[Any]) -> tuple[Any, Any]:
    """Worker a claims, stalls past the lease; b's claim rescues and refetches the job."""
    q.enqueue(conn, {})
    stale = q.claim(conn, "a", LEASE)
    clock.advance(conn, LEASE + timedelta(seconds=1))
    owner = q.claim(conn, "b", LEASE)
    assert stale is not None and owner is not None and owner.job_id == stale.job_id
    return stale, owner


def test_round_trip_enqueue_claim_complete(conn: psycopg.Connection[Any]) -> None:
    """A job is handed out once, completes with its effect, and is not handed out again."""
    q = ObanQueue()
    job = q.enqueue(conn, {"n": 1})
    claim = q.claim(conn, "a", LEASE)
    assert claim is not None and claim.job_id == job and claim.token[0] == 1
    assert q.claim(conn, "b", LEASE) is None
    assert q.complete(conn, claim, _effect)
    assert _state(conn, job) == "completed" and _effects(conn) == 1
    assert q.claim(conn, "b", LEASE) is None


def test_no_rescue_before_the_lease_runs_out(conn: psycopg.Connection[Any]) -> None:
    """The Lifeline rescues by age alone: up to rescue_after the job stays with its worker."""
    q = ObanQueue()
    q.enqueue(conn, {})
    assert q.claim(conn, "a", LEASE) is not None
    clock.advance(conn, LEASE)
    assert q.claim(conn, "b", LEASE) is None


def test_a_rescued_job_comes_back_with_the_next_attempt(conn: psycopg.Connection[Any]) -> None:
    """Past rescue_after the job is fetched again, its attempt counter one higher."""
    stale, owner = _rescued_and_refetched(ObanQueue(), conn)
    assert owner.token[0] == stale.token[0] + 1
    assert owner.token > stale.token


@pytest.mark.skipif(RELEASE < (0, 7, 0), reason="oban < 0.7.0 does not fence acks")
def test_from_0_7_a_stale_completion_is_rejected(conn: psycopg.Connection[Any]) -> None:
    """0.7.0's ack compares attempted_at: the rescued execution's late ack matches nothing."""
    q = ObanQueue()
    stale, owner = _rescued_and_refetched(q, conn)
    assert not q.complete(conn, stale, _effect)
    assert not q.fail(conn, stale, "late")
    assert q.complete(conn, owner, _effect)
    assert _effects(conn) == 1


@pytest.mark.skipif(RELEASE >= (0, 7, 0), reason="from 0.7.0 the ack is fenced (tested above)")
def test_before_0_7_a_stale_completion_wins_over_the_owner(
    conn: psycopg.Connection[Any],
) -> None:
    """Before 0.7.0 the ack matches by id: the stale ack completes the owner's execution."""
    q = ObanQueue()
    stale, owner = _rescued_and_refetched(q, conn)
    assert q.complete(conn, stale, _effect)
    if RELEASE >= (0, 6, 7):  # 'executing' only: the owner's ack now matches nothing
        assert not q.complete(conn, owner, _effect)
        assert _effects(conn) == 1
    else:  # 0.6.3 acks in any state: the job completes twice
        assert q.complete(conn, owner, _effect)
        assert _effects(conn) == 2


def test_a_late_ack_of_a_finished_job(conn: psycopg.Connection[Any]) -> None:
    """From 0.6.7 a second ack of a completed job is refused; 0.6.3 takes it again."""
    q = ObanQueue()
    q.enqueue(conn, {})
    claim = q.claim(conn, "a", LEASE)
    assert claim is not None
    assert q.complete(conn, claim, lambda c: None)
    again = q.complete(conn, claim, _effect)
    assert again is (RELEASE < (0, 6, 7))
    assert _effects(conn) == (1 if again else 0)


def test_failures_retry_until_max_attempts_then_discard(conn: psycopg.Connection[Any]) -> None:
    """max_attempts=3 counts fetches: three failing runs, then the job is discarded."""
    q = ObanQueue(max_attempts=3)
    job = q.enqueue(conn, {})
    attempts = []
    for _ in range(3):
        claim = q.claim(conn, "a", LEASE)
        assert claim is not None
        attempts.append(claim.token[0])
        assert q.fail(conn, claim, "boom")
    assert attempts == [1, 2, 3]
    assert _state(conn, job) == "discarded"
    assert q.claim(conn, "a", LEASE) is None


def test_rescue_at_the_cap_discards(conn: psycopg.Connection[Any]) -> None:
    """A job whose last attempt stalls is discarded by the rescue, not run again."""
    q = ObanQueue(max_attempts=1)
    job = q.enqueue(conn, {})
    assert q.claim(conn, "a", LEASE) is not None
    clock.advance(conn, LEASE + timedelta(seconds=1))
    assert q.claim(conn, "b", LEASE) is None
    assert _state(conn, job) == "discarded"
