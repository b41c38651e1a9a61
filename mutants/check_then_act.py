"""check-then-act — the completion checks the attempt in one statement and acts in the next.

Source: a completion written as two autocommit statements, "is this still my
attempt?" and then "mark it done" by id, the shape an ORM's `get()` then `save()`
gives. Between the two, the owner's lease can run out and another worker can claim
the job: the stale owner's completion then lands by id over the new owner's claim.
Only a call preempted between its own statements reaches it.
Caught by: fencing (a stale completion accepted), or owner-progress / single-completion
for what it does to the new owner.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim, Effect
from mutants._base import sql


class CheckThenAct(ReferenceQueue):
    name = "check-then-act"
    expected = ("fencing", "owner-progress", "single-completion", "late-owner")
    complete_many = None  # type: ignore[assignment]  # the race is the single completion's

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        row = conn.execute(sql("read_attempt"), {"id": claim.job_id}).fetchone()
        if row is None or row[0] != claim.token:
            return False
        with conn.transaction():
            conn.execute(sql("complete_by_id"), {"id": claim.job_id})
            effect(conn)
        return True
