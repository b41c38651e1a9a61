"""no-hidden-claims: a claim takes only what it hands out.

A claim that marks two rows running and hands out one leaves the other under a
lease nobody holds: no worker runs it until that lease runs out, and a claim shaped
`where id in (select ... limit 1 for update skip locked)` does just that once the
planner runs its pick once per row (see `stateful.engine.replan`). No answer shows it; only
`state()` does. So after every step in which a claim answered, each job the model
cannot account for is looked at: one the queue shows `running` must be explained.

Explained, and so not looked at: a job with a grant not released (its owner, live or
late, holds it until a completion or failure report commits, or the queue reclaims
it); a job a claim that lost its answer may hold (`JobModel.unseen`); a finished job
(one the queue shows running again after its completion is no-lost-jobs's verdict at
the end). While any claim is in flight (paused between statements, or blocked) it may
already have taken any job: nothing is judged until it answers. A claim or a release
inside a transaction the harness holds is told to the oracle when it commits, and
`state()` reads committed rows only, so both sides see it at the same moment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leasecheck.stateful import properties as P
from leasecheck.stateful.contract import RUNNING, JobId
from leasecheck.stateful.verdict.findings import Finding, Saw, Violation
from leasecheck.stateful.verdict.grants import JobModel
from leasecheck.stateful.verdict.view import Jobs


@dataclass
class Doubts:
    """Jobs a claim with an unknown outcome may hold, though it was never in flight.

    A claim the harness cancelled (a second lock waiter), or whose connection died,
    before it was counted in flight is not told to the oracle as a lost answer; its
    statements before the cancel may have committed. Each job unfinished then is left
    unjudged until it is granted again: job id -> how many grants it had then.
    """

    grants_then: dict[JobId, int] = field(default_factory=dict)

    def doubt(self, oracle: Jobs) -> None:
        for job_id, job in oracle.jobs.items():
            if not job.finished:
                self.grants_then[job_id] = len(job.grants)

    def holds(self, job_id: JobId, job: JobModel) -> bool:
        return self.grants_then.get(job_id) == len(job.grants)


def _explained(job: JobModel) -> bool:
    """Return whether the model accounts for the job being running, whatever it shows."""
    return job.finished or job.unseen or any(not g.released for g in job.grants)


def judge(oracle: Jobs, doubts: Doubts, unknown: bool) -> list[Finding]:
    """Judge, after a step in which a claim answered, every job the queue shows running
    that the model cannot account for; `unknown`: a claim's outcome was left unknown."""
    if unknown:
        doubts.doubt(oracle)
    if oracle.observe is None:
        return []  # a named gap (contract.not_checked): nothing shows what is running
    if oracle.in_flight.calls:
        return []  # one of them may hold any job: judged once it answers
    found: list[Finding] = []
    for job_id, job in oracle.jobs.items():
        if _explained(job) or doubts.holds(job_id, job):
            continue
        found.append(Saw("job no claim holds looked at after a claim"))
        if oracle.observe(job_id) != RUNNING:
            continue
        last = job.grants[-1].label if job.grants else None
        why = f"its last claim, {last}, was released" if last else "it was never handed out"
        found.append(
            Violation(
                P.NO_HIDDEN_CLAIMS,
                f"the queue shows {job.label} running, but no claim it handed out holds it",
                (f"{why}; no claim was in flight and none lost its answer",),
                (job.label,),
                (last,) if last else (),
            )
        )
    return found
