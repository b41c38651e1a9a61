"""The moves' vocabulary: the composite arguments of the two story rules, and where the
clock may move. Plain data, read by the driver, the programs and the table of moves
(`stateful.rules`, which says what Hypothesis draws for each).

Hypothesis orders a machine's rules by their number of arguments, then by name, and
it extends every new prefix of an early example with the simplest choices: the first
rule whose precondition holds, with every argument at its simplest. Whatever sorts
first therefore runs again and again in about half of the first examples. Giving the
stall and the claim one argument each, and names that sort first (`asleep`, then
`claim`), makes that default continuation the story itself: a worker claims, falls
asleep past its lease, another reclaims, the sleeper wakes, completes and claims
again. The simplest value of each field is the move most likely to expose a race, so
shrinking toward it also shortens the counterexample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from leasecheck.stateful.units import BEAT, MILLISECOND, ROUNDED, SECOND

WAKE_UP = ("complete", "fail", "heartbeat", "nothing", "batch")
"""What a worker that wakes does first with the job it was working on (simplest first);
`batch` fetches once more and acknowledges all it holds in one batch."""


@dataclass(frozen=True)
class Take:
    """Which eligible worker claims, and whether inside a transaction it keeps open."""

    worker: int
    held: bool


RIVALS = ("commits", "holds", "holds, lock_timeout")
"""How the worker that reclaims from a sleeper does it (simplest first): in a call that
commits at once; in a transaction it keeps open, so the woken worker's call on the job
waits on its row lock; or that, with the woken worker's session under `lock_timeout`,
so the wait fails with 55P03, as production's configured timeout makes it. Without the
open transaction no call waited on a lock in a whole `ci` run of the reference."""


@dataclass(frozen=True)
class Stall:
    """Which worker falls asleep past its lease, whether it sleeps alone, and what it does
    on waking. `alone=False` (the simplest) means another worker reclaims meanwhile, as
    `rival` says (a program saved before it had one reclaims as "commits"). A `long`
    stall sleeps a whole lease more past its lease end: the slow morning whose job ran
    past two leases, which a heartbeat that renews from the old lease end, not from
    now, cannot cover (a program saved before it had one sleeps as a short one)."""

    worker: int
    alone: bool
    then: str
    rival: str = RIVALS[0]
    long: bool = False

    def __repr__(self) -> str:
        """The call that builds it, leaving out the defaults: programs read as before."""
        rival = "" if self.rival == RIVALS[0] else f", rival={self.rival!r}"
        long = ", long=True" if self.long else ""
        return (
            f"Stall(worker={self.worker!r}, alone={self.alone!r}, then={self.then!r}{rival}{long})"
        )


TIMES = (
    "lease-end",
    "past-lease-end",
    "beat",
    "second",
    "before-lease-end",
    "before-lease-end-ms",
    "past-lease-end-ms",
    "before-lease-end-s",
    "past-lease-end-s",
    "past-lease-end-2s",
)
"""Where `time_passes` may move the clock (`NEAR_END`, a heartbeat interval, a
second). Hypothesis shrinks a `sampled_from` toward its first entries, so the microsecond
moves stay first, in the order they always had, and the moves at the resolutions queues
store (milliseconds, whole seconds) come after them: a counterexample that needs no
coarse move still shrinks to the moves it always did."""

NEAR_END = {
    "before-lease-end": -1,
    "lease-end": 0,
    "past-lease-end": 1,
    "before-lease-end-ms": -MILLISECOND,
    "past-lease-end-ms": MILLISECOND,
    "before-lease-end-s": -SECOND,
    "past-lease-end-s": SECOND,
    "past-lease-end-2s": ROUNDED,
}
"""Where a move to the next lease end lands, by how far off it: a microsecond before it,
on it, a microsecond after it (the first three, the oldest names); then the same at the
resolutions queues store, a millisecond and a second before and after it, and 2 s after
it (`units.ROUNDED`), past any whole-second rounding of the end and of now.

A queue that keeps epoch milliseconds or whole seconds rounds a lease end up to its own
boundary: a microsecond past the true end is still inside its lease, so without these
the expired lease it should hand out again, or the claim at the attempt cap that
follows, never comes up for it."""

FARTHEST = max(NEAR_END.values())
"""How long ago a lease end a move may land past ended (`landing`)."""


def landing(to: str, now: int, ends: Sequence[int]) -> tuple[int, str]:
    """Return where `time_passes(to)` moves the clock from `now`, and why there, given
    the ends of the leases still held (in order, none more than `FARTHEST` ago).

    A coarse move past an end also reaches one that ended less than its offset ago (still
    inside its lease, for a queue that rounded it up); the three microsecond moves look
    only ahead, as saved programs replayed them. With no lease ending ahead, the clock
    moves on by a second (a heartbeat interval for `beat`). Two moves that land on one
    instant are one move: the explorer offers the first."""
    offset = NEAR_END.get(to, 0)
    since = now - offset if offset > 1 else now
    ahead = [e for e in ends if e > since and e + offset > now]
    if to in NEAR_END and ahead:
        return ahead[0] + offset, to
    if to in NEAR_END:
        return now + SECOND, f"{to}: no lease ends ahead, so 1 s"
    return now + (BEAT if to == "beat" else SECOND), to
