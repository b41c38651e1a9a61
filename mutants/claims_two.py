"""claims-two — the claim marks two jobs running and hands out one.

Source: a claim whose pick was widened (`limit 2`, "prefetch the next one") while its
caller still reads one row. The second job sits running under a lease nobody holds:
no worker runs it until that lease runs out. No answer shows it; `state()` does.
Caught by: no-hidden-claims, or its neighbour no-lost-jobs: the hidden claims spend the
second job's attempts, and it fails for good having been handed out fewer times than promised.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue, check_lease, check_worker
from leasecheck.stateful.contract import Claim
from mutants._base import sql


class ClaimsTwo(ReferenceQueue):
    name = "claims-two"
    expected = ("no-hidden-claims", "no-lost-jobs")

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        params = {"worker": check_worker(worker), "lease": check_lease(lease)}
        rows = sorted(conn.execute(sql("claim_two"), params).fetchall())
        return Claim(int(rows[0][0]), int(rows[0][1]), worker) if rows else None
