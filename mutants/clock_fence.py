"""clock-fence — completion fenced on `lease_until > now()` instead of the attempt.

Source: "only accept work while the lease is valid". It refuses the late completion
of an owner nobody replaced, and it accepts a stale worker whose job was reclaimed
as long as the new lease runs. Caught by: owner-progress or late-owner (and fencing).
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim, Effect
from mutants._base import sql


class ClockFence(ReferenceQueue):
    name = "clock-fence"
    expected = ("owner-progress", "late-owner", "fencing", "single-completion")

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        with conn.transaction():
            if conn.execute(sql("complete_fenced_by_clock"), {"id": claim.job_id}).fetchone():
                effect(conn)
                return True
            return False
