"""no-retry-cap — promises a cap of 3 attempts but never enforces it.

Source: a job that kills its worker (OOM, segfault) is reclaimed forever and takes
the fleet down with it. Caught by: retry-cap.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim
from mutants._base import claim_with, sql


class NoRetryCap(ReferenceQueue):
    name = "no-retry-cap"
    expected = ("retry-cap", "no-lost-jobs")

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        return claim_with("claim_without_cap", conn, worker, lease)

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        params = {"id": claim.job_id, "attempt": claim.token, "error": error}
        return conn.execute(sql("fail_without_cap"), params).fetchone() is not None
