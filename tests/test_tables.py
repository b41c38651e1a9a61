"""`tables.empty` leaves tables as TRUNCATE ... RESTART IDENTITY does: a scan without
ORDER BY meets the next example's rows in the same order, and ids start again,
whatever earlier examples left; and it falls back on TRUNCATE where VACUUM cannot
get there."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from leasecheck import tables
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import clock

QUEUE = ReferenceQueue()
Rows = list[tuple[Any, ...]]


def _example(conn: psycopg.Connection[Any], jobs: int) -> Rows:
    """Enqueue, update some jobs twice (new row versions land where the heap has room),
    delete one; return what a scan without ORDER BY meets, with the row positions."""
    for n in range(jobs):
        QUEUE.enqueue(conn, {"n": n})
    conn.execute("update jobs set attempt = attempt + 1 where id % 2 = 0")
    conn.execute("update jobs set status = 'failed' where id % 3 = 0")
    conn.execute("delete from jobs where id = 2")
    conn.execute("insert into receipts (job_id, worker, attempt) select id, 'w', 1 from jobs")
    return conn.execute("select ctid::text, id, attempt, status from jobs").fetchall()


def _after(conn: psycopg.Connection[Any], reset: Any, history: list[int]) -> Rows:
    """Run examples of `history`'s sizes, each after `reset`; return the last one's scan."""
    seen: Rows = []
    for jobs in history:
        reset(conn)
        seen = _example(conn, jobs)
    return seen


def _truncate(conn: psycopg.Connection[Any]) -> None:
    conn.execute("truncate receipts, jobs restart identity")


def _empty(conn: psycopg.Connection[Any]) -> None:
    tables.empty(conn, "receipts", "jobs")


def _pages(conn: psycopg.Connection[Any]) -> tuple[Any, ...] | None:
    return conn.execute("select pg_relation_size('jobs'), pg_relation_size('receipts')").fetchone()


def test_the_next_example_meets_its_rows_as_after_truncate(db: psycopg.Connection[Any]) -> None:
    fresh = _after(db, _truncate, [7])
    assert _after(db, _delete, [40, 3, 25, 7]) != fresh  # DELETE alone: earlier examples show
    assert _after(db, _empty, [40, 3, 25, 7]) == fresh
    assert _pages(db) != (0, 0)
    _empty(db)
    assert _pages(db) == (0, 0)
    receipt = db.execute(
        "insert into receipts (job_id, worker, attempt) values (1, 'w', 1) returning id"
    )
    assert receipt.fetchone() == (1,)


def _delete(conn: psycopg.Connection[Any]) -> None:
    conn.execute("delete from receipts; delete from jobs")


def test_a_snapshot_elsewhere_falls_back_on_truncate(
    db: psycopg.Connection[Any], reference_dsn: str
) -> None:
    fresh = _after(db, _truncate, [7])
    _after(db, _truncate, [30])  # rows from the heap's first position on, kept dead below
    with psycopg.connect(reference_dsn) as other:
        other.execute("set transaction isolation level repeatable read")
        other.execute("select 1")
        assert _after(db, _empty, [7]) == fresh


def test_inside_a_transaction_it_truncates(reference_dsn: str) -> None:
    with clock.connect(reference_dsn) as conn:
        fresh = _after(conn, _truncate, [5])
        _after(conn, _truncate, [20])
        conn.autocommit = False
        assert _after(conn, _empty, [5]) == fresh
        conn.commit()


def test_no_tables_is_bad_input(db: psycopg.Connection[Any]) -> None:
    with pytest.raises(ValueError, match="at least one table"):
        tables.empty(db)


def _planner(conn: psycopg.Connection[Any]) -> Rows:
    return conn.execute(
        "select relname, relpages, reltuples, relallvisible from pg_class"
        " where relname in ('jobs', 'receipts') order by relname"
    ).fetchall()


def test_the_planner_believes_the_same_either_way(
    db: psycopg.Connection[Any], reference_dsn: str
) -> None:
    """TRUNCATE leaves a table's row count unknown to the planner (-1) where a VACUUM of
    the emptied table leaves 0, and a claim's plan follows what it believes: after the
    fallback the next example must meet the planner the usual way leaves."""
    _after(db, _empty, [30])
    usual = _planner(db)
    _after(db, _truncate, [30])
    with psycopg.connect(reference_dsn) as other:  # keeps the deleted rows from VACUUM
        other.execute("set transaction isolation level repeatable read")
        other.execute("select 1")
        _empty(db)
        assert _planner(db) == usual == [("jobs", 0, 0.0, 0), ("receipts", 0, 0.0, 0)]
