"""The procrastinate adapter against a real PostgreSQL: the kit's tests, then what the
library does with heartbeats, stalls, stale calls and retries."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

pytest.importorskip(
    "procrastinate", reason="procrastinate is not installed: pip install 'procrastinate==3.10.*'"
)


from leasecheck import kit
from leasecheck.adapters.procrastinate_queue import ProcrastinateQueue
from leasecheck.stateful import clock
from leasecheck.stateful.contract import capabilities

LEASE = timedelta(seconds=30)
GIVEN_UP = frozenset({"fencing", "exclusive-lease", "owner-progress", "late-owner"})
"""What procrastinate does not promise: no fencing token (so a stale worker's retry puts
back a job someone else holds), heartbeats per worker that a starting worker prunes
(a worker that stood still 30 s beats into nothing afterwards, though nobody took its
job); its retry cap counts failures, not fetches, so retry-cap is not judged (see the
adapter's docstring)."""


adapter_dsn, pool, conn = kit.fixtures(ProcrastinateQueue, "procrastinate")


class TestProcrastinate(kit.AdapterTests):
    queue = ProcrastinateQueue
    given_up = GIVEN_UP


def _never(conn: psycopg.Connection[Any]) -> None:
    raise AssertionError("complete() called the effect; procrastinate runs the task before")


def _status(conn: psycopg.Connection[Any], job_id: object) -> str:
    row = conn.execute("select status from procrastinate_jobs where id = %s", [job_id]).fetchone()
    assert row is not None
    return str(row[0])


def _stall(conn: psycopg.Connection[Any]) -> None:
    """Let the lease run out with no heartbeat from anyone."""
    clock.advance(conn, LEASE + timedelta(seconds=1))


def test_a_completed_job_is_succeeded_and_its_first_token_is_0(
    conn: psycopg.Connection[Any],
) -> None:
    """What the kit's round trip leaves out: procrastinate's own status and token."""
    q = ProcrastinateQueue()
    job = q.enqueue(conn, {"n": 1})
    claim = q.claim(conn, "a", LEASE)
    assert claim is not None and claim.token == 0
    assert q.complete(conn, claim, _never)
    assert _status(conn, job) == "succeeded"


def test_the_effect_runs_outside_the_completion() -> None:
    """procrastinate records the outcome after the task ran: the machine runs the effect."""
    q = ProcrastinateQueue()
    assert capabilities(q).transactional_effects is False
    assert capabilities(q).maintain is not None and capabilities(q).state is not None
    assert capabilities(q).revokes_expired is False


def test_a_live_worker_keeps_its_job(conn: psycopg.Connection[Any]) -> None:
    """Heartbeats every 10 s keep a job from being recovered past the 30 s lease."""
    q = ProcrastinateQueue()
    job = q.enqueue(conn, {})
    claim = q.claim(conn, "a", LEASE)
    assert claim is not None
    for _ in range(6):
        clock.advance(conn, timedelta(seconds=10))
        assert q.heartbeat(conn, claim, LEASE)
        q.maintain(conn)
    assert q.state(conn, job) == "running"
    assert q.claim(conn, "b", LEASE) is None


def test_claims_do_not_recover_stalled_jobs(conn: psycopg.Connection[Any]) -> None:
    """Recovery is the periodic task's (maintain), never a side effect of fetching."""
    q = ProcrastinateQueue()
    job = q.enqueue(conn, {})
    assert q.claim(conn, "a", LEASE) is not None
    _stall(conn)
    assert q.claim(conn, "b", LEASE) is None
    assert q.state(conn, job) == "running"


def test_a_silent_worker_loses_its_job_with_a_higher_attempt(
    conn: psycopg.Connection[Any],
) -> None:
    """Past the lease without a heartbeat, the sweep puts the job back for the next worker."""
    q = ProcrastinateQueue()
    job = q.enqueue(conn, {})
    first = q.claim(conn, "a", LEASE)
    _stall(conn)
    q.maintain(conn)
    assert q.state(conn, job) == "queued"
    second = q.claim(conn, "b", LEASE)
    assert first is not None and second is not None
    assert second.job_id == job and second.token == 1


def test_an_idle_worker_keeps_beating_and_is_not_pruned(conn: psycopg.Connection[Any]) -> None:
    """A worker holding nothing still heartbeats (its loop runs idle): a starting worker
    does not prune it, and its next fetch works."""
    q = ProcrastinateQueue()
    assert q.claim(conn, "a", LEASE) is None  # a starts, finds nothing
    clock.advance(conn, timedelta(seconds=95))
    assert q.claim(conn, "b", LEASE) is None  # b starts: prunes stalled workers
    job = q.enqueue(conn, {})
    claim = q.claim(conn, "a", LEASE)
    assert claim is not None and claim.job_id == job


def test_a_worker_silent_while_it_holds_a_job_is_pruned_and_cannot_fetch(
    conn: psycopg.Connection[Any],
) -> None:
    """What procrastinate does to a worker that stood still 30 s holding a job while another
    started: its row is pruned, its heartbeat updates nothing, and fetch_job violates the
    foreign key to procrastinate_workers (Worker never re-registers)."""
    q = ProcrastinateQueue()
    q.enqueue(conn, {})
    stale = q.claim(conn, "a", LEASE)
    assert stale is not None
    _stall(conn)
    assert q.claim(conn, "b", LEASE) is None  # b starts and prunes a
    assert not q.heartbeat(conn, stale, LEASE)
    q.enqueue(conn, {})
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        q.claim(conn, "a", LEASE)


def test_a_stale_completion_is_accepted_and_the_owner_refused(
    conn: psycopg.Connection[Any],
) -> None:
    """procrastinate does not fence: the paused worker's late finish wins over the new owner."""
    q = ProcrastinateQueue()
    job = q.enqueue(conn, {})
    stale = q.claim(conn, "a", LEASE)
    _stall(conn)
    q.maintain(conn)
    owner = q.claim(conn, "b", LEASE)
    assert stale is not None and owner is not None and owner.job_id == job
    assert q.complete(conn, stale, _never)
    assert not q.complete(conn, owner, _never)
    assert q.state(conn, job) == "done"


def test_after_recovery_a_late_failure_is_refused_and_a_late_success_taken(
    conn: psycopg.Connection[Any],
) -> None:
    """With nobody holding the recovered job, retry_job (needs doing or failed) refuses the
    late owner's failure while finish_job (todo or doing) takes its success."""
    q = ProcrastinateQueue()
    job = q.enqueue(conn, {})
    late = q.claim(conn, "a", LEASE)
    assert late is not None
    _stall(conn)
    q.maintain(conn)
    assert q.state(conn, job) == "queued"
    assert not q.fail(conn, late, "boom")
    assert q.complete(conn, late, _never)
    assert q.state(conn, job) == "done"


def test_a_heartbeat_holds_only_the_execution_its_worker_still_runs(
    conn: psycopg.Connection[Any],
) -> None:
    """The heartbeat is per worker: it still lands for a stalled worker that was not
    pruned, but holds nothing once the job was recovered and fetched by another."""
    q = ProcrastinateQueue()
    assert q.claim(conn, "b", LEASE) is None  # b starts before a's job exists
    q.enqueue(conn, {})
    stale = q.claim(conn, "a", LEASE)
    _stall(conn)
    q.maintain(conn)
    assert stale is not None and not q.heartbeat(conn, stale, LEASE)  # recovered: todo
    owner = q.claim(conn, "b", LEASE)
    assert owner is not None and owner.job_id == stale.job_id
    assert not q.heartbeat(conn, stale, LEASE)  # b's now
    assert q.heartbeat(conn, owner, LEASE)
    row = conn.execute(
        "select w.last_heartbeat = now() from procrastinate_workers w "
        "join leasecheck_procrastinate_worker m on m.worker_id = w.id where m.name = 'a'"
    ).fetchone()
    assert row == (True,)  # a's heartbeat landed all the same


def test_a_refused_completion_is_reported(conn: psycopg.Connection[Any]) -> None:
    """finish_job raises on a finished job; complete() reports the refusal as False."""
    q = ProcrastinateQueue()
    job = q.enqueue(conn, {})
    claim = q.claim(conn, "a", LEASE)
    assert claim is not None
    assert q.complete(conn, claim, _never)
    assert not q.complete(conn, claim, _never)
    assert q.state(conn, job) == "done"


def test_failures_retry_until_the_strategy_gives_up(conn: psycopg.Connection[Any]) -> None:
    """RetryStrategy(max_attempts=2) runs a failing job three times, then fails it for good."""
    q = ProcrastinateQueue(retries=2)
    job = q.enqueue(conn, {})
    tokens = []
    for _ in range(3):
        claim = q.claim(conn, "a", LEASE)
        assert claim is not None
        tokens.append(claim.token)
        assert q.fail(conn, claim, "boom")
    assert tokens == [0, 1, 2]
    assert _status(conn, job) == "failed" and q.state(conn, job) == "failed"
    assert q.claim(conn, "a", LEASE) is None


def test_stall_recovery_is_not_capped(conn: psycopg.Connection[Any]) -> None:
    """The documented recovery retries a stalled job past RetryStrategy's cap."""
    q = ProcrastinateQueue(retries=2)
    q.enqueue(conn, {})
    tokens = []
    for worker in ("a", "b", "c", "d"):
        claim = q.claim(conn, worker, LEASE)
        assert claim is not None
        tokens.append(claim.token)
        _stall(conn)
        q.maintain(conn)
    assert tokens == [0, 1, 2, 3]
    assert q.max_attempts is None  # the strategy's cap bounds failures, not fetches
