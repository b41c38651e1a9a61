"""The django-tasks-db adapter against a real PostgreSQL: round trip, no recovery, state.

django-tasks-db hands a task out once and never again: no lease, heartbeat, sweeper
or retry. So a task whose worker died stays RUNNING for good (django-tasks-db#5), and
the machine finds exactly that: no-lost-jobs, and nothing else.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest.importorskip(
    "django_tasks_db",
    reason="django-tasks-db is not installed: pip install 'leasecheck[django-tasks-db]'",
)

from leasecheck import kit
from leasecheck.adapters.django_tasks_db_queue import DjangoTasksDbQueue
from leasecheck.stateful import clock
from leasecheck.stateful.contract import capabilities
from leasecheck.stateful.engine import probe

LEASE = timedelta(seconds=30)


adapter_dsn, pool, conn = kit.fixtures(DjangoTasksDbQueue, "django_tasks_db")


def _never(conn: psycopg.Connection[Any]) -> None:
    raise AssertionError("complete() ran the effect: django-tasks-db runs the task before")


def _row(conn: psycopg.Connection[Any], job_id: object) -> tuple[str, list[str], str]:
    row = conn.execute(
        "select status, worker_ids, exception_class_path "
        "from django_tasks_database_dbtaskresult where id = %s",
        [job_id],
    ).fetchone()
    assert row is not None
    return str(row[0]), list(row[1]), str(row[2])


def test_round_trip_enqueue_claim_complete(conn: psycopg.Connection[Any]) -> None:
    """A task is handed out once, completes, and is not handed out again; state follows."""
    q = DjangoTasksDbQueue()
    job = q.enqueue(conn, {"n": 1})
    assert q.state(conn, job) == "queued"
    claim = q.claim(conn, "w0", LEASE)
    assert claim is not None and claim.job_id == job and claim.token == 1
    assert q.state(conn, job) == "running"
    assert q.claim(conn, "w1", LEASE) is None
    assert q.complete(conn, claim, _never)
    assert _row(conn, job) == ("SUCCESSFUL", ["w0"], "")
    assert q.state(conn, job) == "done"
    assert q.claim(conn, "w1", LEASE) is None


def test_the_calls_leave_the_connection_as_they_found_it(conn: psycopg.Connection[Any]) -> None:
    """Idle, in autocommit, on simulated time: Django's transactions were the connection's."""
    q = DjangoTasksDbQueue()
    job = q.enqueue(conn, {})
    claim = q.claim(conn, "w0", LEASE)
    assert claim is not None
    assert q.complete(conn, claim, _never) and q.state(conn, job) == "done"
    assert conn.autocommit
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert conn.execute("show search_path").fetchone() == (clock.SEARCH_PATH.replace(" ", ""),)


def test_declarations() -> None:
    """No heartbeat, no sweeper, one task at a time, the body outside the result's save."""
    q = DjangoTasksDbQueue()
    caps = capabilities(q)
    assert q.max_attempts == 1
    assert not caps.heartbeats and caps.maintain is None and caps.state is not None
    assert caps.one_claim_per_worker and not caps.held_transactions
    assert not caps.transactional_effects and not caps.revokes_expired
    assert caps.advance_clock is None  # its clock is Django's, run at simulated now()


def test_its_timestamps_are_simulated_time(conn: psycopg.Connection[Any]) -> None:
    """Django's clock answers the call's now(): enqueued, started and finished on it."""
    q = DjangoTasksDbQueue()
    job = q.enqueue(conn, {})
    clock.advance(conn, timedelta(seconds=5))
    claim = q.claim(conn, "w0", LEASE)
    assert claim is not None
    clock.advance(conn, timedelta(seconds=7))
    assert q.complete(conn, claim, _never)
    stamps = conn.execute(
        "select enqueued_at - %s, started_at - %s, finished_at - %s "
        "from django_tasks_database_dbtaskresult where id = %s",
        [clock.EPOCH, clock.EPOCH, clock.EPOCH, job],
    ).fetchone()
    assert stamps == (timedelta(0), timedelta(seconds=5), timedelta(seconds=12))


