"""fencing: a call the queue accepted from a grant that no longer owns its job.

Sent after its job was taken from it, the call is stale wherever it landed. Sent
while it still owned the job, it may have landed before what took the job: only what
that placement would mean, or what the queue shows now, can convict it; otherwise it
is said, not judged (`stateful.verdict.window` lays the call against its job's changes).
"""

from __future__ import annotations

from leasecheck.stateful import properties as P
from leasecheck.stateful.contract import RUNNING
from leasecheck.stateful.units import stamp
from leasecheck.stateful.verdict import window
from leasecheck.stateful.verdict.findings import Unjudged, Violation
from leasecheck.stateful.verdict.grants import Grant, JobModel
from leasecheck.stateful.verdict.view import Owners
from leasecheck.stateful.verdict.window import Sent, Window


def accepted(
    oracle: Owners,
    job: JobModel,
    grant: Grant,
    what: str,
    win: Window,
    sent: Sent,
    lease_from: int | None = None,
) -> Violation | Unjudged:
    """Judge `grant`'s accepted call (`what`), which does not own the job now: the
    fencing violation, or what is said when some placement of the call in its window
    breaks nothing.

    A failure report that came first gave the job back and broke nothing, unless the
    queue shows the job given up under the grant that holds it now (`_landed_after`).
    A completion that came first finished a job the queue then handed out again, a
    break either way. A heartbeat that came first renewed a lease the next grant then
    broke, if that grant came before even the earliest renewal could run out.
    """
    when = _when(sent.at, sent.answered)
    refs = {"jobs": (job.label,), "grants": (grant.label, *_others(job, grant))}
    stale = f"the {what} of stale {grant.label} was accepted {when}"
    if win.before:
        why = window.why_stale(job, grant, win)
        return Violation(P.FENCING, stale, (why,), **refs)
    first = win.during[0]
    sent_while = f"it was sent at t={stamp(sent.at)} while {grant.label} still owned {job.label}"
    later = win.first_grant()
    if later is not None and what != "heartbeat":
        shown = _landed_after(oracle, job, grant, win, sent)
        if shown is not None:
            granted = f"{later.by.label} was granted {job.label} while it was in flight"
            return Violation(P.FENCING, stale, (f"{sent_while}; {granted}", shown), **refs)
    either = "either way a property broke"
    if later is not None and what == "completion":
        said = (
            f"the completion of {grant.label} was accepted {when}, although "
            f"{later.by.label} was granted {job.label} while it was in flight"
        )
        why = (
            f"{sent_while}: had it committed first, {job.label} was handed out again "
            f"after its completion was accepted (no-lost-jobs); had it come after, a "
            f"stale completion was accepted; {either}"
        )
        return Violation(P.FENCING, said, (why,), **refs)
    if first.kind == "granted" and what == "heartbeat" and not releasing(grant):
        renewed = (sent.at if lease_from is None else lease_from) + oracle.lease
        if first.mark.instant < renewed:
            said = (
                f"the heartbeat of {grant.label} was accepted {when}, although "
                f"{first.by.label} was granted {job.label} while it was in flight"
            )
            why = (
                f"{sent_while}: had it landed first, {first.by.label} took {job.label} by "
                f"t={stamp(first.mark.instant)} under the lease it renewed until at "
                f"least t={stamp(renewed)} (exclusive-lease); had it come after, a stale "
                f"heartbeat was accepted; {either}"
            )
            return Violation(P.FENCING, said, (why,), **refs)
    took = {
        "granted": f"{first.by.label} was granted {job.label}",
        "completed": f"{first.by.label} completed {job.label}",
        "released": f"its own release of {job.label} was accepted",
    }[first.kind]
    return Unjudged(
        f"the {what} of {grant.label} was accepted {when} after {took}; {sent_while}, so "
        "it may have landed first, where it broke nothing: whether it was stale cannot "
        "be told"
    )


def _landed_after(
    oracle: Owners, job: JobModel, grant: Grant, win: Window, sent: Sent
) -> str | None:
    """Return what the queue shows that places `grant`'s accepted release after the
    grant that holds its job now, or None if nothing does.

    Had the release landed first, the later grant took the job afterwards and holds
    it: the queue would show it running. It shows something else while that grant's
    lease runs and nothing of that grant's may have given it back (no release in
    flight, none that lost its answer): the release came after the claim, and undid
    it. Without `state()` nothing shows it."""
    holder = job.owner
    granted = [c.by for c in win.during if c.kind == "granted"]
    if oracle.observe is None or holder is None or holder not in granted or job.unsure:
        return None
    if holder.lease_end <= sent.answered or releasing(holder):
        return None
    status = oracle.observe(grant.claim.job_id)
    if status == RUNNING:
        return None
    return (
        f"the queue shows {job.label} {status} after it answered, while "
        f"{holder.label}'s lease runs until t={stamp(holder.lease_end)}: it landed "
        f"after {holder.label}'s claim and undid it"
    )


def releasing(grant: Grant) -> bool:
    """Return whether a release of `grant` may have given its job back unseen: one in
    flight, or one that lost its answer."""
    return grant.releasing is not None or grant.released_unknown is not None


def _when(at: int, answered: int | None) -> str:
    """Say when a call was accepted: when sent, and when answered if it waited."""
    if answered is None or answered == at:
        return f"at t={stamp(at)}"
    return f"at t={stamp(answered)} (sent at t={stamp(at)}, it waited or was paused)"


def _others(job: JobModel, grant: Grant) -> tuple[str, ...]:
    """Return the grants a stale call wronged: who completed the job, or who holds it now."""
    if job.completed_by:
        return tuple(g.label for g in job.completed_by if g is not grant)
    later = job.grants[-1]
    return () if later is grant else (later.label,)
