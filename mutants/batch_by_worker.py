"""batch-by-worker — a batch completion matched by the worker that sends it.

Source: acknowledging "everything this worker holds" (`where locked_by = $worker`)
instead of each claim's attempt. A worker that slept past its lease and was handed
the same job again holds a stale and a fresh claim of it; completing the stale one
is accepted, because the worker matches.
Caught by: fencing (or single-completion / owner-progress, by the call that shows it
first).
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import BatchEffect, Claim
from mutants._base import sql
from mutants.batch_first_fence import _done_with


class BatchByWorker(ReferenceQueue):
    name = "batch-by-worker"
    expected = ("fencing", "single-completion", "owner-progress")

    def complete_many(
        self, conn: Connection[Any], claims: list[Claim], effect: BatchEffect
    ) -> list[bool]:
        params = {"ids": [c.job_id for c in claims], "worker": claims[0].worker}
        return _done_with(conn, sql("complete_many_by_worker"), params, claims, effect)
