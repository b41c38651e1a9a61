"""minute-key — the idempotency key is the job's kind and the minute it was scheduled.

Source: cron-style deduplication ("one receipt run per kind per minute") reused as the
idempotency key of each job's effect. Every job of one kind scheduled in the same
minute gets the same key, so the receiver takes the first one's effect and drops
every other's as a duplicate. Each job's own key never changes, so unique-effects
holds. Caught by: distinct-keys (two jobs handed out under one key).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue, check_lease, check_worker
from mutants._base import sql


@dataclass(frozen=True)
class ScheduledClaim:
    """A claim that also carries what the key is built from."""

    job_id: int
    token: int
    worker: str
    kind: str
    minute: datetime


class MinuteKey(ReferenceQueue):
    name = "minute-key"
    expected = ("distinct-keys",)
    claim_many = None  # type: ignore[assignment]  # its claims must carry the schedule

    def claim(  # type: ignore[override]
        self, conn: Connection[Any], worker: str, lease: timedelta
    ) -> ScheduledClaim | None:
        params = {"worker": check_worker(worker), "lease": check_lease(lease)}
        row = conn.execute(sql("claim_with_schedule"), params).fetchone()
        if row is None:
            return None
        return ScheduledClaim(int(row[0]), int(row[1]), worker, str(row[2]), row[3])

    def effect_key(self, claim: ScheduledClaim) -> str:  # type: ignore[override]
        return f"{claim.kind}-{claim.minute:%Y%m%dT%H%M}"
