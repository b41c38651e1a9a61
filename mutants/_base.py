"""Shared plumbing for mutants: their named queries, and a claim that runs one."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import check_lease, check_worker
from leasecheck.stateful.contract import Claim
from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("queries.sql"))


def sql(name: str) -> str:
    """Return the text of one of the mutants' named queries."""
    return QUERIES[name].text


def claim_with(query: str, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
    """Run a mutant's claim query (returning id, attempt) the way the reference claims."""
    params = {"worker": check_worker(worker), "lease": check_lease(lease)}
    row = conn.execute(sql(query), params).fetchone()
    return None if row is None else Claim(job_id=int(row[0]), token=int(row[1]), worker=worker)
