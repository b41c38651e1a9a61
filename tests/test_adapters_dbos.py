"""The DBOS adapter against a real PostgreSQL, on DBOS's own engine: the kit's tests, the
token that fences an outcome, recovery of silent executors only, and the dead letter."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

pytest.importorskip("dbos", reason="dbos is not installed: pip install 'dbos==3.4.0'")

from psycopg.conninfo import make_conninfo

from leasecheck import kit
from leasecheck.adapters.dbos_queue import Client, DBOSQueue
from leasecheck.stateful import clock

LEASE = timedelta(seconds=30)

adapter_dsn, pool, conn = kit.fixtures(DBOSQueue, "dbos")


class TestDBOS(kit.AdapterTests):
    queue = DBOSQueue


@pytest.fixture
def client(conn: psycopg.Connection[Any], adapter_dsn: str) -> Iterator[Client]:
    """One executor's system database, on simulated time."""
    opened = DBOSQueue().connect("w", make_conninfo(adapter_dsn, options=clock.OPTIONS))
    try:
        yield opened
    finally:
        opened.sys_db.destroy()


def _status(conn: psycopg.Connection[Any], job: str) -> tuple[str, int]:
    row = conn.execute(
        "select status, recovery_attempts from dbos.workflow_status where workflow_uuid = %s",
        [job],
    ).fetchone()
    assert row is not None
    return str(row[0]), int(row[1])


def test_a_recovered_executors_outcome_is_refused_and_the_new_owners_lands(
    conn: psycopg.Connection[Any], client: Client
) -> None:
    """The lease runs out, recovery re-enqueues, another executor claims: the first
    executor's token no longer owns the workflow, the second's does."""
    q = DBOSQueue()
    job = q.enqueue(conn, {"n": 1})
    first = q.claim(client, "w0", LEASE)
    assert first is not None and first.job_id == job
    clock.advance(conn, LEASE + timedelta(seconds=1))
    q.maintain(client)
    assert _status(conn, job)[0] == "ENQUEUED"
    second = q.claim(client, "w1", LEASE)
    assert second is not None and second.token != first.token
    assert q.complete(client, first, lambda c: None) is False
    assert q.fail(client, first, "late") is False
    assert q.complete(client, second, lambda c: None) is True
    assert q.state(conn, job) == "done"


def test_recovery_leaves_an_executor_whose_pings_go_on(
    conn: psycopg.Connection[Any], client: Client
) -> None:
    q = DBOSQueue()
    job = q.enqueue(conn, {"n": 1})
    claim = q.claim(client, "w0", LEASE)
    assert claim is not None
    clock.advance(conn, timedelta(seconds=20))
    q.heartbeat(client, claim, LEASE)
    clock.advance(conn, timedelta(seconds=20))
    q.maintain(client)
    assert _status(conn, job)[0] == "PENDING"
    assert q.complete(client, claim, lambda c: None) is True


def test_the_claim_past_the_cap_dead_letters_the_workflow(
    conn: psycopg.Connection[Any], client: Client
) -> None:
    """Each claim counts a dispatch; the one after max_recovery_attempts + 1 dispatches
    moves the workflow off the queue and hands nothing out."""
    q = DBOSQueue(max_recovery_attempts=1)
    job = q.enqueue(conn, {"n": 1})
    for attempt in (1, 2):
        assert q.claim(client, f"w{attempt}", LEASE) is not None
        assert _status(conn, job) == ("PENDING", attempt)
        clock.advance(conn, LEASE + timedelta(seconds=1))
        q.maintain(client)
    assert q.claim(client, "w3", LEASE) is None
    assert _status(conn, job) == ("MAX_RECOVERY_ATTEMPTS_EXCEEDED", 3)
    assert q.state(conn, job) == "failed"


def test_a_failure_gives_the_workflow_up(conn: psycopg.Connection[Any], client: Client) -> None:
    q = DBOSQueue()
    job = q.enqueue(conn, {"n": 1})
    claim = q.claim(client, "w0", LEASE)
    assert claim is not None
    assert q.fail(client, claim, "boom") is True
    assert q.state(conn, job) == "failed"
    assert q.claim(client, "w1", LEASE) is None
