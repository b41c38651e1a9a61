"""strict-lease — fenced on the attempt, but a completion after the lease ran out is refused.

Source: "double-check the lease before accepting work". Safe, but a slow owner that
nobody replaced loses finished work: the job is retried and the effect runs again.
Caught by: late-owner.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim, Effect
from mutants._base import sql


class StrictLease(ReferenceQueue):
    name = "strict-lease"
    expected = ("late-owner",)

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        with conn.transaction():
            params = {"id": claim.job_id, "attempt": claim.token}
            if conn.execute(sql("complete_only_within_lease"), params).fetchone() is None:
                return False
            effect(conn)
            return True
