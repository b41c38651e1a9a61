"""Fewer steps for a failing program: delete the steps its failure does not need.

Hypothesis shrinks the choices behind a program, and a race that hinges on a call
blocked behind another worker's transaction often keeps steps it does not need
(check-then-act's under `ci`: 16 and 22 steps where 5 and 4 break the same
property); deleting one step's choices can change what the draws after it mean. A
saved program is plain rule calls, so a step can be deleted outright and the ones
after it replayed as they are (`stateful.story.replay` skips a step whose precondition no
longer holds). This pass deletes one step at a time, last first, and keeps each
deletion after which the same property still breaks, until no single deletion does
(a 1-minimal program), its budget of replays is spent, or a replay gets stuck (each
such replay waits out the safety timeout). Replays are deterministic (simulated
time; every step settles), so the budget counts replays, never seconds: the same
failure minimizes alike on any machine. It runs on sessions of its own, as
`stateful.story.confirm` does, so the run's counts of what it exercised stay the search's.
"""

from __future__ import annotations

from dataclasses import dataclass

from leasecheck.stateful.engine import actors
from leasecheck.stateful.harness import Harness
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.story import replay
from leasecheck.stateful.story.recorder import Failure

REPLAYS = 200
"""The most replays one failure's minimization may make (a replay is one example)."""


@dataclass(frozen=True)
class Minimized:
    """What the pass did to one failure: how long its program was and is, and the story
    of the shorter one (each step's lines, then the step), empty when none was found."""

    prop: str
    before: int
    after: int
    replays: int
    story: tuple[str, ...] = ()


def minimize_all(harness: Harness, replays: int = REPLAYS) -> list[Minimized]:
    """Minimize every failure `harness` recorded, in place; return what changed for each."""
    done = []
    pool = actors.Pool(harness.pool.dsn, clients=harness.pool.clients)
    try:
        fresh = Harness(queue=harness.queue, pool=pool, excused=harness.excused)
        fresh.reset()
        for prop, failure in list(harness.recorder.last.items()):
            found, spent = _minimize(fresh, prop, list(failure.program), replays)
            if found is None:
                done.append(Minimized(prop, len(failure.program), len(failure.program), spent))
                continue
            shorter, story = found
            harness.recorder.last[prop] = shorter
            done.append(Minimized(prop, len(failure.program), len(shorter.program), spent, story))
    finally:
        pool.close()
    return done


_Found = tuple[Failure, tuple[str, ...]]


def _minimize(
    harness: Harness, prop: str, steps: list[Step], budget: int
) -> tuple[_Found | None, int]:
    """Return the shortest failure of `prop` found by deleting steps, with its story
    (None if no deletion kept it broken), and the replays spent."""
    best: _Found | None = None
    spent = 0
    changed = True
    while changed and spent < budget:
        changed = False
        index = len(steps) - 1
        while index > 0 and spent < budget:  # step 0 starts the workers: never deleted
            spent += 1
            try:
                found = _breaks(harness, prop, steps[:index] + steps[index + 1 :])
            except actors.Stuck:  # each such replay waits out the safety timeout: stop
                return best, spent
            if found is not None:
                best, steps, changed = found, list(found[0].program), True
                index = min(index, len(steps))
            index -= 1
    return best, spent


def _breaks(harness: Harness, prop: str, steps: list[Step]) -> _Found | None:
    """Replay `steps`; return the failure of `prop` it recorded (its program holds only the
    steps that ran) and its story, or None if `prop` held; another property breaking
    does not count."""
    harness.recorder.last.clear()
    story: list[str] = []
    try:
        replay.replay(harness, steps, say=story.append)
    except PropertyViolated as error:
        failure = harness.recorder.last.get(prop)
        if error.violation.prop == prop and failure is not None:
            return failure, tuple(story)
    except actors.Stuck:
        raise
    except Exception:  # a replay the queue or the server could not finish says nothing
        return None
    return None
