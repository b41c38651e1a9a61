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
from leasecheck.stateful.verdict.grants import Grant, Pending
from leasecheck.stateful.verdict.ledger import Ledger

NAMES = {"complete": "completion", "fail": "failure report"}


def sent(grant: Grant, at: int) -> None:
    """`grant`'s completion or failure report, sent at `at`, is in flight."""
    grant.releasing = at


def lost(ledger: Ledger, grant: Grant, op: str, at: int) -> None:
    """`grant`'s report (`op`), sent at `at`, lost its answer (its session died or the
    harness ended it): it may have committed, so from `at` on nothing rests on `grant`
    still holding the job."""
    grant.releasing = None
    if grant.released_unknown is None or at < grant.released_unknown:
        grant.released_unknown = at
    held, grant.held = grant.held, []
    what = NAMES.get(op, op)
    for said, _ in held:
        ledger.unjudged.append(
            f"{said}: the {what} of {grant.label} in flight then lost its answer, so "
            "whether it had given the job back first cannot be told"
        )


def answered(ledger: Ledger, grant: Grant, what: str, accepted: bool) -> list[Pending]:
    """Return what waited for `grant`'s release in flight, now that it answered, to be
    judged: all of it if the release was refused (the grant still held the job); none
    if it was accepted (it may have come first: said, not judged)."""
    if grant.releasing is None:
        return []
    grant.releasing = None
    held, grant.held = grant.held, []
    if not accepted:
        return [verdict for _, verdict in held]
    for said, _ in held:
        ledger.unjudged.append(
            f"{said}: the {what} of {grant.label} in flight then was accepted, so "
            "whether it had given the job back first cannot be told"
        )
    return []


def pending(ledger: Ledger, grant: Grant, said: str, at: int, verdict: Pending) -> bool:
    """Return whether `verdict` on `grant` (what happened by `at`) cannot be given now:
    a release of `grant` sent by then may have given the job back. It waits for a
    release in flight; after one that lost its answer it is said, not judged."""
    if grant.releasing is not None and grant.releasing <= at:
        grant.held.append((said, verdict))
        return True
    if grant.released_unknown is not None and grant.released_unknown <= at:
        ledger.unjudged.append(
            f"{said}: a completion or failure report of {grant.label} sent at "
            f"t={stamp(grant.released_unknown)} lost its answer, so whether it had "
            "given the job back cannot be told"
        )
        return True
    return False


def never_answered(ledger: Ledger, grant: Grant) -> None:
    """After the drain: a verdict still waiting on `grant`'s release is said, not judged."""
    for said, _ in grant.held:
        ledger.unjudged.append(f"{said}: a release of {grant.label} then never answered")
    grant.held.clear()
