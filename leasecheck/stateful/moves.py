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

from dataclasses import dataclass

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
"""Where `time_passes` may move the clock (`Driver.NEAR_END`, a heartbeat interval, a
second). Hypothesis shrinks a `sampled_from` toward its first entries, so the microsecond
moves stay first, in the order they always had, and the moves at the resolutions queues
store (milliseconds, whole seconds) come after them: a counterexample that needs no
coarse move still shrinks to the moves it always did."""
