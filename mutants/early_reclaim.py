"""early-reclaim — a lease that runs out within the next half second is reclaimed now.

Source: "pick up jobs whose lease is about to run out, so they do not wait a whole
poll interval" (or a clock-skew margin applied the wrong way). For the last half
second of a lease, the job is handed to a second worker while its owner still holds
it. Caught by: exclusive-lease (and, when the owner's completion is refused, its
neighbours). Only a clock set just before a lease end reaches it: every other move
of the clock lands on whole seconds from a claim, or on a lease end itself.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue, check_lease, check_worker
from leasecheck.stateful.contract import Claim
from mutants._base import sql


class EarlyReclaim(ReferenceQueue):
    name = "early-reclaim"
    expected = ("exclusive-lease", "owner-progress", "late-owner", "retry-cap")

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        claims = self.claim_many(conn, worker, lease, 1)
        return claims[0] if claims else None

    def claim_many(
        self, conn: Connection[Any], worker: str, lease: timedelta, n: int
    ) -> list[Claim]:
        params = {"worker": check_worker(worker), "lease": check_lease(lease), "n": n}
        rows = conn.execute(sql("claim_early"), params).fetchall()
        return [Claim(job_id=int(r[0]), token=int(r[1]), worker=worker) for r in sorted(rows)]
