"""A queue that claims in batches and completes one job at a time is explored.

Many libraries fetch several jobs per round trip and acknowledge each on its own
(no batch completion). Before, `claim_many` without `complete_many` was not explored
at all, so a bug in the batch claim went unseen; now its batches are claimed and their
jobs completed, heartbeaten and failed one by one.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract
from leasecheck.stateful.contract import Claim
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.properties import PropertyViolated
from tests.fixtures import derandomized

BUDGET = derandomized(100)

PEEK_MORE = """
select id, attempt from jobs
 where status = 'queued' and id <> %(first)s
 order by id limit %(more)s
"""


class BatchClaims(ReferenceQueue):
    """The reference, claiming in batches and completing one job per call."""

    name = "batch-claims"
    complete_many = None  # type: ignore[assignment]  # absent, as the contract reads None


class PeekedBatch(BatchClaims):
    """Its batch claim leases the first job and hands out the next ones as they were
    read, unleased and unlocked: another worker's claim takes them again."""

    name = "peeked-batch"

    def claim_many(
        self, conn: Connection[Any], worker: str, lease: timedelta, n: int
    ) -> list[Claim]:
        with conn.transaction():
            first = self.claim(conn, worker, lease)  # the reference's one-job claim
            if first is None:
                return []
            params = {"first": first.job_id, "more": n - 1}
            more = conn.execute(PEEK_MORE, params).fetchall()
        peeked = [Claim(job_id=int(i), token=int(a) + 1, worker=worker) for i, a in more]
        return [first, *peeked]


def test_batches_without_a_batch_completion_are_claimed(reference_pool: actors.Pool) -> None:
    """The batch claim is a move of its own, and the skip line says what is left out."""
    queue = BatchClaims()
    harness = Harness(queue=queue, pool=reference_pool)
    harness.reset()
    run_state_machine_as_test(lambda: LeaseMachine(harness), settings=BUDGET)
    assert harness.moves["claim_batch"] > 0, harness.moves
    assert harness.moves["complete_batch"] == 0
    (gap,) = [g for g in contract.not_checked(queue) if g.startswith("batches:")]
    assert "claims in batches (claim_many) and completes one job per call" in gap


def test_a_batch_claim_that_hands_out_what_it_did_not_lease_is_killed(
    reference_pool: actors.Pool,
) -> None:
    """A bug only the batch claim has, which no run explored before."""
    harness = Harness(queue=PeekedBatch(), pool=reference_pool)
    harness.reset()
    with pytest.raises(PropertyViolated) as caught:
        run_state_machine_as_test(lambda: LeaseMachine(harness), settings=BUDGET)
    # Whoever meets it first: a rival granted the same job, or the queue refusing the
    # heartbeat of a claim it handed out but never leased.
    assert caught.value.violation.prop in (
        "exclusive-lease",
        "fencing",
        "owner-progress",
        "single-completion",
    ), str(caught.value)
