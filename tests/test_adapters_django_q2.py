"""The django-q2 adapter against a real PostgreSQL: what its ORM broker and monitor do.

django-q2's lease is the queue row's `lock`, taken by a compare-and-set and never
checked again: the acknowledgement deletes the row by primary key, the result is saved
by task id, and a failure counts toward `max_attempts` whoever reports it. These tests
pin that down with the library's own dequeue, worker and monitor, stale writes included.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest.importorskip(
    "django_q", reason="django-q2 is not installed: pip install 'leasecheck[django-q2]'"
)

from leasecheck import kit
from leasecheck.stateful import clock
from leasecheck.stateful.contract import ContractError, capabilities
from leasecheck.stateful.engine import probe

try:
    from leasecheck.adapters.django_q2_queue import RETRY, DjangoQ2Queue
except ContractError as exc:  # Django configured by another module, without django_q
    pytest.skip(f"run this module in a process of its own: {exc}", allow_module_level=True)

LEASE = timedelta(seconds=RETRY)


adapter_dsn, pool, conn = kit.fixtures(DjangoQ2Queue, "django_q2")


def _never(conn: psycopg.Connection[Any]) -> None:
    raise AssertionError("complete() ran the effect: django-q2 runs the task before")


def _enqueue(q: DjangoQ2Queue, conn: psycopg.Connection[Any], payload: dict[str, Any]) -> str:
    """Enqueue, then move the clock 1 us on, as the machine does: the dequeue takes only
    rows whose lock is strictly before now (orm.py:67), and enqueue writes lock = now."""
    job = q.enqueue(conn, payload)
    clock.advance(conn, timedelta(microseconds=1))
    return job


def _queue_rows(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("select count(*) from django_q_ormq").fetchone()
    assert row is not None
    return int(row[0])


def _result(conn: psycopg.Connection[Any], job: str) -> tuple[bool, int] | None:
    row = conn.execute(
        "select success, attempt_count from django_q_task where id = %s", [job]
    ).fetchone()
    return None if row is None else (bool(row[0]), int(row[1]))


def test_round_trip_enqueue_claim_complete(conn: psycopg.Connection[Any]) -> None:
    """A task is handed out once, its success saved and acknowledged; state follows."""
    q = DjangoQ2Queue()
    job = _enqueue(q, conn, {"n": 1})
    assert q.state(conn, job) == "queued"
    claim = q.claim(conn, "w0", LEASE)
    assert claim is not None and claim.job_id == job
    assert q.state(conn, job) == "running"
    assert q.claim(conn, "w1", LEASE) is None
    assert q.complete(conn, claim, _never)
    assert _result(conn, job) == (True, 1) and _queue_rows(conn) == 0
    assert q.state(conn, job) == "done"
    assert q.claim(conn, "w1", LEASE) is None


def test_the_calls_leave_the_connection_as_they_found_it(conn: psycopg.Connection[Any]) -> None:
    """Idle, in autocommit, on simulated time: Django's transactions were the connection's."""
    q = DjangoQ2Queue()
    _enqueue(q, conn, {})
    claim = q.claim(conn, "w0", LEASE)
    assert claim is not None and q.complete(conn, claim, _never)
    assert conn.autocommit
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert conn.execute("show search_path").fetchone() == (clock.SEARCH_PATH.replace(" ", ""),)


def test_declarations() -> None:
    """No heartbeat or sweeper, several deliveries per cluster, the body before the save."""
    q = DjangoQ2Queue()
    caps = capabilities(q)
    assert q.max_attempts is None  # max_attempts counts saved failures, not deliveries
    assert not caps.heartbeats and caps.maintain is None and caps.state is not None
    assert not caps.one_claim_per_worker and not caps.held_transactions
    assert not caps.transactional_effects and not caps.revokes_expired
    assert caps.ordered_tokens and caps.advance_clock is None


def test_the_lock_is_the_lease_on_simulated_time(conn: psycopg.Connection[Any]) -> None:
    """The dequeue writes lock = now + retry, read on Django's clock at simulated now()."""
    q = DjangoQ2Queue()
    job = _enqueue(q, conn, {})
    clock.advance(conn, timedelta(seconds=5))
    claim = q.claim(conn, "w0", LEASE)
    assert claim is not None
    row = conn.execute("select lock - %s from django_q_ormq", [clock.EPOCH]).fetchone()
    assert row is not None
    assert row[0] == timedelta(seconds=5, microseconds=1) + LEASE  # enqueue moved 1 us
    clock.advance(conn, LEASE)
    assert q.claim(conn, "w1", LEASE) is None  # lock == now: not yet (lock < now)
    clock.advance(conn, timedelta(microseconds=1))
    again = q.claim(conn, "w1", LEASE)
    assert again is not None and again.job_id == job
    assert isinstance(again.token, int) and isinstance(claim.token, int)
    assert again.token > claim.token


def test_the_clock_probe_lets_it_through(conn: psycopg.Connection[Any]) -> None:
    """Its dequeue reads simulated time (through Django's clock), so the probe asks no more."""
    assert probe.clock_problem(DjangoQ2Queue(), conn) is None


