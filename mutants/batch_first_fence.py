"""batch-first-fence — a batch completion fenced on its first job only.

Source: batch acknowledgements that check the first claim of a batch (or the batch's
own id) and then mark every listed job done by id. A batch that holds a stale claim
behind a good one completes a job another worker now owns.
Caught by: single-completion (or fencing, if nobody completes the job again).
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import BatchEffect, Claim
from mutants._base import sql


class BatchFirstFence(ReferenceQueue):
    name = "batch-first-fence"
    expected = ("single-completion", "fencing", "owner-progress", "late-owner")

    def complete_many(
        self, conn: Connection[Any], claims: list[Claim], effect: BatchEffect
    ) -> list[bool]:
        first = claims[0]
        params = {
            "ids": [c.job_id for c in claims],
            "first_id": first.job_id,
            "first_attempt": first.token,
        }
        return _done_with(conn, sql("complete_many_first_fenced"), params, claims, effect)


def _done_with(
    conn: Connection[Any],
    query: str,
    params: dict[str, Any],
    claims: list[Claim],
    effect: BatchEffect,
) -> list[bool]:
    """Run a batch completion query; accept the claims whose job it returned."""
    with conn.transaction():
        done = {row[0] for row in conn.execute(query, params)}
        accepted = [c.job_id in done for c in claims]
        for claim, ok in zip(claims, accepted, strict=True):
            if ok:
                effect(conn, claim)
        return accepted
