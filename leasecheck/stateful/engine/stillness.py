"""Keep the server's background work from changing what a replayed example meets.

Hypothesis replays an example (to shrink it, or to confirm it) and expects every draw
to come out as before. Autovacuum breaks that: once enough rows have changed it
VACUUMs or ANALYZEs a table at a moment the clock picks, not the program, and the new
statistics give new plans. Seen on the mutant limbo-at-cap, whose claim had a `LIMIT 1
... FOR UPDATE SKIP LOCKED` subquery in FROM: when autovacuum recorded one row for
`jobs` in the middle of an example, the planner ran that subquery once per row and one
claim took several jobs, so the same program answered two ways. With autovacuum made
eager, 9 of 9 runs of its `ci` shard ended in Hypothesis's flaky errors; with it off,
8 of 8 ended in the same counterexample. (The mutant's claim is a CTE now, as the
reference's is: `tests/test_one_claim.py`.) So the suite turns autovacuum off on every
table of the databases it creates, and the embedded server runs without it; statistics
change only where a queue's own reset changes them, at the same point of every example
(`leasecheck.tables.empty` vacuums its tables itself).
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
