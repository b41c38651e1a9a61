"""no-row-lock — the claim's subquery lacks FOR UPDATE (SKIP LOCKED).

Source: the classic `update ... where id = (select id ... limit 1)`. Two claims
racing in overlapping transactions both pick the same id; the second waits for the
first, then updates the row anyway - even one that was completed meanwhile.
Found only with held transactions. Caught by: exclusive-lease (or single-completion, or
no-lost-jobs when a finished job is handed out again, or retry-cap when the row the
second claim updates anyway had just used its last attempt).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim
from mutants._base import claim_with


class NoRowLock(ReferenceQueue):
    name = "no-row-lock"
    expected = ("exclusive-lease", "single-completion", "no-lost-jobs", "retry-cap")

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        return claim_with("claim_without_row_lock", conn, worker, lease)
