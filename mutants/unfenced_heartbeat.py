"""unfenced-heartbeat — the heartbeat extends the job's lease whichever attempt sends it.

Source: heartbeats keyed by job id only. A stale worker extends the new owner's
lease and believes it still owns the job. Caught by: fencing (and exclusive-lease).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from mutants._base import sql
from reference.queue import ReferenceQueue, check_lease
from stateful.contract import Claim


class UnfencedHeartbeat(ReferenceQueue):
    name = "unfenced-heartbeat"
    expected = ("fencing", "exclusive-lease")

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        params = {"id": claim.job_id, "lease": check_lease(lease)}
        return conn.execute(sql("heartbeat_unfenced"), params).fetchone() is not None
