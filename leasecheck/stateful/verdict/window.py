"""A call's window: whether a heartbeat, completion or failure report was stale when sent.

A call's effect lands at some instant between when it was sent and when it answered
(Jepsen's rule for calls whose outcome lands at an unknown moment). So a call that
answers "yes" after its job was granted to someone else is not, by that alone, a stale
call accepted: a report paused between its UPDATE and a second statement (a NOTIFY, an
audit row) has given the job back before the other worker could claim it, and only
answers later. A violation is told only if it holds under every placement of the call
consistent with what the queue showed; the fencing rule therefore looks at what had
taken the job from the grant *before the call was sent*:

* a later grant of the job, a completion of it by another grant, or (for a heartbeat)
  the grant's own accepted release, each told at a `Mark`;
* one that certainly came before the send makes the call stale for every placement:
  judged as it always was;
* one that may have come after the send (`Sent.may_precede`) leaves the call in its
  window: the call may have landed first, and each call kind says what that placement
  would mean (`stateful.verdict.model`).

Ties are never guessed in the queue's favour: a change told at the very instant the
call was sent counts as before it unless a fact places the send first (a release in
flight is told the moment it is sent), so a stale call sent right after a reclaim is
still one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from leasecheck.stateful.units import stamp
from leasecheck.stateful.verdict.grants import Grant, JobModel, Mark

Kind = Literal["granted", "completed", "released"]


@dataclass(frozen=True)
class Change:
    """Something that took a job from a grant: `by` was granted it later ("granted"),
    completed it ("completed"), or is the grant itself, whose release was accepted
    ("released")."""

    kind: Kind
    by: Grant
    mark: Mark


@dataclass(frozen=True)
class Sent:
    """A call's window: sent at `at`, answered at `answered`; `moment`, when the facts
    tell it, is how many ownership changes had been told when it was sent."""

    at: int
    answered: int
    moment: int | None = None

    def may_precede(self, change: Change) -> bool:
        """Return whether the call may have been sent before `change` was told.

        Certain when the send's place is known and the change was told from then on;
        otherwise only when simulated time shows it: the change answered strictly after
        the call was sent and no later than the call answered (a call judged at the
        commit of a transaction held open answers before changes told meanwhile, and its
        effect lands only at that commit: never before them)."""
        if self.moment is not None and change.mark.moment >= self.moment:
            return True
        return self.at < change.mark.instant <= self.answered


@dataclass(frozen=True)
class Window:
    """What took the job from a grant, split by where it stands against a call's send."""

    before: tuple[Change, ...]
    """Certainly told before the call was sent: the call was stale for every placement."""
    during: tuple[Change, ...]
    """Possibly told after the call was sent: the call may have landed before them."""

    @property
    def owner(self) -> bool:
        """Whether nothing has taken the job from the grant: it owns it now."""
        return not self.before and not self.during

    def first_grant(self) -> Change | None:
        """Return the first later grant the call may have preceded, if any."""
        return next((c for c in self.during if c.kind == "granted"), None)


def changes(job: JobModel, grant: Grant) -> list[Change]:
    """Return what has taken `job` from `grant` so far, in the order told."""
    out: list[Change] = []
    later = job.grants[job.grants.index(grant) + 1 :]
    out.extend(Change("granted", g, _mark(g.told)) for g in later)
    out.extend(Change("completed", g, _mark(g.gone)) for g in job.completed_by if g is not grant)
    if grant.released:
        out.append(Change("released", grant, _mark(grant.gone)))
    return sorted(out, key=lambda c: c.mark.moment)


def _mark(mark: Mark | None) -> Mark:
    """Return a change's mark; one told without it counts as before any call (never
    guessed in the queue's favour)."""
    return Mark(-1, -1) if mark is None else mark


def place(job: JobModel, grant: Grant, sent: Sent, *, own_release_first: bool) -> Window:
    """Split what took `job` from `grant` into before and during the call `sent`.

    `own_release_first`: the call is itself a release (completion or failure report),
    so the grant's own accepted release is before it for every placement (one attempt
    gives its job back once; whichever of two came second was stale)."""
    before: list[Change] = []
    during: list[Change] = []
    for change in changes(job, grant):
        own = change.kind == "released"
        if (own and own_release_first) or not sent.may_precede(change):
            before.append(change)
        else:
            during.append(change)
    return Window(tuple(before), tuple(during))


def why_stale(job: JobModel, grant: Grant, window: Window) -> str:
    """Say what had taken the job from `grant` before its call was sent (the evidence of
    a stale call): a completion first, then its own release, then the latest grant."""
    kinds = {c.kind: c for c in window.before}
    if "completed" in kinds:
        return f"{job.label} was already completed by {kinds['completed'].by.label}"
    if "released" in kinds:
        return f"{grant.label} had already released {job.label}"
    later = [c.by for c in window.before if c.kind == "granted"][-1]
    return f"{job.label} had been granted again to {later.label} at t={stamp(later.granted_at)}"
