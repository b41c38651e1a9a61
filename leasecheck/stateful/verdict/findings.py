"""What a property family finds, as data: the one thing each family returns.

A family judges what it was told and returns findings; it writes nowhere. The ledger
(`stateful.verdict.ledger`) takes them in order, and the story, the coverage lines and
the failure files read the ledger. So a family fed a literal history is tested on what
it returns, and whether a finding is told, said or counted is decided in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from leasecheck.stateful.properties import Violation


@dataclass(frozen=True)
class Unjudged:
    """An answer that could not be judged, with why: said, never told as a violation."""

    said: str


@dataclass(frozen=True)
class Declared:
    """A refusal the queue declares as its design (`revokes_expired`): said, not judged."""

    said: str


@dataclass(frozen=True)
class Saw:
    """A dangerous situation the example produced (`stateful.verdict.coverage`)."""

    situation: str


@dataclass(frozen=True)
class Deferred:
    """An accepted stale completion: told at the end unless a double completion or a
    wronged next owner tells the fuller story first."""

    violation: Violation


Finding = Violation | Unjudged | Declared | Saw | Deferred
"""One thing a family found."""

__all__ = ["Declared", "Deferred", "Finding", "Saw", "Unjudged", "Violation"]
