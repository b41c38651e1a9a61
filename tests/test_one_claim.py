"""A claim hands out one job whatever the planner's statistics say.

`update jobs ... from (select id ... limit 1 for update skip locked) as next` looks
like a one-job claim, but under a nested-loop plan PostgreSQL runs that subquery again
for every row of `jobs`; each run's lock step passes over the row this same statement
has just updated (with or without SKIP LOCKED) and takes the next, so one call takes
several jobs and returns them all (a caller's `fetchone` keeps one; the others sit
running under a lease nobody holds). `where id in (select ... limit 1 ...)` does the
same; a CTE or `where id = (select ...)` runs the pick once. The planner chooses that
plan when the statistics say `jobs` holds about one row, as they did after an
autovacuum mid-example: three mutants whose claim had that shape took two and three
jobs at a time, which made their runs irreproducible and gave them a second bug besides
their own. Each claim here meets those statistics and must take exactly one job.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import mutants
from leasecheck.dbfixtures import janitor
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import clock, contract

SEVERAL = {"claims-two": 2, "in-subquery-claim": 3, "from-subquery-claim": 3}
"""Mutants whose one bug is a claim that takes several jobs: how many of the three."""
QUEUES = {
    "reference": "leasecheck.reference.queue:ReferenceQueue",
    **{name: spec for name, spec in mutants.ALL.items() if name not in SEVERAL},
}
PICK = "select id from jobs where status = 'queued' order by id limit 1 for update skip locked"
SET = (
    "set status = 'running', attempt = jobs.attempt + 1, locked_by = 'w',"
    " lease_until = now() + interval '30 seconds'"
)
SHAPES = {
    "subquery in from": f"update jobs {SET} from ({PICK}) as next where jobs.id = next.id",
    "in (subquery)": f"update jobs {SET} where id in ({PICK})",
}
"""Two one-job claims that are not: each may run its pick once per row."""


@pytest.fixture(scope="module")
def one_row_statistics(leasecheck_server_dsn: str, leasecheck_worker_label: str) -> Iterator[str]:
    """Return a database of its own with the reference schema (its statistics get changed)."""
    with janitor.temporary(leasecheck_server_dsn, f"{leasecheck_worker_label}_one") as dsn:
        clock.prepare(dsn, ReferenceQueue())
        yield dsn


def _three_jobs_seen_as_one(conn: psycopg.Connection[Any]) -> None:
    """Leave three queued jobs in a table whose statistics say it holds one."""
    conn.execute("delete from receipts; delete from jobs")
    conn.execute("vacuum jobs")
    conn.execute("insert into jobs (payload) values ('{}')")
    conn.execute("vacuum analyze jobs")
    conn.execute("insert into jobs (payload) values ('{}'), ('{}')")


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_pick_run_per_row_takes_several_jobs(one_row_statistics: str, shape: str) -> None:
    """The hazard is real on this server: these shapes take more than one job."""
    with clock.connect(one_row_statistics) as conn:
        _three_jobs_seen_as_one(conn)
        taken = conn.execute(f"{SHAPES[shape]} returning jobs.id").fetchall()
    assert len(taken) > 1


@pytest.mark.parametrize("name", sorted(QUEUES))
def test_a_claim_takes_one_job(one_row_statistics: str, name: str) -> None:
    """The reference's claim and every mutant's take one job of three."""
    queue = contract.load(QUEUES[name])
    with clock.connect(one_row_statistics) as conn:
        _three_jobs_seen_as_one(conn)
        claim = queue.claim(conn, "w", timedelta(seconds=30))
        running = conn.execute("select count(*) from jobs where status = 'running'").fetchone()
    assert claim is not None
    assert running == (1,), f"{name}'s claim took {running} jobs"


@pytest.mark.parametrize("name", sorted(SEVERAL))
def test_a_several_job_mutant_takes_several(one_row_statistics: str, name: str) -> None:
    """claims-two always takes two; in-subquery-claim and from-subquery-claim take all three
    under these statistics (a nested loop runs their pick once per row), and hand out one."""
    queue = contract.load(mutants.ALL[name])
    with clock.connect(one_row_statistics) as conn:
        _three_jobs_seen_as_one(conn)
        claim = queue.claim(conn, "w", timedelta(seconds=30))
        running = conn.execute("select count(*) from jobs where status = 'running'").fetchone()
    assert claim is not None
    assert running == (SEVERAL[name],), f"{name}'s claim took {running} jobs"
