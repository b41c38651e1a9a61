"""Empty a queue's tables between examples as TRUNCATE does, at the cost of a DELETE.

An example replayed later must meet its rows as the run did: a scan without ORDER BY
reads them in heap order, and ids show in stories and witnesses. `TRUNCATE ...
RESTART IDENTITY` gives that (fresh, empty files; ids from the start), but it costs
several milliseconds and invalidates every session's cached plans on the tables, so
each worker re-plans its next statements: measured, a third of an example's time.
A DELETE is cheap but leaves dead rows, and where the next rows land then depends on
the examples before. `empty` deletes, restarts the identities, then VACUUMs: with no
transaction open in the database (the harness keeps none between examples) that
removes every dead row and cuts the empty files back to no pages, the state TRUNCATE
leaves. It checks that it got there, and falls back on TRUNCATE when it did not (a
transaction of someone else's holding the dead rows, a connection inside a
transaction, a role that may not vacuum), then VACUUMs the fresh files, so that the
planner believes the same of them either way (the harness's crash of a backend can
still hold dead rows for a moment after it is gone from pg_stat_activity, so which
way a reset goes is a matter of timing).

Queue authors can call it from their `reset(conn)`:

    from leasecheck.tables import empty

    def reset(self, conn):
        empty(conn, "receipts", "jobs")
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Any

import psycopg
from psycopg import Connection, sql

from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("tables.sql"))


def empty(conn: Connection[Any], *tables: str) -> None:
    """Leave `tables` (names as SQL would resolve them) as TRUNCATE ... RESTART IDENTITY does."""
    if not tables:
        raise ValueError("empty() needs at least one table name, e.g. empty(conn, 'jobs')")
    statements = _statements(tables, conn.info.server_version)
    idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    if conn.autocommit and idle:
        conn.execute(statements.delete)
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute(statements.vacuum)  # if not allowed, the check finds the rows
        row = conn.execute(statements.emptied).fetchone()
        if row is not None and row[0]:
            return
    conn.execute(statements.truncate)
    if conn.autocommit and idle:
        # TRUNCATE leaves the planner "row count unknown" (reltuples -1) where the VACUUM
        # leaves 0 rows, and plans follow what it believes: vacuum the fresh, empty files
        # so that either way the next example meets one planner.
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute(statements.vacuum)


class _Statements:
    """The composed statements for one tuple of tables, built once."""

    def __init__(self, tables: tuple[str, ...], server_version: int) -> None:
        names = [sql.Identifier(*name.split(".")) for name in tables]
        listed = sql.SQL(", ").join(names)
        array = sql.Literal(list(tables))
        deletes = [_q("delete").format(name) for name in names]
        self.delete = sql.SQL(";\n").join([*deletes, _q("restart_identities").format(array)])
        options = ["process_toast true"] if server_version >= 140000 else []
        if server_version >= 160000:
            options.append("skip_database_stats")  # no scan of pg_class for datfrozenxid
        self.vacuum = _q("vacuum").format(
            sql.SQL(", ").join(map(sql.SQL, options or ["verbose false"])), listed
        )
        self.emptied = _q("emptied").format(array)
        self.truncate = _q("truncate").format(listed)


def _q(name: str) -> sql.SQL:
    return sql.SQL(QUERIES[name].text)


@functools.lru_cache(maxsize=64)
def _statements(tables: tuple[str, ...], server_version: int) -> _Statements:
    return _Statements(tables, server_version)
