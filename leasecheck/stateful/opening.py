"""The opening: a few short, fixed stories every run plays before the search begins.

The search draws each step from every rule at once, so the plain races a user's queue
gets wrong most (a stale heartbeat or failure report after a takeover, the same
worker claiming its own expired job again, a report paused between its read and its
write) are each one path among many: on queues written from the README, a default
run found a missing fence on the heartbeat or on a failure report in half its runs,
and a fence on the worker's name in one run of ten. Small scopes find most bugs
(CHESS, Loom): two workers and one job suffice for every one of these, so each is
played once, whole, before any example is drawn. They cost well under a second, and
a story that breaks a property needs no shrinking: it is short already.

Each story is a program of the machine's own rules, played as a saved program is
(a step whose precondition does not hold for this queue is skipped), judged after
every step and told, when it breaks a property, like any failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from leasecheck.stateful.contract import Capabilities
from leasecheck.stateful.harness import Harness
from leasecheck.stateful.moves import RIVALS, Stall, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.story import replay

FIRST = Take(worker=0, held=False)
"""The first eligible worker claims, committing at once."""

EXPIRIES = 25
"""At most this many leases run out in the expiry story (a cap above it is not reached)."""


@dataclass(frozen=True)
class Story:
    """One fixed program and the name the run tells it by."""

    name: str
    steps: tuple[Step, ...]


def _s(rule: str, **args: object) -> Step:
    return Step(rule, dict(args))


START = _s("start", workers=2)

LAPSE = (
    START,
    _s("claim", how=FIRST),
    _s("pause", pick=0),
    _s("time_passes", to="past-lease-end"),
    _s("resume", pick=0),
)
"""w1 claims the job, sleeps (its heartbeats stop) until the lease has run out, and wakes
holding the claim it does not know is stale; nobody has claimed the job since."""


def stories(caps: Capabilities, max_attempts: int | None) -> list[Story]:
    """Return the opening's stories for a queue that declares `caps`, in the order played."""
    batches = (
        caps.claim_many is not None
        and caps.complete_many is not None
        and not caps.one_claim_per_worker
    )
    calls = ["complete", "fail", *(["heartbeat"] if caps.heartbeats else [])]
    rivals = RIVALS if "claim" in caps.held_calls else RIVALS[:1]
    told: list[Story] = []
    # A worker sleeps past its lease, another claims the job (committing, or holding its
    # claim's transaction open, so the woken call waits on the row lock), the sleeper wakes
    # and reports on the claim it lost.
    for then in [*calls, *(["batch"] if batches else [])]:
        for rival in rivals:
            stall = Stall(worker=0, alone=False, then=then, rival=rival)
            told.append(Story(f"takeover: {then}, rival {rival}", (
                START, _s("claim", how=FIRST), _s("asleep", how=stall),
            )))  # fmt: skip
    # The woken worker's own loop claims the expired job again (a second thread under the
    # same worker name), then reports on the stale claim: only a fence on the attempt,
    # not on the worker's name, refuses it.
    if not caps.one_claim_per_worker:
        sibling = [*calls, *(["complete_batch"] if batches else [])]
        for call in sibling:
            args = {"pick": 0, **({"size": 2} if call == "complete_batch" else {})}
            told.append(Story(f"own reclaim: {call}", (
                *LAPSE, _s("claim", how=FIRST), _s(call, **args),
            )))  # fmt: skip
    # The woken worker's report pauses after 1, 2 or 3 round trips (its check done, its
    # write not yet sent) while another worker claims the job; then it goes on.
    for call in calls:
        for after in (1, 2, 3):
            told.append(Story(f"report paused in flight: {call}, after {after}", (
                *LAPSE,
                _s("preempt", pick=0, after=after, hold=6),
                _s(call, pick=0),
                _s("claim", how=FIRST),
                _s("resume_call", pick=0),
            )))  # fmt: skip
    # Lease after lease runs out (the holder crashes, the queue's recovery sweeps), past
    # the retry cap.
    if max_attempts is not None:
        expiry: list[Step] = [START]
        for _ in range(min(max_attempts + 1, EXPIRIES)):
            expiry += [
                _s("claim", how=FIRST),
                _s("crash", pick=0),
                _s("time_passes", to="past-lease-end"),
                _s("sweep", after="now"),
            ]
        told.append(Story(f"expiry past the cap of {max_attempts}", tuple(expiry)))
    # A cap on failure reports: leases that run out do not count, and the report that
    # makes the cap gives the job up (a queue that counts deliveries gives it up early;
    # one that counts late hands it out once more).
    if caps.max_failures is not None:
        cap = caps.max_failures
        lapses: list[Step] = []
        for _ in range(min(cap - 1, EXPIRIES)):
            lapses += [
                _s("claim", how=FIRST),
                _s("crash", pick=0),
                _s("time_passes", to="past-lease-end"),
                _s("sweep", after="now"),
            ]
        told.append(Story(f"expiries, then a failure report, under a cap of {cap} failures", (
            START, *lapses, _s("claim", how=FIRST), _s("fail", pick=0),
        )))  # fmt: skip
        reports: list[Step] = []
        for _ in range(min(cap, EXPIRIES)):
            reports += [_s("claim", how=FIRST), _s("fail", pick=0)]
        told.append(Story(f"failure reports up to the cap of {cap}, then a claim", (
            START, *reports, _s("claim", how=FIRST),
        )))  # fmt: skip
    return told


def play(harness: Harness, index: int = 0, count: int = 1) -> None:
    """Play shard `index` of `count`'s share of the stories: every count-th, so a run's
    shards play each once between them. `harness.played` counts them.

    A story that breaks a property raises its PropertyViolated, with its name kept in
    `harness.opening` for the run's report; otherwise `harness.opening` is None again.
    """
    for story in stories(harness.caps, harness.queue.max_attempts)[index::count]:
        harness.opening = story.name
        harness.played += 1
        replay.replay(harness, list(story.steps))  # a broken property raises: name kept
    harness.opening = None
