"""heartbeat-only — heartbeats keep a slow worker's lease, but completion is unfenced.

Source: the story's second attempt. A paused worker (GC, SIGSTOP) sends no
heartbeats; after it wakes, its completion commits although another worker
reclaimed the job. Caught by: single-completion.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim, Effect
from mutants._base import sql


class HeartbeatOnly(ReferenceQueue):
    name = "heartbeat-only"
    expected = ("single-completion", "fencing")

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        with conn.transaction():
            conn.execute(sql("complete_unfenced"), {"id": claim.job_id})
            effect(conn)
            return True
