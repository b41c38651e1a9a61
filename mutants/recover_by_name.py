"""recover-by-name — a claim first hands back every running job marked with its worker's name.

Source: recovery keyed on the worker's name, the shape of procrastinate #1518 and
Oban #862 (jobs recovered by node or worker name at startup). "A worker asks for
work only when it runs none (`one_claim_per_worker`), so a job still marked as its
own was left by a process of that name that died: put it back now instead of waiting
for its lease." The name does not tell processes apart: a process restarted under
the old name (a supervisor's restart, a pod that keeps its hostname) takes back the
job of the old one while its lease still runs, and a job the old process may still
be working on (it was only paused, or partitioned) runs twice.
Caught by: exclusive-lease (the job is granted again within the old lease), or what
the second run does: fencing, single-completion, owner-progress, late-owner; or
retry-cap, when the job handed back was on its last attempt (the hand-back re-queues
it as if it had attempts left, and the next claim is one more than the cap). Only a
restart under the same name reaches it: a crash's replacement gets a new name.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue, check_worker
from leasecheck.stateful.contract import Claim
from mutants._base import sql


class RecoverByName(ReferenceQueue):
    name = "recover-by-name"
    expected = (
        "exclusive-lease",
        "fencing",
        "single-completion",
        "owner-progress",
        "late-owner",
        "retry-cap",
    )
    one_claim_per_worker = True
    claim_many = None  # type: ignore[assignment]  # one job at a time
    complete_many = None  # type: ignore[assignment]

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        with conn.transaction():
            conn.execute(sql("release_mine"), {"worker": check_worker(worker)})
            return super().claim(conn, worker, lease)
