"""Simulated time inside PostgreSQL, and the harness's own tables.

The harness schema `leasecheck` shadows `now()` and its siblings; every connection
the harness hands out puts that schema before `pg_catalog` on its search_path, so
SQL and PL/pgSQL that say `now()` run on simulated time, with PostgreSQL's own
meaning: `now()` and `transaction_timestamp()` answer the simulated instant in force
when the transaction began (the same through every statement and savepoint of it,
however long the harness holds it or pauses a call inside it), `statement_timestamp()`
the one when the statement began, `clock_timestamp()` and `timeofday()` the latest.
A move of the clock is stamped with the server's real instant, and each function maps
PostgreSQL's real instant of its transaction or statement to the simulated one then in
force: the harness makes one move at a time, so the real order is the program's.
(The SQL keywords `current_timestamp`, `localtimestamp`, `current_date` and the input
`'now'` bypass the search path: a queue that uses them must supply `advance_clock`.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import Connection, sql

from leasecheck.stateful.engine import stillness
from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("clock.sql"))
SEARCH_PATH = "public, leasecheck, pg_catalog"
EPOCH = datetime(2030, 1, 1, tzinfo=UTC)


def install(conn: Connection[Any]) -> None:
    """Create the harness schema in a database the suite created."""
    with conn.transaction():
        conn.execute(QUERIES["install"].text)
        conn.execute(QUERIES["clock_functions"].text)


@contextmanager
def counting_reads(conn: Connection[Any]) -> Iterator[Callable[[], int]]:
    """Count every read of simulated time while the block runs; yield the count so far.

    The clock functions are swapped for counting ones (volatile, so slower: only the
    clock probe uses this) and put back after, in a database the suite created.
    """
    conn.execute(QUERIES["counting_clock_functions"].text)
    try:
        yield lambda: int(conn.execute(QUERIES["clock_reads"].text).fetchone()[0])  # type: ignore[index]
    finally:
        conn.execute(QUERIES["clock_functions"].text)


def prepare(dsn: str, queue: Any) -> None:
    """Install the harness schema and then `queue` (which may read `now()`) at `dsn`,
    a database the suite created; then keep autovacuum off its tables (`stillness`)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        install(conn)
        use_simulated_time(conn)
        queue.install(conn)
        stillness.autovacuum_off(conn)


def use_simulated_time(conn: Connection[Any]) -> None:
    """Put the harness schema before `pg_catalog` on `conn`, as `connect` does."""
    schemas = [sql.Identifier(name.strip()) for name in SEARCH_PATH.split(",")]
    conn.execute(sql.SQL("set search_path = {}").format(sql.SQL(", ").join(schemas)))


OPTIONS = "-c search_path=" + SEARCH_PATH.replace(" ", "")
"""The connection options under which `now()` is simulated time (a DSN's `options`)."""


def connect(
    dsn: str, cls: type[Connection[Any]] = psycopg.Connection, **kwargs: Any
) -> Connection[Any]:
    """Return an autocommit connection (of class `cls`) whose `now()` is simulated time."""
    return cls.connect(dsn, autocommit=True, options=OPTIONS, **kwargs)


def advance(conn: Connection[Any], delta: timedelta) -> None:
    """Move simulated time forward by `delta` for every connection."""
    conn.execute(QUERIES["advance"].text, {"delta": delta // timedelta(microseconds=1)})


def reset(conn: Connection[Any]) -> None:
    """Put the clock back to the epoch and forget recorded effects."""
    conn.execute(QUERIES["reset"].text)
