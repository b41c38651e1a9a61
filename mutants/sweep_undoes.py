"""sweep-undoes — a recovery sweep reads expired jobs, then re-queues them by id.

Source: saq 0.26.4's sweep, which reads a job's status `FOR UPDATE` in autocommit and
then writes what it decided whatever the job became meanwhile; River #1302 is the
same shape with the read and the write in one transaction. A late owner's completion
that commits between the two statements is undone: the finished job is queued again
and runs twice. Only a sweep preempted between its own statements reaches it (the
row lock ends with the read).
Caught by: no-lost-jobs (a finished job handed out again) or single-completion; a
re-queue landing on a job claimed meanwhile (its lease cut short: exclusive-lease,
owner-progress) can give it a claim past its cap (retry-cap).
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from mutants._base import sql


class SweepUndoes(ReferenceQueue):
    name = "sweep-undoes"
    revokes_expired = True
    expected = (
        "no-lost-jobs",
        "single-completion",
        "exclusive-lease",
        "owner-progress",
        "retry-cap",
    )

    def maintain(self, conn: Connection[Any]) -> None:
        ids = [row[0] for row in conn.execute(sql("sweep_read_expired")).fetchall()]
        if ids:
            conn.execute(sql("sweep_requeue_by_id"), {"ids": ids})
