"""A new grant against the earlier ones of its job: fencing tokens, exclusive-lease,
and no-lost-jobs's "handed out again after its completion".

A claim answered after it was in flight may have taken the job before or after the
grants told meanwhile: its token order and lease are checked against the grants told
before it was sent, and the rest is said, never guessed. It took the job at some moment
between when it was sent and when it answered: an earlier lease breaks exclusive-lease
only if it held over that whole stretch, and a completion breaks no-lost-jobs only if
it was accepted before the claim was sent.
"""

from __future__ import annotations

from collections.abc import Hashable

from leasecheck.stateful import properties as P
from leasecheck.stateful.units import stamp
from leasecheck.stateful.verdict import caps, releases
from leasecheck.stateful.verdict.findings import Finding, Saw, Unjudged, Violation
from leasecheck.stateful.verdict.grants import Grant, JobModel
from leasecheck.stateful.verdict.view import Owners


def judge(
    oracle: Owners, job: JobModel, new: Grant, sent: int | None, answered: int
) -> tuple[list[Finding], list[Grant]]:
    """Judge `new` (not yet recorded; `sent`: its claim call if it was in flight, and
    `answered` when that answered) against `job`'s grants; return the findings and the
    grants told while its claim was in flight (whose order against it is unknown)."""
    label, claim, at = new.label, new.claim, new.granted_at
    jobs = (job.label,)
    found: list[Finding] = []
    since = oracle.in_flight.told_when_sent.get(sent, new.seq) if sent is not None else new.seq
    meanwhile = [g for g in job.grants if g.seq >= since]
    earlier = [g for g in job.grants if g.seq < since]
    if meanwhile:
        found.append(
            Unjudged(
                f"{label} answered after {', '.join(g.label for g in meanwhile)} of "
                f"{job.label} was granted while its claim was in flight: which came first, "
                "and so their token order, their leases against each other and which of "
                "them owns the job, cannot be told"
            )
        )
    if any(not g.released for g in job.grants):
        found.append(Saw("expired lease claimed again"))
    found += caps.seen(oracle, job)
    found += _after_completion(oracle, job, label, sent)
    if claim.token in job.tokens:
        said = f"{label} carries token {claim.token!r}, already handed out for {job.label}"
        found.append(Violation(P.FENCING, said, jobs=jobs, grants=(label,)))
    elif oracle.ordered_tokens and earlier and not _greater(claim.token, earlier[-1].claim.token):
        said = (
            f"{label} carries token {claim.token!r}, not greater than "
            f"{earlier[-1].claim.token!r} although the queue declares ordered tokens"
        )
        found.append(Violation(P.FENCING, said, jobs=jobs, grants=(label, earlier[-1].label)))
    when = f"at t={stamp(at)}"
    if answered != at:
        when = f"between t={stamp(at)} and t={stamp(answered)} (its claim was in flight)"
    for other in earlier:
        held_until = _lease_end_as_of(other, at)  # a later renewal may come after the grant
        if not other.released and held_until > answered:
            said = (
                f"{label} was granted {when} while "
                f"{other.label} held a lease until t={stamp(held_until)}"
            )
            verdict = Violation(P.EXCLUSIVE_LEASE, said, jobs=jobs, grants=(label, other.label))
            waits = releases.pending(other, said, answered, verdict)
            found += [verdict] if waits is None else waits
    return found, meanwhile


def _after_completion(oracle: Owners, job: JobModel, label: str, sent: int | None) -> list[Finding]:
    """Judge a grant of a job whose completion the queue had accepted: no-lost-jobs if
    it was accepted before the claim was sent, said if only while it was in flight."""
    flight = oracle.in_flight
    since = flight.done_when_sent.get(sent, oracle.done_told) if sent is not None else None
    before = [g for g in job.completed_by if since is None or _done(g) < since]
    if before:
        return [
            Violation(
                P.NO_LOST_JOBS,
                f"{job.label} was handed out again ({label}) after the queue had accepted "
                "its completion",
                tuple(g.label for g in before),
                (job.label,),
                (label, *(g.label for g in before)),
            )
        ]
    if job.finished:
        return [
            Unjudged(
                f"{label} answered after the completion of "
                f"{', '.join(g.label for g in job.completed_by)} was accepted while its "
                "claim was in flight: it may have taken the job before that completion "
                "committed"
            )
        ]
    return []


def _lease_end_as_of(grant: Grant, t: int) -> int:
    """Return when `grant`'s lease ended as it stood at `t`, before any later renewal."""
    for when, replaced in grant.renewals:
        if when > t:
            return replaced
    return grant.lease_end


def _greater(a: Hashable, b: Hashable) -> bool:
    try:
        return bool(a > b)  # type: ignore[operator]
    except TypeError:
        return False


def _done(grant: Grant) -> int:
    assert grant.done is not None, grant.label  # only accepted completions are asked
    return grant.done
