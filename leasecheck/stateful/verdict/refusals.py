"""owner-progress and late-owner: what the queue refused of the grant that owns a job.

The current owner (its lease unexpired) is never refused. A late owner, whose lease
ran out but whom nobody replaced, is refused rightly only when the queue shows it gave
the job up at its cap, or declares that its recovery revokes expired leases (then the
refusal is its design, said but not judged). Nothing is judged of a call whose grant
may not own the job: one among grants whose claims raced, or one a claim that lost its
answer may have replaced (`unsure`).
"""

from __future__ import annotations

from leasecheck.stateful import properties as P
from leasecheck.stateful.contract import FAILED
from leasecheck.stateful.units import stamp
from leasecheck.stateful.verdict import caps, releases
from leasecheck.stateful.verdict.findings import Declared, Finding, Unjudged, Violation
from leasecheck.stateful.verdict.grants import Grant, JobModel, Pending, Refusal
from leasecheck.stateful.verdict.view import Owners


def unsure(job: JobModel, grant: Grant, what: str, accepted: bool) -> list[Finding] | None:
    """Return what to say when who owns the job cannot be told for `grant`'s call (`what`),
    else None: it is among grants whose order is unknown, or it was the owner before a
    claim that lost its answer may have taken the job. Then whether the call was the
    owner's or a stale one is unknown, and neither its acceptance nor its refusal is
    judged."""
    answer = "accepted" if accepted else "refused"
    if grant in job.unsure:
        others = ", ".join(g.label for g in job.unsure if g is not grant)
        return [
            Unjudged(
                f"the {what} of {grant.label} was {answer}: whether it or {others} owns "
                f"{job.label} cannot be told (their claims raced, one in flight)"
            )
        ]
    if job.unseen and grant is job.owner:
        return [
            Unjudged(
                f"the {what} of {grant.label} was {answer}: a claim that lost its answer "
                f"may have taken {job.label} since, so whether it still owns it cannot be told"
            )
        ]
    return None


def refused(
    oracle: Owners, grant: Grant, what: str, at: int, raised: str | None = None
) -> list[Finding]:
    """Judge the owner's call (`what`) that the queue refused at `at` (`raised`: the
    quoted exception, when the "no" was one)."""
    job = oracle.jobs[grant.claim.job_id]
    how = f"refused (it raised {raised})" if raised else "refused"
    said = f"the {what} of {grant.label}, which owns {job.label}, was {how} at t={stamp(at)}"
    waits = releases.pending(grant, said, at, Refusal(grant, what, at, raised))
    if waits is not None:
        return waits
    refs = {"jobs": (job.label,), "grants": (grant.label,)}
    if grant.lease_end > at:
        why = f"its lease ran until t={stamp(grant.lease_end)} and nobody else was granted"
        evidence = (f"{why} {job.label}", *_serialization(raised))
        return [Violation(P.OWNER_PROGRESS, said, evidence, **refs)]
    late = f"{said}, after its lease ended at t={stamp(grant.lease_end)}"
    if oracle.revokes_expired:
        return [Declared(f"{late}: the queue declares revokes_expired")]
    if oracle.observe is None:
        return [Unjudged(f"{late}: without state() it cannot be told from giving up")]
    status = oracle.observe(grant.claim.job_id)
    if status == FAILED and caps.exhausted(oracle, job):
        return []  # given up at its cap, as the queue's own table shows
    if status == FAILED and caps.may_be_exhausted(oracle, job):
        return [Unjudged(f"{late}: {caps.lost_attempts(oracle, job)}")]
    why = f"nobody else was granted {job.label}; the queue shows it {status}"
    verdict = Violation(P.LATE_OWNER, late, (why,), **refs)
    # A claim whose statement ran but whose answer has not come back (it waits
    # between statements, or on a lock) may have taken the job already.
    return [] if oracle.in_flight.wait(grant.claim.job_id, late, verdict) else [verdict]


def settled(oracle: Owners, waited: list[Pending | Unjudged]) -> list[Finding]:
    """Judge what waited on a release that has answered (`releases.answered`): refused,
    the grant still held the job, so each verdict is told, or its refusal judged again."""
    found: list[Finding] = []
    for verdict in waited:
        if isinstance(verdict, Refusal):
            found += refused(oracle, verdict.grant, verdict.what, verdict.at, verdict.raised)
        else:
            found.append(verdict)
    return found


def _serialization(raised: str | None) -> tuple[str, ...]:
    """Return what to say of a refusal that was PostgreSQL's serialization failure: the
    queue let a transaction above READ COMMITTED fail rather than retry it, which is a
    design choice a queue may document (its callers retry), not a lost lease."""
    if raised is None or not any(m in raised for m in _SERIALIZATION):
        return ()
    return (
        "PostgreSQL refused it with a serialization failure (40001), as it may above READ "
        "COMMITTED, and the queue answered no rather than retry; if the queue's callers "
        "retry such a call, run with --leasecheck-excuse owner-progress",
    )


_SERIALIZATION = ("SerializationFailure", "could not serialize")
