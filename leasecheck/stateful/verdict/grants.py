"""What the oracle believes of each job: the grants the queue handed out, and their fate.

Plain records, written only by the oracle (`stateful.verdict.model`) and its property
families, read by the story (the picture draws each grant's lease).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from leasecheck.stateful.contract import Claim
from leasecheck.stateful.properties import Violation


@dataclass(frozen=True)
class Mark:
    """When a change of ownership was told: its place among every such change told
    (grants and accepted releases, in commit order) and the instant it answered."""

    moment: int
    instant: int


@dataclass(eq=False)
class Grant:
    """One claim the queue handed out and the oracle accepted as committed."""

    claim: Claim
    label: str
    granted_at: int
    lease_end: int
    released: bool = False
    seq: int = 0
    """Where it stands among every grant the oracle was told of, in the order told."""
    renewals: list[tuple[int, int]] = field(default_factory=list)
    """(when, the lease end it replaced) for each heartbeat that extended the lease."""
    releasing: int | None = None
    """When its completion or failure report now in flight was sent: it may give the job
    back at any moment from then until it answers."""
    released_unknown: int | None = None
    """When a completion or failure report of it that lost its answer was sent: it may
    have given the job back at any moment since."""
    done: int | None = None
    """Where its accepted completion stands among every accepted completion, in the
    order told (None: none accepted)."""
    told: Mark | None = None
    """When it was told: its place among the ownership changes and the instant its claim
    answered (a claim in flight answers after it was sent; see `stateful.verdict.window`)."""
    gone: Mark | None = None
    """When its accepted completion or failure report was told (None: none accepted)."""
    release_moment: int | None = None
    """How many ownership changes had been told when its release now in flight (sent at
    `releasing`) was sent: what was told from then on may have come after that send."""
    held: list[tuple[str, Pending]] = field(default_factory=list)
    """Verdicts that wait for its release in flight, each with its words: judged if that
    release is refused, said but not judged if it is accepted (it may have come first)
    or loses its answer."""


@dataclass(frozen=True)
class Refusal:
    """An owner's call the queue refused at `at`, judged again once the release of
    `grant` it waits on answers (`stateful.verdict.refusals`)."""

    grant: Grant
    what: str
    at: int
    raised: str | None = None


Pending = Violation | Refusal
"""A verdict that waits, as data: a violation to tell, or a refusal to judge again."""


@dataclass
class JobModel:
    """What the oracle knows about one job."""

    label: str
    grants: list[Grant] = field(default_factory=list)
    tokens: list[Hashable] = field(default_factory=list)
    completed_by: list[Grant] = field(default_factory=list)
    effect_keys: set[str] = field(default_factory=set)
    effects_accepted: int = 0
    unsure: list[Grant] = field(default_factory=list)
    """Grants whose order against each other cannot be told: one of their claims
    answered after the others were granted while it was in flight, so which of them
    owns the job is unknown until a later grant settles it."""
    unseen: bool = False
    """Whether a claim that lost its answer may hold the job: then the grant told last
    may no longer own it, until a later grant settles it."""
    failed: list[int] = field(default_factory=list)
    """Where each failure report the queue accepted stands among every accepted one, in
    the order told (what a cap on failures counts)."""
    failures_unknown: int = 0
    """Failure reports that lost their answers: each may have counted."""

    @property
    def finished(self) -> bool:
        """Return whether the queue accepted a completion (an answer, never an inference)."""
        return bool(self.completed_by)

    @property
    def owner(self) -> Grant | None:
        """Return the grant that owns the job now: the latest one, unless released or
        the job finished."""
        if not self.grants or self.finished:
            return None
        latest = self.grants[-1]
        return None if latest.released else latest
