"""no-row-lock — the claim's subquery lacks FOR UPDATE (SKIP LOCKED).

Source: the classic `update ... where id = (select id ... limit 1)`. Two claims
racing in overlapping transactions both pick the same id; the second waits for the
first, then updates the row anyway - even one that was completed meanwhile.
Found only with held transactions. Caught by: exclusive-lease (or single-completion).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from mutants._base import sql
from reference.queue import ReferenceQueue, check_lease, check_worker
from stateful.contract import Claim


class NoRowLock(ReferenceQueue):
    name = "no-row-lock"
    expected = ("exclusive-lease", "single-completion")

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        params = {"worker": check_worker(worker), "lease": check_lease(lease)}
        row = conn.execute(sql("claim_without_row_lock"), params).fetchone()
        return None if row is None else Claim(job_id=int(row[0]), token=int(row[1]), worker=worker)
