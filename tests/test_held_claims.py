"""A claim inside a transaction the run holds stays in flight until that transaction ends.

What such a claim did is not committed while the transaction is open: the job it
handed out, and (in the reference) the expired jobs at their cap it gave up. A late
owner refused meanwhile may have been refused rightly, which shows only once the
transaction commits; so the verdict waits for it, and reads `state()` again then.

The program is the one a `dev` run found on the reference: w0, asleep past its lease
at the attempt cap, wakes and acknowledges its batch while w1's claim, in a held
transaction, is giving that job up. Before, the reference's one-statement batch
completion was refused whole on the lock (owner-progress, for the job w0 owned), and,
once it was fenced claim by claim, the judge told the late owner's refusal at once
(late-owner, though the uncommitted claim had given the job up at its cap).
"""

from __future__ import annotations

from typing import Any

import pytest
from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import BatchEffect, Claim
from leasecheck.stateful.engine import actors
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.program import from_json
from leasecheck.stateful.properties import OWNER_PROGRESS, PropertyViolated
from leasecheck.stateful.story import replay

PROGRAM = from_json([
    {"rule": "start", "args": {"workers": 2}},
    {"rule": "enqueue", "args": {"jobs": 2}},
    {"rule": "claim", "args": {"how": {"Take": {"worker": 4, "held": False}}}},
    {"rule": "fail", "args": {"pick": 4}},
    {"rule": "claim_batch", "args": {"pick": 7, "size": 3}},
    {"rule": "restart", "args": {"pick": 4}},
    {"rule": "time_passes", "args": {"to": "past-lease-end-ms"}},
    {"rule": "claim", "args": {"how": {"Take": {"worker": 6, "held": True}}}},
    {"rule": "time_out", "args": {"pick": 6}},
    {"rule": "close_transaction", "args": {"commit": True, "pick": 7}},
    {"rule": "asleep", "args": {"how": {"Stall": {
        "worker": 3, "alone": False, "then": "batch", "rival": "holds", "long": False,
    }}}},
])  # fmt: skip


class OneStatementBatch(ReferenceQueue):
    """The reference's batch completion as it was: one UPDATE for the whole batch."""

    name = "one-statement-batch"

    def complete_many(
        self, conn: Connection[Any], claims: list[Claim], effect: BatchEffect
    ) -> list[bool]:
        params = {"ids": [c.job_id for c in claims], "attempts": [c.token for c in claims]}
        with conn.transaction():
            rows = conn.execute(
                "update jobs set status = 'done', locked_by = null, lease_until = null,"
                " finished_at = now() from unnest(%(ids)s::bigint[], %(attempts)s::integer[])"
                " as batch (id, attempt) where jobs.id = batch.id"
                " and jobs.attempt = batch.attempt and jobs.status = 'running'"
                " returning jobs.id, batch.attempt",
                params,
            )
            done = {(r[0], r[1]) for r in rows}
            accepted = [(c.job_id, c.token) in done for c in claims]
            for claim, ok in zip(claims, accepted, strict=True):
                if ok:
                    effect(conn, claim)
            return accepted


def _replayed(queue: ReferenceQueue, pool: actors.Pool) -> replay.Replayed:
    harness = Harness(queue=queue, pool=pool)
    harness.reset()
    return replay.replay(harness, list(PROGRAM))


def test_the_late_owner_refused_while_a_held_claim_gave_its_job_up_is_not_accused(
    reference_pool: actors.Pool,
) -> None:
    done = _replayed(ReferenceQueue(), reference_pool)
    assert done.ran == list(PROGRAM) and not done.skipped


def test_a_batch_refused_whole_on_a_stale_members_lock_refuses_its_owner(
    reference_pool: actors.Pool,
) -> None:
    with pytest.raises(PropertyViolated) as error:
        _replayed(OneStatementBatch(), reference_pool)
    assert error.value.violation.prop == OWNER_PROGRESS
    assert "LockNotAvailable" in str(error.value)

