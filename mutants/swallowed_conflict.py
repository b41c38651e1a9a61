"""swallowed-conflict — a completion that meets a serialization failure answers True anyway.

Source: the same shape as swallowed-timeout (django-q2 1.11.1 acknowledges a task
whose result save failed), with the error a stricter isolation level raises: a
caller's REPEATABLE READ or SERIALIZABLE transaction whose snapshot is older than
the job row's last change (the worker's own heartbeat renewed the lease meanwhile)
gets 40001, "could not serialize access due to concurrent update". "Someone else
updated the job, so it is in hand": the completion's savepoint rolled back, the
job is still running, and the queue said it was done.
Caught by: no-lost-jobs (handed out again after its completion was accepted), or
single-completion. Only a held transaction above READ COMMITTED reaches it
(`--leasecheck-isolation`): at READ COMMITTED the update re-reads the row instead. The
move that reaches it most is `work_in_transaction`: the job body and its completion in
one transaction, while the worker's own heartbeats renew the lease.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim, Effect


class SwallowedConflict(ReferenceQueue):
    name = "swallowed-conflict"
    expected = ("no-lost-jobs", "single-completion", "fencing", "atomic-rejection")
    isolation = "drawn"
    """The kill test runs it with held transactions at drawn levels."""
    excused = ("owner-progress", "late-owner")
    """There the reference itself refuses its owner (40001), live or late: not this
    mutant's bug."""

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        try:
            return super().complete(conn, claim, effect)
        except psycopg.errors.SerializationFailure:
            return True  # someone else updated the job: count it as done
