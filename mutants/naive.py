"""naive — the first worker of the story: no heartbeat, unfenced completion.

Source: the receipt story; every hand-rolled queue starts here. A job that runs
past its lease is reclaimed, and both workers' completions commit.
Caught by: single-completion.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim, Effect
from mutants._base import sql


class Naive(ReferenceQueue):
    name = "naive"
    heartbeats = False
    expected = ("single-completion", "fencing")

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        conn.execute(sql("complete_unfenced"), {"id": claim.job_id})
        effect(conn)  # committed on its own: no transaction ties it to the update
        return True
