"""unfenced-heartbeat — the heartbeat extends the job's lease whichever attempt sends it.

Source: heartbeats keyed by job id only. A stale worker extends the new owner's
lease and believes it still owns the job. Caught by: fencing (and exclusive-lease).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue, check_lease
from leasecheck.stateful.contract import Claim
from mutants._base import sql


class UnfencedHeartbeat(ReferenceQueue):
    name = "unfenced-heartbeat"
    expected = ("fencing", "exclusive-lease")

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        params = {"id": claim.job_id, "lease": check_lease(lease)}
        return conn.execute(sql("heartbeat_unfenced"), params).fetchone() is not None
