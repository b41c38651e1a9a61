"""Keep the server's background work from changing what a replayed example meets.

Hypothesis replays an example (to shrink it, or to confirm it) and expects every draw
to come out as before. Autovacuum breaks that: once enough rows have changed it
ANALYZEs a table, at a moment the clock picks rather than the program, and new
statistics give new plans, so a multi-row UPDATE locks its rows in another order and
a concurrent `FOR UPDATE SKIP LOCKED` skips another row. Measured on the mutant
limbo-at-cap with autovacuum made eager: shrinking ended in `FlakyStrategyDefinition`
in most runs, and in none with autovacuum off. The suite therefore turns autovacuum
off on every table of the databases it creates (the embedded server runs without it
altogether). A queue's own reset keeps its tables small: `leasecheck.tables.empty`
vacuums them itself, at the same point of every example.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from psycopg import Connection

from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("stillness.sql"))


def autovacuum_off(conn: Connection[Any]) -> None:
    """Turn autovacuum off on the tables of `conn`'s database (one the suite created).

    Tables this role does not own, and tables a queue creates later, keep the
    server's setting.
    """
    conn.execute(QUERIES["autovacuum_off"].text)
