"""fail-gives-up — promises 3 attempts, but the first failure is final.

Source: a retry path that was never wired up; jobs that hit a transient error are
dropped. Caught by: no-lost-jobs.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim
from mutants._base import sql


class FailGivesUp(ReferenceQueue):
    name = "fail-gives-up"
    expected = ("no-lost-jobs",)

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        params = {"id": claim.job_id, "attempt": claim.token, "error": error}
        return conn.execute(sql("fail_gives_up"), params).fetchone() is not None
