"""The planner's perturbation: statistics taken while the queue's tables are tiny.

In production autovacuum ANALYZEs a table once enough of its rows changed, and a queue
table is often tiny then (a row or two). The planner then believes the table holds
about one row per page, and a claim written `update ... where id in (select id ...
limit 1 for update skip locked)` runs as a nested-loop semi-join with `jobs` outside:
the pick runs again for every row, and each run locks the next job (odd-jobs #115,
conductor #369). The suite's databases never analyze by themselves
(`stateful.engine.stillness`), so their plans never change; the move `replan` does it on
purpose, at a step of the program, so it replays and shrinks like any other.

Statistics outlive the example, and the next example must meet the plans a fresh
one meets: the first replan of an example saves what the planner read before it
(`Saved`), and the harness's reset puts that back after the queue's own reset
(`undo`): page and row counts restored, column statistics cleared where there were
none. That needs PostgreSQL 18's statistics functions; on an older server the move is
not offered (`supported`), and a run says the situation was never exercised.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psycopg import Connection

from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("replan.sql"))


@dataclass(frozen=True)
class Saved:
    """One table's statistics before the example's first replan."""

    schema: str
    rel: str
    relpages: int
    reltuples: float
    relallvisible: int
    has_columns: bool


def supported(conn: Connection[Any]) -> bool:
    """Return whether the server can put statistics back (PostgreSQL 18 or later)."""
    row = conn.execute(QUERIES["supported"].text).fetchone()
    return bool(row and row[0])


def analyze(conn: Connection[Any], saved: list[Saved]) -> list[str]:
    """ANALYZE the queue's tables as they are now; return their names.

    `saved` is filled with what the planner read before, on the example's first call."""
    tables = [Saved(*row) for row in conn.execute(QUERIES["tables"].text).fetchall()]
    if not saved:
        saved.extend(tables)
    for t in tables:
        statement = conn.execute(QUERIES["analyze"].text, {"schema": t.schema, "rel": t.rel})
        row = statement.fetchone()
        assert row is not None
        conn.execute(row[0])
    return [f"{t.schema}.{t.rel}" for t in tables]


def forget_columns(conn: Connection[Any]) -> None:
    """Clear the column statistics the queue's tables hold, as a fresh install has none.

    `undo` clears what a replan left only where the table had none before; column
    statistics from before the run (an ANALYZE by an earlier test of the same database)
    cannot be put back, so every example after the run's first replan met other plans
    than those before it: one program, two answers. A run starts from none instead."""
    for t in [Saved(*row) for row in conn.execute(QUERIES["tables"].text).fetchall()]:
        if t.has_columns:
            conn.execute(QUERIES["clear_columns"].text, {"schema": t.schema, "rel": t.rel})


def undo(conn: Connection[Any], saved: list[Saved]) -> None:
    """Put back the statistics `analyze` saved (after the queue's reset), and forget them."""
    for t in saved:
        params = {
            "schema": t.schema,
            "rel": t.rel,
            "relpages": t.relpages,
            "reltuples": t.reltuples,
            "relallvisible": t.relallvisible,
        }
        conn.execute(QUERIES["restore_relation"].text, params)
        if not t.has_columns:
            conn.execute(QUERIES["clear_columns"].text, {"schema": t.schema, "rel": t.rel})
    saved.clear()
