"""no-retry-cap — promises a cap of 3 attempts but never enforces it.

Source: a job that kills its worker (OOM, segfault) is reclaimed forever and takes
the fleet down with it. Caught by: retry-cap.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from mutants._base import sql
from reference.queue import ReferenceQueue, check_lease, check_worker
from stateful.contract import Claim


class NoRetryCap(ReferenceQueue):
    name = "no-retry-cap"
    expected = ("retry-cap", "no-lost-jobs")

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        params = {"worker": check_worker(worker), "lease": check_lease(lease)}
        row = conn.execute(sql("claim_without_cap"), params).fetchone()
        return None if row is None else Claim(job_id=int(row[0]), token=int(row[1]), worker=worker)

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        params = {"id": claim.job_id, "attempt": claim.token, "error": error}
        return conn.execute(sql("fail_without_cap"), params).fetchone() is not None
