"""unfenced-fail — a failure report puts the job back whichever attempt sends it.

Source: error handlers that `update jobs set status = 'queued' where id = $1`. A
stale worker's failure re-queues a job another worker is running.
Caught by: fencing.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim
from mutants._base import sql


class UnfencedFail(ReferenceQueue):
    name = "unfenced-fail"
    expected = ("fencing", "owner-progress")

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        params = {"id": claim.job_id, "error": error}
        return conn.execute(sql("fail_unfenced"), params).fetchone() is not None
