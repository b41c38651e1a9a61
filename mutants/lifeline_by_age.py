"""lifeline-by-age — a rescue that goes by the claim's age and ignores heartbeats.

Source: Oban's Lifeline plugin before producer-aware rescue (`rescue_after`: any
executing job attempted longer ago than that is rescued). A slow, live worker that
heartbeats faithfully loses its job anyway once the job runs longer than a lease, and
a second worker runs it while the first still holds an extended lease.
Caught by: exclusive-lease (or fencing / owner-progress / late-owner, by the call that
shows it first).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue, check_lease
from leasecheck.stateful.contract import Claim
from mutants._base import sql


class LifelineByAge(ReferenceQueue):
    name = "lifeline-by-age"
    expected = ("exclusive-lease", "fencing", "owner-progress", "late-owner")

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        conn.execute(sql("lifeline_rescue"), {"lease": check_lease(lease)})
        return super().claim(conn, worker, lease)
