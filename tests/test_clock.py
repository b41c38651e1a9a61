"""Simulated time keeps PostgreSQL's meaning: `now()` is the transaction's start,
`statement_timestamp()` the statement's, `clock_timestamp()` the current instant."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from leasecheck.stateful import clock

READ = "select now(), transaction_timestamp(), statement_timestamp(), clock_timestamp()"
SECONDS = timedelta(seconds=1)


@pytest.fixture
def worker(reference_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """Return a second connection on simulated time, as a worker's."""
    with clock.connect(reference_dsn) as conn:
        yield conn


def _at(seconds: float) -> Any:
    return clock.EPOCH + timedelta(seconds=seconds)


def test_now_is_the_transactions_start_through_moves_and_savepoints(
    db: psycopg.Connection[Any], worker: psycopg.Connection[Any]
) -> None:
    clock.advance(db, 5 * SECONDS)
    worker.execute("begin")
    assert worker.execute(READ).fetchone() == (_at(5), _at(5), _at(5), _at(5))
    clock.advance(db, 5 * SECONDS)
    worker.execute("savepoint nested")
    clock.advance(db, 5 * SECONDS)
    assert worker.execute(READ).fetchone() == (_at(5), _at(5), _at(15), _at(15))
    worker.execute("commit")
    assert worker.execute(READ).fetchone() == (_at(15),) * 4


@pytest.mark.parametrize("level", ["repeatable read", "serializable"])
def test_the_clock_moves_under_a_snapshot_too(
    db: psycopg.Connection[Any], worker: psycopg.Connection[Any], level: str
) -> None:
    """A snapshot taken before a move hides the moves' rows, never the current instant."""
    worker.execute(f"begin isolation level {level}")
    worker.execute("select 1")  # the snapshot is taken here
    clock.advance(db, 7 * SECONDS)
    assert worker.execute(READ).fetchone() == (_at(0), _at(0), _at(7), _at(7))
    worker.execute("rollback")


def test_a_statement_keeps_its_start_while_it_waits_on_a_lock(
    db: psycopg.Connection[Any], worker: psycopg.Connection[Any], reference_dsn: str
) -> None:
    """A statement blocked across a move reads the instant it began at, as PostgreSQL's does;
    `clock_timestamp()` in it reads the instant it went on at."""
    lock = "select pg_advisory_xact_lock(77)"
    with clock.connect(reference_dsn) as holder:
        holder.execute("begin")
        holder.execute(lock)
        waits = f"select ({lock}) is null, statement_timestamp(), clock_timestamp()"
        with ThreadPoolExecutor(1) as pool:  # the waiting statement, on a thread of its own
            waiting = pool.submit(lambda: worker.execute(waits).fetchone())
            deadline = 200
            while not db.execute(
                "select cardinality(pg_blocking_pids(%s)) > 0", (worker.info.backend_pid,)
            ).fetchone()[0]:  # type: ignore[index]
                deadline -= 1
                assert deadline, "the statement never waited on the lock"
                db.execute("select pg_sleep(0.01)")  # poll the server, not a wall-clock race
            clock.advance(db, 9 * SECONDS)
            holder.execute("commit")
            row = waiting.result(timeout=30)
    assert row is not None and tuple(row[1:]) == (_at(0), _at(9))


def test_timeofday_reads_the_current_instant(
    db: psycopg.Connection[Any], worker: psycopg.Connection[Any]
) -> None:
    clock.advance(db, 3 * SECONDS)
    assert worker.execute("select timeofday()").fetchone() == (
        "Tue Jan 01 00:00:03.000000 2030 UTC",
    )


def test_reset_goes_back_to_the_epoch(
    db: psycopg.Connection[Any], worker: psycopg.Connection[Any]
) -> None:
    clock.advance(db, 60 * SECONDS)
    clock.reset(db)
    assert worker.execute(READ).fetchone() == (_at(0),) * 4
