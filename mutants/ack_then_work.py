"""ack-then-work — the completion commits `done` first and runs the effect afterwards.

Source: "acknowledge the job, then do the work" (or a completion split in two so the
job's row lock is held briefly): the fenced update that marks the job done commits on
its own, and the effect runs in a second transaction. A worker that dies between the
two leaves a job the queue shows done whose effect never happened, and nothing runs
it again. Only a completion paused between its statements, then crashed or cut,
reaches it. Caught by: done-effect (from what state() shows after the drain and the
effect rows); no claim count or completion answer shows it.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim, Effect
from mutants._base import sql


class AckThenWork(ReferenceQueue):
    name = "ack-then-work"
    expected = ("done-effect",)
    complete_many = None  # type: ignore[assignment]  # the bug is the single completion's

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        params = {"id": claim.job_id, "attempt": claim.token}
        if conn.execute(sql("complete_done_only"), params).fetchone() is None:
            return False
        with conn.transaction():
            effect(conn)
        return True
