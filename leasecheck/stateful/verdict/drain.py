"""no-lost-jobs: after healing and a full drain, every job is done once or failed for good.

Judged once, from what the queue's own `state()` shows after the drain: finality
is never inferred from claim counts. A job failed for good before its cap while
claims lost their answers may have used its attempts unseen: said, not judged.
Whatever still waited for a call to answer is said too (the teardown lets every
call answer, so none is expected), and then done-effect reads the same answers.
"""

from __future__ import annotations

from leasecheck.stateful import properties as P
from leasecheck.stateful.contract import DONE, FAILED
from leasecheck.stateful.verdict import caps, effects, releases
from leasecheck.stateful.verdict.findings import Finding, Saw, Unjudged, Violation
from leasecheck.stateful.verdict.view import Jobs


def judge(oracle: Jobs) -> list[Finding]:
    """Judge no-lost-jobs, then done-effect, once healing and a full drain are over."""
    found = oracle.in_flight.never_answered()
    for job in oracle.jobs.values():
        for g in job.grants:
            found += releases.never_answered(g)
    found += [Saw("job recovered and drained") for j in oracle.jobs.values() if len(j.grants) > 1]
    lost, unsure = lost_jobs(oracle)
    found += unsure
    if lost:
        found.append(
            Violation(
                P.NO_LOST_JOBS,
                "after healing and a full drain, the queue shows jobs neither done once "
                "nor failed for good",
                (*lost, *oracle.ledger.raised[:3]),
                tuple(line.split(":")[0] for line in lost),
            )
        )
    return found + effects.judge(oracle)  # done-effect, from what state() showed just now


def lost_jobs(oracle: Jobs) -> tuple[list[str], list[Finding]]:
    """Return the jobs the queue shows neither done once nor failed for good (after a
    drain), and what cannot be told of the others.

    Read from the queue's own `state`; the caller judges this only when it has one.
    A job failed for good before its cap while claims lost their answers is neither:
    it is said, not judged.
    """
    assert oracle.observe is not None, "no-lost-jobs needs the queue's state()"
    lost: list[str] = []
    unsure: list[Finding] = []
    for job_id, job in oracle.jobs.items():
        status = oracle.shown[job_id] = oracle.observe(job_id)
        done = ", ".join(g.label for g in job.completed_by) or "nobody"
        claims = f"{len(job.grants)} claims"
        if status == DONE and len(job.completed_by) <= 1:
            continue
        if status == FAILED and not job.completed_by:
            if not caps.capped(oracle) or caps.exhausted(oracle, job):
                continue
            if caps.may_be_exhausted(oracle, job):
                unsure.append(Unjudged(f"{job.label}: {caps.lost_attempts(oracle, job)}"))
                continue
            lost.append(f"{job.label}: failed for good after {caps.promised(oracle, job)}")
            continue
        lost.append(f"{job.label}: the queue shows it {status} ({claims}, completed by {done})")
    return lost, unsure
