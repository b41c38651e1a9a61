"""distinct-keys: no two jobs share the idempotency key a receiver deduplicates on.

unique-effects looks at one job at a time (its keys never change between attempts).
A key shared by two jobs is the other half: the receiver takes the first job's effect
and drops the second's as a duplicate, so a job that ran is never delivered. A key
derived from something jobs have in common (their kind and the minute they were
scheduled, cron style) does exactly that. The key is the queue's own answer
(`effect_key` of a claim it handed out), read at every grant and every effect sent,
so the verdict needs no effect to be sent: two jobs handed out under one key suffice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leasecheck.stateful import properties as P
from leasecheck.stateful.properties import Violation


@dataclass
class KeyOwners:
    """Which job each idempotency key was first given for (job labels)."""

    first: dict[str, str] = field(default_factory=dict)
    told: set[tuple[str, str]] = field(default_factory=set)
    """(key, job) pairs already judged, so a key is compared once per job."""

    def note(self, key: str, job: str, grant: str) -> Violation | None:
        """Record that `job`'s claim `grant` carries `key`; return the violation when
        another job was given that key first (once per job and key)."""
        if (key, job) in self.told:
            return None
        self.told.add((key, job))
        owner = self.first.setdefault(key, job)
        if owner == job:
            return None
        return Violation(
            P.DISTINCT_KEYS,
            f"{job} and {owner} share the idempotency key {key!r}: a receiver that "
            f"deduplicates on it drops the effect of one of them as a duplicate",
            (f"{grant} carries {key!r}, first given for {owner}",),
            (job, owner),
            (grant,),
        )

    @property
    def compared(self) -> bool:
        """Return whether keys of two jobs or more have been seen (the property at work)."""
        return len({job for _, job in self.told}) > 1
