"""no-recovery — a job whose worker dies is never handed out again.

Source: a queue with a claim and a status column but no lease at all
(`select ... where status = 'queued' for update skip locked`, then `running`), as
queues without a reaper are written; django-tasks-db 0.13.0 is one. A crashed
worker's job stays running for good. The clock probe must not mistake it for a queue
on the wall clock: its claim reads now(), and the verdict is the machine's.
Caught by: no-lost-jobs (the queue shows the job running after the drain).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim
from mutants._base import claim_with


class NoRecovery(ReferenceQueue):
    name = "no-recovery"
    expected = ("no-lost-jobs",)
    claim_many = None  # type: ignore[assignment]  # its batch claim would recover jobs

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        return claim_with("claim_without_recovery", conn, worker, lease)