def test_a_stale_acknowledgement_deletes_the_live_delivery(conn: psycopg.Connection[Any]) -> None:
    """w0's delivery ran out and w1 took the task; w0's success is saved and its ack
    deletes the row w1 holds, and w1's own success is then discarded (no write)."""
    q = DjangoQ2Queue()
    job = _enqueue(q, conn, {})
    stale = q.claim(conn, "w0", LEASE)
    assert stale is not None
    clock.advance(conn, LEASE + timedelta(seconds=1))
    live = q.claim(conn, "w1", LEASE)
    assert live is not None and live.job_id == job
    assert q.state(conn, job) == "running"
    assert q.complete(conn, stale, _never)  # accepted, with no lease
    assert _queue_rows(conn) == 0  # w1's delivery is gone while w1 runs the task
    assert q.state(conn, job) == "done"
    assert not q.complete(conn, live, _never)  # the current owner's result is dropped
    assert _result(conn, job) == (True, 1)


def test_a_stale_failure_counts_and_at_the_cap_deletes_the_live_row(
    conn: psycopg.Connection[Any],
) -> None:
    """Failures count toward max_attempts (3) whoever reports them: the third, from an
    expired delivery, gives the task up and deletes the row another cluster holds."""
    q = DjangoQ2Queue()
    job = _enqueue(q, conn, {})
    for n in (1, 2):
        claim = q.claim(conn, f"w{n}", LEASE)
        assert claim is not None and q.fail(conn, claim, "boom")
        assert _result(conn, job) == (False, n)
        assert q.state(conn, job) == "queued"  # waiting out its lock for the retry
        assert q.claim(conn, "wx", LEASE) is None
        clock.advance(conn, LEASE + timedelta(seconds=1))
    stale = q.claim(conn, "w3", LEASE)
    assert stale is not None
    clock.advance(conn, LEASE + timedelta(seconds=1))
    live = q.claim(conn, "w4", LEASE)
    assert live is not None and q.state(conn, job) == "running"
    assert q.fail(conn, stale, "late")  # counted: attempt 3 of 3, acknowledged
    assert _result(conn, job) == (False, 3) and _queue_rows(conn) == 0
    assert q.state(conn, job) == "failed"  # while w4 still runs it
    assert q.complete(conn, live, _never)  # w4's success still replaces the failure
    assert _result(conn, job) == (True, 4) and q.state(conn, job) == "done"


def test_a_redelivered_task_runs_again_until_it_fails_three_times(
    conn: psycopg.Connection[Any],
) -> None:
    """A delivery whose cluster died records nothing: it is handed out again, uncounted."""
    q = DjangoQ2Queue()
    job = _enqueue(q, conn, {})
    for _ in range(5):  # five clusters die holding it
        assert q.claim(conn, "w", LEASE) is not None
        clock.advance(conn, LEASE + timedelta(seconds=1))
    for _ in (1, 2, 3):
        claim = q.claim(conn, "w", LEASE)
        assert claim is not None and q.fail(conn, claim, "boom")
        clock.advance(conn, LEASE + timedelta(seconds=1))
    assert _result(conn, job) == (False, 3) and q.state(conn, job) == "failed"
    assert q.claim(conn, "w", LEASE) is None


def test_a_success_whose_save_times_out_is_acknowledged_without_a_result(
    conn: psycopg.Connection[Any], adapter_dsn: str
) -> None:
    """save_task's pruning locks every saved success (select_for_update); when that
    wait times out, the error is logged and swallowed and the monitor acknowledges the
    success anyway: no result, no queue row."""
    q = DjangoQ2Queue()
    first = _enqueue(q, conn, {})
    claim = q.claim(conn, "w0", LEASE)
    assert claim is not None and q.complete(conn, claim, _never)
    job = _enqueue(q, conn, {})
    claim = q.claim(conn, "w1", LEASE)
    assert claim is not None
    with clock.connect(adapter_dsn) as other, other.transaction():
        other.execute("select 1 from django_q_task where id = %s for update", [first])
        conn.execute("set lock_timeout = '50ms'")
        try:
            answer = q.complete(conn, claim, _never)
        finally:
            conn.execute("reset lock_timeout")
    assert not answer  # nothing was saved
    assert _result(conn, job) is None and _queue_rows(conn) == 0
    assert q.state(conn, job) == "failed"


def test_two_clusters_never_take_one_delivery(conn: psycopg.Connection[Any]) -> None:
    """The dequeue's compare-and-set: one row, two reads of it, one update wins."""
    q = DjangoQ2Queue()
    job = _enqueue(q, conn, {})
    assert q.claim(conn, "w0", LEASE) is not None
    assert q.claim(conn, "w1", LEASE) is None
    assert q.state(conn, job) == "running"


COUNTEREXAMPLES = (
    Path(__file__).parent.parent / "matrix/results/counterexamples" / "django-q2-1.11.1"
)


class TestDjangoQ2(kit.AdapterTests):
    """Within a fixed budget the machine stops on fencing (an expired delivery's success);
    with that excused, it finds no overlap, lost job or double completion; the matrix's
    counterexample still breaks fencing."""

    queue = DjangoQ2Queue
    given_up = frozenset({"fencing"})
    counterexamples = COUNTEREXAMPLES
