"""swallowed-timeout — a completion whose statement timed out answers True anyway.

Source: a completion that catches its own database error and acknowledges the job,
the shape of django-q2 1.11.1's result save (a save that fails still acknowledges
the task, with no result). Here the caught error is a lock timeout (55P03), which
production's `lock_timeout` raises when the job's row is locked by another worker's
transaction: "the row is busy, so someone else has it in hand; do not retry forever".
The completion's transaction rolled back, so the job is still running, and the
queue said it was done: the job runs again after an accepted completion.
Caught by: no-lost-jobs (handed out again after its completion was accepted), or
fencing / single-completion when the swallowed call was a stale one. Only a lock
timeout (the `time_out` move) reaches it: without one, a completion that meets a
lock waits for it.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim, Effect


class SwallowedTimeout(ReferenceQueue):
    name = "swallowed-timeout"
    expected = ("no-lost-jobs", "fencing", "single-completion", "atomic-rejection")

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        try:
            return super().complete(conn, claim, effect)
        except psycopg.errors.LockNotAvailable:
            return True  # the row is busy: count the job as done rather than retry it
