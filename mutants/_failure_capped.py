"""A queue whose cap counts failure reports, not claims: the reference but for its cap.

dramatiq, pgqueuer, chancy and django-q2 cap retries this way: a failure report counts,
a delivery lost to a crash or an expired lease does not. So claims are
unbounded, and a job is given up for good at its third accepted failure report. It
declares `max_failures = 3` and no cap on claims, and keeps every property
(tests/test_failure_cap.py). The mutants failure-cap-late and failure-cap-counts-claims
are it with one thing wrong each.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim
from mutants._base import claim_with, sql


class FailureCapped(ReferenceQueue):
    name = "failure-capped"
    max_failures = 3
    fail_query = "fail_counted"

    def __init__(self) -> None:
        super().__init__()
        self.max_attempts = None

    def install(self, conn: Connection[Any]) -> None:
        super().install(conn)
        conn.execute(sql("failures_column"))

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        return claim_with("claim_without_cap", conn, worker, lease)

    claim_many = None  # type: ignore[assignment]  # one job a call: the cap is the point
    complete_many = None  # type: ignore[assignment]

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        params = {
            "id": claim.job_id,
            "attempt": claim.token,
            "error": error,
            "cap": self.max_failures,
        }
        return conn.execute(sql(self.fail_query), params).fetchone() is not None
