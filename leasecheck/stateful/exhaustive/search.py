"""Bounded-exhaustive search: every program of a scope, breadth first, each state once.

Each program runs from a reset queue on the driver directly and is judged after every
move, so a program that breaks a property is a counterexample with the same files a
property run leaves. A program whose end state (`state.fingerprint`: everything its
future depends on) was met before is not extended, and its end is not judged again
(the same state ends the same way); a new state is brought to rest and judged whole
(heal, finish, drain: no-lost-jobs and the other end properties).

The budget is counted in schedules, so a search covers the same programs on any
machine (a derandomized run stays one run), and optionally in seconds, for the
command. A search that stops on its budget says how deep it went whole: a search
cut short proves nothing about the rest. `part=(i, n)` keeps the i-th of every n
programs of the first move, so n shards split one scope between them; `parallel`
shares one search among processes instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable

from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.exhaustive.moves import enabled
from leasecheck.stateful.exhaustive.scope import Outcome, Progress, Scope, silent
from leasecheck.stateful.exhaustive.state import Tables, fingerprint
from leasecheck.stateful.harness import Harness
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import PropertyViolated


class Budget:
    """Schedules and seconds left; either may be unbounded."""

    def __init__(self, schedules: int | None, seconds: float | None) -> None:
        self.schedules = schedules
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def spent(self, done: Outcome) -> bool:
        if self.schedules is not None and done.schedules >= self.schedules:
            return True
        return self.deadline is not None and time.monotonic() > self.deadline


def explore(
    harness: Harness,
    scope: Scope,
    seconds: float | None = 60.0,
    ignored: Iterable[str] = (),
    *,
    schedules: int | None = None,
    part: tuple[int, int] = (0, 1),
    progress: Progress = silent,
) -> Outcome:
    """Search `scope` breadth first within the budget; the columns named in `ignored`
    are not part of a state (see `Tables`); `progress` is told after each program."""
    started = time.monotonic()
    budget = Budget(schedules, seconds)
    done = Outcome()
    fresh = first_time(set())
    start = scope.start()
    tables = Tables(harness.pool.monitor, ignored)
    harness.reset()
    before = tables.sequences(harness.pool.monitor)
    try:
        _, _, offered = run(harness, start, scope, tables, fresh, judge_end=True)
    except PropertyViolated as error:
        done.seconds = time.monotonic() - started
        return found(done, error, start)
    after = tables.sequences(harness.pool.monitor)  # the program's end reset the queue
    done.running_on = tuple(name for name, value in after.items() if before.get(name) != value)
    index, count = part
    frontier = [(start, offered[index::count])]
    for depth in range(1, scope.moves + 1):
        deeper = []
        total, ran = sum(len(moves) for _, moves in frontier), 0
        for prefix, moves in frontier:
            for move in moves:
                progress(done, depth, ran, total)
                ran += 1
                if budget.spent(done):
                    done.complete = False
                    done.seconds = time.monotonic() - started
                    return done
                steps = [*prefix, move]
                done.schedules += 1
                try:
                    _, new, offered = run(harness, steps, scope, tables, fresh)
                except PropertyViolated as error:
                    done.seconds = time.monotonic() - started
                    return found(done, error, steps)
                if new:
                    done.states += 1
                    deeper.append((steps, offered))
        frontier = deeper
        done.depth = depth
        done.seconds = time.monotonic() - started
        progress(done, depth, total, total)
    return done


Fresh = Callable[[Hashable], bool]
"""Whether a state is met for the first time (and, if so, is now met)."""


def first_time(seen: set[Hashable]) -> Fresh:
    """Return the `Fresh` of one process's search, over the states in `seen`."""

    def fresh(state: Hashable) -> bool:
        if state in seen:
            return False
        seen.add(state)
        return True

    return fresh


def run(
    harness: Harness,
    steps: list[Step],
    scope: Scope,
    tables: Tables,
    fresh: Fresh,
    *,
    judge_end: bool = False,
) -> tuple[Hashable, bool, list[Step]]:
    """Run `steps` on a fresh driver (the harness was reset by the program before),
    judging after each; return the state it reached, whether `fresh` called it new,
    and the moves it offers next. A new state is brought to rest and judged at its
    end (as every state is with `judge_end`); a state met before only cleaned up. A
    broken property raises.
    """
    d = Driver(harness)
    d.core.program.extend(steps)
    try:
        for step in steps:
            getattr(d, step.rule)(**step.args)
            d.check()
        state = fingerprint(d, tables)
        offered = enabled(d, scope, sum(s.rule == "preempt" for s in steps))
        new = fresh(state)
    except BaseException:
        d.core.clean_up()
        raise
    if new or judge_end or _in_flight(d):
        d.teardown()  # a call in flight goes on: cheaper than ending its backend
    else:
        d.core.clean_up()
    return state, new, offered


def _in_flight(d: Driver) -> bool:
    return any(
        w.waiting is not None or w.main.parked or w.beat_waiting is not None
        for w in d.core.actors()
    )


def found(done: Outcome, error: PropertyViolated, steps: list[Step]) -> Outcome:
    """Return `done` with the counterexample `steps` and what it broke."""
    done.violation, done.counterexample = error, steps
    return done


def run_program(harness: Harness, steps: list[Step], scope: Scope) -> tuple[Hashable, list[Step]]:
    """Run one program from a reset queue, judged whole; return its state and next moves
    (what a test of the explorer compares)."""
    harness.reset()
    tables = Tables(harness.pool.monitor)
    state, _, offered = run(harness, steps, scope, tables, first_time(set()), judge_end=True)
    return state, offered