def test_the_clock_probe_lets_it_through(conn: psycopg.Connection[Any]) -> None:
    """Its claim reads simulated time (through Django's clock), so the probe asks no more."""
    assert probe.clock_problem(DjangoTasksDbQueue(), conn) is None


def test_tasks_come_out_in_enqueue_order(conn: psycopg.Connection[Any]) -> None:
    """Equal priority: the oldest enqueued first (the model's ordering); tasks enqueued at
    one simulated instant come out as they were inserted, every time."""
    q = DjangoTasksDbQueue()
    enqueued = [q.enqueue(conn, {"n": n}) for n in range(4)]
    claimed = []
    for worker in ("w0", "w1", "w2", "w3"):
        claim = q.claim(conn, worker, LEASE)
        assert claim is not None
        claimed.append(claim.job_id)
    assert claimed == enqueued


def test_a_task_whose_worker_died_is_never_handed_out_again(
    conn: psycopg.Connection[Any],
) -> None:
    """No lease: however long nothing is heard of w0, its task stays RUNNING, unclaimed."""
    q = DjangoTasksDbQueue()
    job = q.enqueue(conn, {})
    assert q.claim(conn, "w0", LEASE) is not None
    clock.advance(conn, timedelta(days=7))
    assert q.claim(conn, "w1", LEASE) is None
    assert q.claim(conn, "w0", LEASE) is None  # restarted under the same worker id
    assert _row(conn, job)[:2] == ("RUNNING", ["w0"])
    assert q.state(conn, job) == "running"


def test_a_late_completion_is_accepted(conn: psycopg.Connection[Any]) -> None:
    """The result is saved by id, whenever it comes: nothing to refuse it with."""
    q = DjangoTasksDbQueue()
    job = q.enqueue(conn, {})
    claim = q.claim(conn, "w0", LEASE)
    assert claim is not None
    clock.advance(conn, LEASE * 10)
    assert q.complete(conn, claim, _never)
    assert q.state(conn, job) == "done"


def test_a_failure_is_final(conn: psycopg.Connection[Any]) -> None:
    """No retries: the task's exception is recorded and the task is failed for good."""
    q = DjangoTasksDbQueue()
    job = q.enqueue(conn, {})
    claim = q.claim(conn, "w0", LEASE)
    assert claim is not None
    assert q.fail(conn, claim, "boom")
    status, _, raised = _row(conn, job)
    assert (status, raised) == ("FAILED", "leasecheck.adapters.django_tasks_db_queue.JobFailed")
    assert q.state(conn, job) == "failed"
    assert q.claim(conn, "w1", LEASE) is None


def test_a_lost_connection_reads_as_one(conn: psycopg.Connection[Any], adapter_dsn: str) -> None:
    """Django's wrapper is taken off: the harness sees psycopg's OperationalError."""
    q = DjangoTasksDbQueue()
    q.enqueue(conn, {})
    with clock.connect(adapter_dsn) as worker:
        with clock.connect(adapter_dsn) as monitor:
            monitor.execute("select pg_terminate_backend(%s)", [worker.info.backend_pid])
        with pytest.raises(psycopg.OperationalError):
            q.claim(worker, "w0", LEASE)


def test_state_of_an_unknown_task_is_a_lookup_error(conn: psycopg.Connection[Any]) -> None:
    """The backend's TaskResultDoesNotExist, as the contract names it."""
    with pytest.raises(LookupError):
        DjangoTasksDbQueue().state(conn, "00000000-0000-0000-0000-000000000000")


COUNTEREXAMPLES = (
    Path(__file__).parent.parent / "matrix/results/counterexamples/django-tasks-db-0.13.0"
)


class TestDjangoTasksDb(kit.AdapterTests):
    """Within a fixed budget the machine stops on no-lost-jobs (a crashed worker's task);
    with that excused, it finds no double completion, overlap or refusal; the matrix's
    counterexample still breaks no-lost-jobs."""

    queue = DjangoTasksDbQueue
    given_up = frozenset({"no-lost-jobs"})
    counterexamples = COUNTEREXAMPLES
