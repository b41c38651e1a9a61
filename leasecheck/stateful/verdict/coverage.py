"""What a run exercised: the dangerous situations it produced, counted per property.

A property that held only because its situation never came up has not been tested:
a stale completion never sent cannot have been refused. The oracle counts each
situation as it judges the fact that shows it (so a saved history counts alike when
judged again), the driver adds the ones only it sees (a call paused between its
statements, a call blocked on a lock, a sweep sent while a transaction is open, a
lease that ran out while its worker's call waited, a failure report on a job's last
attempt, a heartbeat racing its own worker's completion, a lock timeout on a call's
later statement, a crash between a call's two transactions), and a run reads "holds,
not exercised" for every property whose situations all stayed at zero. Every count goes
through the ledger's `saw`, which tells a listener (a property run's Hypothesis events).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from leasecheck.stateful import properties as P

SITUATIONS: dict[str, tuple[str, ...]] = {
    "stale heartbeat sent": (P.FENCING,),
    "stale completion sent": (P.FENCING, P.SINGLE_COMPLETION),
    "stale failure report sent": (P.FENCING,),
    "completion refused": (P.ATOMIC_REJECTION,),
    "late owner's call": (P.LATE_OWNER,),
    "owner's call answered after a wait": (P.OWNER_PROGRESS,),
    "owner's call refused or accepted": (P.OWNER_PROGRESS,),
    "expired lease claimed again": (P.EXCLUSIVE_LEASE, P.FENCING, P.SINGLE_COMPLETION),
    "claim at the attempt cap": (P.RETRY_CAP,),
    "claim past the attempt cap tried": (P.RETRY_CAP,),
    "effect sent for a job again": (P.UNIQUE_EFFECTS,),
    "batch of stale and fresh claims": (P.FENCING, P.SINGLE_COMPLETION),
    "job recovered and drained": (P.NO_LOST_JOBS,),
    "idempotency keys of distinct jobs compared": (P.DISTINCT_KEYS,),
    "job shown done judged against its effects": (P.DONE_EFFECT,),
    "job shown done with no completion answered": (P.DONE_EFFECT,),
    "job no claim holds looked at after a claim": (P.NO_HIDDEN_CLAIMS,),
    "tiny tables analyzed, then grown": (P.NO_HIDDEN_CLAIMS, P.EXCLUSIVE_LEASE),
    "call paused between its statements": (P.SINGLE_COMPLETION, P.FENCING, P.DONE_EFFECT),
    "call blocked on a lock": (P.EXCLUSIVE_LEASE, P.SINGLE_COMPLETION),
    "sweep raced an open transaction": (P.NO_LOST_JOBS, P.SINGLE_COMPLETION),
    "lease ran out while its call waited": (P.OWNER_PROGRESS, P.LATE_OWNER, P.FENCING),
    "release in flight": (P.OWNER_PROGRESS, P.EXCLUSIVE_LEASE),
    "serialization failure in a held transaction": (P.OWNER_PROGRESS, P.NO_LOST_JOBS),
    "call timed out on a lock": (P.OWNER_PROGRESS, P.SINGLE_COMPLETION, P.NO_LOST_JOBS),
    "worker restarted under its name while it held a lease": (
        P.EXCLUSIVE_LEASE,
        P.FENCING,
        P.SINGLE_COMPLETION,
    ),
    # The report that gives a job up for good: a queue that retries it anyway breaks the
    # cap; one that neither fails it nor gives it back loses it.
    "failure report on the last attempt": (P.NO_LOST_JOBS, P.RETRY_CAP),
    # Sent while the completion is in flight, the beat is the owner's; landing after it,
    # it is stale; one that writes `running` back revives a finished job.
    "heartbeat after its own worker's completion": (
        P.OWNER_PROGRESS,
        P.FENCING,
        P.NO_LOST_JOBS,
    ),
    # The call ends halfway: what its earlier statements committed stays (a job marked
    # running that no claim answered, a job marked done twice), or a transaction it
    # began is aborted with the work it did.
    "lock timeout on a call's later statement": (
        P.NO_HIDDEN_CLAIMS,
        P.NO_LOST_JOBS,
        P.SINGLE_COMPLETION,
    ),
    # The first transaction committed and the second never runs: a job shown done
    # whose effect never happened, or one taken that nobody will finish or give back.
    "crash between a call's two transactions": (P.DONE_EFFECT, P.NO_LOST_JOBS),
}
"""Each situation, and the properties it puts to the test."""

AIMED = tuple(
    dict.fromkeys(
        [
            *(s for s, props in SITUATIONS.items() if {P.RETRY_CAP, P.NO_LOST_JOBS} & set(props)),
            "failure report on the last attempt",
            "heartbeat after its own worker's completion",
            "lock timeout on a call's later statement",
            "crash between a call's two transactions",
        ]
    )
)
"""The situations a property run aims at (`hypothesis.target`, one label each, at an
example's end): those that put retry-cap and no-lost-jobs to the test, the properties whose
situations an example rarely meets and only near its end (a job's last attempt, a drain
after recovery), and the four that need a fault at one exact point of a call. Hypothesis
then favours examples that meet them more often; the common situations need no help."""


def per_property(counts: Mapping[str, int]) -> dict[str, int]:
    """Return, for every property, how often its situations occurred."""
    out = dict.fromkeys(P.ALL, 0)
    for situation, n in counts.items():
        for prop in SITUATIONS.get(situation, ()):
            out[prop] += n
    return out


def merge(runs: Iterable[Mapping[str, int]]) -> Counter[str]:
    """Return the situations of several runs (shards, examples) added up."""
    total: Counter[str] = Counter()
    for run in runs:
        total.update(run)
    return total


def situations_of(prop: str) -> tuple[str, ...]:
    """Return the situations that put `prop` to the test, in `SITUATIONS`' order."""
    return tuple(s for s, props in SITUATIONS.items() if prop in props)


def summary(
    counts: Mapping[str, int],
    judged: Iterable[str] = P.ALL,
    *,
    holds: bool = True,
    unjudged: Mapping[str, str] | None = None,
) -> list[str]:
    """Return, per property, how often it was exercised, then each of its situations.

    A property's count adds up its situations, so a sum can stand over one that never
    happened ("fencing: exercised 140 times" with no stale heartbeat ever sent): every
    situation is listed with its own count, and those at zero are named again. Without
    `holds` (a run the queue's contract error cut short) no property is said to hold; a
    property in `unjudged` (excused, or ruled out by a declaration) says why instead.
    """
    exercised = per_property(counts)
    lines = []
    for prop in judged:
        n = exercised.get(prop, 0)
        said = f"exercised {n} times" if n else "holds, not exercised" if holds else "not exercised"
        if unjudged and prop in unjudged:
            said = f"{unjudged[prop]}; its situations met {n} times"
        lines.append(f"{prop}: {said}")
        own = situations_of(prop)
        met = [f"{s} {counts[s]}" for s in own if counts.get(s, 0)]
        never = [s for s in own if not counts.get(s, 0)]
        if met:
            lines.append("    " + "; ".join(met))
        if never:
            lines.append("    never met: " + "; ".join(never))
    return lines
