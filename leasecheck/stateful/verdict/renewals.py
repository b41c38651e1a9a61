"""A process-level lease: one heartbeat of a worker renews every claim it holds.

A queue that declares `heartbeat_renews = "worker"` keeps all of a worker's jobs on
one beat (procrastinate's and chancy's workers beat per process, not per job). The
judge then believes each of those leases renewed by any accepted heartbeat of the
worker, so a claim of one inside the renewed lease is an exclusive-lease violation.

It believes no more than every such queue must do, so as never to accuse one wrongly:
only the claims that own their job (the latest grant of it, not released, not racing
another) and whose lease still ran when the heartbeat's statement could last have run
(its answer: a beat paused or blocked may have reached the server only then), each to
the end the beat's own claim got (from when it was sent: an end no later than the
queue's). A lease that had run out is left as it was: whether a beat revives one is
the queue's choice.
"""

from __future__ import annotations

from leasecheck.stateful.verdict.grants import Grant
from leasecheck.stateful.verdict.view import Jobs


def worker(oracle: Jobs, grant: Grant, at: int, answered: int, end: int) -> None:
    """Renew to `end` the other claims of `grant`'s worker that the beat sent at `at`
    and answered at `answered` renewed for sure."""
    for job in oracle.jobs.values():
        if not job.grants:
            continue
        owner = job.grants[-1]
        if (
            owner is grant
            or owner.claim.worker != grant.claim.worker
            or owner.released
            or owner in job.unsure
            or job.unseen
            or owner.lease_end <= answered
            or owner.lease_end >= end
        ):
            continue
        owner.renewals.append((at, owner.lease_end))
        owner.lease_end = end
