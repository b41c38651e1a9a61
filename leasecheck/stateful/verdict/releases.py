"""Releases in flight: a completion or failure report may give the job back before
it answers.

From the moment such a report is sent, its job may already be free: a claim of it
then is no exclusive-lease violation, and a refusal of the owner's other calls (its
own heartbeat) is no owner-progress violation, until the report answers. A verdict
that rests on the grant still holding the job waits for that answer: judged if the
report was refused, said but not judged if it was accepted (it may have come first)
or lost its answer (it may have committed).
"""

from __future__ import annotations

from leasecheck.stateful.units import stamp
from leasecheck.stateful.verdict.findings import Finding, Unjudged
from leasecheck.stateful.verdict.grants import Grant, Pending

NAMES = {"complete": "completion", "fail": "failure report"}


def sent(grant: Grant, at: int) -> None:
    """`grant`'s completion or failure report, sent at `at`, is in flight."""
    grant.releasing = at


def lost(grant: Grant, op: str, at: int) -> list[Finding]:
    """`grant`'s report (`op`), sent at `at`, lost its answer (its session died or the
    harness ended it): it may have committed, so from `at` on nothing rests on `grant`
    still holding the job."""
    grant.releasing = None
    if grant.released_unknown is None or at < grant.released_unknown:
        grant.released_unknown = at
    held, grant.held = grant.held, []
    what = NAMES.get(op, op)
    return [
        Unjudged(
            f"{said}: the {what} of {grant.label} in flight then lost its answer, so "
            "whether it had given the job back first cannot be told"
        )
        for said, _ in held
    ]


def answered(grant: Grant, what: str, accepted: bool) -> list[Pending | Unjudged]:
    """Return what waited for `grant`'s release in flight, now that it answered: to be
    judged, all of it if the release was refused (the grant still held the job); said,
    not judged, if it was accepted (it may have come first)."""
    if grant.releasing is None:
        return []
    grant.releasing = None
    held, grant.held = grant.held, []
    if not accepted:
        return [verdict for _, verdict in held]
    return [
        Unjudged(
            f"{said}: the {what} of {grant.label} in flight then was accepted, so "
            "whether it had given the job back first cannot be told"
        )
        for said, _ in held
    ]


def pending(grant: Grant, said: str, at: int, verdict: Pending) -> list[Finding] | None:
    """Return None when `verdict` on `grant` (what happened by `at`) can be given now,
    else what to say instead: a release of `grant` sent by then may have given the job
    back. The verdict waits for a release in flight (nothing said yet); after one that
    lost its answer it is said, not judged."""
    if grant.releasing is not None and grant.releasing <= at:
        grant.held.append((said, verdict))
        return []
    if grant.released_unknown is not None and grant.released_unknown <= at:
        return [
            Unjudged(
                f"{said}: a completion or failure report of {grant.label} sent at "
                f"t={stamp(grant.released_unknown)} lost its answer, so whether it had "
                "given the job back cannot be told"
            )
        ]
    return None


def never_answered(grant: Grant) -> list[Finding]:
    """After the drain: a verdict still waiting on `grant`'s release is said, not judged."""
    held, grant.held = grant.held, []
    return [Unjudged(f"{said}: a release of {grant.label} then never answered") for said, _ in held]
