"""stale-release — a failure report first makes the job visible again by id, then is fenced.

Source: queues whose release is a visibility reset (`set_vt(id, 0)`, `run_at = now()`,
`lease_until = now()`) keyed by the job alone. The fenced half refuses the stale
worker, so its answer looks right, but the reset has already ended the lease of the
worker that holds the job now: a third worker claims it while the owner still works.
The four-move race: claim, stall past the lease, another worker reclaims, the
sleeper wakes and reports a failure; then anyone claims.
Caught by: exclusive-lease (or owner-progress / fencing, by the call that shows it first).
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim
from mutants._base import sql


class StaleRelease(ReferenceQueue):
    name = "stale-release"
    expected = ("exclusive-lease", "owner-progress", "fencing")

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        with conn.transaction():
            conn.execute(sql("release_by_id"), {"id": claim.job_id})
            return super().fail(conn, claim, error)
