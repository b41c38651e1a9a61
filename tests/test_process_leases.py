"""A process-level lease (`heartbeat_renews = "worker"`): one heartbeat of a worker
renews every claim it holds, and the judge believes so.

Two variants of the reference queue: one whose heartbeat renews all of its worker's
running jobs and declares it (it holds every property), and one that declares it but
renews only the claim named (it breaks exclusive-lease on a short program: a rival
claims the job whose lease the worker's beat was declared to have renewed).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract
from leasecheck.stateful.contract import Claim, ContractError
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.moves import Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import EXCLUSIVE_LEASE, PropertyViolated
from tests.fixtures import derandomized, replayed

BEAT_ALL = """
update jobs
   set lease_until = now() + %(lease)s
 where status = 'running'
   and ((id = %(id)s and attempt = %(attempt)s)
        or (locked_by = %(worker)s and lease_until > now()))
returning id, attempt
"""
"""The worker's beat: its own claim (while its attempt owns the job), and every other
running job of the worker whose lease still runs."""


class WorkerLeases(ReferenceQueue):
    """The reference, with one lease per worker process: a beat renews all its jobs."""

    name = "worker-leases"
    heartbeat_renews = "worker"

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        params = {
            "id": claim.job_id,
            "attempt": claim.token,
            "worker": claim.worker,
            "lease": lease,
        }
        rows = conn.execute(BEAT_ALL, params).fetchall()
        return (claim.job_id, claim.token) in {(r[0], r[1]) for r in rows}


class ClaimLeasesDeclaredWorker(ReferenceQueue):
    """Declares a lease per worker, but its beat renews only the claim it names."""

    name = "claim-leases-declared-worker"
    heartbeat_renews = "worker"


W0 = Take(worker=0, held=False)
RIVAL = Take(worker=1, held=False)
PROGRAM = [
    Step("start", {"workers": 2}),
    Step("enqueue", {"jobs": 1}),
    Step("claim", {"how": W0}),  # w0 claims job1 at t=0: lease to 30 s
    Step("time_passes", {"to": "second"}),
    Step("claim", {"how": W0}),  # w0 claims job2 at 1 s: lease to 31 s
    # job1's beat at 10 s renews it to 40 s; job2's at 11 s renews job2, and (declared)
    # every lease of w0, to 41 s
    Step("time_passes", {"to": "beat"}),
    Step("pause", {"pick": 0}),  # w0 beats no more
    Step("time_passes", {"to": "before-lease-end"}),  # just before 41 s: job1's 40 s is past
    Step("claim", {"how": RIVAL}),  # free only if job2's beat did not renew job1
]


def test_a_beat_renews_every_lease_of_its_worker(reference_pool: actors.Pool) -> None:
    story = replayed(WorkerLeases(), reference_pool, PROGRAM)
    assert any("w1 claim: nothing" in line for line in story), story


def test_a_declared_worker_lease_that_renews_one_claim_breaks_exclusive_lease(
    reference_pool: actors.Pool,
) -> None:
    with pytest.raises(PropertyViolated) as caught:
        replayed(ClaimLeasesDeclaredWorker(), reference_pool, PROGRAM)
    assert caught.value.violation.prop == EXCLUSIVE_LEASE
    assert "w1:job1#2 was granted at t=41.000001s while w0:job1#1 held a lease until t=41" in str(
        caught.value
    )


def test_the_worker_leases_queue_holds_a_search(reference_pool: actors.Pool) -> None:
    harness = Harness(queue=WorkerLeases(), pool=reference_pool)
    harness.reset()
    run_state_machine_as_test(lambda: LeaseMachine(harness), settings=derandomized(60))


def test_a_declaration_of_anything_else_is_refused() -> None:
    class Nightly(ReferenceQueue):
        heartbeat_renews = "nightly"

    with pytest.raises(ContractError, match="heartbeat_renews is 'nightly'; declare 'claim'"):
        contract.capabilities(Nightly())
